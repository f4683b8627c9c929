package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/index"
	"sou/p2p"
	"sou/search"
)

// everyRoute is each route of the Handler with a request that would
// succeed from a loopback client of a node without a token.
func everyRoute() []sweepCase {
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	return []sweepCase{
		{name: "search", method: "GET", target: "/api/search?q=a"},
		{name: "cache", method: "GET", target: "/api/cache?url=" + q("http://a.example/")},
		{name: "opensearch", method: "GET", target: "/opensearch.xml"},
		{name: "status", method: "GET", target: "/api/status"},
		{name: "peers", method: "GET", target: "/api/peers"},
		{name: "metrics", method: "GET", target: "/metrics"},
		{name: "warc", method: "GET", target: "/api/export/warc"},
		{name: "heap profile", method: "GET", target: "/debug/pprof/heap"},
		{name: "crawl", method: "POST", target: "/api/crawl", body: jsonURLs("http://a.example/"), header: map[string]string{"Content-Type": "application/json"}},
		{name: "search page", method: "GET", target: "/?q=a"},
		{name: "start page", method: "GET", target: "/"},
		{name: "dashboard", method: "GET", target: "/dashboard"},
		{name: "seed form", method: "POST", target: "/dashboard/seed", body: "urls=" + q("http://a.example/"), header: form},
		{name: "asset", method: "GET", target: "/ui/sou.js"},
		{name: "login page", method: "GET", target: "/login"},
		{name: "login", method: "POST", target: "/login", body: "token=x", header: form},
		{name: "logout", method: "POST", target: "/logout", header: form},
		{name: "unknown API route", method: "GET", target: "/api/nope"},
	}
}

// serveAs sends c to h in-process from remote with the given Host header
// and returns the recorded answer.
func serveAs(h http.Handler, c sweepCase, remote, host string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
	req.RemoteAddr, req.Host = remote, host
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestHostHeaderRebinding is DNS rebinding (issue 20, finding 3): a page of
// attacker.example, rebound to 127.0.0.1, talks to a token-less loopback
// node as a same-origin client. The Host it sends names the attacker, and
// every route refuses it, state-changing posts included (which a rebinding
// page sends with a same-origin Origin). The node's own names still work.
func TestHostHeaderRebinding(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPHosts = []string{"sou.lan"}
	n, srv := newHandlerNode(t, cfg)
	h := n.Handler()
	for _, foreign := range []string{"attacker.example", "attacker.example:7070", "localhost.attacker.example", "127.0.0.1.nip.io:7070", "", "sou.lan.attacker.example"} {
		for _, c := range everyRoute() {
			c.header = mergeHeader(c.header, map[string]string{"Origin": "http://" + foreign, "Sec-Fetch-Site": "same-origin"})
			t.Run(fmt.Sprintf("%s Host %q", c.name, foreign), func(t *testing.T) {
				rec := serveAs(h, c, loopbackClient, foreign)
				if rec.Code != http.StatusMisdirectedRequest {
					t.Fatalf("%s %s with Host %q: %d, want 421: %.200s", c.method, c.target, foreign, rec.Code, rec.Body)
				}
				var e struct{ Error string }
				if json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, "--http-host") {
					t.Errorf("421 body %q does not say what to do", rec.Body)
				}
			})
		}
	}
	// The names a loopback node is reached by legitimately.
	for _, own := range []string{"localhost", "localhost:7070", "LOCALHOST.", "127.0.0.1", "127.0.0.1:7070", "127.0.0.2:7070", "[::1]:7070", "[::1]", "sou.lan", "sou.lan:7070"} {
		for _, c := range everyRoute() {
			t.Run(fmt.Sprintf("%s Host %q", c.name, own), func(t *testing.T) {
				if rec := serveAs(h, c, loopbackClient, own); rec.Code == http.StatusMisdirectedRequest || rec.Code >= 500 {
					t.Fatalf("%s %s with Host %q: %d: %.200s", c.method, c.target, own, rec.Code, rec.Body)
				}
			})
		}
	}
	// Over TCP, the Host a client sends is what the guard sees.
	req, _ := http.NewRequest("GET", srv.URL+"/api/status", nil)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("GET /api/status over TCP with a foreign Host: %d, want 421", resp.StatusCode)
	}
}

// TestHostHeaderWithToken: a node with a token answers any Host (nothing
// is granted by the client's address, and a session cookie never goes to
// another name), and a foreign Host still needs the token.
func TestHostHeaderWithToken(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPToken = testToken
	n, _ := newHandlerNode(t, cfg)
	h := n.Handler()
	for _, c := range everyRoute() {
		t.Run(c.name, func(t *testing.T) {
			rec := serveAs(h, c, loopbackClient, "attacker.example")
			if rec.Code == http.StatusMisdirectedRequest || rec.Code == http.StatusOK || rec.Code == http.StatusAccepted {
				if c.target != "/ui/sou.js" && c.target != "/login" {
					t.Fatalf("%s %s with a foreign Host and no token: %d: %.200s", c.method, c.target, rec.Code, rec.Body)
				}
			}
			if c.name == "login" || c.name == "logout" {
				return // the form's token, not the header's, counts there
			}
			c.header = mergeHeader(c.header, map[string]string{"Authorization": "Bearer " + testToken})
			rec = serveAs(h, c, remoteClient, "sou.example.org:7070")
			if rec.Code == http.StatusMisdirectedRequest || rec.Code == http.StatusUnauthorized || rec.Code >= 500 {
				t.Fatalf("%s %s with the token by a LAN name: %d: %.200s", c.method, c.target, rec.Code, rec.Body)
			}
		})
	}
}

// TestForwardedHeadersAreNotLoopback: what a client says about its own
// address counts for nothing; only the connection's address does.
func TestForwardedHeadersAreNotLoopback(t *testing.T) {
	n, _ := newHandlerNode(t, testConfig(t))
	h := n.Handler()
	spoofs := []map[string]string{
		{"X-Forwarded-For": "127.0.0.1"},
		{"X-Forwarded-For": "127.0.0.1, 198.51.100.7"},
		{"Forwarded": "for=127.0.0.1;proto=http;host=localhost"},
		{"Forwarded": `for="[::1]"`},
		{"X-Real-IP": "127.0.0.1"},
		{"X-Client-IP": "127.0.0.1", "True-Client-IP": "127.0.0.1", "X-Forwarded-Host": "localhost"},
	}
	for i, spoof := range spoofs {
		for _, c := range everyRoute() {
			switch c.name {
			case "asset", "login page", "login", "logout", "unknown API route":
				continue // not access-controlled
			}
			c.header = mergeHeader(c.header, spoof)
			t.Run(fmt.Sprintf("%s spoof %d", c.name, i), func(t *testing.T) {
				if rec := serveAs(h, c, remoteClient, "localhost"); rec.Code != http.StatusUnauthorized {
					t.Fatalf("%s %s from %s claiming loopback: %d, want 401: %.200s", c.method, c.target, remoteClient, rec.Code, rec.Body)
				}
			})
		}
	}
	if got := clientKey(&http.Request{RemoteAddr: remoteClient, Header: http.Header{"X-Forwarded-For": {"127.0.0.1"}}}); got != "198.51.100.7" {
		t.Errorf("clientKey with X-Forwarded-For = %q, want the connection's address", got)
	}
}

// TestSecurityHeadersOnEveryAnswer: nosniff and no framing on every
// route, whatever the answer.
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	n, _ := newHandlerNode(t, testConfig(t))
	h := n.Handler()
	cases := append(everyRoute(), sweepCase{name: "bad request", method: "GET", target: "/api/search"},
		sweepCase{name: "not found", method: "GET", target: "/nope"}, sweepCase{name: "wrong method", method: "DELETE", target: "/api/status"})
	for _, host := range []string{"localhost", "attacker.example"} {
		for _, c := range cases {
			t.Run(c.name+" "+host, func(t *testing.T) {
				rec := serveAs(h, c, loopbackClient, host)
				hdr := rec.Header()
				if hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("X-Frame-Options") != "DENY" ||
					!strings.Contains(hdr.Get("Content-Security-Policy"), "frame-ancestors 'none'") || hdr.Get("Referrer-Policy") != "no-referrer" {
					t.Fatalf("%s %s (%d): headers %v", c.method, c.target, rec.Code, hdr)
				}
			})
		}
	}
}

func TestInflightLimiter(t *testing.T) {
	type step struct {
		acquire bool // false: release
		client  string
		want    bool // for acquire
	}
	tests := []struct {
		name             string
		total, perClient int
		steps            []step
	}{
		{"per client", 10, 2, []step{{true, "a", true}, {true, "a", true}, {true, "a", false}, {true, "b", true}, {false, "a", false}, {true, "a", true}}},
		{"in all", 3, 2, []step{{true, "a", true}, {true, "b", true}, {true, "c", true}, {true, "d", false}, {false, "b", false}, {true, "d", true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newInflightLimiter(tc.total, tc.perClient)
			for i, s := range tc.steps {
				if !s.acquire {
					l.release(s.client)
					continue
				}
				if got := l.acquire(s.client); got != s.want {
					t.Fatalf("step %d: acquire(%s) = %v, want %v", i, s.client, got, s.want)
				}
			}
		})
	}
	if a, b := clientKey(&http.Request{RemoteAddr: "[2001:db8:1:2:aaaa::1]:5000"}), clientKey(&http.Request{RemoteAddr: "[2001:db8:1:2:bbbb::9]:6000"}); a != b {
		t.Errorf("one IPv6 /64 counts as two clients: %q, %q", a, b)
	}
}

// peerPair is a node a and a second real node b joined to it, with b's
// answers to search requests in the test's hands.
type peerPair struct {
	a, b  *Node
	baseA string
	// answer rewrites b's answers; honest computes the true one.
	mu     sync.Mutex
	answer func(ctx context.Context, req []byte, honest func() ([]byte, error)) ([]byte, error)
}

func startPeerPair(t *testing.T, cfgA Config) *peerPair {
	t.Helper()
	p := &peerPair{}
	p.a, p.baseA = runNode(t, cfgA)
	cfgB := testConfig(t)
	cfgB.Network = cfgA.Network
	cfgB.Bootstrap = bootstrapAddrs(p.a)
	// Enough workers for every search a test holds at b at once, whatever
	// the machine's core count.
	p.b, _ = runNode(t, cfgB, WithP2PConfig(func(c *p2p.Config) { c.SearchWorkers = 8 }))
	waitMembers(t, 2, p.a, p.b)
	p.b.net.SetSearchHandler(func(ctx context.Context, _ peer.ID, req []byte) ([]byte, error) {
		honest := func() ([]byte, error) { return p.b.coord.HandleShardRequest(ctx, req) }
		p.mu.Lock()
		answer := p.answer
		p.mu.Unlock()
		if answer == nil {
			return honest()
		}
		return answer(ctx, req, honest)
	})
	return p
}

func (p *peerPair) setAnswer(f func(ctx context.Context, req []byte, honest func() ([]byte, error)) ([]byte, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answer = f
}

// hostOf returns a host that b owns and a agrees b holds.
func (p *peerPair) hostOfB(t *testing.T) string {
	t.Helper()
	for i := 0; i < 1000; i++ {
		h := fmt.Sprintf("peer-b-%d.example", i)
		if p.b.net.IsOwner(h) && p.a.net.Holds(p.b.net.ID(), h) {
			return h
		}
	}
	t.Fatal("no host owned by b")
	return ""
}

// putPage stores a page on n and makes it searchable.
func putPage(t *testing.T, n *Node, doc *index.Document) {
	t.Helper()
	if doc.Status == 0 {
		doc.Status = 200
	}
	if doc.FetchedAt.IsZero() {
		doc.FetchedAt = time.Now()
	}
	if err := n.ix.Put(context.Background(), doc); err != nil {
		t.Fatalf("store %s: %v", doc.URL, err)
	}
	if err := n.ix.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// forgeAnswer rewrites the titles of a shard answer's candidates and the
// snippets of its snippet answer, on search's wire.
func forgeAnswer(req, b []byte, snippet, title string) ([]byte, error) {
	r, err := search.DecodeShardRequest(req)
	if err != nil {
		return nil, fmt.Errorf("forge: %w", err)
	}
	if len(r.SnippetURLs) > 0 {
		sn, err := search.DecodeSnippetResponse(b, r.Analyzer, r.SnippetURLs)
		if err != nil {
			return nil, fmt.Errorf("forge: %w", err)
		}
		for u := range sn {
			sn[u] = snippet
		}
		return search.EncodeSnippetResponse(r.Analyzer, r.SnippetURLs, sn)
	}
	q, err := search.ParseQuery(r.Query, index.SharedAnalyzer())
	if err != nil {
		return nil, fmt.Errorf("forge: %w", err)
	}
	res, err := search.DecodeShardResponse(b, r.Analyzer, q.Terms(), r.K)
	if err != nil {
		return nil, fmt.Errorf("forge: %w", err)
	}
	for i := range res.Candidates {
		res.Candidates[i].Title = title
	}
	return search.EncodeShardResponse(r.Analyzer, q.Terms(), res)
}

// The hostile snippet and title of issue 20's finding 4.
const (
	hostileSnippet = `<form action=/dashboard/seed method=post><input name=urls value=http://evil.example/><button id=evilsubmit>go</button></form>` +
		`<meta http-equiv=refresh content="0;url=http://evil.example/"><script>document.title="pwned"</script><img src=x onerror="document.title='pwned'"> lighthouse keeper`
	hostileTitle = `<img src=x onerror="document.title='pwned'">Lighthouse<script>document.title="pwned"</script>`
)

// TestHostileSnippetFromPeerIsText: a real peer answers searches with
// markup as its snippet and title; the coordinator's result page and API
// carry it as text only.
func TestHostileSnippetFromPeerIsText(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	p := startPeerPair(t, testConfig(t))
	host := p.hostOfB(t)
	putPage(t, p.b, &index.Document{URL: "http://" + host + "/light", Host: host, Title: "Lighthouse", Body: "the lighthouse keeper", ContentType: "text/html"})
	p.setAnswer(func(ctx context.Context, req []byte, honest func() ([]byte, error)) ([]byte, error) {
		b, err := honest()
		if err != nil {
			return nil, err
		}
		return forgeAnswer(req, b, hostileSnippet, hostileTitle)
	})

	status, _, page := get(t, p.baseA+"/?q=lighthouse")
	if status != 200 {
		t.Fatalf("search page: %d\n%s", status, page)
	}
	mustContain(t, page, `&lt;form action=/dashboard/seed method=post&gt;`, `&lt;meta http-equiv=refresh`, `&lt;img src=x onerror=`,
		`<b>lighthouse</b>`, `1 results`, `2 of 2 peers answered`)
	for _, raw := range []string{"<form action=/dashboard/seed", "<meta http-equiv=refresh", "<img src=x", `<script>document.title`, "<input name=urls"} {
		if strings.Contains(page, raw) {
			t.Errorf("the result page holds the peer's markup %q", raw)
		}
	}
	var resp search.Response
	status, _, body := get(t, p.baseA+"/api/search?q=lighthouse")
	if status != 200 || json.Unmarshal([]byte(body), &resp) != nil || len(resp.Results) != 1 {
		t.Fatalf("API: %d %s", status, body)
	}
	r := resp.Results[0]
	if !strings.HasPrefix(r.Snippet, "<form action=/dashboard/seed") || len(r.Highlights) == 0 {
		t.Errorf("API snippet %q, highlights %v: want the markup as plain text and the query highlighted", r.Snippet, r.Highlights)
	}
}

// TestSearchConcurrencyLimit: searches beyond the per-client or the total
// limit are answered 429 with Retry-After, whatever the client claims in
// X-Forwarded-For; they are admitted again once the others end. The
// searches held in flight are real: they wait for a peer that does not
// answer before their deadline.
func TestSearchConcurrencyLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	cfg := testConfig(t)
	cfg.SearchConcurrency, cfg.SearchConcurrencyPerClient = 3, 2
	cfg.PublicSearch = true // any client may search: what the limit is for
	p := startPeerPair(t, cfg)
	arrived := make(chan struct{}, 16)
	// The held searches end when released, not at a deadline: on a loaded
	// machine a deadline could pass before the last check runs.
	release := make(chan struct{})
	p.setAnswer(func(ctx context.Context, _ []byte, _ func() ([]byte, error)) ([]byte, error) {
		arrived <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return nil, errors.New("released")
		}
	})
	h := p.a.Handler()
	search := func(remote string, header ...string) *httptest.ResponseRecorder {
		c := sweepCase{method: "GET", target: "/api/search?timeout=10s&q=" + url.QueryEscape(fmt.Sprintf("stall %s %d", remote, time.Now().UnixNano()))}
		c.header = map[string]string{}
		for i := 0; i+1 < len(header); i += 2 {
			c.header[header[i]] = header[i+1]
		}
		return serveAs(h, c, remote, "localhost")
	}
	var wg sync.WaitGroup
	hold := func(remote string) {
		wg.Go(func() {
			if rec := search(remote); rec.Code != 200 {
				t.Errorf("held search from %s: %d %s", remote, rec.Code, rec.Body)
			}
		})
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("the held search from %s never reached the peer", remote)
		}
	}
	const x, y, z = "127.0.0.1:41000", "198.51.100.8:41000", "198.51.100.9:41000"
	hold(x)
	hold(x)
	tests := []struct {
		name   string
		remote string
		header []string
		page   bool
	}{
		{"third from one client", x, nil, false},
		{"third from one client, new port", "127.0.0.1:41999", nil, false},
		{"third from one client claiming another address", x, []string{"X-Forwarded-For", "203.0.113.1"}, false},
		{"third from one client on the search page", x, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec *httptest.ResponseRecorder
			if tc.page {
				rec = serveAs(h, sweepCase{method: "GET", target: "/?q=stall"}, tc.remote, "localhost")
			} else {
				rec = search(tc.remote, tc.header...)
			}
			if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("%d (Retry-After %q), want 429 with Retry-After: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
			}
		})
	}
	hold(y) // a third client: three in flight, the total
	if rec := search(z); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a fourth search in all: %d, want 429: %s", rec.Code, rec.Body)
	}
	// Status and the dashboard are not searches.
	if rec := serveAs(h, sweepCase{method: "GET", target: "/api/status"}, x, "localhost"); rec.Code != 200 {
		t.Fatalf("status while searches are held: %d", rec.Code)
	}
	close(release)
	wg.Wait()
	p.setAnswer(nil)
	if rec := search(z); rec.Code != 200 {
		t.Fatalf("a search after the held ones ended: %d %s", rec.Code, rec.Body)
	}
}
