package search

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"sou/index"
)

// BenchmarkLocalQuery measures top-10 query latency (p50/p99 over a fixed
// query set) on a synthetic Chinese+English shard. SOU_BENCH_DOCS sets the
// shard size (default 5,000; the target is p50 <= 2 ms at ~36k).
func BenchmarkLocalQuery(b *testing.B) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("SOU_BENCH_DOCS")); err == nil && v > 0 {
		n = v
	}
	syn, err := index.NewSynthetic(42)
	if err != nil {
		b.Fatal(err)
	}
	docs := make([]testDoc, n)
	for i := range docs {
		zh := 0.85
		if i%3 == 0 {
			zh = 0.03
		}
		host := fmt.Sprintf("site%d.example", i%200)
		docs[i] = testDoc{url: fmt.Sprintf("http://%s/%d", host, i), host: host,
			title: syn.Text(5, zh), body: syn.Text(120+i%300, zh), rank: float64(i%7) / 3}
	}
	start := time.Now()
	ix := newTestIndex(b, docs, 5000)
	st := ix.Stats()
	b.Logf("indexed %d docs in %v (%.0f docs/s), postings %d bytes (%.0f B/doc), %d terms",
		n, time.Since(start), float64(n)/time.Since(start).Seconds(), st.PostingsBytes, float64(st.PostingsBytes)/float64(n), st.Terms)
	l := NewLocal(ix, DefaultParams())
	var queries []*Query
	qsyn, _ := index.NewSynthetic(7)
	for i := range 60 {
		var s string
		switch i % 6 {
		case 0:
			s = qsyn.ZhWord()
		case 1:
			s = qsyn.ZhWord() + qsyn.ZhWord()
		case 2:
			s = qsyn.EnWord()
		case 3:
			s = qsyn.EnWord() + " " + qsyn.EnWord()
		case 4:
			s = qsyn.EnWord() + " OR " + qsyn.ZhWord()
		case 5:
			s = `"` + qsyn.EnWord() + " " + qsyn.EnWord() + `"`
		}
		q, err := ParseQuery(s, ix.Analyzer())
		if err != nil {
			continue
		}
		queries = append(queries, q)
	}
	ctx := context.Background()
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := queries[i%len(queries)]
		t0 := time.Now()
		if _, err := l.Search(ctx, q, 10, nil, nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	}
}
