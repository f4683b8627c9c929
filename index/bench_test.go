package index

import (
	"context"
	"sync"
	"testing"
)

// BenchmarkIndexing measures Put throughput (analysis, compression, page
// store, postings flushes) on synthetic Chinese+English pages with two
// writers, as on a 2-core node. Reports docs/s and postings bytes/doc.
func BenchmarkIndexing(b *testing.B) {
	syn, err := NewSynthetic(1)
	if err != nil {
		b.Fatal(err)
	}
	const pool = 2000
	docs := make([]*Document, pool)
	for i := range docs {
		docs[i] = syn.Page()
	}
	db := openDB(b, b.TempDir())
	defer db.Close()
	ix := openIndex(b, db, 2000)
	ctx := context.Background()
	var raw int64
	for _, d := range docs {
		raw += int64(len(d.Body))
	}
	b.SetBytes(raw / pool)
	b.ResetTimer()
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= b.N {
					return
				}
				d := *docs[i%pool]
				if i >= pool { // a new URL each time: no replacement
					d.URL += "?" + string(rune('a'+i/pool%26)) + itoa(i)
				}
				if err := ix.Put(ctx, &d); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := ix.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	st := ix.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(st.PostingsBytes)/float64(max(st.Docs, 1)), "postB/doc")
	ix.Close()
}

func itoa(i int) string {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return string(buf[n:])
}
