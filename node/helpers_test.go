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
func runNode(t *testing.T, cfg Config) (*Node, string) {
	t.Helper()
	n, base, stop := startNode(t, cfg)
	t.Cleanup(stop)
	return n, base
}

// startNode is runNode with the stop in the caller's hands: stop ends Run
// and waits for it (it may be called more than once), so that a test can
// start another node on the same data directory.
func startNode(t *testing.T, cfg Config) (_ *Node, base string, stop func()) {
	t.Helper()
	cfg.HTTPAddr = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	n, err := New(ctx, cfg, quietLogger())
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
