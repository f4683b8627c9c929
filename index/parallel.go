package index

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

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
