package crawl

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
)

func newTestFetcher(t *testing.T, mod func(*FetcherConfig)) *Fetcher {
	t.Helper()
	cfg := DefaultFetcherConfig()
	cfg.AllowLoopback = true
	cfg.ConnectTimeout = time.Second
	cfg.FirstByteTimeout = 2 * time.Second
	cfg.TotalTimeout = 5 * time.Second
	if mod != nil {
		mod(&cfg)
	}
	r := NewResolver(ResolverConfig{Server: "127.0.0.1:1", Timeout: time.Second})
	f := NewFetcher(cfg, r)
	t.Cleanup(func() { f.Close(); r.Close() })
	return f
}

func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func fetchPath(t *testing.T, f *Fetcher, srv *httptest.Server, path string) (*FetchResponse, error) {
	t.Helper()
	return f.Fetch(context.Background(), FetchRequest{URL: mustURL(t, srv.URL+path)})
}

var fetchTestPage = []byte(strings.Repeat("<p>hello 搜索 world</p>\n", 2000))

func compressed(t testing.TB, enc string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch enc {
	case "gzip":
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		_, _ = w.Write(data)
		_ = w.Close()
	case "deflate":
		w := zlib.NewWriter(&buf)
		_, _ = w.Write(data)
		_ = w.Close()
	case "rawdeflate":
		w, _ := flate.NewWriter(&buf, flate.BestSpeed)
		_, _ = w.Write(data)
		_ = w.Close()
	case "br":
		w := brotli.NewWriterLevel(&buf, 1)
		_, _ = w.Write(data)
		_ = w.Close()
	}
	return buf.Bytes()
}

func TestFetchContentEncodings(t *testing.T) {
	bodies := map[string][]byte{}
	for _, enc := range []string{"gzip", "deflate", "rawdeflate", "br"} {
		bodies[enc] = compressed(t, enc, fetchTestPage)
	}
	var gotAE, gotUA atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAE.Store(r.Header.Get("Accept-Encoding"))
		gotUA.Store(r.Header.Get("User-Agent"))
		enc := strings.TrimPrefix(r.URL.Path, "/")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch enc {
		case "identity":
			_, _ = w.Write(fetchTestPage)
			return
		case "rawdeflate":
			w.Header().Set("Content-Encoding", "deflate")
		case "garbage":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write([]byte("this is not gzip at all"))
			return
		case "corrupt":
			w.Header().Set("Content-Encoding", "gzip")
			b := bodies["gzip"]
			_, _ = w.Write(b[:len(b)/2])
			_, _ = w.Write(bytes.Repeat([]byte{0xff}, 64))
			return
		case "unknown":
			w.Header().Set("Content-Encoding", "zstd-ish")
			_, _ = w.Write([]byte("x"))
			return
		default:
			w.Header().Set("Content-Encoding", enc)
		}
		_, _ = w.Write(bodies[enc])
	}))
	defer srv.Close()
	f := newTestFetcher(t, nil)
	for _, enc := range []string{"identity", "gzip", "deflate", "rawdeflate", "br"} {
		t.Run(enc, func(t *testing.T) {
			resp, err := fetchPath(t, f, srv, "/"+enc)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != 200 || resp.Truncated || !bytes.Equal(resp.Body, fetchTestPage) {
				t.Fatalf("status %d truncated %v body %d bytes", resp.Status, resp.Truncated, len(resp.Body))
			}
			if resp.ContentType != "text/html" || resp.RemoteAddr == "" || resp.FirstByte <= 0 || resp.Duration < resp.FirstByte {
				t.Fatalf("metadata %+v", resp)
			}
		})
	}
	if gotAE.Load() != "gzip, deflate, br" || !strings.HasPrefix(gotUA.Load().(string), "sou/") {
		t.Fatalf("request headers: %v %v", gotAE.Load(), gotUA.Load())
	}
	for _, path := range []string{"/garbage", "/corrupt", "/unknown"} {
		_, err := fetchPath(t, f, srv, path)
		if ErrorClass(err) != "bad_encoding" {
			t.Errorf("%s: %v (class %q)", path, err, ErrorClass(err))
		}
	}
}

func TestFetchSizeCap(t *testing.T) {
	bomb := compressed(t, "gzip", make([]byte, 16<<20)) // 16 MiB of zeros, ~16 KiB on the wire
	brBomb := compressed(t, "br", make([]byte, 16<<20))
	huge := bytes.Repeat([]byte("a"), 3<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/bomb":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(bomb)
		case "/brbomb":
			w.Header().Set("Content-Encoding", "br")
			_, _ = w.Write(brBomb)
		case "/huge":
			_, _ = w.Write(huge)
		case "/exact":
			_, _ = w.Write(huge[:1<<20])
		}
	}))
	defer srv.Close()
	f := newTestFetcher(t, func(c *FetcherConfig) { c.MaxBodyBytes = 1 << 20 })
	for _, tc := range []struct {
		path      string
		truncated bool
	}{{"/bomb", true}, {"/brbomb", true}, {"/huge", true}, {"/exact", false}} {
		resp, err := fetchPath(t, f, srv, tc.path)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if resp.Truncated != tc.truncated || len(resp.Body) != 1<<20 {
			t.Fatalf("%s: truncated %v, %d bytes", tc.path, resp.Truncated, len(resp.Body))
		}
	}
}

func TestFetchTimeouts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slowfirst":
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
				return
			}
			_, _ = w.Write([]byte("late"))
		case "/headersonly":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/slowbig":
			// More than minTimeTruncatedBytes at once, then nothing more.
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(200)
			_, _ = w.Write(bytes.Repeat([]byte("y"), 2*minTimeTruncatedBytes))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/drip":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(200)
			for i := 0; i < 100; i++ {
				_, _ = w.Write([]byte("x"))
				w.(http.Flusher).Flush()
				select {
				case <-time.After(50 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	defer srv.Close()
	f := newTestFetcher(t, func(c *FetcherConfig) {
		c.FirstByteTimeout = 200 * time.Millisecond
		c.TotalTimeout = 600 * time.Millisecond
	})
	start := time.Now()
	_, err := fetchPath(t, f, srv, "/slowfirst")
	if ErrorClass(err) != "timeout" || time.Since(start) > 1800*time.Millisecond {
		t.Fatalf("slow first byte: %v (class %q) after %v", err, ErrorClass(err), time.Since(start))
	}
	start = time.Now()
	_, err = fetchPath(t, f, srv, "/headersonly")
	if ErrorClass(err) != "timeout" || time.Since(start) > 1800*time.Millisecond {
		t.Fatalf("headers and no body: %v (class %q) after %v", err, ErrorClass(err), time.Since(start))
	}
	// A trickle is a timeout: the host gets parked.
	start = time.Now()
	_, err = fetchPath(t, f, srv, "/drip")
	if ErrorClass(err) != "timeout" || time.Since(start) > 3*time.Second {
		t.Fatalf("slow drip: %v (class %q) after %v", err, ErrorClass(err), time.Since(start))
	}
	// A large body still arriving at TotalTimeout is kept as far as it
	// came: the host answers, over a slow link.
	start = time.Now()
	resp, err := fetchPath(t, f, srv, "/slowbig")
	if err != nil || time.Since(start) > 3*time.Second {
		t.Fatalf("slow large body: %v after %v", err, time.Since(start))
	}
	if !resp.TimedOut || !resp.Truncated || len(resp.Body) != 2*minTimeTruncatedBytes {
		t.Fatalf("slow large body: timed out %v, truncated %v, %d bytes", resp.TimedOut, resp.Truncated, len(resp.Body))
	}
	// The caller's own cancellation is no truncation.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if resp, err := f.Fetch(ctx, FetchRequest{URL: mustURL(t, srv.URL+"/slowbig")}); err == nil {
		t.Fatalf("body cancelled by the caller: a response (timed out %v, %d bytes), want an error", resp.TimedOut, len(resp.Body))
	}
}

func TestFetchRedirectsNotFollowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/dir/old":
			w.Header().Set("Location", "../New/Page?b=2&a=1#frag")
			w.WriteHeader(http.StatusMovedPermanently)
		case "/abs":
			w.Header().Set("Location", "HTTP://Other.Example:80/x")
			w.WriteHeader(http.StatusFound)
		case "/bad":
			w.Header().Set("Location", "javascript:alert(1)")
			w.WriteHeader(http.StatusFound)
		default:
			t.Errorf("redirect followed to %s", r.URL.Path)
		}
	}))
	defer srv.Close()
	f := newTestFetcher(t, nil)
	tests := []struct{ path, loc string }{
		{"/dir/old", srv.URL + "/New/Page?a=1&b=2"},
		{"/abs", "http://other.example/x"},
		{"/bad", ""},
	}
	for _, tc := range tests {
		resp, err := fetchPath(t, f, srv, tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status/100 != 3 || resp.Location != tc.loc {
			t.Errorf("%s: status %d location %q, want %q", tc.path, resp.Status, resp.Location, tc.loc)
		}
	}
}

func TestFetchConditionalAndRetryAfter(t *testing.T) {
	retryDate := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cond":
			if r.Header.Get("If-None-Match") == `"v1"` && r.Header.Get("If-Modified-Since") == "Mon, 02 Jan 2006 15:04:05 GMT" {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("ETag", `"v1"`)
			_, _ = w.Write([]byte("<p>content</p>"))
		case "/429":
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/503":
			w.Header().Set("Retry-After", retryDate)
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/503bad":
			w.Header().Set("Retry-After", "soon")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	f := newTestFetcher(t, nil)
	resp, err := fetchPath(t, f, srv, "/cond")
	if err != nil || resp.Status != 200 || resp.Header.Get("ETag") != `"v1"` {
		t.Fatalf("first fetch: %v %+v", err, resp)
	}
	resp, err = f.Fetch(context.Background(), FetchRequest{URL: mustURL(t, srv.URL+"/cond"), ETag: `"v1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"})
	if err != nil || resp.Status != 304 || len(resp.Body) != 0 || StatusClass(resp.Status) != "304" {
		t.Fatalf("conditional fetch: %v %+v", err, resp)
	}
	resp, err = fetchPath(t, f, srv, "/429")
	if err != nil || resp.RetryAfter != 120*time.Second || StatusClass(resp.Status) != "429" {
		t.Fatalf("429: %v %+v", err, resp)
	}
	resp, err = fetchPath(t, f, srv, "/503")
	if err != nil || resp.RetryAfter < 80*time.Second || resp.RetryAfter > 91*time.Second {
		t.Fatalf("503 date: %v %v", err, resp.RetryAfter)
	}
	resp, err = fetchPath(t, f, srv, "/503bad")
	if err != nil || resp.RetryAfter != 0 {
		t.Fatalf("503 bad: %v %v", err, resp.RetryAfter)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{" 30 ", 30 * time.Second},
		{"99999999999", 7 * 24 * time.Hour},
		{"Thu, 01 Jan 2026 12:02:00 GMT", 2 * time.Minute},
		{"Thursday, 01-Jan-26 12:01:00 GMT", time.Minute},
		{"Thu Jan  1 12:00:30 2026", 30 * time.Second},
		{"Wed, 31 Dec 2025 12:00:00 GMT", 0},
		{"later", 0},
	}
	for _, tc := range tests {
		if got := parseRetryAfter(tc.v, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestFetchContentTypeFilterAndKeepAlive(t *testing.T) {
	var newConns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/img":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(bytes.Repeat([]byte{0x89}, 1<<20))
		case "/sitemap.xml.gz", "/blob":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write([]byte("sitemap bytes"))
		default:
			w.Header().Set("Content-Type", "text/html; charset=gbk")
			_, _ = w.Write([]byte("<title>x</title>"))
		}
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	f := newTestFetcher(t, nil)
	resp, err := fetchPath(t, f, srv, "/img")
	if err != nil || !resp.Skipped || resp.Body != nil || resp.ContentType != "image/png" {
		t.Fatalf("image: %v %+v", err, resp)
	}
	resp, err = fetchPath(t, f, srv, "/sitemap.xml.gz")
	if err != nil || resp.Skipped || string(resp.Body) != "sitemap bytes" {
		t.Fatalf("octet-stream sitemap: %v %+v", err, resp)
	}
	resp, err = fetchPath(t, f, srv, "/blob")
	if err != nil || !resp.Skipped {
		t.Fatalf("octet-stream blob: %v %+v", err, resp)
	}
	before := newConns.Load()
	for i := 0; i < 5; i++ {
		resp, err := fetchPath(t, f, srv, "/page"+strconv.Itoa(i))
		if err != nil || resp.Skipped || string(resp.Body) != "<title>x</title>" {
			t.Fatalf("page: %v %+v", err, resp)
		}
	}
	if got := newConns.Load() - before; got > 1 {
		t.Fatalf("%d new connections for 5 sequential fetches, want at most 1 (keep-alive)", got)
	}
}

func TestFetchAddressPolicy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("inside"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(mustURL(t, srv.URL).Host)
	dnsSrv := startTestDNS(t, map[string]testDNSRecord{
		"rebind.test":  {a: []string{"127.0.0.1"}, ttl: 300},
		"private.test": {a: []string{"10.1.2.3"}, aaaa: []string{"fd00::1"}, ttl: 300},
	})
	newF := func(loopback bool) *Fetcher {
		cfg := DefaultFetcherConfig()
		cfg.AllowLoopback = loopback
		cfg.ConnectTimeout = 500 * time.Millisecond
		r := NewResolver(ResolverConfig{Server: dnsSrv.addr, Timeout: time.Second})
		f := NewFetcher(cfg, r)
		t.Cleanup(func() { f.Close(); r.Close() })
		return f
	}
	strict := newF(false)
	for _, raw := range []string{
		"http://rebind.test:" + port + "/",
		"http://127.0.0.1:" + port + "/",
		"http://[::1]:" + port + "/",
		"http://private.test:" + port + "/",
		"http://169.254.169.254/latest/meta-data/",
		"http://0.0.0.0:" + port + "/",
	} {
		_, err := strict.Fetch(context.Background(), FetchRequest{URL: mustURL(t, raw)})
		if ErrorClass(err) != "blocked_ip" {
			t.Errorf("%s: %v (class %q), want blocked_ip", raw, err, ErrorClass(err))
		}
	}
	// Allowed loopback through our resolver: the DNS path really dials.
	resp, err := newF(true).Fetch(context.Background(), FetchRequest{URL: mustURL(t, "http://rebind.test:"+port+"/")})
	if err != nil || string(resp.Body) != "inside" {
		t.Fatalf("allowed loopback via DNS: %v", err)
	}
	if _, err := newF(true).Fetch(context.Background(), FetchRequest{URL: mustURL(t, "http://nxdomain.test:"+port+"/")}); ErrorClass(err) != "dns_nxdomain" {
		t.Fatalf("nxdomain: %v (class %q)", err, ErrorClass(err))
	}
}

func TestFetchConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f := newTestFetcher(t, nil)
	_, err = f.Fetch(context.Background(), FetchRequest{URL: mustURL(t, "http://"+addr+"/")})
	if ErrorClass(err) != "connect" {
		t.Fatalf("%v (class %q)", err, ErrorClass(err))
	}
}

func TestStatusClass(t *testing.T) {
	tests := map[int]string{200: "2xx", 206: "2xx", 301: "3xx", 304: "304", 404: "404", 410: "410",
		429: "429", 400: "4xx", 403: "403", 500: "5xx", 503: "503", 0: "status_other", 999: "status_other"}
	for status, want := range tests {
		if got := StatusClass(status); got != want {
			t.Errorf("StatusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestFetchMalformedResponses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	replies := map[string]string{
		"/garbage": "HELLO THERE\r\n\r\n",
		"/close":   "",
		"/chunked": "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
		"/short":   "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\nonly a little",
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				buf := make([]byte, 4096)
				n, _ := c.Read(buf)
				line := string(buf[:n])
				for path, reply := range replies {
					if strings.HasPrefix(line, "GET "+path+" ") {
						_, _ = c.Write([]byte(reply))
					}
				}
			}(c)
		}
	}()
	f := newTestFetcher(t, nil)
	want := map[string]string{"/garbage": "protocol", "/close": "reset", "/chunked": "protocol", "/short": "reset"}
	for path, class := range want {
		_, err := f.Fetch(context.Background(), FetchRequest{URL: mustURL(t, "http://"+ln.Addr().String()+path)})
		if got := ErrorClass(err); got != class {
			t.Errorf("%s: %v (class %q), want %q", path, err, got, class)
		}
	}
}

func TestFetchIPv6AndAddressFallback(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	v4 := httptest.NewServer(handler)
	defer v4.Close()
	_, port, _ := net.SplitHostPort(mustURL(t, v4.URL).Host)
	dnsSrv := startTestDNS(t, map[string]testDNSRecord{
		// ::1 on v4's port has no listener: the dial must fall back to 127.0.0.1.
		"dual.test": {a: []string{"127.0.0.1"}, aaaa: []string{"::1"}, ttl: 300},
	})
	cfg := DefaultFetcherConfig()
	cfg.AllowLoopback = true
	r := NewResolver(ResolverConfig{Server: dnsSrv.addr, Timeout: time.Second, PreferIPv6: true})
	f := NewFetcher(cfg, r)
	defer func() { f.Close(); r.Close() }()
	resp, err := f.Fetch(context.Background(), FetchRequest{URL: mustURL(t, "http://dual.test:"+port+"/")})
	if err != nil || string(resp.Body) != "ok" || !strings.HasPrefix(resp.RemoteAddr, "127.0.0.1:") {
		t.Fatalf("fallback: %v %+v", err, resp)
	}

	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	v6 := httptest.NewUnstartedServer(handler)
	v6.Listener = ln
	v6.Start()
	defer v6.Close()
	resp, err = f.Fetch(context.Background(), FetchRequest{URL: mustURL(t, v6.URL+"/")})
	if err != nil || string(resp.Body) != "ok" || !strings.HasPrefix(resp.RemoteAddr, "[::1]:") {
		t.Fatalf("IPv6: %v %+v", err, resp)
	}
}
