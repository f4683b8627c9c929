package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHarnessSmoke runs the whole harness on a ~200-page synthetic web:
// both engines index the same documents and find the known item for a
// title query; the metrics helpers agree with hand-computed values.
func TestHarnessSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	web, err := startWeb(ctx, 4, 200)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	docs, err := SyntheticDocs(ctx, web)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 100 {
		t.Fatalf("got %d parsed documents from a 200-page web, want at least 100", len(docs))
	}
	f, e, err := indexBoth(ctx, docs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if f.SouBytes <= 0 || f.BleveBytes <= 0 {
		t.Fatalf("disk usage sou=%d bleve=%d, want both > 0", f.SouBytes, f.BleveBytes)
	}
	qs := TitleQueries(docs, 5, 1)
	if len(qs) == 0 {
		t.Fatal("no title queries")
	}
	qf, err := queryBoth(ctx, e, "smoke", qs, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if qf.SouEmpty == len(qs) || qf.BleveEmpty == len(qs) {
		t.Fatalf("an engine answered nothing: sou empty %d, bleve empty %d of %d", qf.SouEmpty, qf.BleveEmpty, len(qs))
	}
	if qf.SouQ.Success10 == 0 || qf.BleveQ.Success10 == 0 {
		t.Fatalf("known-item title queries never found: sou S@10 %.2f, bleve S@10 %.2f", qf.SouQ.Success10, qf.BleveQ.Success10)
	}
	if qf.Sou.N != len(qs) || qf.Bleve.N != len(qs) {
		t.Fatalf("latency samples sou=%d bleve=%d, want %d", qf.Sou.N, qf.Bleve.N, len(qs))
	}
}

func TestMetrics(t *testing.T) {
	qs := []Query{
		{Text: "a", Relevant: []string{"http://x.test/a?DbPAR=1#f"}},
		{Text: "b", Relevant: []string{"http://x.test/b"}},
		{Text: "c", Relevant: []string{"http://x.test/c"}},
		{Text: "unjudged"},
	}
	res := [][]string{
		{"http://X.test:80/a"},                 // rank 1 (host case, port, query ignored)
		{"http://x.test/z", "http://x.test/b"}, // rank 2
		{"http://x.test/z"},                    // miss
		{"http://x.test/anything"},
	}
	q := Judge(qs, res)
	if q.Queries != 3 || abs(q.MRR10-0.5) > 1e-9 || abs(q.Success10-2.0/3) > 1e-9 {
		t.Fatalf("Judge = %+v, want 3 queries, MRR 0.5, S@10 0.667", q)
	}
	shared, jac := Overlap([][]string{{"http://a/1", "http://a/2"}, {}}, [][]string{{"http://a/2", "http://a/3"}, {}})
	if abs(shared-0.75) > 1e-9 || abs(jac-(1.0/3+1)/2) > 1e-9 {
		t.Fatalf("Overlap = %v, %v; want 0.75, 0.667", shared, jac)
	}
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := Summarize(ds)
	if l.P50 != 50*time.Millisecond || l.P99 != 99*time.Millisecond || l.Max != 100*time.Millisecond {
		t.Fatalf("Summarize = %+v", l)
	}
}

func abs(x float64) float64 { return max(x, -x) }

// benchSizes reads SOU_BENCH_PAGES ("2000,10000" by default).
func benchSizes() ([]int, error) {
	v := os.Getenv("SOU_BENCH_PAGES")
	if v == "" {
		v = "2000,10000"
	}
	var sizes []int
	for s := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 50 {
			return nil, fmt.Errorf("SOU_BENCH_PAGES: bad size %q (want integers >= 50)", s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// TestCompare runs every comparison on the synthetic web and writes the
// figures to bench/results/compare-<UTC time>.md. Gated by SOU_BENCH=1;
// sizes from SOU_BENCH_PAGES; SOU_BENCH_CRAWL=0 skips the crawl comparison.
// The real corpus is TestCompareCorpus.
func TestCompare(t *testing.T) {
	if os.Getenv("SOU_BENCH") != "1" {
		t.Skip("set SOU_BENCH=1 to run the side-by-side benchmark (minutes)")
	}
	sizes, err := benchSizes()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	var out strings.Builder
	started := time.Now().UTC()
	fmt.Fprintf(&out, "# sou vs colly + Bleve, %s\n\n", started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&out, "Machine: %s. All ratios from this one run.\n\n", machineLine())
	fmt.Fprintf(&out, "Command: `SOU_BENCH=1 SOU_BENCH_PAGES=%s go test -run 'TestCompare$' -v -timeout 2h ./bench/`\n\n",
		strings.Trim(strings.Join(strings.Fields(fmt.Sprint(sizes)), ","), "[]"))
	dir := "results"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "compare-"+started.Format("20060102-150405")+".md")
	// The file is rewritten after every section, so a long run that is
	// stopped still leaves the figures measured so far.
	emit := func(s string) {
		out.WriteString(s)
		t.Log("\n" + s)
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	progress := func(format string, args ...any) {
		t.Logf("%s "+format, append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}
	for _, pages := range sizes {
		var sec strings.Builder
		fmt.Fprintf(&sec, "## Synthetic web: %d pages on %d hosts (seed 1, well-behaved)\n\n", pages, hostsFor(pages))
		progress("fetching and parsing %d synthetic pages", pages)
		docs, err := syntheticDocs(ctx, pages)
		if err != nil {
			t.Fatal(err)
		}
		progress("indexing %d docs with sou, then Bleve", len(docs))
		f, e, err := indexBoth(ctx, docs, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		writeIndexTable(&sec, f)
		progress("indexed: sou %.1f s, Bleve %.1f s; querying", f.SouTime.Seconds(), f.BleveTime.Seconds())
		qf, err := queryBoth(ctx, e, "known-item titles", TitleQueries(docs, 200, 1), 2, true)
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		writeQueryTable(&sec, qf)
		if os.Getenv("SOU_BENCH_CRAWL") != "0" {
			progress("crawling with sou, then colly + Bleve")
			cf, err := crawlBoth(ctx, pages, 32, t.TempDir(), os.Getenv("SOU_BENCH_CRAWL_DIAG") != "0")
			if err != nil {
				t.Fatal(err)
			}
			writeCrawlTable(&sec, cf)
		}
		emit(sec.String())
	}
	t.Logf("figures written to bench/%s", path)
}

// TestCompareCorpus indexes the real corpus (../shared/corpus) with both
// engines and scores the LibreOffice zh-CN and en-US development sets;
// figures go to bench/results/compare-corpus-<UTC time>.md. Gated by
// SOU_BENCH=1; skipped when the corpus is not installed.
func TestCompareCorpus(t *testing.T) {
	if os.Getenv("SOU_BENCH") != "1" {
		t.Skip("set SOU_BENCH=1 to run the side-by-side benchmark on the real corpus (minutes)")
	}
	sites := os.Getenv("SOU_BENCH_CORPUS")
	if sites == "" {
		sites = DefaultSitesTSV
	}
	if _, err := os.Stat(sites); err != nil {
		t.Skipf("real corpus not installed (%v); install it with ../shared/corpus/install.sh", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	started := time.Now().UTC()
	docs, err := CorpusDocs(ctx, sites)
	if err != nil {
		t.Fatal(err)
	}
	var sec strings.Builder
	fmt.Fprintf(&sec, "# sou vs Bleve on the real corpus, %s\n\n", started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&sec, "Machine: %s. All ratios from this one run.\n\n", machineLine())
	sec.WriteString("Command: `SOU_BENCH=1 go test -run TestCompareCorpus -v -timeout 2h ./bench/`\n\n")
	fmt.Fprintf(&sec, "%d pages parsed from the main sites of %s.\n\n", len(docs), sites)
	t.Logf("%s indexing %d corpus docs", time.Now().UTC().Format("15:04:05"), len(docs))
	f, e, err := indexBoth(ctx, docs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	writeIndexTable(&sec, f)
	for _, lang := range []string{"zh-CN", "en-US"} {
		qs, err := LoadQrels(ctx, QrelsScript, lang, 300)
		if err != nil {
			fmt.Fprintf(&sec, "qrels %s: %v\n\n", lang, err)
			continue
		}
		qf, err := queryBoth(ctx, e, "LibreOffice "+lang+" known-item (qrels.py)", qs, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		writeQueryTable(&sec, qf)
	}
	t.Log("\n" + sec.String())
	if err := os.MkdirAll("results", 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("results", "compare-corpus-"+started.Format("20060102-150405")+".md")
	if err := os.WriteFile(path, []byte(sec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("figures written to bench/%s", path)
}

// benchPages is the synthetic size the Go benchmarks use: the first of
// SOU_BENCH_PAGES, 1000 by default (a run of all benchmarks with
// -benchtime 1x then takes a few minutes).
func benchPages(b *testing.B) int {
	if os.Getenv("SOU_BENCH_PAGES") == "" {
		return 1000
	}
	sizes, err := benchSizes()
	if err != nil {
		b.Fatal(err)
	}
	return sizes[0]
}

func benchDocs(b *testing.B) []Doc {
	docs, err := syntheticDocs(context.Background(), benchPages(b))
	if err != nil {
		b.Fatal(err)
	}
	loadDictionaries()
	return docs
}

// BenchmarkIndex: one op indexes every document of the synthetic web
// into a fresh index (open, add, flush, close).
func BenchmarkIndex(b *testing.B) {
	docs := benchDocs(b)
	ctx := context.Background()
	b.Run("engine=sou", func(b *testing.B) {
		var bytes int64
		for b.Loop() {
			dir := b.TempDir()
			s, err := OpenSou(dir)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.AddAll(ctx, docs); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			bytes, _ = DiskUsage(dir)
			b.StartTimer()
		}
		b.ReportMetric(float64(len(docs))*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		b.ReportMetric(float64(bytes), "disk-bytes")
	})
	b.Run("engine=bleve", func(b *testing.B) {
		var bytes int64
		for b.Loop() {
			dir := filepath.Join(b.TempDir(), "bleve")
			e, err := newBleve(dir)
			if err != nil {
				b.Fatal(err)
			}
			if err := e.AddAll(ctx, docs); err != nil {
				b.Fatal(err)
			}
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			bytes, _ = DiskUsage(dir)
			b.StartTimer()
		}
		b.ReportMetric(float64(len(docs))*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		b.ReportMetric(float64(bytes), "disk-bytes")
	})
}

// BenchmarkQuery: one op runs the whole title query set (200 queries);
// ns/query, p50 and p99 are reported.
func BenchmarkQuery(b *testing.B) {
	docs := benchDocs(b)
	ctx := context.Background()
	_, e, err := indexBoth(ctx, docs, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	qs := TitleQueries(docs, 200, 1)
	engines := []struct {
		name string
		run  func(q string) ([]string, error)
	}{
		{"engine=sou", func(q string) ([]string, error) { return e.sou.Search(ctx, q, 10) }},
		{"engine=bleve", func(q string) ([]string, error) { return e.bleve.Search(ctx, q, 10, true) }},
		{"engine=bleve-hits-only", func(q string) ([]string, error) { return e.bleve.Search(ctx, q, 10, false) }},
	}
	for _, eng := range engines {
		b.Run(eng.name, func(b *testing.B) {
			for _, q := range qs { // warm-up
				if _, err := eng.run(q.Text); err != nil {
					b.Fatal(err)
				}
			}
			var lat []time.Duration
			for b.Loop() {
				for _, q := range qs {
					start := time.Now()
					if _, err := eng.run(q.Text); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
			}
			l := Summarize(lat)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(len(lat)), "ns/query")
			b.ReportMetric(float64(l.P50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(l.P99.Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkCrawl: one op crawls and indexes the whole synthetic web with
// 32 concurrent fetches.
func BenchmarkCrawl(b *testing.B) {
	pages := benchPages(b)
	ctx := context.Background()
	web, err := startWeb(ctx, hostsFor(pages), pages)
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	loadDictionaries()
	pipelines := []struct {
		name string
		run  func(dir string) (CrawlResult, error)
	}{
		{"pipeline=sou", func(dir string) (CrawlResult, error) { return CrawlSou(ctx, web, dir, 32, true, nil) }},
		{"pipeline=colly-bleve", func(dir string) (CrawlResult, error) { return CrawlColly(ctx, web, dir, 32, true) }},
	}
	for _, p := range pipelines {
		b.Run(p.name, func(b *testing.B) {
			var indexed int64
			var anchorUpdates uint64
			var lastTenth float64
			var mem0, mem1 runtime.MemStats
			runtime.ReadMemStats(&mem0)
			cpu0 := processCPU(b)
			for b.Loop() {
				r, err := p.run(filepath.Join(b.TempDir(), "crawl"))
				if err != nil {
					b.Fatal(err)
				}
				indexed += r.Indexed
				anchorUpdates += r.AnchorUpdates
				lastTenth = r.LastTenthRate
			}
			if lastTenth > 0 {
				b.ReportMetric(lastTenth, "last/first-tenth")
			}
			if anchorUpdates > 0 {
				b.ReportMetric(float64(anchorUpdates)/float64(max(indexed, 1))*100, "anchor-updates-%")
			}
			b.ReportMetric(float64(indexed)/b.Elapsed().Seconds(), "pages/s")
			// The process's CPU: the pipeline and the simulated web serving it.
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/1000/float64(max(indexed, 1)), "cpu-ms/page")
			// Go allocation and collections per page, the simulated web's
			// included (the same for both pipelines).
			runtime.ReadMemStats(&mem1)
			b.ReportMetric(float64(mem1.TotalAlloc-mem0.TotalAlloc)/1024/float64(max(indexed, 1)), "alloc-KiB/page")
			b.ReportMetric(float64(mem1.NumGC-mem0.NumGC)*1000/float64(max(indexed, 1)), "gc/1k-pages")
		})
	}
}
