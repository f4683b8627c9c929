package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"sou/search"
	"sou/testnet/simweb"
)

// findBrowser returns a Chromium (or Chrome) binary: $SOU_CHROMIUM, then
// Debian's /usr/bin/chromium, then the usual names on $PATH.
func findBrowser() string {
	if p := os.Getenv("SOU_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactDir is where screenshots go: $SOU_ARTIFACTS (kept) or a
// temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SOU_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "browser")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts: %v", err)
	}
	return dir
}

// requireBrowser returns the Chromium to test with, or skips the test.
func requireBrowser(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	browser := findBrowser()
	if browser == "" {
		t.Skip("no Chromium found (tried $SOU_CHROMIUM, /usr/bin/chromium, chromium, chromium-browser, google-chrome): install Debian's chromium package (.ci/run does)")
	}
	return browser
}

// headless is one headless Chromium for a test, closed when it ends.
type headless struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

func startBrowser(ctx context.Context, t *testing.T, browser string) *headless {
	t.Helper()
	// Chromium's helper processes may still write to its profile for a
	// moment after the browser exits, which fails t.TempDir's removal:
	// the profile is removed (after the browser, cleanups run last first)
	// with retries instead.
	profile, err := os.MkdirTemp("", "sou-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 20 {
			if err := os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("browser profile %s left behind", profile)
	})
	allocCtx, allocCancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1100, 900),
	)
	t.Cleanup(allocCancel)
	bctx, bcancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(bcancel)
	// Start the browser on bctx itself: the first Run ties the browser's
	// life to its context, and each step has a shorter one.
	if err := chromedp.Run(bctx); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}
	return &headless{t: t, ctx: bctx, shots: artifactDir(t)}
}

// shot saves a screenshot under the artifact directory.
func (b *headless) shot(name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var buf []byte
		if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil { // quality 100 = PNG
			return fmt.Errorf("screenshot %s: %w", name, err)
		}
		p := filepath.Join(b.shots, name+".png")
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			return err
		}
		b.t.Logf("screenshot: %s", p)
		return nil
	})
}

// run performs one step of 20 s at most; a failure is photographed.
func (b *headless) run(step string, actions ...chromedp.Action) {
	b.t.Helper()
	stepCtx, stepCancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer stepCancel()
	began := time.Now()
	defer func() { b.t.Logf("step %q took %v", step, time.Since(began).Round(time.Millisecond)) }()
	if err := chromedp.Run(stepCtx, actions...); err != nil {
		_ = chromedp.Run(b.ctx, b.shot("failed-"+strings.ReplaceAll(step, " ", "-")))
		b.t.Fatalf("browser: %s: %v", step, err)
	}
}

// waitForCrawl waits until the node has indexed at least minDocs pages and
// is idle, failing with the node's state when it takes longer than limit.
func waitForCrawl(ctx context.Context, t *testing.T, n *Node, minDocs int64, limit time.Duration) Status {
	t.Helper()
	deadline := time.Now().Add(limit)
	var s Status
	lastLog := time.Now()
	for {
		s = n.Status(ctx)
		if s.Index.Docs >= minDocs && s.Idle {
			return s
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("crawl of the simulated web not done after %v: %d docs indexed (want >= %d), idle=%v, fetched=%d, stored=%d, frontier=%d, errors=%v, recent=%v",
				limit, s.Index.Docs, minDocs, s.Idle, s.Crawl.Fetched, s.Crawl.Stored, s.Crawl.Frontier, s.Crawl.ErrorsByClass, s.Errors)
		}
		if time.Since(lastLog) > 5*time.Second {
			t.Logf("crawling: %d docs, fetched %d, frontier %d, idle %v", s.Index.Docs, s.Crawl.Fetched, s.Crawl.Frontier, s.Idle)
			lastLog = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pickQuery returns a word from the simulated web's page titles that has
// more than one page of results, so the test can page.
func pickQuery(ctx context.Context, t *testing.T, n *Node, truth *simweb.Truth) (string, int64) {
	t.Helper()
	seen := map[string]bool{}
	best, bestTotal := "", int64(0)
	for _, p := range truth.Pages {
		for _, w := range strings.FieldsFunc(strings.ToLower(p.Title), func(r rune) bool { return !unicode.IsLetter(r) }) {
			if len(w) < 5 || seen[w] || strings.IndexFunc(w, func(r rune) bool { return r > unicode.MaxASCII }) >= 0 {
				continue
			}
			seen[w] = true
			resp, err := n.Search(ctx, search.Request{Query: w, Page: 1, N: 10})
			if err != nil {
				t.Fatalf("search %q: %v", w, err)
			}
			if resp.Total > bestTotal {
				best, bestTotal = w, resp.Total
			}
			if bestTotal > 20 || len(seen) > 60 {
				return best, bestTotal
			}
		}
	}
	return best, bestTotal
}

// TestBrowserEndToEnd crawls the simulated web with a real node, then uses
// the UI in headless Chromium as a person would: search, see results and
// coverage, open a cached copy, page, add a seed on the dashboard.
func TestBrowserEndToEnd(t *testing.T) {
	browser := requireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Second)
	defer cancel()

	web, err := simweb.Start(ctx, simweb.Config{Seed: 1, Hosts: 10, Pages: 300, Misbehave: []string{"none"}, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("start the simulated web: %v", err)
	}
	defer web.Close()
	cfg := testConfig(t)
	cfg.Network = "sou-browser-test"
	cfg.DNS = web.DNSAddr()
	cfg.Fast = true
	cfg.AllowLoopback = true
	cfg.Seeds = web.Seeds()
	n, base := runNode(t, cfg)

	start := time.Now()
	st := waitForCrawl(ctx, t, n, 50, 50*time.Second)
	t.Logf("crawl done in %v: %d docs, fetched %d", time.Since(start).Round(time.Millisecond), st.Index.Docs, st.Crawl.Fetched)
	query, total := pickQuery(ctx, t, n, web.Truth())
	if total <= 10 {
		t.Fatalf("no title word of the simulated web has more than one page of results (best %q: %d)", query, total)
	}
	t.Logf("query %q: %d results", query, total)

	b := startBrowser(ctx, t, browser)
	shot, run := b.shot, b.run

	// 1. Type a query. The page's fetch is slowed down so the "searching"
	// state is visible long enough to be seen and photographed.
	var stats, location, firstTitle string
	var hits int
	run("search",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`input[name=q]`),
		chromedp.Evaluate(`(() => { const f = window.fetch; window.fetch = (...a) => new Promise(r => setTimeout(r, 1500)).then(() => f(...a)); return true; })()`, nil),
		chromedp.SendKeys(`input[name=q]`, query),
		chromedp.Click(`form#search button`),
		chromedp.WaitVisible(`#searching`),
		shot("1-searching"),
		chromedp.WaitVisible(`#stats`),
		chromedp.WaitVisible(`li.hit`),
		chromedp.Text(`#stats`, &stats),
		chromedp.Evaluate(`document.querySelectorAll('li.hit').length`, &hits),
		chromedp.Text(`li.hit a.t`, &firstTitle),
		chromedp.Location(&location),
		shot("2-results"),
	)
	if !strings.Contains(stats, "1 of 1 peers answered") || !strings.Contains(stats, fmt.Sprintf("%d results", total)) {
		t.Errorf("statistics bar %q lacks the coverage or the total %d", stats, total)
	}
	if hits != 10 {
		t.Errorf("%d results on page 1, want 10", hits)
	}
	if !strings.Contains(location, "q="+query) {
		t.Errorf("URL %q not in sync with the query %q", location, query)
	}
	var searchingHidden bool
	run("searching state ends", chromedp.Evaluate(`document.getElementById('searching').hidden`, &searchingHidden))
	if !searchingHidden {
		t.Errorf("the searching indicator is still shown after the results arrived")
	}
	t.Logf("stats %q, first result %q", stats, firstTitle)

	// 2. Page 2.
	var start2, location2 string
	var ok bool
	run("page 2",
		chromedp.Click(`nav.pager a.next`),
		chromedp.WaitVisible(`nav.pager b.cur`),
		chromedp.Poll(`document.querySelector('ol.hits') && document.querySelector('ol.hits').getAttribute('start') === '11'`, nil),
		chromedp.AttributeValue(`ol.hits`, "start", &start2, &ok),
		chromedp.Location(&location2),
		shot("3-page2"),
	)
	if start2 != "11" || !strings.Contains(location2, "page=2") {
		t.Errorf("page 2: list starts at %q, URL %q", start2, location2)
	}

	// 3. Back to page 1 with the browser's history, without JavaScript
	// fetches going stale: the server-rendered page for the same URL.
	var cachedHref string
	run("server-rendered page",
		chromedp.Navigate(base+"/?q="+query),
		chromedp.WaitVisible(`a.cached`),
		chromedp.AttributeValue(`a.cached`, "href", &cachedHref, &ok),
	)
	if !ok || !strings.HasPrefix(cachedHref, "/api/cache?") {
		t.Fatalf("cached link %q", cachedHref)
	}

	// 4. The cached copy, with the query term highlighted.
	var marks int
	var markText string
	run("cached copy",
		chromedp.Click(`a.cached`),
		chromedp.WaitVisible(`mark`),
		chromedp.Evaluate(`document.querySelectorAll('mark').length`, &marks),
		chromedp.Text(`mark`, &markText),
		shot("4-cached"),
	)
	if marks < 1 || !strings.EqualFold(strings.TrimSpace(markText), query) {
		t.Errorf("cached copy: %d highlighted terms, first %q, want %q", marks, markText, query)
	}

	// 5. The dashboard: live figures and a seed added from the form.
	seed := web.Seeds()[0] + "browser-test-seed"
	var docs, result string
	run("dashboard",
		chromedp.Navigate(base+"/dashboard"),
		chromedp.WaitVisible(`#live`),
		chromedp.Text(`#docs`, &docs),
		chromedp.SendKeys(`#seed-urls`, seed),
		chromedp.Click(`#seed-form button`),
		chromedp.WaitVisible(`#seed-result .msg`),
		chromedp.Text(`#seed-result`, &result),
		shot("5-dashboard"),
	)
	if docs == "" || docs == "0" {
		t.Errorf("dashboard shows %q documents", docs)
	}
	if !strings.Contains(result, "accepted: 1") {
		t.Errorf("seed form answered %q, want accepted: 1", result)
	}

	// 6. The Chinese page.
	var zhStats string
	run("chinese",
		chromedp.Navigate(base+"/?lang=zh&q="+query),
		chromedp.WaitVisible(`#stats`),
		chromedp.Text(`#stats`, &zhStats),
		shot("6-results-zh"),
	)
	if !strings.Contains(zhStats, "个节点中") {
		t.Errorf("Chinese statistics bar %q", zhStats)
	}

	// 7. Without JavaScript: the search is a plain form GET rendered by the
	// server, and the dashboard's form posts to /dashboard/seed.
	var noJSStats, noJSLocation, noJSResult string
	var noJSHits int
	run("search without JavaScript",
		emulation.SetScriptExecutionDisabled(true),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`input[name=q]`),
		chromedp.SendKeys(`input[name=q]`, query),
		chromedp.Click(`form#search button`),
		chromedp.WaitVisible(`#stats`),
		chromedp.Text(`#stats`, &noJSStats),
		chromedp.Evaluate(`document.querySelectorAll('li.hit').length`, &noJSHits),
		chromedp.Location(&noJSLocation),
		chromedp.Click(`nav.pager a.next`),
		chromedp.WaitVisible(`ol.hits[start="11"]`),
		shot("7-nojs-page2"),
		chromedp.Navigate(base+"/dashboard"),
		chromedp.WaitVisible(`#seed-urls`),
		chromedp.SendKeys(`#seed-urls`, web.Seeds()[0]+"browser-test-nojs"),
		chromedp.Click(`#seed-form button`),
		chromedp.WaitVisible(`#seed-result .msg`),
		chromedp.Text(`#seed-result`, &noJSResult),
		shot("8-nojs-dashboard-seed"),
	)
	if !strings.Contains(noJSStats, "peers answered") || noJSHits != 10 || !strings.Contains(noJSLocation, "q="+query) {
		t.Errorf("search without JavaScript: stats %q, %d results, URL %q", noJSStats, noJSHits, noJSLocation)
	}
	if !strings.Contains(noJSResult, "accepted: 1") {
		t.Errorf("seed form without JavaScript answered %q, want accepted: 1", noJSResult)
	}

	// 8. Missing peers: a second node joins, and a search with a deadline
	// too short for it to answer must say that peers are missing instead of
	// showing a bare page.
	cfg2 := testConfig(t)
	cfg2.Network = cfg.Network
	cfg2.DNS, cfg2.Fast, cfg2.AllowLoopback = cfg.DNS, true, true
	for _, a := range n.net.Addrs() {
		cfg2.Bootstrap = append(cfg2.Bootstrap, a.String())
	}
	joinStart := time.Now()
	runNode(t, cfg2)
	defer func() { t.Logf("second node joined in %v", time.Since(joinStart).Round(time.Millisecond)) }()
	joinDeadline := time.Now().Add(20 * time.Second)
	// Joined: a member, and asked by this node's searches (a member is
	// asked once this node has heard of it, which on a loaded machine can
	// come after Status counts it). The probe is another query than the
	// page's: one of its searches that both members answered within the
	// millisecond would be cached, and the page would show that complete
	// answer.
	asked := 0
	for n.Status(ctx).Members < 2 || asked < 2 {
		if time.Now().After(joinDeadline) {
			t.Fatalf("second node did not join within 20 s (members %d, asked by a search %d)", n.Status(ctx).Members, asked)
		}
		time.Sleep(100 * time.Millisecond)
		if resp, err := n.Search(ctx, search.Request{Query: query + " joinprobe", Timeout: time.Millisecond}); err == nil {
			asked = resp.Coverage.Asked
		}
	}
	var partial, partialStats string
	run("partial coverage",
		emulation.SetScriptExecutionDisabled(false),
		chromedp.Navigate(base+"/?timeout=1ms&q="+query),
		chromedp.WaitVisible(`#partial`),
		chromedp.Text(`#partial`, &partial),
		chromedp.Text(`#stats`, &partialStats),
		shot("9-partial-coverage"),
	)
	if !strings.Contains(partial, "did not answer in time") || !strings.Contains(partialStats, "of 2 peers answered") {
		t.Errorf("partial coverage: stats %q, warning %q", partialStats, partial)
	}
	t.Logf("partial coverage: %q / %q", partialStats, partial)
}
