package index

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
