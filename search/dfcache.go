package search

import (
	"fmt"
	"slices"
	"sync"

	"sou/index"
)

// dfCacheTerms and dfCacheHosts bound the cache (terms, and host counts
// over all terms: a few MB); it is emptied when either is reached (a
// term's entry is rebuilt by the next query that needs it).
const (
	dfCacheTerms = 1 << 16
	dfCacheHosts = 1 << 18
)

// dfCache remembers each term's document frequency over live documents,
// per host, as counted for a view with a given watermark while a given
// number of documents had been deleted. Counting DF is a pass over the
// term's whole postings list, so without it a query's cost grew with the
// index for every common term, even when the query itself skipped most of
// the list's blocks. An entry stays exact while no document is deleted or
// replaced and no anchor field changes: documents only become Live by the
// watermark rising, so a later view adds the Live documents between the
// two watermarks, which are at the end of the list. Any deletion, and any
// anchor update (which may add or remove a term of a document), empties
// the cache's use (entries carry the deletion count and the view's
// anchor generation), since which terms those documents held is not known
// without reading every list.
//
// Counts are kept per host because a shard in a network answers only for
// the hosts it owns, not for those it holds as a replica, and ownership
// moves with membership: the DF a query needs is the sum over the hosts
// the filter keeps, a pass over the term's hosts instead of its postings.
// Before, a filtered count bypassed the cache and read every posting; on
// the 4-node corpus that was a fifth of the shards' search CPU
// (BENCHMARKS.md, "Stop 20: document frequencies per host, page summaries").
type dfCache struct {
	mu      sync.Mutex
	entries map[string]dfEntry
	hosts   int // host counts held by entries
}

type dfEntry struct {
	perHost   []hostDF
	flushed   uint32 // the view's watermark when perHost was counted
	deletions uint64 // deletions counted before and after the pass
	anchors   uint64 // the view's anchor generation
}

// hostDF is a term's live document count on one host.
type hostDF struct {
	host string
	df   int64
}

// count returns the DF of term over the Live documents of r on the hosts
// keep passes (nil = all), taking the per-host counts from the cache where
// it holds them exactly and counting otherwise.
func (c *dfCache) count(r *index.Reader, term string, keep func(host string) bool) (int64, error) {
	perHost, err := c.perHost(r, term)
	if err != nil {
		return 0, err
	}
	var df int64
	for _, h := range perHost {
		if keep == nil || keep(h.host) {
			df += h.df
		}
	}
	return df, nil
}

// perHost returns term's live document counts per host in r. The slice is
// shared with the cache: read it, never write it.
func (c *dfCache) perHost(r *index.Reader, term string) ([]hostDF, error) {
	before, current := r.Deletions()
	flushed := r.Flushed()
	c.mu.Lock()
	e, ok := c.entries[term]
	c.mu.Unlock()
	anchors := r.AnchorGeneration()
	valid := ok && current && e.deletions == before && e.anchors == anchors
	if valid && e.flushed == flushed {
		return e.perHost, nil
	}
	from := uint32(0)
	var base []hostDF
	if valid && e.flushed < flushed {
		from, base = e.flushed, e.perHost
	}
	perHost, err := liveDFPerHost(r, term, from, base)
	if err != nil {
		return nil, err
	}
	if after, stillCurrent := r.Deletions(); current && stillCurrent && after == before {
		c.mu.Lock()
		if old, ok := c.entries[term]; ok {
			c.hosts -= len(old.perHost)
		}
		if c.entries == nil || len(c.entries) >= dfCacheTerms || c.hosts+len(perHost) > dfCacheHosts {
			c.entries, c.hosts = make(map[string]dfEntry), 0
		}
		c.entries[term] = dfEntry{perHost: perHost, flushed: flushed, deletions: before, anchors: anchors}
		c.hosts += len(perHost)
		c.mu.Unlock()
	}
	return perHost, nil
}

// liveDFPerHost adds to base (copied, not modified) the Live documents
// from docID from on in term's postings, per host. A host's pages have
// neighbouring docIDs (its owner crawls it), so the previous posting's
// host is tried before the map.
func liveDFPerHost(r *index.Reader, term string, from uint32, base []hostDF) ([]hostDF, error) {
	p, err := r.Postings(term, false)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	out := slices.Clone(base)
	at := make(map[string]int, len(out))
	for i, h := range out {
		at[h.host] = i
	}
	last := -1
	for d := p.Advance(from); d < r.Flushed(); d = p.Next() { // NoMoreDocs is above every watermark
		if !r.Live(d) {
			continue
		}
		host := r.Host(d)
		if last < 0 || out[last].host != host {
			i, ok := at[host]
			if !ok {
				i = len(out)
				at[host] = i
				out = append(out, hostDF{host: host})
			}
			last = i
		}
		out[last].df++
	}
	if err := p.Err(); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return out, nil
}
