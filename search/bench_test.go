package search

import (
	"context"
	"fmt"
	"hash/crc32"
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
	l, queries := benchShard(b)
	ctx := context.Background()
	benchLatency(b, queries, func(q *Query) error {
		_, err := l.Search(ctx, q, 10, nil, nil)
		return err
	})
}

// BenchmarkShardQuery measures what one shard of a network does for a
// coordinator's first page of 10: 50 candidates, the top 10 with
// snippets, statistics over the hosts it owns. owned=all is a single node;
// owned=half a node of a network with replication, where half of the
// pages it holds are replicas of other owners' hosts.
func BenchmarkShardQuery(b *testing.B) {
	l, queries := benchShard(b)
	ctx := context.Background()
	filters := []struct {
		name string
		keep func(host string) bool
	}{
		{"owned=all", nil},
		{"owned=half", func(host string) bool { return crc32.ChecksumIEEE([]byte(host))%2 == 0 }},
	}
	for _, f := range filters {
		b.Run(f.name, func(b *testing.B) {
			benchLatency(b, queries, func(q *Query) error {
				_, err := l.SearchSnippets(ctx, q, 50, 10, nil, f.keep)
				return err
			})
		})
	}
}

// benchShard indexes SOU_BENCH_DOCS (default 5,000) synthetic documents
// on 200 hosts and returns an engine over them with 60 queries: Chinese
// and English words, pairs, OR and phrases.
func benchShard(b *testing.B) (*Local, []*Query) {
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
	b.Logf("indexed %d docs in %v (%.0f docs/s), postings %d bytes (%.0f B/doc)",
		n, time.Since(start), float64(n)/time.Since(start).Seconds(), st.PostingsBytes, float64(st.PostingsBytes)/float64(n))
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
	return NewLocal(ix, DefaultParams()), queries
}

// benchLatency runs the queries round-robin and reports p50 and p99.
func benchLatency(b *testing.B, queries []*Query, run func(*Query) error) {
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if err := run(queries[i%len(queries)]); err != nil {
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
