package index

// tailCache keeps the encoded tail block of recently flushed terms so that
// a flush rewrites a frequent term's tail without reading it back from
// Badger. It is only an optimisation: Badger stays the truth, an entry is
// set only after the transaction writing that value committed, and the
// whole cache is dropped when a flush fails. Least recently used entries
// are evicted past maxBytes. A term's tail is admitted from its second
// flush on: most terms new to a flush (numbers, names, identifiers) never
// come back, and caching them evicted the tails of the terms that do
// (BENCHMARKS.md, "A fair baseline"). Used by the flusher only (under
// flushMu), so it has no lock.
type tailCache struct {
	maxBytes int
	bytes    int
	m        map[string]*tailEntry
	head     tailEntry // sentinel: head.next is the most recently used
}

type tailEntry struct {
	term       string
	val        []byte
	prev, next *tailEntry
}

// tailEntryOverhead approximates the map slot, entry and headers.
const tailEntryOverhead = 96

func newTailCache(maxBytes int) *tailCache {
	c := &tailCache{maxBytes: maxBytes, m: map[string]*tailEntry{}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (e *tailEntry) size() int { return len(e.term) + cap(e.val) + tailEntryOverhead }

func (c *tailCache) unlink(e *tailEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *tailCache) pushFront(e *tailEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// get returns the cached tail of term. The bytes must not be modified.
func (c *tailCache) get(term string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	e, ok := c.m[term]
	if !ok {
		return nil, false
	}
	c.unlink(e)
	c.pushFront(e)
	return e.val, true
}

// put records term's committed tail block (val is kept, not copied).
func (c *tailCache) put(term string, val []byte) {
	if c == nil || c.maxBytes <= 0 {
		return
	}
	if cap(val) > len(val)+len(val)/4+16 {
		val = append([]byte(nil), val...) // do not pin a mostly empty buffer
	}
	if e, ok := c.m[term]; ok {
		c.bytes -= e.size()
		e.val = val
		c.bytes += e.size()
		c.unlink(e)
		c.pushFront(e)
	} else {
		e := &tailEntry{term: term, val: val}
		if e.size() > c.maxBytes/8 {
			return // a huge tail would evict too much for one term
		}
		c.m[term] = e
		c.bytes += e.size()
		c.pushFront(e)
	}
	for c.bytes > c.maxBytes && c.head.prev != &c.head {
		old := c.head.prev
		c.unlink(old)
		delete(c.m, old.term)
		c.bytes -= old.size()
	}
}

// reset empties the cache (after a failed flush, when Badger's content is
// not known for sure).
func (c *tailCache) reset() {
	if c == nil {
		return
	}
	clear(c.m)
	c.head.prev, c.head.next = &c.head, &c.head
	c.bytes = 0
}
