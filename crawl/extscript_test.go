package crawl

import (
	"context"
	"errors"
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
)

// scriptWeb serves two hosts, a.test and b.test, on one listener. a.test has
// pages under /docs/guide/ whose <base href> is the docroot; they include
// scripts, and a script names the page /docs/only.html relative to the
// document base (from the script's own directory it would be
// /js/docs/only.html, which does not exist).
type scriptWeb struct {
	srv  *httptest.Server
	port string

	mu       sync.Mutex
	log      []string // host+path, in order
	inflight map[string]int
	overlap  bool
}

func newScriptWeb(t *testing.T) *scriptWeb {
	w := &scriptWeb{inflight: map[string]int{}}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	_, w.port, _ = net.SplitHostPort(w.srv.Listener.Addr().String())
	w.srv.Start()
	t.Cleanup(w.srv.Close)
	return w
}

func (w *scriptWeb) url(host, path string) string { return "http://" + host + ":" + w.port + path }

// bigScript is past the fetcher's MaxScriptBytes: a link before the cut,
// one after it.
var bigScript = `var early = "docs/early.html";` + strings.Repeat("/* padding */\n", (2<<20)/14) + `var late = "docs/late.html";`

func (w *scriptWeb) serve(rw http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.Host)
	key := host + r.URL.Path
	w.mu.Lock()
	w.inflight[host]++
	if w.inflight[host] > 1 {
		w.overlap = true
	}
	w.log = append(w.log, key)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.inflight[host]--
		w.mu.Unlock()
	}()
	js := func(body string) {
		rw.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		fmt.Fprint(rw, body)
	}
	html := func(body string) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(rw, "<!DOCTYPE html><html><head><title>"+r.URL.Path+"</title>"+body+"</body></html>")
	}
	switch r.URL.Path {
	case "/robots.txt":
		fmt.Fprint(rw, "User-agent: *\nDisallow: /blocked/\n")
	case "/docs/guide/p1.html":
		html(`<base href="../../">
<script src="js/menu.js"></script><script src="js/menu.js"></script>
<script src="` + w.url("b.test", "/js/other.js") + `"></script>
<script type="application/json" src="js/data.json"></script>
<script type="text/template" src="js/tmpl.js"></script>
<script src="blocked/x.js"></script>
<script src="js/html.js"></script>
<script type="module" src="js/big.js"></script>
<script src="js/missing.js"></script>
<script src="js/old.js"></script>
</head><body><p>one</p><a href="docs/guide/p2.html">two</a>`)
	case "/docs/guide/p2.html":
		// Another includer of menu.js, with another base.
		html(`<script src="/js/menu.js"></script></head><body><p>two</p>`)
	case "/docs/only.html", "/docs/other.html", "/docs/early.html", "/docs/late.html", "/docs/moved.html":
		html(`</head><body><p>named by a script</p>`)
	case "/js/menu.js":
		js(`// "docs/comment.html" is in a comment
var menu = [{url:"docs/only.html", text:"Only"}, {url:"docs/other.html?x=1#frag"}];
document.write('<a href="docs/written.html">x</a>');`)
	case "/js/data.json", "/js/tmpl.js", "/blocked/x.js":
		js(`var x = "docs/never.html";`)
	case "/js/html.js":
		html(`</head><body><a href="docs/never.html">soft 404</a>`)
	case "/js/big.js":
		js(bigScript)
	case "/js/old.js":
		http.Redirect(rw, r, "/js/new.js", http.StatusMovedPermanently)
	case "/js/new.js":
		js(`location.href = "docs/moved.html";`)
	default:
		http.NotFound(rw, r)
	}
}

func (w *scriptWeb) requests() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, k := range w.log {
		out[k]++
	}
	return out
}

// fetchedSink is an engSink that hears of URLs settled without a page.
type fetchedSink struct {
	*engSink
	fmu     sync.Mutex
	fetched []string
}

func (s *fetchedSink) Fetched(host, url string, sitemap bool) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	if !sitemap {
		s.fetched = append(s.fetched, url)
	}
}

// TestExternalScripts: the crawler fetches the same-host scripts a page
// includes, once each, within robots.txt, as link sources; their links
// resolve against the including page's base; scripts are neither stored
// nor counted as pages.
func TestExternalScripts(t *testing.T) {
	web := newScriptWeb(t)
	cfg := engConfig(engDNS(t))
	cfg.Robots.Sitemaps = false
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	sink := &fetchedSink{engSink: newEngSink()}
	c, err := New(db, cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Add(t.Context(), []Discovered{{URL: web.url("a.test", "/docs/guide/p1.html")}}); err != nil {
		t.Fatal(err)
	}
	engRun(t, c, 30*time.Second)

	reqs := web.requests()
	tests := []struct {
		path string
		want int
		why  string
	}{
		{"a.test/docs/guide/p1.html", 1, "seed"},
		{"a.test/docs/guide/p2.html", 1, "linked"},
		{"a.test/js/menu.js", 1, "included twice, fetched once"},
		{"a.test/docs/only.html", 1, "named by menu.js, relative to the document base"},
		{"a.test/docs/other.html", 1, "named by menu.js with a query"},
		{"a.test/js/docs/only.html", 0, "relative to the script's directory"},
		{"a.test/docs/guide/docs/only.html", 0, "relative to the second includer's base"},
		{"a.test/docs/comment.html", 0, "in a comment"},
		{"a.test/docs/written.html", 0, "inside HTML in a string"},
		{"a.test/js/data.json", 0, "JSON is not fetched by browsers"},
		{"a.test/js/tmpl.js", 0, "a template is not fetched by browsers"},
		{"a.test/blocked/x.js", 0, "disallowed by robots.txt"},
		{"a.test/js/html.js", 1, "fetched, an HTML answer is not read"},
		{"a.test/docs/never.html", 0, "named only where no script is read"},
		{"a.test/js/big.js", 1, "fetched"},
		{"a.test/docs/early.html", 1, "before the script's size cap"},
		{"a.test/docs/late.html", 0, "past the script's size cap"},
		{"a.test/js/missing.js", 1, "fetched, 404"},
		{"a.test/js/old.js", 1, "a redirect"},
		{"a.test/js/new.js", 1, "the redirect's target, still a script"},
		{"a.test/docs/moved.html", 1, "named by the redirected script"},
	}
	for _, tt := range tests {
		if got := reqs[tt.path]; got != tt.want {
			t.Errorf("%s requested %d times, want %d (%s)", tt.path, got, tt.want, tt.why)
		}
	}
	for k := range reqs {
		if strings.HasPrefix(k, "b.test") {
			t.Errorf("%s requested: a script on another host", k)
		}
	}
	web.mu.Lock()
	if web.overlap {
		t.Error("two requests to one host in flight at once")
	}
	web.mu.Unlock()

	sink.mu.Lock()
	for u := range sink.stored {
		if strings.HasSuffix(u, ".js") {
			t.Errorf("script %s stored as a page", u)
		}
	}
	stored := len(sink.stored)
	sink.mu.Unlock()
	if stored != 6 {
		t.Errorf("%d pages stored, want 6", stored)
	}
	sink.fmu.Lock()
	if !slices.Contains(sink.fetched, web.url("a.test", "/js/menu.js")) {
		t.Errorf("the FetchedSink did not hear of menu.js: %v", sink.fetched)
	}
	sink.fmu.Unlock()
	st := c.Stats()
	if st.ScriptsFetched != 6 || st.Fetched != 6 {
		t.Errorf("stats: %d scripts, %d pages fetched; want 6 and 6", st.ScriptsFetched, st.Fetched)
	}
	if st.ErrorsByClass["truncated"] != 1 || st.ErrorsByClass["http_404"] != 1 || st.Filtered["content_type"] != 1 {
		t.Errorf("errors %v, filtered %v: want one truncated script, one 404, one skipped HTML answer", st.ErrorsByClass, st.Filtered)
	}
}

// TestScriptEntrySurvivesHandoff: a queued external script keeps its
// base through ExportHost and ImportHost, and the new owner reads it as a
// script.
func TestScriptEntrySurvivesHandoff(t *testing.T) {
	web := newScriptWeb(t)
	cfg := engConfig(engDNS(t))
	cfg.Robots.Sitemaps = false
	host := "a.test:" + web.port
	base := web.url("a.test", "/")

	db1 := engOpenDB(t, t.TempDir())
	defer db1.Close()
	c1, err := New(db1, cfg, newEngSink(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if err := c1.Add(t.Context(), []Discovered{{URL: web.url("a.test", "/js/menu.js"), SourceHost: host, Cash: 1, Base: base}}); err != nil {
		t.Fatal(err)
	}
	exp, err := c1.ExportHost(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}

	db2 := engOpenDB(t, t.TempDir())
	defer db2.Close()
	sink := &fetchedSink{engSink: newEngSink()}
	c2, err := New(db2, cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.ImportHost(t.Context(), exp); err != nil {
		t.Fatal(err)
	}
	engRun(t, c2, 30*time.Second)
	reqs := web.requests()
	if reqs["a.test/js/menu.js"] != 1 || reqs["a.test/docs/only.html"] != 1 {
		t.Errorf("after the handoff: requests %v; want menu.js read as a script", reqs)
	}
	if st := c2.Stats(); st.ScriptsFetched != 1 {
		t.Errorf("scripts fetched %d, want 1", st.ScriptsFetched)
	}

	// A peer's record with a bad base is refused.
	bad := &seenRecord{URL: web.url("a.test", "/js/x.js"), State: stateDone, Base: "javascript:alert(1)"}
	if err := c2.ImportHost(t.Context(), &HostExport{Host: host, URLs: [][]byte{bad.encode()}}); err == nil {
		t.Error("a record whose base is not an http(s) URL was imported")
	}
}

// TestScriptSources: which <script src> become external-script links.
func TestScriptSources(t *testing.T) {
	page, _ := url.Parse("http://a.test/docs/guide/p.html")
	tests := []struct {
		name, head string
		want       []Link // only links with a Base
	}{
		{"relative to the page", `<script src="menu.js"></script>`,
			[]Link{{URL: "http://a.test/docs/guide/menu.js", Base: "http://a.test/docs/guide/p.html"}}},
		{"base href", `<base href="../../"><script src="js/menu.js"></script>`,
			[]Link{{URL: "http://a.test/js/menu.js", Base: "http://a.test/"}}},
		{"absolute, same host", `<script src="http://A.test/m.js"></script>`,
			[]Link{{URL: "http://a.test/m.js", Base: "http://a.test/docs/guide/p.html"}}},
		{"other host", `<script src="http://b.test/m.js"></script>`, nil},
		{"subdomain", `<script src="http://static.a.test/m.js"></script>`, nil},
		{"other port", `<script src="http://a.test:8080/m.js"></script>`, nil},
		{"module and JavaScript types", `<script type="module" src="/a.js"></script><script type="text/javascript" src="/b.js"></script><script type="application/ecmascript" src="/c.js"></script>`,
			[]Link{{URL: "http://a.test/a.js", Base: "http://a.test/docs/guide/p.html"}, {URL: "http://a.test/b.js", Base: "http://a.test/docs/guide/p.html"}, {URL: "http://a.test/c.js", Base: "http://a.test/docs/guide/p.html"}}},
		{"types browsers do not fetch", `<script type="application/json" src="/a.json"></script><script type="text/x-template" src="/t.js"></script><script type="importmap" src="/i.json"></script>`, nil},
		{"same script twice", `<script src="/m.js"></script><script src="/m.js?"></script><script src="/m.js#x"></script>`,
			[]Link{{URL: "http://a.test/m.js", Base: "http://a.test/docs/guide/p.html"}}},
		{"page nofollow", `<meta name="robots" content="nofollow"><script src="/m.js"></script>`,
			[]Link{{URL: "http://a.test/m.js", NoFollow: true, Base: "http://a.test/docs/guide/p.html"}}},
		{"empty and javascript: src", `<script src=""></script><script src="javascript:void(0)"></script>`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseHTML([]byte("<html><head>"+tt.head+"</head><body><p>x</p></body></html>"), "text/html", nil, page)
			if err != nil {
				t.Fatal(err)
			}
			var got []Link
			for _, l := range p.Links {
				if l.Base != "" {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("script links %+v, want %+v", got, tt.want)
			}
		})
	}

	// An HTML link to a script the page includes becomes the script; the
	// number of scripts a page contributes is capped.
	var b strings.Builder
	b.WriteString(`<a href="/s0.js">s</a>`)
	for i := range maxScriptsPerPage + 10 {
		fmt.Fprintf(&b, `<script src="/s%d.js"></script>`, i)
	}
	p, err := ParseHTML([]byte(b.String()), "text/html", nil, page)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range p.Links {
		if l.Base != "" {
			n++
		}
		if l.URL == "http://a.test/s0.js" && (l.Base == "" || l.Anchor != "s") {
			t.Errorf("linked and included script: %+v", l)
		}
	}
	if n != maxScriptsPerPage {
		t.Errorf("%d scripts taken, want %d", n, maxScriptsPerPage)
	}
}

// TestExternalScriptLinks: an external script's links resolve against the
// includer's base.
func TestExternalScriptLinks(t *testing.T) {
	base, _ := url.Parse("http://a.test/")
	tests := []struct {
		name, ct, body string
		want           []string
	}{
		{"relative to the base", "text/javascript", `var b = [{url:"en-US/text/a.html?DbPAR=W#bm"}, {url:"en-US/text/a.html?DbPAR=W#other"}]`,
			[]string{"http://a.test/en-US/text/a.html?DbPAR=W"}},
		{"root-relative and absolute", "application/javascript", `f("/x/y.html"); g('http://b.test/z'); h("//c.test/w.php")`,
			[]string{"http://a.test/x/y.html", "http://b.test/z", "http://c.test/w.php"}},
		{"not links", "text/javascript", `var s = "a b.html", t = "<a href='q.html'>", u = "/p?id=" + id, v = "style.css"`, nil},
		{"GBK bytes", "text/javascript; charset=gbk", "var t = \"\xd6\xd0\xce\xc4\", u = \"zh/p.html\";", []string{"http://a.test/zh/p.html"}},
		{"UTF-16 with a BOM", "", "\xff\xfe" + utf16le(`x="u/v.html"`), []string{"http://a.test/u/v.html"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, l := range ScriptLinks([]byte(tt.body), tt.ct, base) {
				if !l.Script || l.Base != "" {
					t.Errorf("link %+v: want Script and no Base", l)
				}
				got = append(got, l.URL)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("links %q, want %q", got, tt.want)
			}
		})
	}
	var many strings.Builder
	for i := range MaxLinksPerPage + 100 {
		fmt.Fprintf(&many, "'p%d.html',", i)
	}
	if n := len(ScriptLinks([]byte(many.String()), "", base)); n != MaxLinksPerPage {
		t.Errorf("%d links from one script, want the cap %d", n, MaxLinksPerPage)
	}
}

func utf16le(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		b.WriteByte(c)
		b.WriteByte(0)
	}
	return b.String()
}

// TestScriptFetch: a script request reads script types up to
// MaxScriptBytes and skips the rest.
func TestScriptFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "*/*" && strings.HasPrefix(r.URL.Path, "/s/") {
			http.Error(rw, "bad accept "+r.Header.Get("Accept"), http.StatusBadRequest)
			return
		}
		if ct := r.URL.Query().Get("ct"); ct != "" {
			rw.Header().Set("Content-Type", ct)
		} else {
			rw.Header()["Content-Type"] = nil // no sniffing
		}
		n := 100
		if r.URL.Query().Get("big") != "" {
			n = 3000
		}
		fmt.Fprint(rw, strings.Repeat("x", n))
	}))
	defer srv.Close()
	cfg := DefaultFetcherConfig()
	cfg.AllowLoopback = true
	cfg.MaxScriptBytes = 1000
	f := NewFetcher(cfg, nil)
	defer f.Close()
	tests := []struct {
		query      string
		script     bool
		skipped    bool
		bodyLen    int
		truncation bool
	}{
		{"ct=text/javascript", true, false, 100, false},
		{"ct=application/javascript;+charset=utf-8", true, false, 100, false},
		{"ct=application/x-javascript", true, false, 100, false},
		{"ct=text/ecmascript", true, false, 100, false},
		{"ct=application/json", true, false, 100, false},
		{"ct=text/plain", true, false, 100, false},
		{"", true, false, 100, false},
		{"ct=text/html", true, true, 0, false},
		{"ct=image/png", true, true, 0, false},
		{"ct=text/javascript&big=1", true, false, 1000, true},
		{"ct=text/javascript", false, true, 0, false},
		{"ct=text/html&big=1", false, false, 3000, false},
	}
	for _, tt := range tests {
		path := "/p/"
		if tt.script {
			path = "/s/"
		}
		u, _ := url.Parse(srv.URL + path + "?" + tt.query)
		resp, err := f.Fetch(context.Background(), FetchRequest{URL: u, Script: tt.script})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if resp.Status != 200 || resp.Skipped != tt.skipped || len(resp.Body) != tt.bodyLen || resp.Truncated != tt.truncation {
			t.Errorf("%s (script %v): status %d skipped %v body %d truncated %v; want skipped %v body %d truncated %v",
				u, tt.script, resp.Status, resp.Skipped, len(resp.Body), resp.Truncated, tt.skipped, tt.bodyLen, tt.truncation)
		}
	}
}

// TestScriptCash: an external script takes no share of its includer's
// cash (it would keep what later includers send it).
func TestScriptCash(t *testing.T) {
	tests := []struct {
		name  string
		links []Link
		want  []float64
	}{
		{"mixed", []Link{{URL: "http://a/x"}, {URL: "http://a/y", Script: true}, {URL: "http://a/m.js", Base: "http://a/"}}, []float64{2.0 / 3, 1.0 / 3, 0}},
		{"only a script", []Link{{URL: "http://a/m.js", Base: "http://a/"}}, []float64{0}},
	}
	for _, tt := range tests {
		got := (&Crawler{}).outLinks(&procEntry{URL: "http://a/", Host: "a", Cash: 1}, &Parsed{Links: tt.links})
		if len(got) != len(tt.want) {
			t.Fatalf("%s: %d links, want %d", tt.name, len(got), len(tt.want))
		}
		for i, d := range got {
			if d.Cash != tt.want[i] || d.Base != tt.links[i].Base {
				t.Errorf("%s: %s cash %v base %q, want %v %q", tt.name, d.URL, d.Cash, d.Base, tt.want[i], tt.links[i].Base)
			}
		}
	}
}

// queueSink is an engSink that keeps the links of pageless responses, and
// refuses the first attempt for each.
type queueSink struct {
	*engSink
	qmu     sync.Mutex
	queued  map[string][]string // settled URL -> links kept
	refused map[string]bool
}

func (s *queueSink) Queue(_ context.Context, _, url string, links []Discovered) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if !s.refused[url] {
		s.refused[url] = true
		return errors.New("replicas unavailable")
	}
	for _, l := range links {
		s.queued[url] = append(s.queued[url], l.URL)
	}
	return nil
}

// TestPagelessLinksKeptBeforeQueued: the links of a response that stores
// no page (an external script, a redirect) go to a QueueSink before they
// are queued, since no stored page tells of them; when it fails, the
// response is processed again and its links are queued only then.
func TestPagelessLinksKeptBeforeQueued(t *testing.T) {
	web := newScriptWeb(t)
	cfg := engConfig(engDNS(t))
	cfg.Robots.Sitemaps = false
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	sink := &queueSink{engSink: newEngSink(), queued: map[string][]string{}, refused: map[string]bool{}}
	c, err := New(db, cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Add(t.Context(), []Discovered{{URL: web.url("a.test", "/docs/guide/p1.html")}}); err != nil {
		t.Fatal(err)
	}
	engRun(t, c, 30*time.Second)

	tests := []struct {
		settled, link string
	}{
		{"/js/menu.js", "/docs/only.html"},
		{"/js/old.js", "/js/new.js"},
		{"/js/new.js", "/docs/moved.html"},
	}
	sink.qmu.Lock()
	defer sink.qmu.Unlock()
	for _, tt := range tests {
		if got := sink.queued[web.url("a.test", tt.settled)]; !slices.Contains(got, web.url("a.test", tt.link)) {
			t.Errorf("links kept for %s: %v, want %s among them", tt.settled, got, tt.link)
		}
	}
	for u := range sink.queued {
		if !strings.HasSuffix(u, ".js") {
			t.Errorf("links of %s kept through Queue: a page's links are its own", u)
		}
	}
	reqs := web.requests()
	if n := reqs["a.test/docs/moved.html"]; n != 1 {
		t.Errorf("the link of a refused Queue requested %d times, want 1 (after the retry)", n)
	}
}
