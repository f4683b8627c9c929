package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"

	"sou/index"
	"sou/testnet/simweb"
)

// startWeb starts a well-behaved synthetic web (seed 1) of about pages
// pages on hosts hosts.
func startWeb(ctx context.Context, hosts, pages int) (*simweb.Web, error) {
	web, err := simweb.Start(ctx, simweb.Config{Seed: 1, Hosts: hosts, Pages: pages, Misbehave: []string{"none"}})
	if err != nil {
		return nil, fmt.Errorf("start simulated web (%d hosts, %d pages): %w", hosts, pages, err)
	}
	return web, nil
}

// loadDictionaries loads both gojieba dictionaries (sou's shared analyzer
// and the Bleve tokenizer's instance) before any clock starts: loading is a
// one-off per process, not indexing work.
func loadDictionaries() {
	index.SharedAnalyzer()
	sharedJieba()
}

// hostsFor gives the synthetic web one host per 50 pages (at least 4).
func hostsFor(pages int) int { return max(4, pages/50) }

var (
	docCacheMu sync.Mutex
	docCache   = map[int][]Doc{}
)

// syntheticDocs fetches and parses the required pages of a synthetic web
// of the given size once per test binary.
func syntheticDocs(ctx context.Context, pages int) ([]Doc, error) {
	docCacheMu.Lock()
	defer docCacheMu.Unlock()
	if d, ok := docCache[pages]; ok {
		return d, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	web, err := startWeb(wctx, hostsFor(pages), pages)
	if err != nil {
		return nil, err
	}
	defer web.Close()
	docs, err := SyntheticDocs(ctx, web)
	if err != nil {
		return nil, err
	}
	docCache[pages] = docs
	return docs, nil
}

// engines is one side-by-side pair over the same documents.
type engines struct {
	sou   *SouEngine
	bleve *BleveEngine
}

func (e *engines) Close() {
	if e.sou != nil {
		_ = e.sou.Close()
	}
	if e.bleve != nil {
		_ = e.bleve.Close()
	}
}

// IndexFigures compares indexing the same documents.
type IndexFigures struct {
	Docs                 int
	SouTime, BleveTime   time.Duration // open, add everything, flush, close
	SouBytes, BleveBytes int64         // du of each directory after close
}

// indexBoth indexes docs into sou then Bleve (each timed from open to
// close), measures their directories, and reopens both for querying.
func indexBoth(ctx context.Context, docs []Doc, dir string) (*IndexFigures, *engines, error) {
	loadDictionaries()
	souDir, bleveDir := filepath.Join(dir, "sou"), filepath.Join(dir, "bleve")
	f := &IndexFigures{Docs: len(docs)}
	runtime.GC()
	var err error
	f.SouTime, err = Timed(func() error {
		s, err := OpenSou(souDir)
		if err != nil {
			return err
		}
		if err := s.AddAll(ctx, docs); err != nil {
			_ = s.Close()
			return err
		}
		return s.Close()
	})
	if err != nil {
		return nil, nil, err
	}
	runtime.GC()
	f.BleveTime, err = Timed(func() error {
		b, err := newBleve(bleveDir)
		if err != nil {
			return err
		}
		if err := b.AddAll(ctx, docs); err != nil {
			_ = b.Close()
			return err
		}
		return b.Close()
	})
	if err != nil {
		return nil, nil, err
	}
	if f.SouBytes, err = DiskUsage(souDir); err != nil {
		return nil, nil, err
	}
	if f.BleveBytes, err = DiskUsage(bleveDir); err != nil {
		return nil, nil, err
	}
	e := &engines{}
	if e.sou, err = OpenSou(souDir); err != nil {
		return nil, nil, err
	}
	idx, err := bleve.Open(bleveDir)
	if err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("bleve open %s: %w", bleveDir, err)
	}
	e.bleve = &BleveEngine{dir: bleveDir, idx: idx}
	return f, e, nil
}

// QueryFigures compares answering one query set.
type QueryFigures struct {
	Name                   string
	Queries                int
	Sou, Bleve, BleveIDs   Latency // BleveIDs: hits only, no stored title, no highlight
	Shared, Jaccard        float64 // top-10 overlap
	SouQ, BleveQ           Quality
	SouEmpty, BleveEmpty   int // queries with no result
	SouErrors, BleveErrors int
}

// queryBoth runs every query once untimed (warm caches for both), then
// passes timed rounds, interleaving the engines query by query so that
// background noise hits both alike.
// queryBoth runs qs on both engines. highlight asks Bleve for highlighted
// fragments too (the fair match for sou's snippets); the real corpus runs
// without, because Bleve's highlighter on long documentation pages takes
// seconds per query.
func queryBoth(ctx context.Context, e *engines, name string, qs []Query, passes int, highlight bool) (*QueryFigures, error) {
	f := &QueryFigures{Name: name, Queries: len(qs)}
	souRes := make([][]string, len(qs))
	bleveRes := make([][]string, len(qs))
	for i, q := range qs {
		r, err := e.sou.Search(ctx, q.Text, 10)
		if err != nil {
			f.SouErrors++
		}
		souRes[i] = r
		r, err = e.bleve.Search(ctx, q.Text, 10, highlight)
		if err != nil {
			f.BleveErrors++
		}
		bleveRes[i] = r
		if len(souRes[i]) == 0 {
			f.SouEmpty++
		}
		if len(bleveRes[i]) == 0 {
			f.BleveEmpty++
		}
	}
	var ts, tb, tbi []time.Duration
	for range passes {
		for _, q := range qs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			start := time.Now()
			_, _ = e.sou.Search(ctx, q.Text, 10)
			ts = append(ts, time.Since(start))
			if highlight {
				start = time.Now()
				_, _ = e.bleve.Search(ctx, q.Text, 10, true)
				tb = append(tb, time.Since(start))
			}
			start = time.Now()
			_, _ = e.bleve.Search(ctx, q.Text, 10, false)
			tbi = append(tbi, time.Since(start))
		}
	}
	f.Sou, f.Bleve, f.BleveIDs = Summarize(ts), Summarize(tb), Summarize(tbi)
	f.Shared, f.Jaccard = Overlap(souRes, bleveRes)
	f.SouQ, f.BleveQ = Judge(qs, souRes), Judge(qs, bleveRes)
	return f, nil
}

// CrawlFigures compares the two crawl-and-index pipelines on one web.
type CrawlFigures struct {
	Hosts, Required int
	Workers         int
	Sou, Colly      CrawlResult
	// Crawl-only diagnostics (pages parsed and counted, not indexed); nil
	// when not measured.
	SouCrawlOnly, CollyCrawlOnly *CrawlResult
}

// crawlBoth crawls one fresh simulated web with both pipelines (sou first),
// and with diag also with both crawlers alone (nothing indexed).
func crawlBoth(ctx context.Context, pages, workers int, dir string, diag bool) (*CrawlFigures, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hosts := hostsFor(pages)
	web, err := startWeb(wctx, hosts, pages)
	if err != nil {
		return nil, err
	}
	defer web.Close()
	req, err := RequiredPages(web)
	if err != nil {
		return nil, err
	}
	f := &CrawlFigures{Hosts: hosts, Required: len(req), Workers: workers}
	loadDictionaries()
	runtime.GC()
	if f.Sou, err = CrawlSou(ctx, web, filepath.Join(dir, "sou-crawl"), workers, true, nil); err != nil {
		return nil, fmt.Errorf("sou crawl: %w", err)
	}
	runtime.GC()
	if f.Colly, err = CrawlColly(ctx, web, filepath.Join(dir, "colly-crawl"), workers, true); err != nil {
		return nil, fmt.Errorf("colly crawl: %w", err)
	}
	if !diag {
		return f, nil
	}
	runtime.GC()
	s, err := CrawlSou(ctx, web, filepath.Join(dir, "sou-crawl-only"), workers, false, nil)
	if err != nil {
		return nil, fmt.Errorf("sou crawl only: %w", err)
	}
	runtime.GC()
	c, err := CrawlColly(ctx, web, filepath.Join(dir, "colly-crawl-only"), workers, false)
	if err != nil {
		return nil, fmt.Errorf("colly crawl only: %w", err)
	}
	f.SouCrawlOnly, f.CollyCrawlOnly = &s, &c
	return f, nil
}

// machineLine describes where the figures were measured.
func machineLine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d), %s %s/%s", cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0),
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	if r := a / b; r < 0.1 {
		return fmt.Sprintf("%.3f×", r)
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

func writeIndexTable(b *strings.Builder, f *IndexFigures) {
	souRate := float64(f.Docs) / f.SouTime.Seconds()
	bleveRate := float64(f.Docs) / f.BleveTime.Seconds()
	fmt.Fprintf(b, "| indexing (%d docs) | sou | Bleve | sou / Bleve |\n|---|---|---|---|\n", f.Docs)
	fmt.Fprintf(b, "| wall time (open → close) | %.2f s | %.2f s | %s |\n", f.SouTime.Seconds(), f.BleveTime.Seconds(),
		ratio(f.SouTime.Seconds(), f.BleveTime.Seconds()))
	fmt.Fprintf(b, "| docs/s | %.0f | %.0f | %s |\n", souRate, bleveRate, ratio(souRate, bleveRate))
	fmt.Fprintf(b, "| bytes on disk | %s | %s | %s |\n", mb(f.SouBytes), mb(f.BleveBytes),
		ratio(float64(f.SouBytes), float64(f.BleveBytes)))
	fmt.Fprintf(b, "| bytes per doc | %.0f | %.0f | |\n\n", float64(f.SouBytes)/float64(f.Docs), float64(f.BleveBytes)/float64(f.Docs))
}

func writeQueryTable(b *strings.Builder, f *QueryFigures) {
	fmt.Fprintf(b, "| queries: %s (%d) | sou | Bleve | sou / Bleve |\n|---|---|---|---|\n", f.Name, f.Queries)
	fmt.Fprintf(b, "| p50 (title + snippet) | %s | %s | %s |\n", ms(f.Sou.P50), ms(f.Bleve.P50), ratio(float64(f.Sou.P50), float64(f.Bleve.P50)))
	fmt.Fprintf(b, "| p99 (title + snippet) | %s | %s | %s |\n", ms(f.Sou.P99), ms(f.Bleve.P99), ratio(float64(f.Sou.P99), float64(f.Bleve.P99)))
	fmt.Fprintf(b, "| Bleve hits only (no stored fields, no highlight) p50 / p99 | | %s / %s | |\n", ms(f.BleveIDs.P50), ms(f.BleveIDs.P99))
	fmt.Fprintf(b, "| MRR@10 | %.3f | %.3f | %s |\n", f.SouQ.MRR10, f.BleveQ.MRR10, ratio(f.SouQ.MRR10, f.BleveQ.MRR10))
	fmt.Fprintf(b, "| Success@10 | %.3f | %.3f | %s |\n", f.SouQ.Success10, f.BleveQ.Success10, ratio(f.SouQ.Success10, f.BleveQ.Success10))
	fmt.Fprintf(b, "| queries with no result | %d | %d | |\n", f.SouEmpty, f.BleveEmpty)
	if f.SouErrors+f.BleveErrors > 0 {
		fmt.Fprintf(b, "| query errors | %d | %d | |\n", f.SouErrors, f.BleveErrors)
	}
	fmt.Fprintf(b, "| top-10 overlap: mean \\|A∩B\\|/10, mean Jaccard | %.2f, %.2f | | |\n\n", f.Shared, f.Jaccard)
}

func writeCrawlTable(b *strings.Builder, f *CrawlFigures) {
	s, c := f.Sou, f.Colly
	fmt.Fprintf(b, "| crawl + index (%d hosts, %d required pages, %d workers) | sou crawl + sou index | colly + Bleve | sou / colly |\n|---|---|---|---|\n",
		f.Hosts, f.Required, f.Workers)
	fmt.Fprintf(b, "| wall time | %.2f s | %.2f s | %s |\n", s.Elapsed.Seconds(), c.Elapsed.Seconds(), ratio(s.Elapsed.Seconds(), c.Elapsed.Seconds()))
	fmt.Fprintf(b, "| pages indexed | %d | %d | |\n", s.Indexed, c.Indexed)
	fmt.Fprintf(b, "| pages/s (indexed / wall) | %.0f | %.0f | %s |\n", s.PagesPerSecond(), c.PagesPerSecond(), ratio(s.PagesPerSecond(), c.PagesPerSecond()))
	fmt.Fprintf(b, "| HTTP requests seen by the web | %d | %d | |\n", s.Requests, c.Requests)
	fmt.Fprintf(b, "| bytes on disk after close | %s | %s | %s |\n", mb(s.Bytes), mb(c.Bytes), ratio(float64(s.Bytes), float64(c.Bytes)))
	if so, co := f.SouCrawlOnly, f.CollyCrawlOnly; so != nil && co != nil {
		fmt.Fprintf(b, "| diagnostic: crawl + parse only, nothing indexed: wall time | %.2f s | %.2f s | %s |\n",
			so.Elapsed.Seconds(), co.Elapsed.Seconds(), ratio(so.Elapsed.Seconds(), co.Elapsed.Seconds()))
		fmt.Fprintf(b, "| diagnostic: crawl + parse only: pages/s | %.0f | %.0f | %s |\n",
			so.PagesPerSecond(), co.PagesPerSecond(), ratio(so.PagesPerSecond(), co.PagesPerSecond()))
	}
	b.WriteString("\n")
}
