package search

import (
	"container/list"
	"sync"
	"time"
)

// resultCache is the coordinator's LRU of complete answers, keyed by the
// normalised query, page and members asked (cacheKey). Entries age out
// after ttl so that new pages appear, and the whole cache is dropped when
// membership changes.
type resultCache struct {
	mu      sync.Mutex
	max     int
	ttl     time.Duration
	ll      *list.List
	entries map[string]*list.Element
	hits    uint64
	misses  uint64
}

type cacheEntry struct {
	key string
	at  time.Time
	res *Response
}

func newResultCache(max int, ttl time.Duration) *resultCache {
	return &resultCache{max: max, ttl: ttl, ll: list.New(), entries: map[string]*list.Element{}}
}

func (c *resultCache) get(key string) (*Response, bool) {
	if c.max <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		c.misses++
		return nil, false
	}
	ent := e.Value.(*cacheEntry)
	if time.Since(ent.at) > c.ttl {
		c.ll.Remove(e)
		delete(c.entries, key)
		c.misses++
		return nil, false
	}
	c.ll.MoveToFront(e)
	c.hits++
	return ent.res, true
}

func (c *resultCache) put(key string, r *Response) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		e.Value.(*cacheEntry).res, e.Value.(*cacheEntry).at = r, time.Now()
		c.ll.MoveToFront(e)
		return
	}
	c.entries[key] = c.ll.PushFront(&cacheEntry{key: key, at: time.Now(), res: r})
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}

func (c *resultCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	clear(c.entries)
}

// CacheStats are the result cache's counters.
type CacheStats struct{ Entries, Hits, Misses uint64 }

func (c *resultCache) stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Entries: uint64(c.ll.Len()), Hits: c.hits, Misses: c.misses}
}

// CacheStats reports the result cache's size and hit counts.
func (c *Coordinator) CacheStats() CacheStats { return c.cache.stats() }
