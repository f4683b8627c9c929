package p2p

import (
	"bufio"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// streamsTo counts the open streams of proto on h's connections to p.
func streamsTo(h host.Host, p peer.ID, proto protocol.ID) int {
	n := 0
	for _, c := range h.Network().ConnsToPeer(p) {
		for _, s := range c.GetStreams() {
			if s.Protocol() == proto {
				n++
			}
		}
	}
	return n
}

func TestPipes(t *testing.T) {
	tests := []struct {
		name string
		// receiver and sender config; noPipes removes the receiver's pipe
		// handlers before the sender meets it (a node that predates them).
		receiver, sender func(*Config)
		noPipes          bool
		// pause between the requests.
		pause time.Duration
		// wantIdle: pipes the sender keeps idle after the requests.
		wantIdle int
	}{
		{name: "one pipe carries every request", wantIdle: 1},
		{name: "a peer without pipes gets one stream per request", noPipes: true, wantIdle: 0},
		{
			// The receiver closes an idle pipe long before the sender
			// would: the next request finds it closed and goes on a new one.
			name:     "a pipe the receiver closed is replaced",
			receiver: func(c *Config) { c.StreamIdleTimeout = 50 * time.Millisecond },
			pause:    time.Second,
			wantIdle: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := startNode(t, tc.receiver, nil)
			var got atomic.Int64
			b.SetDeliverHandler("t", func(context.Context, peer.ID, []byte) error { got.Add(1); return nil })
			if tc.noPipes {
				for _, pipe := range b.pipeOf {
					b.h.RemoveStreamHandler(pipe)
				}
			}
			a := startNode(t, tc.sender, []*testNode{b})
			waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
			const requests = 12
			for i := range requests {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				// callParts, not Send, which retries on its own.
				_, _, err := a.callParts(ctx, b.ID(), a.protoDeliver, deliverHead("t"), []byte{byte(i)})
				cancel()
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				time.Sleep(tc.pause)
			}
			if got.Load() != requests {
				t.Fatalf("handler ran %d times, want %d", got.Load(), requests)
			}
			if n := a.pipes.count(); n != tc.wantIdle {
				t.Fatalf("%d idle pipes, want %d", n, tc.wantIdle)
			}
			pipe := a.pipeOf[a.protoDeliver]
			waitFor(t, 5*time.Second, "the streams left open", func() bool {
				return streamsTo(a.h, b.ID(), pipe) == tc.wantIdle && streamsTo(a.h, b.ID(), a.protoDeliver) == 0
			})
		})
	}
}

// openPipe opens a raw pipe stream of proto from h to target.
func openPipe(t *testing.T, h host.Host, target *testNode, proto protocol.ID) (network.Stream, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := h.NewStream(ctx, target.ID(), proto)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Reset() })
	return s, bufio.NewReader(s)
}

// pipeExchange writes one framed request on s and reads its response.
func pipeExchange(s network.Stream, br *bufio.Reader, payload []byte) (status byte, err error) {
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Write(framed(payload)); err != nil {
		return 0, err
	}
	frame, err := readFrame(br, 1<<20)
	if err != nil {
		return 0, err
	}
	status, _, err = decodeResponse(frame)
	return status, err
}

// A member's pipe passes every check a new stream does, at every request:
// a flood of requests on one pipe is throttled, a pipe left idle is
// closed, and a peer that stops being a member is cut off mid-pipe.
func TestHostilePipes(t *testing.T) {
	victim := startNode(t, func(c *Config) {
		patient(c)
		c.PeerRate, c.PeerBurst = 1, 20
		c.StreamIdleTimeout = 200 * time.Millisecond
	}, nil)
	victim.SetDeliverHandler("t", func(context.Context, peer.ID, []byte) error { return nil })
	pipe := victim.pipeOf[victim.protoDeliver]
	streamsOf := func(p peer.ID) int {
		victim.limits.mu.Lock()
		defer victim.limits.mu.Unlock()
		if l := victim.limits.limiters[p]; l != nil {
			return l.streams
		}
		return 0
	}

	t.Run("flood on one pipe", func(t *testing.T) {
		attacker := attackerHost(t, victim)
		s, br := openPipe(t, attacker, victim, pipe)
		before := victim.Stats().ThrottleEvents
		served := 0
		for ; served < 100; served++ {
			if _, err := pipeExchange(s, br, encodeDeliver("t", []byte("x"))); err != nil {
				break
			}
		}
		if served >= 100 || served < 10 {
			t.Fatalf("%d requests served on one pipe at a burst of 20", served)
		}
		if victim.Stats().ThrottleEvents == before {
			t.Fatal("the flooding peer was not throttled")
		}
	})

	t.Run("idle pipe closed", func(t *testing.T) {
		attacker := attackerHost(t, victim)
		s, br := openPipe(t, attacker, victim, pipe)
		if status, err := pipeExchange(s, br, encodeDeliver("t", []byte("x"))); err != nil || status != statusOK {
			t.Fatalf("first request: status %d, %v", status, err)
		}
		if n := streamsOf(attacker.ID()); n != 1 {
			t.Fatalf("victim counts %d streams of the attacker, want 1", n)
		}
		waitFor(t, 5*time.Second, "the idle pipe closed", func() bool { return streamsOf(attacker.ID()) == 0 })
		if _, err := pipeExchange(s, br, encodeDeliver("t", []byte("x"))); err == nil {
			t.Fatal("a request on the closed pipe was answered")
		}
	})

	t.Run("member no more", func(t *testing.T) {
		attacker := attackerHost(t, victim)
		before := victim.Stats().NonMemberStreams
		// The attacker's heartbeats readmit it within a heartbeat; a
		// request that raced one is tried again on a new pipe.
		for attempt := 0; ; attempt++ {
			s, br := openPipe(t, attacker, victim, pipe)
			if status, err := pipeExchange(s, br, encodeDeliver("t", []byte("x"))); err != nil || status != statusOK {
				t.Fatalf("first request: status %d, %v", status, err)
			}
			victim.mem.mu.Lock()
			delete(victim.mem.members, attacker.ID())
			victim.mem.mu.Unlock()
			_, err := pipeExchange(s, br, encodeDeliver("t", []byte("x")))
			if err != nil {
				break
			}
			if !victim.mem.isMember(attacker.ID()) || attempt == 4 {
				t.Fatal("a request from a peer that is no longer a member was answered")
			}
			waitFor(t, 5*time.Second, "the attacker readmitted", func() bool { return victim.mem.isMember(attacker.ID()) })
		}
		if victim.Stats().NonMemberStreams == before {
			t.Fatal("the refusal was not counted")
		}
	})
}

// BenchmarkDeliver sends small deliveries to another member from as many
// goroutines as there are cores, on pipes and on one stream per request
// (the receiver's pipe handlers removed), and reports the CPU of the
// whole process, both nodes, per delivery.
//
//	go test -run '^$' -bench BenchmarkDeliver -count 6 ./p2p/
func BenchmarkDeliver(b *testing.B) {
	unlimited := func(c *Config) { c.PeerRate, c.PeerBurst = 1e9, 1e9 }
	for _, path := range []string{"pipe", "stream"} {
		b.Run("path="+path, func(b *testing.B) {
			to := startNode(b, unlimited, nil)
			to.SetDeliverHandler("t", func(context.Context, peer.ID, []byte) error { return nil })
			if path == "stream" {
				for _, pipe := range to.pipeOf {
					to.h.RemoveStreamHandler(pipe)
				}
			}
			from := startNode(b, unlimited, []*testNode{to})
			waitFor(b, 10*time.Second, "membership", func() bool { return knows(from, to.ID()) && knows(to, from.ID()) })
			payload := make([]byte, 600)
			before := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := from.Send(context.Background(), to.ID(), "t", payload); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/delivery")
		})
	}
}
