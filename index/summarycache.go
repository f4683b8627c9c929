package index

import "sync"

// summaryCache keeps the summaries of recently read documents, so that a
// query's candidates cost a map lookup instead of a Badger read each. A
// docID's record never changes (a replaced page gets a new docID), so an
// entry is never stale and nothing invalidates it; a deleted doc's entry
// is only dropped to free its memory. Memory is bounded by two generations
// of at most half the budget each: when the current one fills, it becomes
// the previous one and the old previous one is dropped, and a hit in the
// previous generation moves the entry to the current one (a cheap
// approximation of LRU without a list).
type summaryCache struct {
	mu        sync.Mutex
	cur, prev map[uint32]*Summary
	curBytes  int
	genBytes  int // budget of one generation
}

// summaryOverhead approximates the memory of an entry besides its
// strings: the map slot, the Summary struct and the string headers.
const summaryOverhead = 96

func newSummaryCache(maxBytes int) *summaryCache {
	return &summaryCache{cur: map[uint32]*Summary{}, genBytes: max(maxBytes/2, 1)}
}

func summaryBytes(s *Summary) int {
	return summaryOverhead + len(s.URL) + len(s.Host) + len(s.Title)
}

// get returns doc id's summary, which the caller must not modify.
func (c *summaryCache) get(id uint32) (*Summary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.cur[id]; ok {
		return s, true
	}
	if s, ok := c.prev[id]; ok {
		delete(c.prev, id)
		c.addLocked(id, s)
		return s, true
	}
	return nil, false
}

func (c *summaryCache) put(id uint32, s *Summary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[id]; !ok {
		c.addLocked(id, s)
	}
}

func (c *summaryCache) addLocked(id uint32, s *Summary) {
	n := summaryBytes(s)
	if c.curBytes+n > c.genBytes && len(c.cur) > 0 {
		c.prev, c.cur, c.curBytes = c.cur, make(map[uint32]*Summary, len(c.cur)), 0
	}
	c.cur[id] = s
	c.curBytes += n
}

// drop forgets doc id (deleted: it will not be asked for again).
func (c *summaryCache) drop(id uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.cur[id]; ok {
		c.curBytes -= summaryBytes(s)
		delete(c.cur, id)
	}
	delete(c.prev, id)
}
