package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"sou/crawl"
	"sou/testnet"
)

// TestCorpusVsColly is the colly + Bleve half of bench/corpus-vs.sh: it
// crawls the corpus that a `sou testnet web --sites` process serves
// (SOU_VS_WEB_HTTP, its HTTP listener; SOU_VS_WEB_CONTROL, its control
// URL for the seeds) with colly, one request in flight per host and as
// many fetch workers in all as a sou node, indexes every page into Bleve
// + gojieba, and writes its figures as JSON to SOU_VS_OUT. Its seeds are
// the web's seeds and every page the web requires (SOU_VS_SEEDS=web: the
// web's seeds only). The script runs
// it beside `sou testnet run --nodes 1` on the same corpus; run alone, it
// skips.
func TestCorpusVsColly(t *testing.T) {
	httpAddr, control, out := os.Getenv("SOU_VS_WEB_HTTP"), os.Getenv("SOU_VS_WEB_CONTROL"), os.Getenv("SOU_VS_OUT")
	if httpAddr == "" || control == "" || out == "" {
		t.Skip("run by bench/corpus-vs.sh (needs SOU_VS_WEB_HTTP, SOU_VS_WEB_CONTROL, SOU_VS_OUT)")
	}
	dir := os.Getenv("SOU_VS_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	seeds, err := webSeeds(ctx, control)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("SOU_VS_SEEDS") != "web" {
		// sou finds pages that no <a href> reaches (links in scripts,
		// sitemaps); colly does not look there. Seeding it with every
		// page the web requires makes both fetch and index the same pages.
		required, err := webRequired(ctx, control)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, required...)
	}
	mem := &rssPeaks{}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { mem.run(sampleCtx, time.Second) })

	workers := crawl.FastConfig().Workers
	transport := newPoliteTransport(webTransport(httpAddr, ".test", workers), workers)
	res, err := crawlColly(ctx, collyRun{
		seeds:      seeds,
		transport:  transport,
		urlFilter:  regexp.MustCompile(`^https?://[^/]+\.test(:\d+)?(/|$)`),
		onePerHost: hostsOf(seeds),
		requests:   func() int { return int(transport.count.Load()) },
	}, dir, true)
	stopSampling()
	sampling.Wait()
	mem.sample()
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := testnet.CPUSecondsOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	fig := map[string]any{
		"workers":          workers,
		"seeds":            len(seeds),
		"hosts":            len(hostsOf(seeds)),
		"seconds":          round3(res.Elapsed.Seconds()),
		"fetch_seconds":    round3(transport.span().Seconds()),
		"pages_fetched":    res.Fetched,
		"pages_indexed":    res.Indexed,
		"requests":         res.Requests,
		"cpu_seconds":      round3(cpu),
		"rss_anon_peak_mb": round3(mem.anon),
		"rss_file_peak_mb": round3(mem.file),
		"index_bytes":      res.Bytes,
	}
	b, err := json.MarshalIndent(fig, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", b)
}

// webSeeds asks a simulated web's control address for its seed URLs.
func webSeeds(ctx context.Context, control string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(control, "/")+"/seeds", nil)
	if err != nil {
		return nil, fmt.Errorf("seeds request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("seeds from %s: %w", control, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("seeds from %s: %s", control, resp.Status)
	}
	var seeds []string
	if err := json.NewDecoder(resp.Body).Decode(&seeds); err != nil {
		return nil, fmt.Errorf("seeds from %s: %w", control, err)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("seeds from %s: none", control)
	}
	return seeds, nil
}

// webRequired asks a simulated web's control address for the URLs of
// its required pages (waiting for its truth listing).
func webRequired(ctx context.Context, control string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(control, "/")+"/truth", nil)
	if err != nil {
		return nil, fmt.Errorf("truth request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("truth from %s: %w", control, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("truth from %s: %s", control, resp.Status)
	}
	var truth struct {
		Pages []struct {
			URL      string `json:"url"`
			Required bool   `json:"required"`
		} `json:"pages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&truth); err != nil {
		return nil, fmt.Errorf("truth from %s: %w", control, err)
	}
	var out []string
	for _, p := range truth.Pages {
		if p.Required {
			out = append(out, p.URL)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("truth from %s: no required page", control)
	}
	return out, nil
}

// hostsOf is the distinct hosts (host[:port]) of urls.
func hostsOf(urls []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || seen[u.Host] {
			continue
		}
		seen[u.Host] = true
		out = append(out, u.Host)
	}
	return out
}

// rssPeaks follows this process's resident memory, split as the testnet
// report splits a node's: RssAnon (what the process needs) and RssFile
// (mapped files the kernel can drop).
type rssPeaks struct {
	mu         sync.Mutex
	anon, file float64 // MB
}

func (p *rssPeaks) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		p.sample()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *rssPeaks) sample() {
	anon, file, err := testnet.RSSOf(os.Getpid())
	if err != nil {
		return // no /proc: the figures stay 0, which the report shows
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.anon = max(p.anon, anon)
	p.file = max(p.file, file)
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
