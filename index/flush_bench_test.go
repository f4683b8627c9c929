package index

import (
	"context"
	"testing"
)

// BenchmarkFlushSmallBatches measures what a flush costs when it brings
// few pages, as on a crawling node (a flush every few seconds of a
// crawl): 2,000 synthetic pages are indexed first, then b.N more are put
// 64 at a time, each batch flushed. It reports the process CPU of the
// flushes alone per page flushed.
//
//	go test -run '^$' -bench BenchmarkFlushSmallBatches -benchtime 3000x -count 6 ./index/
func BenchmarkFlushSmallBatches(b *testing.B) {
	syn, err := NewSynthetic(1)
	if err != nil {
		b.Fatal(err)
	}
	db := openDB(b, b.TempDir())
	defer db.Close()
	ix := openIndex(b, db, 1<<30)
	defer ix.Close()
	ctx := context.Background()
	for range 2000 {
		if err := ix.Put(ctx, syn.Page()); err != nil {
			b.Fatal(err)
		}
	}
	if err := ix.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	docs := make([]*Document, b.N)
	for i := range docs {
		docs[i] = syn.Page()
	}
	const batch = 64
	var flushCPU int64
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += batch {
		for _, d := range docs[lo:min(lo+batch, b.N)] {
			if err := ix.Put(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
		// The pages' analysis, which the flush runs first, is not timed.
		if err := ix.drainQueue(ctx); err != nil {
			b.Fatal(err)
		}
		before := cpuTime()
		if err := ix.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		flushCPU += int64(cpuTime() - before)
	}
	b.StopTimer()
	b.ReportMetric(float64(flushCPU)/1e3/float64(b.N), "flush-cpu-µs/doc")
}
