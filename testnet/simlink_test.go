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
			ha, hb, _ := linkedSimHosts(t, tc.latency)
			got := make(chan []byte, 1)
			hb.SetStreamHandler("/test/1", func(s network.Stream) {
				data, _ := io.ReadAll(s)
				got <- data
				_ = s.Close()
			})
			s, err := ha.NewStream(ctx, hb.ID(), "/test/1")
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

// TestSimStreamCountsMessages: a message is a run of writes on a stream
// end between reads, so three exchanges on one long-lived stream (a
// pipe) count six messages, as three streams of one exchange each would.
func TestSimStreamCountsMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ha, hb, tr := linkedSimHosts(t, time.Millisecond)
	hb.SetStreamHandler("/test/pipe", func(s network.Stream) {
		buf := make([]byte, 4)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				_ = s.Close()
				return
			}
			// A response in two writes is one message.
			if _, err := s.Write(buf[:2]); err != nil {
				return
			}
			if _, err := s.Write(buf[2:]); err != nil {
				return
			}
		}
	})
	s, err := ha.NewStream(ctx, hb.ID(), "/test/pipe")
	if err != nil {
		t.Fatal(err)
	}
	const exchanges = 3
	for i := range exchanges {
		req := []byte{byte(i), 1, 2, 3}
		for _, part := range [][]byte{req[:1], req[1:]} {
			if _, err := s.Write(part); err != nil {
				t.Fatal(err)
			}
		}
		resp := make([]byte, 4)
		if _, err := io.ReadFull(s, resp); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(resp, req) {
			t.Fatalf("exchange %d: response %v, want %v", i, resp, req)
		}
	}
	_ = s.Close()
	got := tr.snapshot()[classOther]
	if got.Streams != 2 || got.Messages != 2*exchanges || got.Writes != 4*exchanges {
		t.Fatalf("counted %+v, want 2 stream ends, %d messages, %d writes", got, 2*exchanges, 4*exchanges)
	}
}

// linkedSimHosts is two simulator hosts on one mocknet, linked with the
// given one-way latency and connected, and their traffic tally; all
// closed when the test ends.
func linkedSimHosts(t *testing.T, latency time.Duration) (a, b *simHost, tr *traffic) {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { mn.Close() })
	ha, err := genSimPeer(mn)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := genSimPeer(mn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mn.LinkPeers(ha.ID(), hb.ID()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	tr = newTraffic(0, func(peer.ID, peer.ID) time.Duration { return latency }, done)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ha.Connect(ctx, peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return &simHost{Host: ha, t: tr}, &simHost{Host: hb, t: tr}, tr
}
