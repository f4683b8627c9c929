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
	classClaim   = "claim"   // content claims, routed and in batches (/sou/<net>/claim, /claims)
	classPubsub  = "pubsub"  // membership heartbeats (gossipsub)
	classDHT     = "dht"     // Kademlia
	classOther   = "other"
)

var trafficClasses = []string{classURLs, classSearch, classDeliver, classClaim, classPubsub, classDHT, classOther}

func classOf(p protocol.ID) string {
	s := string(p)
	// Every version: URL batches, deliveries and claim batches have a
	// pipe version (p2p.PipeProtocolIDs) beside the one-request one.
	switch {
	case strings.Contains(s, "/urls/"):
		return classURLs
	case strings.Contains(s, "/search/"):
		return classSearch
	case strings.Contains(s, "/deliver/"):
		return classDeliver
	case strings.Contains(s, "/claim/"), strings.Contains(s, "/claims/"):
		return classClaim
	case strings.Contains(s, "meshsub"), strings.Contains(s, "floodsub"):
		return classPubsub
	case strings.Contains(s, "/kad/"):
		return classDHT
	}
	return classOther
}

// trafficCounter counts, for one class, the streams opened, the messages
// (runs of writes on a stream end between reads: one request or one
// response, on a stream of its own or on a pipe) and the writes and bytes
// written on them, at the application's side of the stream (libp2p
// framing below the stream — yamux, noise, TCP/IP — is not counted;
// mocknet has none).
type trafficCounter struct {
	streams, messages, writes, bytes, lossDelays atomic.Uint64
}

// TrafficCount is one class's totals.
type TrafficCount struct {
	Streams  uint64 `json:"streams"`
	Messages uint64 `json:"messages"`
	Writes   uint64 `json:"writes"`
	Bytes    uint64 `json:"bytes"`
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
		out[name] = TrafficCount{Streams: c.streams.Load(), Messages: c.messages.Load(), Writes: c.writes.Load(), Bytes: c.bytes.Load(), LossDelays: c.lossDelays.Load()}
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

func (h *simHost) SetStreamHandlerMatch(pid protocol.ID, match func(protocol.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, match, func(s network.Stream) { handler(h.wrap(s)) })
}

func (h *simHost) wrap(s network.Stream) network.Stream {
	return &simStream{Stream: s, t: h.t, local: h.ID()}
}

// simStream delays, counts and (optionally) loses the writes of one
// stream end. The delay is the link's one-way latency, applied as a
// pipeline: Write queues the bytes with their arrival time and returns, and
// a pump goroutine hands them to the mocknet stream when they are due, in
// order. (Mocknet's own latency makes each write of 256 bytes or more wait
// out the whole latency before the next one may start, so a stream carries
// one message per latency — a gossipsub stream under 200 nodes' heartbeats
// falls hopelessly behind, which no TCP connection would.) The queue holds
// at most simWindow writes, as a TCP window would. Mocknet still applies
// the link's bandwidth. The pump runs only while writes are queued: most
// streams (gossipsub's, the DHT's) are idle most of the time, and at 200
// nodes a pump per stream was 88,000 parked goroutines.
//
// Loss: libp2p runs over reliable transports (TCP, QUIC), so an
// application never sees a lost packet, only its retransmission: a write
// whose packets (1460 bytes each) include a lost one arrives one
// retransmission timeout later, max(200 ms, RTT) + RTT, and so does
// everything behind it on the stream (head-of-line blocking).
type simStream struct {
	network.Stream
	t     *traffic
	local peer.ID

	// mu guards the fields below and is held by Write while it waits for
	// room in the window (keeping writes in order). The pump never takes
	// it.
	mu      sync.Mutex
	counter *trafficCounter
	latency time.Duration
	queue   chan queuedWrite // nil until the first write
	closed  bool             // no more writes (Close, CloseWrite or Reset)
	lastDue time.Time
	// pumpMu guards pumping (a pump goroutine runs) and queueClosed, so
	// that a pump going idle and a Write or Close starting one cannot miss
	// each other.
	pumpMu      sync.Mutex
	pumping     bool
	queueClosed bool
	// failed is closed by the pump when the stream broke, after setting
	// err; flushed when the queue is closed and drained (or the stream
	// broke, or the simulation ended).
	failed, flushed chan struct{}
	err             error
	// readSinceWrite: the stream end read something since its last write,
	// so its next write begins a new message.
	readSinceWrite atomic.Bool
}

type queuedWrite struct {
	b   []byte
	due time.Time
}

const (
	tcpPayloadBytes = 1460
	simWindow       = 64
)

// Read marks that the next write begins a new message.
func (s *simStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	if n > 0 {
		s.readSinceWrite.Store(true)
	}
	return n, err
}

// start sets the stream end up at its first write; s.mu is held.
func (s *simStream) start() {
	s.counter = s.t.counters[classOf(s.Stream.Protocol())]
	s.counter.streams.Add(1)
	s.counter.messages.Add(1)
	s.readSinceWrite.Store(false)
	if c := s.Conn(); c != nil {
		s.latency = s.t.latency(s.local, c.RemotePeer())
	}
	s.queue = make(chan queuedWrite, simWindow)
	s.failed = make(chan struct{})
	s.flushed = make(chan struct{})
}

// ensurePump starts a pump unless one is running; called after queueing
// a write or closing the queue.
func (s *simStream) ensurePump() {
	s.pumpMu.Lock()
	defer s.pumpMu.Unlock()
	if !s.pumping {
		s.pumping = true
		go s.pump()
	}
}

// pumpIdle ends the pump when nothing is queued and the queue is open.
func (s *simStream) pumpIdle() bool {
	s.pumpMu.Lock()
	defer s.pumpMu.Unlock()
	if len(s.queue) > 0 || s.queueClosed {
		return false
	}
	s.pumping = false
	return true
}

func (s *simStream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b := append([]byte(nil), p...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, network.ErrReset
	}
	if s.queue == nil {
		s.start()
	} else if s.readSinceWrite.Swap(false) {
		s.counter.messages.Add(1)
	}
	due := time.Now().Add(s.latency)
	if s.t.loss > 0 {
		packets := float64((len(p) + tcpPayloadBytes - 1) / tcpPayloadBytes)
		if rand.Float64() < 1-math.Pow(1-s.t.loss, packets) {
			s.counter.lossDelays.Add(1)
			rtt := 2 * s.latency
			due = due.Add(max(200*time.Millisecond, rtt) + rtt)
		}
	}
	if due.Before(s.lastDue) {
		due = s.lastDue // in order, as on one connection
	}
	s.lastDue = due
	select {
	case s.queue <- queuedWrite{b: b, due: due}:
	case <-s.failed:
		return 0, s.err
	case <-s.t.done:
		return 0, network.ErrReset
	}
	s.ensurePump()
	s.counter.writes.Add(1)
	s.counter.bytes.Add(uint64(len(p)))
	return len(p), nil
}

// pump delivers queued writes when they are due. It ends when the queue
// is empty (a later Write starts another), closed (everything delivered:
// flushed), the stream breaks or the simulation ends.
func (s *simStream) pump() {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var w queuedWrite
		var ok bool
		select {
		case w, ok = <-s.queue:
		case <-s.t.done:
			close(s.flushed)
			return
		default:
			if s.pumpIdle() {
				return
			}
			continue
		}
		if !ok {
			close(s.flushed)
			return
		}
		if d := time.Until(w.due); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-s.t.done:
				close(s.flushed)
				return
			}
		}
		if _, err := s.Stream.Write(w.b); err != nil {
			s.err = err
			close(s.failed)
			close(s.flushed)
			return
		}
	}
}

// finish stops further writes and, unless reset, waits until the queued
// ones are delivered (or the stream broke, or the simulation ended).
func (s *simStream) finish(reset bool) {
	s.mu.Lock()
	flushed := s.flushed
	started := s.queue != nil
	if !s.closed {
		s.closed = true
		if started {
			s.pumpMu.Lock()
			close(s.queue)
			s.queueClosed = true
			s.pumpMu.Unlock()
		}
	}
	s.mu.Unlock()
	if started {
		s.ensurePump() // to close flushed if no pump is running
	}
	if reset || flushed == nil {
		return
	}
	select {
	case <-flushed:
	case <-s.t.done:
	}
}

func (s *simStream) CloseWrite() error {
	s.finish(false)
	return s.Stream.CloseWrite()
}

func (s *simStream) Close() error {
	s.finish(false)
	return s.Stream.Close()
}

// Reset resets the mocknet stream first: that fails a pump blocked on a
// peer that does not read, which frees a Write waiting for the window.
func (s *simStream) Reset() error {
	err := s.Stream.Reset()
	s.finish(true)
	return err
}

func (s *simStream) ResetWithError(code network.StreamErrorCode) error {
	err := s.Stream.ResetWithError(code)
	s.finish(true)
	return err
}
