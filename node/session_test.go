package node

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends one request to base+target with the headers and cookie given and
// returns status, headers and body.
func do(t *testing.T, method, target, body string, cookie *http.Cookie, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func sessionCookieOf(t *testing.T, h http.Header) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	return nil
}

// TestLoginFlow is issue 20's finding 12 over HTTP: a node with a
// token sends a browser to /login, a right token there starts a session
// that opens the UI, the API reads and the UI's own changes (with CSRF
// protection), and logging out ends it.
func TestLoginFlow(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPToken = testToken
	n, srv := newHandlerNode(t, cfg)
	indexPages(t, n, 3)
	base := srv.URL

	status, hdr, _ := do(t, "GET", base+"/dashboard?lang=en", "", nil)
	if status != http.StatusSeeOther || hdr.Get("Location") != "/login?next=%2Fdashboard%3Flang%3Den" {
		t.Fatalf("dashboard without a session: %d to %q, want 303 to the login form", status, hdr.Get("Location"))
	}
	status, _, page := do(t, "GET", base+"/login?next="+url.QueryEscape("/dashboard?lang=en"), "", nil)
	if status != 200 {
		t.Fatalf("login form: %d", status)
	}
	mustContain(t, page, `action="/login" method="post"`, `type="password" name="token"`, `name="next" value="/dashboard?lang=en"`)

	status, hdr, page = do(t, "POST", base+"/login", url.Values{"token": {"wrong"}, "next": {"/dashboard"}}.Encode(), nil)
	if status != http.StatusUnauthorized || sessionCookieOf(t, hdr) != nil || !strings.Contains(page, "Wrong token") {
		t.Fatalf("wrong token: %d, cookie %v\n%s", status, sessionCookieOf(t, hdr), page)
	}
	status, hdr, _ = do(t, "POST", base+"/login", url.Values{"token": {testToken}, "next": {"/dashboard?lang=en"}}.Encode(), nil)
	cookie := sessionCookieOf(t, hdr)
	if status != http.StatusSeeOther || hdr.Get("Location") != "/dashboard?lang=en" || cookie == nil {
		t.Fatalf("right token: %d to %q, cookie %v", status, hdr.Get("Location"), cookie)
	}
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Secure ||
		cookie.MaxAge != int(sessionTTL.Seconds()) || len(cookie.Value) < 43 {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, 12 h, not Secure over plain HTTP, 32 random bytes", cookie)
	}
	session := &http.Cookie{Name: cookie.Name, Value: cookie.Value}
	origin := []string{"Origin", base}

	tests := []struct {
		name   string
		method string
		target string
		body   string
		cookie *http.Cookie
		header []string
		status int
		want   string
	}{
		{"dashboard", "GET", "/dashboard", "", session, nil, 200, `action="/logout"`},
		{"search page", "GET", "/?q=harbour", "", session, nil, 200, `3 results`},
		{"status", "GET", "/api/status", "", session, nil, 200, `"peer_id"`},
		{"search API", "GET", "/api/search?q=harbour", "", session, nil, 200, `"total":3`},
		{"export", "GET", "/api/export/warc", "", session, nil, 200, "WARC/1.1"},
		{"profiles", "GET", "/debug/pprof/heap?debug=1", "", session, nil, 200, "heap profile"},
		{"crawl from the UI", "POST", "/api/crawl", jsonURLs("http://seed-a.example/"), session, append(origin, "Content-Type", "application/json"), 202, `"accepted":1`},
		{"crawl from the UI by fetch metadata", "POST", "/api/crawl", jsonURLs("http://seed-b.example/"), session,
			[]string{"Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}, 202, `"accepted":1`},
		{"seed form", "POST", "/dashboard/seed", "urls=" + q("http://seed-c.example/"), session, origin, 200, `accepted: 1`},
		{"crawl with the cookie but no browser headers", "POST", "/api/crawl", jsonURLs("http://seed-d.example/"), session,
			[]string{"Content-Type", "application/json"}, 403, "this node's pages"},
		{"crawl from another site", "POST", "/api/crawl", jsonURLs("http://seed-e.example/"), session,
			[]string{"Origin", "https://evil.example", "Content-Type", "application/json"}, 403, "cross-origin"},
		{"seed form from another site", "POST", "/dashboard/seed", "urls=" + q("http://seed-f.example/"), session,
			[]string{"Sec-Fetch-Site", "cross-site"}, 403, "cross-origin"},
		{"forged cookie", "GET", "/api/status", "", &http.Cookie{Name: sessionCookie, Value: strings.Repeat("A", 43)}, nil, 401, "log in at /login"},
		{"forged cookie on a page", "GET", "/dashboard", "", &http.Cookie{Name: sessionCookie, Value: "x"}, nil, 303, ""},
		{"no cookie", "GET", "/api/status", "", nil, nil, 401, "log in at /login"},
		{"logged in asks for the form", "GET", "/login?next=/dashboard", "", session, nil, 303, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, tc.method, base+tc.target, tc.body, tc.cookie, tc.header...)
			if status != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s: %d, want %d with %q\n%.500s", tc.method, tc.target, status, tc.status, tc.want, body)
			}
		})
	}

	status, hdr, _ = do(t, "POST", base+"/logout", "", session, origin...)
	if cleared := sessionCookieOf(t, hdr); status != http.StatusSeeOther || hdr.Get("Location") != "/login" || cleared == nil || cleared.MaxAge >= 0 {
		t.Fatalf("logout: %d to %q, cookie %+v", status, hdr.Get("Location"), cleared)
	}
	if status, _, _ := do(t, "GET", base+"/api/status", "", session); status != http.StatusUnauthorized {
		t.Fatalf("the session still works after logout: %d", status)
	}
}

// TestLoginRedirectStaysLocal: the page a login returns to is a path on
// this node, whatever next says.
func TestLoginRedirectStaysLocal(t *testing.T) {
	tests := []struct{ next, want string }{
		{"/dashboard", "/dashboard"},
		{"/?q=harbour&page=2", "/?q=harbour&page=2"},
		{"", "/"},
		{"//evil.example/", "/"},
		{"///evil.example/", "/"},
		{`/\evil.example/`, "/"},
		{"https://evil.example/", "/"},
		{"http:evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"evil.example", "/"},
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/login?next=//evil.example", "/"},
		{"/" + strings.Repeat("a", 9000), "/"},
	}
	cfg := testConfig(t)
	cfg.HTTPToken = testToken
	_, srv := newHandlerNode(t, cfg)
	for _, tc := range tests {
		t.Run(tc.next[:min(len(tc.next), 40)], func(t *testing.T) {
			if got := safeNext(tc.next); got != tc.want {
				t.Errorf("safeNext(%q) = %q, want %q", tc.next, got, tc.want)
			}
			if len(tc.next) > maxLoginBody/2 {
				return // the form itself would be too large
			}
			status, hdr, _ := do(t, "POST", srv.URL+"/login", url.Values{"token": {testToken}, "next": {tc.next}}.Encode(), nil)
			if status != http.StatusSeeOther || hdr.Get("Location") != tc.want {
				t.Errorf("login with next=%q: %d to %q, want %q", tc.next, status, hdr.Get("Location"), tc.want)
			}
		})
	}
}

// TestFailedLoginsAreThrottled: after loginBurst wrong tokens a client is
// answered 429 with Retry-After, even with the right token, while other
// clients log in as usual.
func TestFailedLoginsAreThrottled(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPToken = testToken
	n, _ := newHandlerNode(t, cfg)
	h := n.Handler()
	login := func(remote, token string) *httptest.ResponseRecorder {
		return serveAs(h, sweepCase{method: "POST", target: "/login", body: url.Values{"token": {token}}.Encode(),
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, remote, "sou.lan")
	}
	const guesser, other = "203.0.113.5:1000", "203.0.113.6:1000"
	for i := range loginBurst {
		if rec := login(guesser, "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, rec.Code)
		}
	}
	for _, token := range []string{"guess", testToken} {
		rec := login(guesser, token)
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || sessionCookieOf(t, rec.Header()) != nil {
			t.Fatalf("attempt after %d failures: %d, Retry-After %q", loginBurst, rec.Code, rec.Header().Get("Retry-After"))
		}
	}
	if rec := login("203.0.113.5:2000", testToken); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("the same address from another port: %d, want 429", rec.Code)
	}
	if rec := login(other, testToken); rec.Code != http.StatusSeeOther || sessionCookieOf(t, rec.Header()) == nil {
		t.Fatalf("another client: %d, want a session", rec.Code)
	}
	// Over TLS the cookie is Secure.
	req := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.RemoteAddr, req.TLS = "203.0.113.7:1000", &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if c := sessionCookieOf(t, rec.Header()); c == nil || !c.Secure {
		t.Fatalf("login over TLS: cookie %+v, want Secure", c)
	}
	// Without a token there is nothing to log in to.
	plain, _ := newHandlerNode(t, testConfig(t))
	if rec := serveAs(plain.Handler(), sweepCase{method: "GET", target: "/login"}, loopbackClient, "localhost"); rec.Code != http.StatusNotFound {
		t.Fatalf("GET /login without a token: %d, want 404", rec.Code)
	}
}

func TestSessionStore(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := newSessionStore(time.Hour, 3)
	var values []string
	for i := range 4 {
		v, err := s.create(now.Add(time.Duration(i) * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
	}
	tests := []struct {
		name  string
		value string
		at    time.Time
		want  bool
	}{
		{"the oldest was evicted at the bound", values[0], now, false},
		{"live", values[1], now.Add(time.Minute), true},
		{"newest", values[3], now.Add(time.Minute), true},
		{"unknown", strings.Repeat("A", 43), now, false},
		{"wrong length", values[2] + "A", now, false},
		{"expired", values[2], now.Add(2 * time.Hour), false},
		{"expired stays gone", values[2], now, false},
	}
	for _, tc := range tests {
		if got := s.valid(tc.value, tc.at); got != tc.want {
			t.Errorf("%s: valid = %v, want %v", tc.name, got, tc.want)
		}
	}
	s.remove(values[3])
	if s.valid(values[3], now) {
		t.Error("a removed session is still valid")
	}
}
