package index

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Re-indexing for new anchors may cost at most reindexShare of the new
// pages of a flush (and at least reindexMin pages) while the crawl is busy.
const (
	reindexShare = 0.5
	reindexMin   = 256
)

// reindexDue picks the pages a flush re-indexes, oldest change first: all
// of them when all is set (forced, or no page stored since the last
// flush), else those waiting longer than due, within the budget. Why a
// budget: during a long crawl a page's anchors trickle in for as long as
// pages linking to it are fetched, so a page could be re-indexed every
// ReindexDelay; measured on a 100,000-page crawl, docIDs ran at twice the
// pages stored and the index fell 11,000 pages behind the crawler. With
// the budget, the work of a busy flush is at most 1.5× its new pages; the
// rest waits for a quieter flush (which takes everything).
func reindexDue(waiting map[string]time.Time, due time.Time, all bool, puts int) []string {
	type change struct {
		url   string
		since time.Time
	}
	var picked []change
	for u, since := range waiting {
		if all || !since.After(due) {
			picked = append(picked, change{u, since})
		}
	}
	slices.SortFunc(picked, func(a, b change) int {
		if c := a.since.Compare(b.since); c != 0 {
			return c
		}
		return strings.Compare(a.url, b.url)
	})
	if budget := max(reindexMin, int(float64(puts)*reindexShare)); !all && len(picked) > budget {
		picked = picked[:budget]
	}
	out := make([]string, len(picked))
	for i, c := range picked {
		out[i] = c.url
	}
	return out
}

// reindexPages re-puts the pages at urls with their current anchors. The
// expensive part, reading and analysing each page (as much as a Put), runs
// on up to GOMAXPROCS goroutines without ix.mu, so Puts and AddAnchors go
// on meanwhile; the stored record and raw body are reused as compressed,
// since only the anchors changed. Each page is then put under ix.mu, where
// nothing can change its docID or its anchors: a page whose docID or
// anchors changed since it was read is read and analysed again under the
// lock (rare), so a re-index never indexes stale anchors, and a page that
// a Put or Delete took care of meanwhile is skipped.
func (ix *Index) reindexPages(ctx context.Context, urls []string) error {
	loaded := make([]reindexed, len(urls))
	return inWindows(ctx, len(urls),
		func(i int) { loaded[i] = ix.loadForReindex(urls[i]) },
		func(lo, hi int) error {
			ix.mu.Lock()
			defer ix.mu.Unlock()
			var err error
			for i := lo; i < hi; i++ {
				if err == nil {
					err = ix.applyReindexLocked(&loaded[i])
				}
				loaded[i].release(ix)
				loaded[i] = reindexed{} // the stored values too: a forced flush may re-index thousands of pages
			}
			return err
		})
}

// reindexed is a page read and analysed for a re-index.
type reindexed struct {
	url      string
	found    bool   // the page is stored
	id       uint32 // its docID when read
	anchors  []string
	host     string
	dp       *docPostings
	form     *analysedForm // the page's analysed form, nil without a form cache
	rec, raw []byte        // the stored values (compressed), written again as they are
	err      error
	corrupt  bool // a held page whose record does not decode (held.go)
}

func (r *reindexed) release(ix *Index) {
	if r.dp != nil {
		ix.releaseDoc(r.dp)
		r.dp = nil
	}
}

// loadForReindex reads the page at u and analyses it with its anchors:
// from its analysed form when the form cache has it, so that only the
// anchors are analysed.
func (ix *Index) loadForReindex(u string) reindexed {
	r := reindexed{url: u}
	var doc Document
	err := ix.db.View(func(txn *badger.Txn) error {
		id, ok, held, err := getDoc(txn, u)
		if err != nil || !ok || held { // a held page waits for IndexHeld
			return err
		}
		if r.rec, r.raw, err = storedValues(txn, id); err != nil {
			return err
		}
		if r.anchors, err = anchorsIn(txn, u); err != nil {
			return err
		}
		r.found, r.id = true, id
		return ix.decodeStored(r.rec, &doc)
	})
	if err != nil {
		r.err = fmt.Errorf("index: re-index %q: %w", u, err)
		return r
	}
	if !r.found {
		return r
	}
	r.host = doc.Host
	if r.form = ix.forms.get(u, r.id); r.form != nil {
		if r.dp, err = ix.replayForm(&doc, r.form, r.anchors); err == nil {
			return r
		}
		ix.log.Error("index: re-index: analysing the page again", "url", u, "err", err)
	}
	r.dp = ix.analyzeDoc(&doc, r.anchors)
	if ix.forms.wants(r.dp) {
		r.form = formOf(r.dp)
	}
	return r
}

// applyReindexLocked puts a page read by loadForReindex, after checking
// that it is still what was read. Callers hold ix.mu.
func (ix *Index) applyReindexLocked(r *reindexed) error {
	if r.err != nil {
		return r.err
	}
	if _, waiting := ix.reindex[r.url]; !waiting || ix.isQueuedLocked(r.url) {
		return nil // deleted, or put since: the flush analyses it with its current anchors
	}
	var id uint32
	var found bool
	var anchors []string
	err := ix.db.View(func(txn *badger.Txn) error {
		var err error
		var held bool
		if id, found, held, err = getDoc(txn, r.url); err != nil {
			return err
		}
		found = found && !held
		anchors, err = anchorsIn(txn, r.url)
		return err
	})
	if err != nil {
		return fmt.Errorf("index: re-index %q: %w", r.url, err)
	}
	if found != r.found || id != r.id || !slices.Equal(anchors, r.anchors) {
		r.release(ix)
		if *r = ix.loadForReindex(r.url); r.err != nil {
			return r.err
		}
	}
	if !r.found { // page gone: drop the request
		delete(ix.reindex, r.url)
		return ix.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(prefixReindex + r.url)) })
	}
	return ix.putLocked(r.url, r.host, newAnalysedEntry(r.url, r.host, r.anchors, r.dp, r.form), r.rec, r.raw)
}

// inWindows calls prepare(i) for every i in [0, n) on up to GOMAXPROCS
// goroutines, a window of 8 per goroutine at a time (bounding the
// prepared work held in memory), and after each window commit(lo, hi) on
// the caller's goroutine, windows in order. It stops at the first error
// of commit or when ctx ends.
func inWindows(ctx context.Context, n int, prepare func(i int), commit func(lo, hi int) error) error {
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	window := 8 * workers
	for lo := 0; lo < n; lo += window {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+window, n)
		next := atomic.Int64{}
		next.Store(int64(lo))
		var wg sync.WaitGroup
		for range min(workers, hi-lo) {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < hi; i = int(next.Add(1) - 1) {
					prepare(i)
				}
			})
		}
		wg.Wait()
		if err := commit(lo, hi); err != nil {
			return err
		}
	}
	return nil
}
