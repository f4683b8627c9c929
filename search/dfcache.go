package search

import (
	"fmt"
	"sync"

	"sou/index"
)

// dfCacheTerms bounds the cache; it is emptied when full (a term's entry
// is rebuilt by the next query that needs it).
const dfCacheTerms = 1 << 16

// dfCache remembers each term's document frequency over live documents,
// as counted for a view with a given watermark while a given number of
// documents had been deleted. Counting DF is a pass over the term's whole
// postings list, so without it a query's cost grew with the index for
// every common term, even when the query itself skipped most of the
// list's blocks. An entry stays exact while no document is deleted or
// replaced: documents only become Live by the watermark rising, so a later
// view adds the Live documents between the two watermarks, which are at
// the end of the list. Any deletion empties the cache's use (entries carry
// the deletion count), since which terms a deleted document held is not
// known without reading every list.
type dfCache struct {
	mu      sync.Mutex
	entries map[string]dfEntry
}

type dfEntry struct {
	df        int64
	flushed   uint32 // the view's watermark when df was counted
	deletions uint64 // deletions counted before and after the pass
}

// count returns the DF of term over the Live documents of r, taking it
// from the cache where the cache holds it exactly and counting otherwise.
func (c *dfCache) count(r *index.Reader, term string) (int64, error) {
	before, current := r.Deletions()
	flushed := r.Flushed()
	c.mu.Lock()
	e, ok := c.entries[term]
	c.mu.Unlock()
	valid := ok && current && e.deletions == before
	if valid && e.flushed == flushed {
		return e.df, nil
	}
	from, df := uint32(0), int64(0)
	if valid && e.flushed < flushed {
		from, df = e.flushed, e.df
	}
	more, err := liveDF(r, term, from, nil)
	if err != nil {
		return 0, err
	}
	df += more
	if after, stillCurrent := r.Deletions(); current && stillCurrent && after == before {
		c.mu.Lock()
		if c.entries == nil || len(c.entries) >= dfCacheTerms {
			c.entries = make(map[string]dfEntry)
		}
		c.entries[term] = dfEntry{df: df, flushed: flushed, deletions: before}
		c.mu.Unlock()
	}
	return df, nil
}

// liveDF counts the Live documents from docID from on in term's postings
// whose host passes keep (nil = all).
func liveDF(r *index.Reader, term string, from uint32, keep func(host string) bool) (int64, error) {
	p, err := r.Postings(term, false)
	if err != nil {
		return 0, fmt.Errorf("search: %w", err)
	}
	var df int64
	for d := p.Advance(from); d < r.Flushed(); d = p.Next() { // NoMoreDocs is above every watermark
		if r.Live(d) && (keep == nil || keep(r.Host(d))) {
			df++
		}
	}
	if err := p.Err(); err != nil {
		return 0, fmt.Errorf("search: %w", err)
	}
	return df, nil
}
