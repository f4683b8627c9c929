package testnet

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Traffic classes of the simulator's links, by libp2p protocol.
const (
	classURLs    = "urls"    // URL forwarding (/sou/<net>/urls)
	classSearch  = "search"  // shard requests and answers (/sou/<net>/search)
	classDeliver = "deliver" // handoff, replication, manifests (/sou/<net>/deliver)
	classClaim   = "claim"   // near-duplicate claims (/sou/<net>/claim)
	classPubsub  = "pubsub"  // membership heartbeats (gossipsub)
	classDHT     = "dht"     // Kademlia
	classOther   = "other"
)

var trafficClasses = []string{classURLs, classSearch, classDeliver, classClaim, classPubsub, classDHT, classOther}

func classOf(p protocol.ID) string {
	s := string(p)
	switch {
	case strings.HasSuffix(s, "/urls/1.0.0"):
		return classURLs
	case strings.HasSuffix(s, "/search/1.0.0"):
		return classSearch
	case strings.HasSuffix(s, "/deliver/1.0.0"):
		return classDeliver
	case strings.HasSuffix(s, "/claim/1.0.0"):
		return classClaim
	case strings.Contains(s, "meshsub"), strings.Contains(s, "floodsub"):
		return classPubsub
	case strings.Contains(s, "/kad/"):
		return classDHT
	}
	return classOther
}

// trafficCounter counts, for one class, the streams opened and the writes
// and bytes written on them, at the application's side of the stream
// (libp2p framing below the stream — yamux, noise, TCP/IP — is not
// counted; mocknet has none).
type trafficCounter struct {
	streams, writes, bytes, lossDelays atomic.Uint64
}

// TrafficCount is one class's totals.
type TrafficCount struct {
	Streams uint64 `json:"streams"`
	Writes  uint64 `json:"writes"`
	Bytes   uint64 `json:"bytes"`
	// LossDelays is how many writes were held back one retransmission
	// timeout by the emulated packet loss.
	LossDelays uint64 `json:"loss_delays"`
}

// traffic is the simulator's whole-network tally plus the loss model.
type traffic struct {
	counters map[string]*trafficCounter
	// loss is the per-packet loss probability; latency gives the one-way
	// latency between two peers, for the retransmission timeout.
	loss    float64
	latency func(a, b peer.ID) time.Duration
	// done ends loss sleeps when the simulation stops.
	done <-chan struct{}
}

func newTraffic(loss float64, latency func(a, b peer.ID) time.Duration, done <-chan struct{}) *traffic {
	t := &traffic{counters: map[string]*trafficCounter{}, loss: loss, latency: latency, done: done}
	for _, c := range trafficClasses {
		t.counters[c] = &trafficCounter{}
	}
	return t
}

func (t *traffic) snapshot() map[string]TrafficCount {
	out := map[string]TrafficCount{}
	for name, c := range t.counters {
		out[name] = TrafficCount{Streams: c.streams.Load(), Writes: c.writes.Load(), Bytes: c.bytes.Load(), LossDelays: c.lossDelays.Load()}
	}
	return out
}

// simHost wraps a mocknet host so that every stream the node's p2p layer
// (its protocols, gossipsub and the DHT) opens or accepts is counted and
// goes through the loss model. Identify and ping, run by the inner host
// itself, are neither.
type simHost struct {
	host.Host
	t *traffic
}

func (h *simHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	return h.wrap(s), nil
}

func (h *simHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, func(s network.Stream) { handler(h.wrap(s)) })
}

func (h *simHost) SetStreamHandlerMatch(pid protocol.ID, match protocol.MatchingFunc, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, match, func(s network.Stream) { handler(h.wrap(s)) })
}

func (h *simHost) wrap(s network.Stream) network.Stream {
	return &simStream{Stream: s, t: h.t, local: h.ID()}
}

// simStream counts writes and emulates loss. libp2p runs over reliable
// transports (TCP, QUIC), so an application never sees a lost packet, only
// its retransmission: a write whose packets (1460 bytes each) include a
// lost one is held back one retransmission timeout, max(200 ms, RTT) plus
// the link's RTT, and so is everything queued behind it on the stream
// (head-of-line blocking), as on a TCP connection.
type simStream struct {
	network.Stream
	t       *traffic
	local   peer.ID
	once    sync.Once
	counter *trafficCounter
}

const tcpPayloadBytes = 1460

func (s *simStream) Write(p []byte) (int, error) {
	s.once.Do(func() {
		c := s.t.counters[classOf(s.Stream.Protocol())]
		c.streams.Add(1)
		s.counter = c
	})
	if s.t.loss > 0 && len(p) > 0 {
		packets := float64((len(p) + tcpPayloadBytes - 1) / tcpPayloadBytes)
		if rand.Float64() < 1-math.Pow(1-s.t.loss, packets) {
			s.counter.lossDelays.Add(1)
			rtt := 2 * s.t.latency(s.local, s.Conn().RemotePeer())
			rto := max(200*time.Millisecond, rtt) + rtt
			timer := time.NewTimer(rto)
			select {
			case <-timer.C:
			case <-s.t.done:
				timer.Stop()
			}
		}
	}
	n, err := s.Stream.Write(p)
	s.counter.writes.Add(1)
	s.counter.bytes.Add(uint64(n))
	return n, err
}
