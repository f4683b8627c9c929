package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"sou/index"
)

// TestIndexGrowth measures whether indexing slows down as the store grows,
// the complaint Bleve and YaCy users share (issue 10): it indexes
// SOU_BENCH_GROWTH synthetic pages (index.Synthetic: gojieba-frequency
// Chinese and Zipf English, 150–1,200 words) into one sou index on disk,
// as a node stores them (node.IndexOptions, node.BadgerOptions, two
// writers), and reports per band of a tenth of the pages: docs/s, disk
// bytes per page and local query latency at the band's end (100
// known-item title queries of pages indexed so far). The crawler is left
// out on purpose: the crawl's own tail (slow hosts, politeness) would hide
// what the store does.
//
//	SOU_BENCH_GROWTH=100000 go test -run TestIndexGrowth -v -timeout 2h ./bench/
func TestIndexGrowth(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SOU_BENCH_GROWTH"))
	if n <= 0 {
		t.Skip("set SOU_BENCH_GROWTH=<pages> to run")
	}
	ctx := context.Background()
	syn, err := index.NewSynthetic(7)
	if err != nil {
		t.Skip(err)
	}
	index.SharedAnalyzer()
	e, err := OpenSou(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	band := max(n/10, 1)
	var titles []string
	t.Logf("%-16s %9s %12s %12s %12s %10s", "pages", "docs/s", "disk B/page", "query p50", "query p99", "heap MB")
	for done := 0; done < n; {
		docs := make([]*index.Document, min(band, n-done))
		for i := range docs {
			docs[i] = syn.Page()
			if len(titles) < 10_000 && i%10 == 0 {
				titles = append(titles, docs[i].Title)
			}
		}
		start := time.Now()
		if err := putAll(ctx, e.Index(), docs); err != nil {
			t.Fatal(err)
		}
		if err := e.Index().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(start)
		done += len(docs)
		bytes, err := DiskUsage(e.Dir())
		if err != nil {
			t.Fatal(err)
		}
		var lat []time.Duration
		for i := range 100 {
			q := titles[(i*7919)%len(titles)]
			qs := time.Now()
			if _, err := e.Search(ctx, q, 10); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(qs))
		}
		l := Summarize(lat)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("%-16s %9.0f %12d %12v %12v %10.0f", fmt.Sprintf("%d-%d", done-len(docs), done),
			float64(len(docs))/elapsed.Seconds(), bytes/int64(done), l.P50.Round(10*time.Microsecond), l.P99.Round(10*time.Microsecond), float64(ms.HeapInuse)/(1<<20))
	}
}
