package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// sweepCase is one request of the bad-input sweep.
type sweepCase struct {
	name   string
	method string
	target string // path and query, already escaped
	body   string
	header map[string]string
	remote string // client address; "" = loopback
	want   int    // exact status; 0 = any 4xx; anyStatus = anything but 5xx
}

// anyStatus marks hostile input that is still a valid request (a query of
// odd characters is a query): the answer may be 200 but never a 5xx.
const anyStatus = -1

// hostileCases are odd but legal requests; they must not crash or 5xx.
func hostileCases() []sweepCase {
	var out []sweepCase
	for _, hq := range []string{
		"\xff\xfe\xfd", "\x00", `"unterminated`, `-`, `--a`, `""`, `a OR OR OR`, `site:`, `site:%`, `(((((`, `*`, `?`,
		strings.Repeat("a ", 1000), strings.Repeat("搜索引擎", 150), "🙂🙃", "\u202egnp.exe", `<script>alert(1)</script>`,
		`' OR 1=1 --`, "%00", "../../etc/passwd", "a\r\nSet-Cookie: x=y",
	} {
		hq = strings.NewReplacer(`\xff`, "\xff", `\xfe`, "\xfe", `\xfd`, "\xfd", `\x00`, "\x00", `\u202e`, "\u202e", `\r\n`, "\r\n").Replace(hq)
		out = append(out,
			sweepCase{name: "search hostile " + q(hq)[:min(len(q(hq)), 30)], method: "GET", target: "/api/search?q=" + q(hq), want: anyStatus},
			sweepCase{name: "UI hostile " + q(hq)[:min(len(q(hq)), 30)], method: "GET", target: "/?q=" + q(hq), want: anyStatus},
			sweepCase{name: "cache hostile q " + q(hq)[:min(len(q(hq)), 30)], method: "GET", target: "/api/cache?url=http://a.example/&q=" + q(hq), want: 404},
		)
	}
	return append(out,
		sweepCase{name: "repeated q", method: "GET", target: "/api/search?q=a&q=b&page=1&page=2", want: anyStatus},
		sweepCase{name: "raw invalid UTF-8 escape", method: "GET", target: "/?q=%ff%fe", want: anyStatus},
		sweepCase{name: "huge Accept-Language", method: "GET", target: "/dashboard", header: map[string]string{"Accept-Language": strings.Repeat("zh-CN;q=0.9,", 4000)}, want: anyStatus},
		sweepCase{name: "hostile Host for opensearch", method: "GET", target: "/opensearch.xml", header: map[string]string{"Host": `"><x>`}, want: anyStatus},
		sweepCase{name: "lang injection", method: "GET", target: "/?lang=" + q(`"><script>`) + "&q=a", want: anyStatus},
		sweepCase{name: "page with plus sign", method: "GET", target: "/api/search?q=a&page=%2B1", want: anyStatus},
	)
}

const (
	loopbackClient = "127.0.0.1:40000"
	remoteClient   = "198.51.100.7:40000"
	testToken      = "correct-horse-battery-staple"
)

var (
	megabyte = strings.Repeat("a", 1<<20)
	kb100    = strings.Repeat("字", 100<<10/3)
)

func q(s string) string { return url.QueryEscape(s) }

func jsonURLs(urls ...string) string {
	b, _ := json.Marshal(map[string]any{"urls": urls})
	return string(b)
}

func manyURLs(n int) string {
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://host%d.example/page/%d", i%97, i)
	}
	return jsonURLs(urls...)
}

// badInputCases are requests a loopback client of a node without a token
// might send by mistake or malice; every one must be a clear 4xx.
func badInputCases() []sweepCase {
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	jsonCT := map[string]string{"Content-Type": "application/json"}
	return []sweepCase{
		// GET /api/search
		{name: "search without q", method: "GET", target: "/api/search", want: 400},
		{name: "search empty q", method: "GET", target: "/api/search?q=", want: 400},
		{name: "search blank q", method: "GET", target: "/api/search?q=%20%09%20", want: 400},
		{name: "search 100 KB q", method: "GET", target: "/api/search?q=" + q(kb100), want: 400},
		{name: "search q over the cap", method: "GET", target: "/api/search?q=" + strings.Repeat("x", 2049), want: 400},
		{name: "search page 0", method: "GET", target: "/api/search?q=a&page=0", want: 400},
		{name: "search page negative", method: "GET", target: "/api/search?q=a&page=-1", want: 400},
		{name: "search page text", method: "GET", target: "/api/search?q=a&page=two", want: 400},
		{name: "search page overflow", method: "GET", target: "/api/search?q=a&page=99999999999999999999999", want: 400},
		{name: "search page past max", method: "GET", target: "/api/search?q=a&page=51", want: 400},
		{name: "search n 0", method: "GET", target: "/api/search?q=a&n=0", want: 400},
		{name: "search n huge", method: "GET", target: "/api/search?q=a&n=1000000", want: 400},
		{name: "search n float", method: "GET", target: "/api/search?q=a&n=1.5", want: 400},
		{name: "search timeout negative", method: "GET", target: "/api/search?q=a&timeout=-1s", want: 400},
		{name: "search timeout zero", method: "GET", target: "/api/search?q=a&timeout=0", want: 400},
		{name: "search timeout hour", method: "GET", target: "/api/search?q=a&timeout=1h", want: 400},
		{name: "search timeout text", method: "GET", target: "/api/search?q=a&timeout=soon", want: 400},
		{name: "search timeout overflow", method: "GET", target: "/api/search?q=a&timeout=99999999999999999999", want: 400},
		// GET /api/cache
		{name: "cache without url", method: "GET", target: "/api/cache", want: 400},
		{name: "cache empty url", method: "GET", target: "/api/cache?url=", want: 400},
		{name: "cache huge url", method: "GET", target: "/api/cache?url=http://a.example/" + strings.Repeat("p", 9000), want: 400},
		{name: "cache javascript url", method: "GET", target: "/api/cache?url=" + q("javascript:alert(1)"), want: 400},
		{name: "cache file url", method: "GET", target: "/api/cache?url=" + q("file:///etc/passwd"), want: 400},
		{name: "cache ftp url", method: "GET", target: "/api/cache?url=" + q("ftp://a.example/x"), want: 400},
		{name: "cache no host", method: "GET", target: "/api/cache?url=" + q("http://"), want: 400},
		{name: "cache not a url", method: "GET", target: "/api/cache?url=" + q("not a url at all"), want: 400},
		{name: "cache NUL in url", method: "GET", target: "/api/cache?url=" + q("http://a.example/\x00"), want: 0},
		{name: "cache unknown page", method: "GET", target: "/api/cache?url=" + q("http://never-crawled.example/"), want: 404},
		{name: "cache unknown page hostile q", method: "GET", target: "/api/cache?url=" + q("http://never-crawled.example/") + "&q=" + q(`"<script>`), want: 404},
		// POST /api/crawl
		{name: "crawl no body", method: "POST", target: "/api/crawl", header: jsonCT, want: 400},
		{name: "crawl truncated JSON", method: "POST", target: "/api/crawl", body: `{"urls": [`, header: jsonCT, want: 400},
		{name: "crawl JSON array", method: "POST", target: "/api/crawl", body: `["http://a.example/"]`, header: jsonCT, want: 400},
		{name: "crawl null", method: "POST", target: "/api/crawl", body: `null`, header: jsonCT, want: 400},
		{name: "crawl empty urls", method: "POST", target: "/api/crawl", body: `{"urls": []}`, header: jsonCT, want: 400},
		{name: "crawl urls not a list", method: "POST", target: "/api/crawl", body: `{"urls": "http://a.example/"}`, header: jsonCT, want: 400},
		{name: "crawl urls numbers", method: "POST", target: "/api/crawl", body: `{"urls": [1, 2]}`, header: jsonCT, want: 400},
		{name: "crawl unknown field", method: "POST", target: "/api/crawl", body: `{"url": "http://a.example/"}`, header: jsonCT, want: 400},
		{name: "crawl not JSON", method: "POST", target: "/api/crawl", body: `urls=http://a.example/`, header: form, want: 400},
		{name: "crawl 10000 URLs", method: "POST", target: "/api/crawl", body: manyURLs(10000), header: jsonCT, want: 400},
		{name: "crawl 1 MB body", method: "POST", target: "/api/crawl", body: `{"urls": ["http://a.example/` + megabyte + `"]}`, header: jsonCT, want: 400},
		{name: "crawl non-http URLs", method: "POST", target: "/api/crawl", header: jsonCT, want: 400,
			body: jsonURLs("ftp://a.example/", "javascript:alert(1)", "file:///etc/passwd", "mailto:a@b.example", "data:text/html,x", "", "  ")},
		{name: "crawl relative URLs", method: "POST", target: "/api/crawl", body: jsonURLs("/just/a/path", "a.example"), header: jsonCT, want: 400},
		{name: "crawl cross-site", method: "POST", target: "/api/crawl", body: jsonURLs("http://a.example/"),
			header: map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"}, want: 403},
		{name: "crawl foreign origin", method: "POST", target: "/api/crawl", body: jsonURLs("http://a.example/"),
			header: map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, want: 403},
		// Wrong methods and unknown routes.
		{name: "POST search", method: "POST", target: "/api/search?q=a", want: 405},
		{name: "DELETE status", method: "DELETE", target: "/api/status", want: 405},
		{name: "PUT peers", method: "PUT", target: "/api/peers", want: 405},
		{name: "GET crawl", method: "GET", target: "/api/crawl", want: 405},
		{name: "PATCH cache", method: "PATCH", target: "/api/cache?url=http://a.example/", want: 405},
		{name: "POST warc", method: "POST", target: "/api/export/warc", want: 405},
		{name: "unknown API route", method: "GET", target: "/api/nope", want: 404},
		{name: "API root", method: "GET", target: "/api/", want: 404},
		{name: "POST metrics", method: "POST", target: "/metrics", want: 405},
		{name: "POST search page", method: "POST", target: "/", want: 405},
		{name: "POST dashboard", method: "POST", target: "/dashboard", want: 405},
		{name: "GET seed form", method: "GET", target: "/dashboard/seed", want: 405},
		{name: "unknown page", method: "GET", target: "/nope", want: 404},
		{name: "asset other type", method: "GET", target: "/ui/search.html", want: 404},
		{name: "asset missing", method: "GET", target: "/ui/none.js", want: 404},
		{name: "asset traversal", method: "GET", target: "/ui/..%2f..%2fapi.js", want: 404},
		// The UI with the same bad parameters answers a page with the error.
		{name: "UI page 0", method: "GET", target: "/?q=a&page=0", want: 400},
		{name: "UI page without q", method: "GET", target: "/?page=2", want: 400},
		{name: "UI n huge", method: "GET", target: "/?q=a&n=100000", want: 400},
		{name: "UI 100 KB q", method: "GET", target: "/?q=" + q(kb100), want: 400},
		// POST /dashboard/seed (form-encoded, no JavaScript)
		{name: "seed empty form", method: "POST", target: "/dashboard/seed", header: form, want: 400},
		{name: "seed blank urls", method: "POST", target: "/dashboard/seed", body: "urls=%20%0A%20", header: form, want: 400},
		{name: "seed non-http", method: "POST", target: "/dashboard/seed", body: "urls=" + q("ftp://a.example/\njavascript:alert(1)"), header: form, want: 400},
		{name: "seed 10000 URLs", method: "POST", target: "/dashboard/seed", body: "urls=" + q(strings.Repeat("http://a.example/x\n", 10000)), header: form, want: 400},
		{name: "seed 1 MB body", method: "POST", target: "/dashboard/seed", body: "urls=" + megabyte, header: form, want: 400},
		{name: "seed bad escape", method: "POST", target: "/dashboard/seed", body: "urls=%zz", header: form, want: 400},
		{name: "seed JSON body", method: "POST", target: "/dashboard/seed", body: jsonURLs("http://a.example/"), header: jsonCT, want: 400},
		{name: "seed cross-site", method: "POST", target: "/dashboard/seed", body: "urls=" + q("http://a.example/"),
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"}, want: 403},
	}
}

// authCases are the access rules of a node with a token and without
// --public-search: nothing without the token, not even from loopback. A
// browser (no Authorization header) asking for a UI page is sent to the
// login form instead of a 401.
func authCases() []sweepCase {
	bad := []map[string]string{
		nil,
		{"Authorization": "Bearer wrong"},
		{"Authorization": "Bearer "},
		{"Authorization": "Bearer " + testToken + "x"},
		{"Authorization": "bearer " + testToken},
		{"Authorization": "Basic " + testToken},
		{"Authorization": testToken},
		{"Authorization": "Bearer " + strings.Repeat("t", 60<<10)},
	}
	routes := []struct{ method, target, body string }{
		{"GET", "/api/search?q=a", ""},
		{"GET", "/api/cache?url=http://a.example/", ""},
		{"GET", "/api/status", ""},
		{"GET", "/api/peers", ""},
		{"GET", "/metrics", ""},
		{"GET", "/api/export/warc", ""},
		{"GET", "/debug/pprof/heap", ""},
		{"POST", "/api/crawl", jsonURLs("http://a.example/")},
		{"GET", "/", ""},
		{"GET", "/?q=a", ""},
		{"GET", "/dashboard", ""},
		{"POST", "/dashboard/seed", "urls=http://a.example/"},
	}
	var out []sweepCase
	for _, rt := range routes {
		for i, h := range bad {
			want := 401
			if h == nil && rt.method == "GET" && (strings.HasPrefix(rt.target, "/?") || rt.target == "/" || rt.target == "/dashboard") {
				want = 303
			}
			for _, remote := range []string{loopbackClient, remoteClient} {
				out = append(out, sweepCase{name: fmt.Sprintf("%s %s bad token %d from %s", rt.method, rt.target, i, remote),
					method: rt.method, target: rt.target, body: rt.body, header: h, remote: remote, want: want})
			}
		}
	}
	return out
}

// publicCases: a node with --public-search and a token, asked from beyond
// loopback without the token: search is open, everything else is 401.
func publicCases() []sweepCase {
	return []sweepCase{
		{name: "status", method: "GET", target: "/api/status", remote: remoteClient, want: 401},
		{name: "peers", method: "GET", target: "/api/peers", remote: remoteClient, want: 401},
		{name: "metrics", method: "GET", target: "/metrics", remote: remoteClient, want: 401},
		{name: "profiles", method: "GET", target: "/debug/pprof/goroutine", remote: remoteClient, want: 401},
		{name: "warc", method: "GET", target: "/api/export/warc", remote: remoteClient, want: 401},
		{name: "crawl", method: "POST", target: "/api/crawl", body: jsonURLs("http://a.example/"), remote: remoteClient, want: 401},
		{name: "crawl bad token", method: "POST", target: "/api/crawl", body: jsonURLs("http://a.example/"), remote: remoteClient,
			header: map[string]string{"Authorization": "Bearer nope"}, want: 401},
		{name: "crawl from loopback", method: "POST", target: "/api/crawl", body: jsonURLs("http://a.example/"), want: 401},
		{name: "dashboard", method: "GET", target: "/dashboard", remote: remoteClient, want: 303},
		{name: "seed form", method: "POST", target: "/dashboard/seed", body: "urls=http://a.example/", remote: remoteClient,
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, want: 401},
		{name: "search without q", method: "GET", target: "/api/search", remote: remoteClient, want: 400},
		{name: "search page 0", method: "GET", target: "/api/search?q=a&page=0", remote: remoteClient, want: 400},
		{name: "cache javascript url", method: "GET", target: "/api/cache?url=" + q("javascript:x"), remote: remoteClient, want: 400},
		{name: "cache unknown", method: "GET", target: "/api/cache?url=" + q("http://a.example/"), remote: remoteClient, want: 404},
		{name: "wrong method", method: "DELETE", target: "/api/search?q=a", remote: remoteClient, want: 405},
	}
}

// checkAnswer asserts the sweep's promise about one answer.
func checkAnswer(t *testing.T, c sweepCase, status int, header http.Header, body []byte) {
	t.Helper()
	if status >= 500 {
		t.Fatalf("%s %s: %d (5xx) %s", c.method, c.target[:min(len(c.target), 80)], status, body[:min(len(body), 300)])
	}
	if c.want == anyStatus {
		c.want = status
	}
	if c.want != 0 && status != c.want {
		t.Fatalf("%s %s: status %d, want %d: %s", c.method, c.target[:min(len(c.target), 80)], status, c.want, body[:min(len(body), 300)])
	}
	if c.want == 0 && (status < 400 || status > 499) {
		t.Fatalf("%s %s: status %d, want a 4xx: %s", c.method, c.target[:min(len(c.target), 80)], status, body[:min(len(body), 300)])
	}
	if status == http.StatusUnauthorized && !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without a WWW-Authenticate: Bearer header")
	}
	if status == http.StatusSeeOther {
		if loc, want := header.Get("Location"), "/login?next="+url.QueryEscape(c.target); loc != want {
			t.Errorf("redirected to %q, want the login form %q", loc, want)
		}
	}
	path, _, _ := strings.Cut(c.target, "?")
	if path == "/" && (strings.Contains(string(body), "<script>alert") || strings.Contains(string(body), "<x>")) {
		t.Errorf("%s: hostile input reflected unescaped", c.target)
	}
	// Every 401/403 comes from the API's wrappers (JSON); API routes
	// always answer JSON errors.
	if (strings.HasPrefix(path, "/api/") || status == 401 || status == 403) && status >= 400 {
		if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("%s %s: Content-Type %q, want JSON", c.method, path, ct)
		}
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || strings.TrimSpace(e.Error) == "" {
			t.Fatalf("%s %s: body is not {\"error\": \"...\"}: %q (%v)", c.method, path, body[:min(len(body), 300)], err)
		}
		if strings.Contains(e.Error, "\n") {
			t.Errorf("%s %s: error is not one line: %q", c.method, path, e.Error)
		}
	}
	if len(body) > 2<<20 {
		t.Errorf("%s %s: %d-byte error answer echoes too much input", c.method, path, len(body))
	}
}

// serveCase sends c to h in-process, from c.remote.
func serveCase(t *testing.T, h http.Handler, c sweepCase) {
	t.Helper()
	req := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
	req.RemoteAddr = loopbackClient
	if c.remote != "" {
		req.RemoteAddr = c.remote
	}
	req.Host = "localhost:7070"
	for k, v := range c.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req) // a panic here fails the test
	checkAnswer(t, c, rec.Code, rec.Header(), rec.Body.Bytes())
}

func TestAPIBadInputSweep(t *testing.T) {
	n, _ := newHandlerNode(t, testConfig(t))
	h := n.Handler()
	for _, c := range append(badInputCases(), hostileCases()...) {
		t.Run(c.name, func(t *testing.T) { serveCase(t, h, c) })
	}
	// Without a token, beyond loopback nothing is served, and with a
	// token-less node even search is private (it binds to loopback only).
	for _, c := range authCases() {
		if c.remote == remoteClient && c.header == nil {
			c.name = "no token node: " + c.name
			c.want = 401 // no login form without a token
			t.Run(c.name, func(t *testing.T) { serveCase(t, h, c) })
		}
	}
}

func TestAPITokenSweep(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPToken = testToken
	n, _ := newHandlerNode(t, cfg)
	h := n.Handler()
	for _, c := range authCases() {
		t.Run(c.name, func(t *testing.T) { serveCase(t, h, c) })
	}
	// The right token opens every route, from anywhere.
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	for _, c := range []sweepCase{
		{name: "status", method: "GET", target: "/api/status"},
		{name: "search", method: "GET", target: "/api/search?q=a"},
		{name: "dashboard", method: "GET", target: "/dashboard"},
		{name: "crawl", method: "POST", target: "/api/crawl", body: jsonURLs("http://a.example/")},
	} {
		t.Run("token "+c.name, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
			req.RemoteAddr = remoteClient
			for k, v := range auth {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 && rec.Code != 202 {
				t.Fatalf("%s %s with the token: %d %s", c.method, c.target, rec.Code, rec.Body)
			}
		})
	}
	// Bad input with the right token is still a clear 4xx.
	for _, c := range badInputCases() {
		if c.want == 403 {
			continue // the cross-origin check comes before the token
		}
		c.remote = remoteClient
		c.header = mergeHeader(c.header, auth)
		t.Run("token "+c.name, func(t *testing.T) { serveCase(t, h, c) })
	}
}

func mergeHeader(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestAPIPublicSearchSweep(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPToken = testToken
	cfg.PublicSearch = true
	n, _ := newHandlerNode(t, cfg)
	h := n.Handler()
	for _, c := range publicCases() {
		t.Run(c.name, func(t *testing.T) { serveCase(t, h, c) })
	}
	for _, target := range []string{"/api/search?q=a", "/?q=a", "/", "/opensearch.xml", "/ui/sou.js"} {
		req := httptest.NewRequest("GET", target, nil)
		req.RemoteAddr = remoteClient
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("public GET %s: %d %s", target, rec.Code, rec.Body)
		}
	}
}

// TestAPIThroughRun sweeps a node started with Run over real TCP,
// including a 1 MB query string, which the server refuses before any
// handler (431, header limit).
func TestAPIThroughRun(t *testing.T) {
	_, base := runNode(t, testConfig(t))
	cases := append(append(badInputCases(), hostileCases()...),
		sweepCase{name: "1 MB q", method: "GET", target: "/api/search?q=" + megabyte, want: 431},
		sweepCase{name: "1 MB cache url", method: "GET", target: "/api/cache?url=http://a.example/" + megabyte, want: 431},
		sweepCase{name: "1 MB UI q", method: "GET", target: "/?q=" + megabyte, want: 431},
	)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range cases {
		if len(c.target) > 64<<10 {
			c.want = 431 // past Run's MaxHeaderBytes
		}
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, base+c.target, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.header {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v (did the handler panic?)", c.method, c.name, err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			resp.Body.Close()
			if c.want == 431 {
				if resp.StatusCode != 431 {
					t.Fatalf("%s: %d, want 431", c.name, resp.StatusCode)
				}
				return
			}
			checkAnswer(t, c, resp.StatusCode, resp.Header, body)
		})
	}
	// The node still answers normally after the sweep.
	resp, err := http.Get(base + "/api/status")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status after the sweep: %v %v", resp, err)
	}
	resp.Body.Close()
}
