package crawl

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// engDNS serves A 127.0.0.1 for every name under .test and NXDOMAIN for
// anything else, on a UDP port of 127.0.0.1.
func engDNS(t testing.TB) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dns listen: %v", err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if !strings.HasSuffix(q.Name, ".test.") {
				m.Rcode = dns.RcodeNameError
				continue
			}
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
					A:   net.IPv4(127, 0, 0, 1),
				})
			}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// engRequest is one request the simulated web saw.
type engRequest struct {
	host, path  string
	start, end  time.Time
	concurrent  bool // another request to the same host was in flight
	userAgentOK bool
}

// engWeb is a small simulated web: hosts h0..hN-1.test on one listener,
// each with pages /, /p1../pK linking around (including to other hosts and
// to a disallowed /private), plus misbehaviour: a 503 with Retry-After on
// the first visit of one page, a robots.txt that fails twice, a redirect,
// a broken page, a sitemap listing a page nothing links to.
type engWeb struct {
	srv   *httptest.Server
	port  string
	hosts int
	pages int
	delay time.Duration // per request (at least 1ms; negative: none)
	clean bool          // no misbehaviour (benchmarks)
	// slowURL answers only after slow (or when the client gives up).
	slowURL string
	slow    time.Duration

	mu        sync.Mutex
	log       []engRequest
	inflight  map[string]int
	served503 map[string]bool
	robotsErr map[string]int
}

func newEngWeb(t testing.TB, hosts, pages int, delay time.Duration) *engWeb {
	w := &engWeb{hosts: hosts, pages: pages, delay: delay, inflight: map[string]int{}, served503: map[string]bool{}, robotsErr: map[string]int{}}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	_, w.port, _ = net.SplitHostPort(w.srv.Listener.Addr().String())
	w.srv.Start()
	t.Cleanup(w.srv.Close)
	return w
}

func (w *engWeb) hostName(i int) string { return fmt.Sprintf("h%d.test:%s", i, w.port) }

func (w *engWeb) url(i int, path string) string { return "http://" + w.hostName(i) + path }

// truth lists every page a complete crawl must fetch (robots-allowed, reachable).
func (w *engWeb) truth() []string {
	var out []string
	for h := range w.hosts {
		out = append(out, w.url(h, "/"), w.url(h, "/orphan"), w.url(h, "/moved"), w.url(h, "/target"), w.url(h, "/broken"))
		for p := 1; p <= w.pages; p++ {
			out = append(out, w.url(h, fmt.Sprintf("/p%d", p)))
		}
	}
	return out
}

func (w *engWeb) serve(rw http.ResponseWriter, r *http.Request) {
	host := r.Host
	w.mu.Lock()
	w.inflight[host]++
	rec := engRequest{host: host, path: r.URL.Path, start: time.Now(), concurrent: w.inflight[host] > 1,
		userAgentOK: strings.HasPrefix(r.UserAgent(), "sou/")}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.inflight[host]--
		rec.end = time.Now()
		w.log = append(w.log, rec)
		w.mu.Unlock()
	}()
	if w.delay >= 0 {
		time.Sleep(max(w.delay, time.Millisecond)) // give overlapping requests a chance to show
	}
	var idx int
	if _, err := fmt.Sscanf(host, "h%d.test", &idx); err != nil {
		http.NotFound(rw, r)
		return
	}
	path := r.URL.Path
	if w.slowURL != "" && "http://"+host+path == w.slowURL {
		select {
		case <-time.After(w.slow):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case path == "/robots.txt":
		w.mu.Lock()
		fail := idx == 1 && w.robotsErr[host] < 2 && !w.clean
		w.robotsErr[host]++
		w.mu.Unlock()
		if fail {
			http.Error(rw, "busy", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(rw, "User-agent: *\nDisallow: /private\n\nSitemap: http://%s/sitemap.xml\n", host)
		return
	case path == "/sitemap.xml":
		rw.Header().Set("Content-Type", "application/xml")
		fmt.Fprintf(rw, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://%s/orphan</loc></url></urlset>`, host)
		return
	case path == "/moved":
		http.Redirect(rw, r, "/target", http.StatusMovedPermanently)
		return
	case path == "/loop/a" || path == "/loop/b":
		http.Redirect(rw, r, map[string]string{"/loop/a": "/loop/b", "/loop/b": "/loop/a"}[path], http.StatusFound)
		return
	case path == "/broken":
		rw.Header().Set("Content-Type", "text/html; charset=x-unknown-charset")
		rw.Write([]byte("<html><head><title>\xff\xfe broken <a href=\"http://[::1\">x</a><<<>>>"))
		return
	}
	if idx == 0 && path == "/p1" && !w.clean {
		w.mu.Lock()
		first := !w.served503[host]
		w.served503[host] = true
		w.mu.Unlock()
		if first {
			rw.Header().Set("Retry-After", "1")
			http.Error(rw, "slow down", http.StatusServiceUnavailable)
			return
		}
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>%s %s</title></head><body><p>page %s on host %d, some words %d.</p>", host, path, path, idx, len(path)*idx)
	b.WriteString(`<a href="/">home</a> <a href="/private/secret">secret</a> <a href="/moved">moved</a> <a href="/broken">broken</a> <a href="/loop/a">loop</a>`)
	for p := 1; p <= w.pages; p++ {
		fmt.Fprintf(&b, ` <a href="/p%d">page %d</a>`, p, p)
	}
	fmt.Fprintf(&b, ` <a href="http://%s/">next host</a>`, w.hostName((idx+1)%w.hosts))
	b.WriteString(` <a href="http://foreign.test/x">elsewhere</a></body></html>`)
	rw.Write([]byte(b.String()))
}

func (w *engWeb) requests() []engRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]engRequest(nil), w.log...)
}

// engSink records what the crawler hands to the node.
type engSink struct {
	mu        sync.Mutex
	stored    map[string]int
	pages     map[string]*Page
	forwarded []Discovered
	foreign   map[string]bool // host keys we do not own
	failStore func(url string) bool
}

func newEngSink() *engSink {
	return &engSink{stored: map[string]int{}, pages: map[string]*Page{}, foreign: map[string]bool{"foreign.test": true}}
}

func (s *engSink) Owns(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.foreign[host]
}

func (s *engSink) Forward(_ context.Context, links []Discovered) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forwarded = append(s.forwarded, links...)
	return nil
}

func (s *engSink) Store(_ context.Context, p *Page) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failStore != nil && s.failStore(p.URL) {
		return fmt.Errorf("store unavailable")
	}
	s.stored[p.URL]++
	s.pages[p.URL] = p
	return nil
}

func engConfig(dnsAddr string) Config {
	cfg := FastConfig()
	cfg.Workers = 4
	cfg.Resolver.Server = dnsAddr
	cfg.Fetch.TotalTimeout = 5 * time.Second
	cfg.IdleHorizon = 5 * time.Second
	cfg.BloomExpectedURLs = 10_000
	return cfg
}

// engRun runs c until it is idle (or the deadline), then stops it.
func engRun(t testing.TB, c *Crawler, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(limit)
	idleSince := time.Time{}
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if c.Idle() {
			if idleSince.IsZero() {
				idleSince = time.Now()
			} else if time.Since(idleSince) > 100*time.Millisecond {
				break
			}
		} else {
			idleSince = time.Time{}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !c.Idle() {
		t.Fatalf("crawl not idle after %v: %+v", limit, c.Stats())
	}
}

func TestCrawlEndToEnd(t *testing.T) {
	web := newEngWeb(t, 4, 6, 0)
	cfg := engConfig(engDNS(t))
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	sink := newEngSink()
	c, err := New(db, cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A host whose name does not exist has its URLs given up, not retried forever.
	if err := c.Add(t.Context(), []Discovered{{URL: web.url(0, "/")}, {URL: "http://gone.example/a"}, {URL: "http://gone.example/b"}}); err != nil {
		t.Fatal(err)
	}
	engRun(t, c, 30*time.Second)

	reqs := web.requests()
	byPage := map[string]int{}
	lastByHost := map[string]engRequest{}
	for _, r := range reqs {
		byPage["http://"+r.host+r.path]++
		if strings.HasPrefix(r.path, "/private") {
			t.Errorf("robots violation: %s%s requested", r.host, r.path)
		}
		if r.concurrent {
			t.Errorf("two requests in flight to %s at once", r.host)
		}
		if !r.userAgentOK {
			t.Errorf("request without the sou user agent")
		}
		if prev, ok := lastByHost[r.host]; ok && r.start.Before(prev.end) {
			t.Errorf("requests to %s overlap: %v..%v and %v", r.host, prev.start, prev.end, r.start)
		}
		lastByHost[r.host] = r
	}
	for _, u := range web.truth() {
		want := 1
		if u == web.url(0, "/p1") {
			want = 2 // the 503 answer, then the page: re-queued, not duplicated
		}
		if byPage[u] != want {
			t.Errorf("%s fetched %d times, want %d", u, byPage[u], want)
		}
	}
	for h := range web.hosts {
		want := 1
		if h == 1 {
			want = 3 // two 500s, then the file
		}
		if n := byPage[web.url(h, "/robots.txt")]; n != want {
			t.Errorf("robots.txt of host %d fetched %d times, want %d", h, n, want)
		}
		if n := byPage[web.url(h, "/sitemap.xml")]; n != 1 {
			t.Errorf("sitemap of host %d fetched %d times, want 1", h, n)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, u := range web.truth() {
		if strings.HasSuffix(u, "/moved") {
			continue // a redirect is not a page
		}
		if sink.stored[u] != 1 {
			t.Errorf("%s stored %d times, want 1", u, sink.stored[u])
		}
	}
	// Some pages have no cash to pass on (one the sitemap listed, fetched
	// before any link to it), and processing order varies; the seed has
	// cash, and it links to the foreign page.
	withCash := slices.ContainsFunc(sink.forwarded, func(d Discovered) bool {
		return d.URL == "http://foreign.test/x" && d.Cash > 0
	})
	if !withCash {
		t.Errorf("foreign links not forwarded with cash: %+v", sink.forwarded[:min(3, len(sink.forwarded))])
	}
	if p := sink.pages[web.url(0, "/")]; p == nil || p.Title == "" || len(p.Links) == 0 || !(p.Cash > 0) {
		t.Errorf("home page badly stored: %+v", p)
	}
	st := c.Stats()
	if st.Frontier != 0 || st.InFlight != 0 || st.Processing != 0 {
		t.Errorf("stats after the crawl: %+v", st)
	}
	if st.ErrorsByClass["http_503"] != 1 || st.ErrorsByClass["robots_5xx"] != 2 {
		t.Errorf("errors by class = %v, want one http_503 and two robots_5xx", st.ErrorsByClass)
	}
	if st.ErrorsByClass["redirect_loop"] != int64(web.hosts) {
		t.Errorf("redirect loops counted %d, want one per host", st.ErrorsByClass["redirect_loop"])
	}
	for h := range web.hosts {
		if byPage[web.url(h, "/loop/a")] != 1 || byPage[web.url(h, "/loop/b")] != 1 {
			t.Errorf("redirect loop of host %d not fetched exactly once per URL", h)
		}
	}
	if st.Filtered["host_dns_nxdomain"] != 2 || st.ErrorsByClass["robots_dns_nxdomain"] != 1 {
		t.Errorf("NXDOMAIN host: filtered %v errors %v; want its 2 URLs given up after one robots.txt attempt", st.Filtered, st.ErrorsByClass)
	}
	if st.RobotsDisallowed == 0 {
		t.Errorf("no URL was dropped by robots.txt: %+v", st)
	}
	t.Logf("stats: %+v", st)
}

// TestProcessingQueueReplay: responses recorded as fetched but not yet
// stored when the process stops are stored by the next run, from the same
// Badger, without fetching them again.
func TestProcessingQueueReplay(t *testing.T) {
	web := newEngWeb(t, 2, 4, 0)
	cfg := engConfig(engDNS(t))
	dir := t.TempDir()
	db := engOpenDB(t, dir)
	sink := newEngSink()
	sink.failStore = func(string) bool { return true } // the node is down: nothing can be stored
	c, err := New(db, cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Add(t.Context(), []Discovered{{URL: web.url(0, "/")}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Processing == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	left := c.Stats().Processing
	if left == 0 {
		t.Fatal("nothing left in the processing queue")
	}
	fetchedBefore := len(web.requests())
	_ = c.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = engOpenDB(t, dir)
	defer db.Close()
	sink2 := newEngSink()
	c2, err := New(db, cfg, sink2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := c2.Stats().Processing; got != left {
		t.Fatalf("processing entries after reopen = %d, want %d", got, left)
	}
	engRun(t, c2, 30*time.Second)
	byPage := map[string]int{}
	for _, r := range web.requests() {
		byPage["http://"+r.host+r.path]++
	}
	for u, n := range byPage {
		if n > 1 && !strings.HasSuffix(u, "/robots.txt") && u != web.url(0, "/p1") {
			t.Errorf("%s fetched %d times across the restart", u, n)
		}
	}
	sink2.mu.Lock()
	defer sink2.mu.Unlock()
	if sink2.stored[web.url(0, "/")] != 1 {
		t.Errorf("the seed page left in the processing queue was not stored after restart (fetched before: %d)", fetchedBefore)
	}
	for _, u := range web.truth() {
		if !strings.HasSuffix(u, "/moved") && sink2.stored[u] != 1 {
			t.Errorf("%s stored %d times after restart, want 1", u, sink2.stored[u])
		}
	}
}

func TestAddRejectsBadInput(t *testing.T) {
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	cfg := engConfig("127.0.0.1:1")
	c, err := New(db, cfg, newEngSink(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := []Discovered{
		{URL: "ftp://x.test/"}, {URL: "http://[::1"}, {URL: "javascript:alert(1)"}, {URL: ""},
		{URL: "http://ok.test/a", Cash: -3}, {URL: "http://ok.test/b", SourceHost: "p", Cash: 1e300},
	}
	if err := c.Add(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Frontier != 2 || st.Filtered["bad_url"] != 4 {
		t.Fatalf("frontier %d filtered %v; want 2 queued and 4 bad URLs", st.Frontier, st.Filtered)
	}
	if _, err := New(db, Config{}, newEngSink(), nil); err == nil {
		t.Fatal("New accepted an empty config")
	}
}

// TestCrawlTimeouts: a page that never answers in time is tried MaxAttempts
// times (the host waits after each timeout at least as long as it made us
// wait), then given up; the rest of the host is crawled; nothing overlaps.
func TestCrawlTimeouts(t *testing.T) {
	web := newEngWeb(t, 2, 3, 0)
	web.slowURL = web.url(1, "/p2")
	web.slow = 2 * time.Second
	cfg := engConfig(engDNS(t))
	cfg.Fetch.FirstByteTimeout = 100 * time.Millisecond
	cfg.Fetch.TotalTimeout = 150 * time.Millisecond
	cfg.Politeness.ParkAfterTimeouts = 0 // parking is TestPolitenessParkAfterTimeouts'
	cfg.Politeness.MaxAttempts = 3
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	c, err := New(db, cfg, newEngSink(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Add(t.Context(), []Discovered{{URL: web.url(0, "/")}}); err != nil {
		t.Fatal(err)
	}
	engRun(t, c, 30*time.Second)
	fetched := map[string]int{}
	for _, r := range web.requests() {
		fetched["http://"+r.host+r.path]++
		if r.concurrent {
			t.Errorf("two requests in flight to %s at once", r.host)
		}
	}
	if n := fetched[web.slowURL]; n != 3 {
		t.Errorf("slow page requested %d times, want MaxAttempts = 3", n)
	}
	for _, u := range web.truth() {
		if u != web.slowURL && fetched[u] == 0 {
			t.Errorf("%s not fetched", u)
		}
	}
	// At least the slow page's three; a loaded machine may time out others
	// (which are then retried).
	if st := c.Stats(); st.ErrorsByClass["timeout"] < 3 {
		t.Errorf("timeouts counted = %v, want at least 3", st.ErrorsByClass)
	}
}

// gatedSink pauses hosts through the optional MayFetch method.
type gatedSink struct {
	*engSink
	paused sync.Map // host key -> bool
}

func (g *gatedSink) MayFetch(host string) bool {
	v, _ := g.paused.Load(host)
	return v != true
}

// TestMayFetchPausesHost: a host the node pauses (ownership moving) is not
// requested at all, keeps its entries, and is crawled once released.
func TestMayFetchPausesHost(t *testing.T) {
	web := newEngWeb(t, 2, 3, 0)
	web.clean = true
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	sink := &gatedSink{engSink: newEngSink()}
	sink.paused.Store(web.hostName(1), true)
	c, err := New(db, engConfig(engDNS(t)), sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Add(t.Context(), []Discovered{{URL: web.url(0, "/")}, {URL: web.url(1, "/")}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	hostDone := func(i int) bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		n := 0
		for u := range sink.stored {
			if strings.Contains(u, web.hostName(i)) {
				n++
			}
		}
		return n == len(web.truth())/web.hosts-1 // all but the redirect
	}
	for !hostDone(0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	for _, r := range web.requests() {
		if r.host == web.hostName(1) {
			t.Fatalf("paused host requested: %s", r.path)
		}
	}
	if c.Idle() || c.Stats().Frontier == 0 {
		t.Fatalf("paused host's entries are gone or the crawler claims to be idle: %+v", c.Stats())
	}
	// Stats says why it is not idle: the paused host, held back.
	st := c.Stats()
	if st.SoonDue != 1 || len(st.Busy) != 1 || st.Busy[0].Host != web.hostName(1) || !st.Busy[0].Gated || st.Busy[0].Queued == 0 {
		t.Fatalf("busy hosts = %d %+v, want the paused host %s, gated, with its queue", st.SoonDue, st.Busy, web.hostName(1))
	}
	sink.paused.Store(web.hostName(1), false)
	for !(hostDone(1) && c.Idle()) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if !hostDone(1) {
		t.Fatalf("released host not crawled: %+v", c.Stats())
	}
	if st := c.Stats(); st.SoonDue != 0 || len(st.Busy) != 0 {
		t.Fatalf("idle crawler lists busy hosts: %d %+v", st.SoonDue, st.Busy)
	}
}

// TestPageBudget: a host stops at Filter.MaxPagesPerHost page requests; its
// remaining URLs stay queued and do not keep the crawler busy.
func TestPageBudget(t *testing.T) {
	web := newEngWeb(t, 2, 10, 0)
	web.clean = true
	cfg := engConfig(engDNS(t))
	cfg.Filter.MaxPagesPerHost = 4
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	c, err := New(db, cfg, newEngSink(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Add(t.Context(), []Discovered{{URL: web.url(0, "/")}}); err != nil {
		t.Fatal(err)
	}
	engRun(t, c, 20*time.Second)
	pages := map[string]int{}
	for _, r := range web.requests() {
		if r.path != "/robots.txt" && r.path != "/sitemap.xml" {
			pages[r.host]++
		}
	}
	for host, n := range pages {
		if n > 4 {
			t.Errorf("%s: %d page requests, budget 4", host, n)
		}
	}
	if st := c.Stats(); st.ExhaustedHosts == 0 || st.Frontier == 0 {
		t.Errorf("no host at its budget with URLs left: %+v", st)
	}
}

// sitemapSink records what SitemapRead reports.
type sitemapSink struct {
	*engSink
	mu     sync.Mutex
	listed map[string][]string // sitemap URL -> URLs listed
}

func (s *sitemapSink) SitemapRead(host, url string, listed, children []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listed[url] = append(s.listed[url], listed...)
}

// TestSitemapProgressCarriesOver: a sitemap that a previous owner read
// (NoteSitemaps, as a node taking a host over from its replica does) is not
// read again, the URLs it listed still get crawled when handed in, and
// every sitemap read is reported with what it listed.
func TestSitemapProgressCarriesOver(t *testing.T) {
	web := newEngWeb(t, 2, 3, 0)
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	sink := &sitemapSink{engSink: newEngSink(), listed: map[string][]string{}}
	c, err := New(db, engConfig(engDNS(t)), sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h0 := HostKey(mustParse(t, web.url(0, "/")))
	if err := c.NoteSitemaps(t.Context(), h0, []string{web.url(0, "/sitemap.xml")}, nil); err != nil {
		t.Fatal(err)
	}
	// What the replica knew the sitemap listed.
	seeds := []Discovered{{URL: web.url(0, "/")}, {URL: web.url(1, "/")}, {URL: web.url(0, "/orphan"), SourceHost: h0, Depth: 1}}
	if err := c.Add(t.Context(), seeds); err != nil {
		t.Fatal(err)
	}
	engRun(t, c, 30*time.Second)
	byPage := map[string]int{}
	for _, r := range web.requests() {
		byPage["http://"+r.host+r.path]++
	}
	for _, tc := range []struct {
		url  string
		want int
	}{
		{web.url(0, "/sitemap.xml"), 0}, // read by the previous owner
		{web.url(1, "/sitemap.xml"), 1},
		{web.url(0, "/orphan"), 1}, // listed only by the sitemap not read again
		{web.url(1, "/orphan"), 1},
	} {
		if byPage[tc.url] != tc.want {
			t.Errorf("%s fetched %d times, want %d", tc.url, byPage[tc.url], tc.want)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if got := sink.listed[web.url(1, "/sitemap.xml")]; len(got) != 1 || got[0] != web.url(1, "/orphan") {
		t.Errorf("SitemapRead for host 1 reported %v, want its orphan page", got)
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
