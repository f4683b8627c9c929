package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"sou/index"
)

// BenchmarkSearchHandler measures GET /api/search in-process on a lone node
// with 200 pages, three ways: through the whole Handler (route table and
// guard), through the guard's wrappers alone (security headers, Host
// check, access rule, concurrency limit) and through the bare search
// handler. "cached" answers from the result cache, where the guard's share
// is largest; "uncached" runs the search each time.
func BenchmarkSearchHandler(b *testing.B) {
	ctx := context.Background()
	for _, token := range []string{"", testToken} {
		cfg := Config{DataDir: b.TempDir(), HTTPAddr: "127.0.0.1:0", Network: "sou-bench", Listen: []string{"/ip4/127.0.0.1/tcp/0"}, HTTPToken: token}
		n, err := New(ctx, cfg, quietLogger())
		if err != nil {
			b.Fatal(err)
		}
		for i := range 200 {
			body := fmt.Sprintf("Page %d tells about the harbour lighthouse number %d. filler%d words", i, i, i)
			doc := &index.Document{URL: fmt.Sprintf("http://docs.example/page/%d", i), Host: "docs.example", Title: fmt.Sprintf("Harbour guide %d", i),
				Body: body, Status: 200, FetchedAt: time.Now(), ContentType: "text/html", Raw: []byte("<html><body>" + body + "</body></html>")}
			if err := n.ix.Put(ctx, doc); err != nil {
				b.Fatal(err)
			}
		}
		if err := n.ix.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		g := newHTTPGuard(cfg)
		handler, guardOnly, bare := n.Handler(), g.serve(g.public(g.limited(n.handleSearch))), http.HandlerFunc(n.handleSearch)
		name := "no token"
		if token != "" {
			name = "token"
		}
		for _, path := range []struct {
			name string
			h    http.Handler
		}{{"handler", handler}, {"guard", guardOnly}, {"bare", bare}} {
			for _, cached := range []bool{true, false} {
				sub := fmt.Sprintf("%s/%s/cached=%v", name, path.name, cached)
				b.Run(sub, func(b *testing.B) {
					for b.Loop() {
						if !cached {
							n.coord.Invalidate()
						}
						req := httptest.NewRequest("GET", "/api/search?q=harbour+lighthouse", nil)
						req.RemoteAddr, req.Host = loopbackClient, "localhost:7070"
						if token != "" {
							req.Header.Set("Authorization", "Bearer "+testToken)
						}
						rec := httptest.NewRecorder()
						path.h.ServeHTTP(rec, req)
						if rec.Code != 200 {
							b.Fatalf("%d %s", rec.Code, rec.Body)
						}
					}
				})
			}
		}
		n.closeAll()
	}
}

// BenchmarkGuard is the guard's own cost per request: its wrappers
// (security headers, Host check, access rule, session lookup, concurrency
// limit) around a handler that writes a small JSON answer, against that
// handler alone.
func BenchmarkGuard(b *testing.B) {
	answer := func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, map[string]int{"ok": 1}) }
	for _, tc := range []struct {
		name, token, auth string
		cookie            bool
	}{
		{"no token", "", "", false},
		{"bearer token", testToken, "Bearer " + testToken, false},
		{"session cookie", testToken, "", true},
	} {
		g := newHTTPGuard(Config{HTTPAddr: "127.0.0.1:7070", HTTPToken: tc.token})
		var session string
		if tc.cookie {
			var err error
			if session, err = g.sessions.create(time.Now()); err != nil {
				b.Fatal(err)
			}
		}
		for _, path := range []struct {
			name string
			h    http.Handler
		}{{"guarded", g.serve(g.public(g.limited(answer)))}, {"bare", http.HandlerFunc(answer)}} {
			b.Run(tc.name+"/"+path.name, func(b *testing.B) {
				for b.Loop() {
					req := httptest.NewRequest("GET", "/api/search?q=harbour", nil)
					req.RemoteAddr, req.Host = loopbackClient, "localhost:7070"
					if tc.auth != "" {
						req.Header.Set("Authorization", tc.auth)
					}
					if session != "" {
						req.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
					}
					rec := httptest.NewRecorder()
					path.h.ServeHTTP(rec, req)
					if rec.Code != 200 {
						b.Fatalf("%d %s", rec.Code, rec.Body)
					}
				}
			})
		}
	}
}
