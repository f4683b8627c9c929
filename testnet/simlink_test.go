package testnet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// TestSimStreamDeliversInOrderAcrossIdlePumps writes bursts separated by
// pauses long enough for the stream's pump to end, then closes: every byte
// must arrive, in order, no sooner than the link latency, and the pump
// must not be left running while the stream is idle.
func TestSimStreamDeliversInOrderAcrossIdlePumps(t *testing.T) {
	cases := []struct {
		name    string
		bursts  int
		writes  int
		size    int
		latency time.Duration
		pause   time.Duration
	}{
		{"small writes", 3, 20, 16, 5 * time.Millisecond, 30 * time.Millisecond},
		{"more than a window", 2, 3 * simWindow, 100, time.Millisecond, 20 * time.Millisecond},
		{"large writes", 2, 5, 64 << 10, 2 * time.Millisecond, 20 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			mn := mocknet.New()
			defer mn.Close()
			a, err := genSimPeer(mn)
			if err != nil {
				t.Fatal(err)
			}
			b, err := genSimPeer(mn)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mn.LinkPeers(a.ID(), b.ID()); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			defer close(done)
			tr := newTraffic(0, func(peer.ID, peer.ID) time.Duration { return tc.latency }, done)
			ha, hb := &simHost{Host: a, t: tr}, &simHost{Host: b, t: tr}
			got := make(chan []byte, 1)
			hb.SetStreamHandler("/test/1", func(s network.Stream) {
				data, _ := io.ReadAll(s)
				got <- data
				_ = s.Close()
			})
			if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
				t.Fatal(err)
			}
			s, err := ha.NewStream(ctx, b.ID(), "/test/1")
			if err != nil {
				t.Fatal(err)
			}
			ss := s.(*simStream)
			var want bytes.Buffer
			start := time.Now()
			for burst := 0; burst < tc.bursts; burst++ {
				for i := 0; i < tc.writes; i++ {
					msg := bytes.Repeat([]byte(fmt.Sprintf("%d.%d;", burst, i)), tc.size/4+1)[:tc.size]
					want.Write(msg)
					if _, err := s.Write(msg); err != nil {
						t.Fatal(err)
					}
				}
				waitUntil(t, 5*time.Second, func() bool {
					ss.pumpMu.Lock()
					defer ss.pumpMu.Unlock()
					return !ss.pumping
				})
				time.Sleep(tc.pause)
			}
			if err := s.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			select {
			case data := <-got:
				if !bytes.Equal(data, want.Bytes()) {
					t.Fatalf("received %d bytes, want %d (or out of order)", len(data), want.Len())
				}
			case <-ctx.Done():
				t.Fatal("stream not delivered")
			}
			if el := time.Since(start); el < tc.latency {
				t.Fatalf("delivered in %v, under the link latency %v", el, tc.latency)
			}
		})
	}
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}
