package simweb

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func startWeb(t *testing.T, cfg Config) *Web {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return w
}

// dnsClient is an HTTP client that resolves every host through the web's
// own DNS server, as a crawler would, and never follows redirects.
func dnsClient(w *Web, timeout time.Duration) *http.Client {
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, w.DNSAddr())
	}}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := res.LookupIP(ctx, "ip4", host)
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp4", net.JoinHostPort(ips[0].String(), port))
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: dial, DisableCompression: true, MaxIdleConnsPerHost: 4,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type fetched struct {
	status int
	header http.Header
	body   []byte
}

// maxTestBody caps bodies read by tests (the huge page is 11 MB).
const maxTestBody = 12 << 20

func get(c *http.Client, u string) (fetched, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return fetched{}, err
	}
	req.Header.Set("User-Agent", "sou-test")
	resp, err := c.Do(req)
	if err != nil {
		return fetched{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxTestBody))
	if err != nil {
		return fetched{}, fmt.Errorf("read %s: %w", u, err)
	}
	return fetched{resp.StatusCode, resp.Header, b}, nil
}

// getRetry retries 429 and 503 answers that carry Retry-After, without
// waiting (the web only refuses first requests).
func getRetry(c *http.Client, u string) (fetched, error) {
	var f fetched
	var err error
	for i := 0; i < 4; i++ {
		f, err = get(c, u)
		if err != nil || (f.status != 429 && f.status != 503) || f.header.Get("Retry-After") == "" {
			return f, err
		}
	}
	return f, err
}

func hostClasses(tr *Truth, host string) map[string]bool {
	h, _ := tr.Host(host)
	out := map[string]bool{}
	for _, c := range h.Classes {
		out[c] = true
	}
	return out
}

func stripPort(u, suffix string) string {
	if suffix == "" {
		return u
	}
	return strings.ReplaceAll(u, suffix+"/", "/")
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	return u
}
