package node

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"sou/crawl"
)

// testConfig is a node that stays on loopback and finds no one by mDNS.
func testConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		DataDir:  t.TempDir(),
		HTTPAddr: "127.0.0.1:0",
		Network:  "sou-test",
		Listen:   []string{"/ip4/127.0.0.1/tcp/0"},
		MDNS:     false,
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newHandlerNode opens a real node (Badger, index, libp2p, crawler) without
// running its loops, serving its Handler through httptest.
func newHandlerNode(t *testing.T, cfg Config) (*Node, *httptest.Server) {
	t.Helper()
	n, err := New(context.Background(), cfg, quietLogger())
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() {
		srv.Close()
		n.closeAll()
	})
	return n, srv
}

// runNode starts a node with Run on a free loopback port and returns its
// base URL; the node stops when the test ends.
func runNode(t *testing.T, cfg Config, opts ...Option) (*Node, string) {
	t.Helper()
	n, base, stop := startNode(t, cfg, opts...)
	t.Cleanup(stop)
	return n, base
}

// startNode is runNode with the stop in the caller's hands: stop ends Run
// and waits for it (it may be called more than once), so that a test can
// start another node on the same data directory.
func startNode(t *testing.T, cfg Config, opts ...Option) (_ *Node, base string, stop func()) {
	t.Helper()
	cfg.HTTPAddr = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	n, err := New(ctx, cfg, quietLogger(), opts...)
	if err != nil {
		cancel()
		t.Fatalf("node.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("Run did not return 20 s after cancel")
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.HTTPAddr() == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	base = "http://" + n.HTTPAddr()
	for {
		resp, err := http.Get(base + "/api/status")
		if err == nil {
			resp.Body.Close()
			return n, base, stop
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("node HTTP API at %s not up after 10 s: %v", base, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bootstrapAddrs are n's listen addresses as bootstrap peers.
func bootstrapAddrs(n *Node) []string {
	var boot []string
	for _, a := range n.net.Addrs() {
		boot = append(boot, a.String()+"/p2p/"+n.PeerID())
	}
	return boot
}

// waitMembers waits until each node sees want members.
func waitMembers(t *testing.T, want int, nodes ...*Node) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for len(n.net.Members()) < want {
			if time.Now().After(deadline) {
				t.Fatalf("node %s sees %d members after 30 s", n.PeerID(), len(n.net.Members()))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// htmlPage is a fetched 200 HTML page of host at path, ready to Store.
func htmlPage(host, path, title, text string) *crawl.Page {
	p := &crawl.Page{
		URL: "http://" + host + path, Host: host, Status: 200, FetchedAt: time.Now(),
		ContentType: "text/html", Title: title, Text: text,
	}
	p.ContentHash = crawl.ContentHash(p.Text)
	return p
}
