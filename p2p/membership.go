package p2p

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Member is one live member of the network as this node sees it.
type Member struct {
	ID       peer.ID
	Addrs    []ma.Multiaddr
	Load     Load
	LastSeen time.Time
	// Key is the member's point in the keyspace: sha256(peer ID bytes).
	Key [32]byte
}

// EventKind says what happened to a member.
type EventKind int

const (
	// Joined: a member was heard from for the first time (or again after
	// it had been dropped).
	Joined EventKind = iota + 1
	// Left: a member announced departure or missed heartbeats for
	// MemberTimeout.
	Left
)

func (k EventKind) String() string {
	switch k {
	case Joined:
		return "joined"
	case Left:
		return "left"
	}
	return "unknown"
}

// MemberEvent is a change of the membership view.
type MemberEvent struct {
	Kind   EventKind
	Member Member
	At     time.Time
}

// Events delivers membership changes in order. The channel is closed by
// Close. Events queue without bound inside the node, so a slow reader
// loses nothing.
func (n *Node) Events() <-chan MemberEvent { return n.mem.events }

// SetLoad sets what the heartbeat announces (OutboxDepth is filled in by
// p2p).
func (n *Node) SetLoad(l Load) {
	n.mem.mu.Lock()
	n.mem.load = l
	n.mem.mu.Unlock()
}

// Members returns the live members, this node included, sorted by ID.
func (n *Node) Members() []Member { return n.mem.list() }

// View is the ownership ring of this node's view (the members and this
// node) as it is now; it does not change when the view does.
func (n *Node) View() *Ring { return n.mem.ring.Load() }

// Owner is the owner of host by this node's view.
func (n *Node) Owner(host string) peer.ID { return n.View().Owner(host) }

// ReplicationFactor is R, the number of members that hold each host.
func (n *Node) ReplicationFactor() int { return n.cfg.Replicas }

// Replicas is the R closest live members to host, owner first.
func (n *Node) Replicas(host string) []peer.ID { return n.mem.replicas(host) }

// Holds reports whether p holds host by this node's view: p is this node
// or a member, and among the Replicas members closest to host. A peer this
// node has not admitted holds nothing: what it sends about a host is
// refused until its heartbeat (and connection) make it a member, and an
// honest sender retries until then.
func (n *Node) Holds(p peer.ID, host string) bool { return n.mem.holds(p, host) }

// IsMember reports whether p is a member by this node's view (this node
// included).
func (n *Node) IsMember(p peer.ID) bool { return p == n.h.ID() || n.mem.isMember(p) }

// IsOwner reports whether this node owns host by its own view.
func (n *Node) IsOwner(host string) bool { return n.Owner(host) == n.h.ID() }

// membership is this node's view of the network: the members, the ring
// over them, the candidates (admission), the heartbeats that keep the view
// and the events that report its changes. It runs the heartbeat, receive,
// event and maintenance loops; Node hands it the host, the DHT and
// gossipsub's topic as they come up.
type membership struct {
	cfg        Config
	log        *slog.Logger
	clock      Clock
	st         *counters
	limits     *peerLimits
	outbox     peerOutbox
	viewFilter func(string) bool // WithViewFilter
	ctx        context.Context   // ends at Close
	spawn      func(func())      // runs a goroutine that Close waits for

	// Set as they come up, before anything reads them: h by setHost, ps
	// before the heartbeat validator is registered, the rest by start.
	h     host.Host
	ps    *pubsub.PubSub
	kad   *dht.IpfsDHT
	topic *pubsub.Topic
	sub   *pubsub.Subscription

	mu      sync.Mutex
	members map[peer.ID]*Member
	// ring is the ownership ring of members and this node, replaced
	// (under mu) whenever members changes; read without a lock.
	ring       atomic.Pointer[Ring]
	tombstones map[peer.ID]uint64 // SentMs of a member's leave message
	lastSent   map[peer.ID]uint64
	departed   map[peer.ID]time.Time // when a member left, for pruneDepartures
	adm        *admission
	load       Load

	evMu     sync.Mutex
	evQueue  []MemberEvent
	evSignal chan struct{}
	events   chan MemberEvent

	hbMu    sync.Mutex
	leaving bool
	dialing sync.Map // peer.ID -> true while a routing-table dial runs
	// candidateSem bounds the dials to candidate members under way.
	candidateSem chan struct{}
}

// peerOutbox is what membership needs of the outbox: the depth it
// announces, and a wake-up when a peer joins (its queue may send now) or
// leaves (its URL queue is re-routed, a send to it aborted).
type peerOutbox interface {
	Depth(topic string) (int, map[peer.ID]int)
	wakePeer(p peer.ID, abort bool)
}

func newMembership(ctx context.Context, cfg Config, log *slog.Logger, clock Clock, st *counters, limits *peerLimits, outbox peerOutbox, viewFilter func(string) bool, spawn func(func())) *membership {
	return &membership{
		cfg: cfg, log: log, clock: clock, st: st, limits: limits, outbox: outbox,
		viewFilter: viewFilter, ctx: ctx, spawn: spawn,
		members:      map[peer.ID]*Member{},
		tombstones:   map[peer.ID]uint64{},
		lastSent:     map[peer.ID]uint64{},
		departed:     map[peer.ID]time.Time{},
		adm:          newAdmission(cfg),
		candidateSem: make(chan struct{}, candidateDials),
		evSignal:     make(chan struct{}, 1),
		events:       make(chan MemberEvent, 256),
	}
}

// setHost gives membership the host; the view then holds this node.
func (ms *membership) setHost(h host.Host) {
	ms.h = h
	ms.ring.Store(NewRing([]peer.ID{h.ID()}))
}

// start runs the loops, over the DHT and the joined heartbeat topic.
func (ms *membership) start(kad *dht.IpfsDHT, topic *pubsub.Topic, sub *pubsub.Subscription) {
	ms.kad, ms.topic, ms.sub = kad, topic, sub
	ms.spawn(ms.eventPump)
	ms.spawn(ms.receiveHeartbeats)
	ms.spawn(ms.heartbeatLoop)
	ms.spawn(ms.maintenanceLoop)
}

// leave publishes the leaving heartbeat, after which no regular one goes
// out, and reports whether members may be waiting to hear it.
func (ms *membership) leave() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// Under hbMu no regular heartbeat can follow the leave message.
	ms.hbMu.Lock()
	ms.leaving = true
	err := ms.topic.Publish(ctx, encodeHeartbeat(heartbeat{Leaving: true, SentMs: nowMs()}))
	ms.hbMu.Unlock()
	return err == nil && ms.count() > 0
}

// count is the number of members, this node excluded.
func (ms *membership) count() int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return len(ms.members)
}

func (ms *membership) outboxDepth() int {
	d, _ := ms.outbox.Depth(TopicURLs)
	return d
}

func (ms *membership) list() []Member {
	ms.mu.Lock()
	out := make([]Member, 0, len(ms.members)+1)
	self := Member{ID: ms.h.ID(), Addrs: ms.h.Addrs(), Load: ms.load, LastSeen: ms.clock.Now(), Key: PeerKey(ms.h.ID())}
	self.Load.OutboxDepth = uint64(ms.outboxDepth())
	out = append(out, self)
	for _, m := range ms.members {
		c := *m
		c.Addrs = slices.Clone(m.Addrs)
		out = append(out, c)
	}
	ms.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

func (ms *membership) self() peer.ID { return ms.h.ID() }

func (ms *membership) view() *Ring { return ms.ring.Load() }

func (ms *membership) replicas(host string) []peer.ID {
	return ms.view().Replicas(host, ms.cfg.Replicas)
}

func (ms *membership) holds(p peer.ID, host string) bool {
	if p != ms.h.ID() && !ms.isMember(p) {
		return false
	}
	return slices.Contains(ms.replicas(host), p)
}

func nowMs() uint64 { return uint64(max(time.Now().UnixMilli(), 0)) }

func (ms *membership) isMember(p peer.ID) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	_, ok := ms.members[p]
	return ok
}

func (ms *membership) emit(ev MemberEvent) {
	ms.evMu.Lock()
	ms.evQueue = append(ms.evQueue, ev)
	ms.evMu.Unlock()
	select {
	case ms.evSignal <- struct{}{}:
	default:
	}
}

// eventPump moves queued events to the public channel so that emitters
// never block on a slow reader.
func (ms *membership) eventPump() {
	defer close(ms.events)
	for {
		ms.evMu.Lock()
		q := ms.evQueue
		ms.evQueue = nil
		ms.evMu.Unlock()
		for _, ev := range q {
			select {
			case ms.events <- ev:
			case <-ms.ctx.Done():
				return
			}
		}
		select {
		case <-ms.evSignal:
		case <-ms.ctx.Done():
			return
		}
	}
}

// heartbeatLoop announces this node every HeartbeatInterval ±25 %. The
// jitter matters: nodes started together (a testnet, the simulator, a
// rack after a power cut) would otherwise publish in lockstep, and each
// burst of N heartbeats overflows gossipsub's queues (Stats.GossipDrops),
// which is how a 200-node start-up took five to seven intervals.
func (ms *membership) heartbeatLoop() {
	for {
		ms.publishHeartbeat()
		jitter := 0.75 + 0.5*rand.Float64()
		if !sleepCtx(ms.ctx, time.Duration(jitter*float64(ms.cfg.HeartbeatInterval))) {
			return
		}
	}
}

func (ms *membership) publishHeartbeat() {
	ms.mu.Lock()
	l := ms.load
	ms.mu.Unlock()
	l.OutboxDepth = uint64(ms.outboxDepth())
	ctx, cancel := context.WithTimeout(ms.ctx, ms.cfg.HeartbeatInterval)
	defer cancel()
	ms.hbMu.Lock()
	defer ms.hbMu.Unlock()
	if ms.leaving {
		return
	}
	hb := heartbeat{SentMs: nowMs(), Addrs: ms.h.Addrs(), Load: l}
	if err := ms.topic.Publish(ctx, encodeHeartbeat(hb)); err != nil && ms.ctx.Err() == nil {
		ms.log.Debug("publish heartbeat", "err", err)
	}
}

// validateHeartbeat runs inside pubsub before a message is relayed: bad
// or flooding origins are rejected (which also lowers the relaying peer's
// gossipsub score).
func (ms *membership) validateHeartbeat(_ context.Context, relayer peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	origin := msg.GetFrom()
	if origin == ms.h.ID() {
		return pubsub.ValidationAccept
	}
	if !ms.mayHear(origin) {
		ms.st.heartbeatsIgnored.Add(1)
		return pubsub.ValidationIgnore
	}
	if !ms.limits.allowHeartbeat(origin) {
		return pubsub.ValidationIgnore
	}
	hb, err := decodeHeartbeat(msg.Data)
	if err != nil {
		ms.st.rejected.Add(1)
		return pubsub.ValidationReject
	}
	msg.ValidatorData = hb
	if ms.isMember(origin) {
		return pubsub.ValidationAccept
	}
	// Not a member yet: admitted here if it can be, and relayed onwards
	// only then. A candidate's heartbeat stays with this node, so that
	// honest members never relay an origin they could not reach, and the
	// relayer of a candidate that fails its dial is the one that vouched
	// for it (relayer accounting, admission.go).
	ms.onHeartbeat(origin, hb, relayer)
	if ms.isMember(origin) {
		return pubsub.ValidationAccept
	}
	return pubsub.ValidationIgnore
}

// mayHear reports whether a heartbeat from origin is worth decoding: it
// comes from a member or a candidate, or there is room for a new
// candidate. A flood of heartbeats signed by generated keys therefore
// costs no per-origin state once the candidate list is full.
func (ms *membership) mayHear(origin peer.ID) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	_, member := ms.members[origin]
	return member || ms.adm.known(origin) || !ms.adm.full()
}

func (ms *membership) receiveHeartbeats() {
	for {
		msg, err := ms.sub.Next(ms.ctx)
		if err != nil {
			return
		}
		from := msg.GetFrom()
		if from == ms.h.ID() {
			continue
		}
		hb, ok := msg.ValidatorData.(heartbeat)
		if !ok {
			continue
		}
		ms.onHeartbeat(from, hb, msg.ReceivedFrom)
	}
}

// onHeartbeat applies a heartbeat of from, relayed to this node by relayer
// (from itself when it came directly).
func (ms *membership) onHeartbeat(from peer.ID, hb heartbeat, relayer peer.ID) {
	if ms.viewFilter != nil && !ms.viewFilter(string(from)) {
		return
	}
	now := ms.clock.Now()
	connected := ms.h.Network().Connectedness(from) == network.Connected
	var ev *MemberEvent
	dial := false
	ms.mu.Lock()
	m, known := ms.members[from]
	if hb.SentMs <= ms.tombstones[from] || known && hb.SentMs < ms.lastSent[from] {
		ms.mu.Unlock()
		return // older than a leave or a newer heartbeat: a late duplicate
	}
	switch {
	case hb.Leaving && known:
		ms.tombstones[from] = hb.SentMs
		delete(ms.members, from)
		ms.ring.Store(ms.ring.Load().Without(from))
		ms.departed[from] = now
		ev = &MemberEvent{Kind: Left, Member: *m, At: now}
	case hb.Leaving:
		delete(ms.adm.candidates, from)
	case known:
		ms.lastSent[from] = hb.SentMs
		m.Addrs, m.Load, m.LastSeen = hb.Addrs, hb.Load, now
	default:
		switch ms.adm.decide(from, hb, relayer, connected, len(ms.members), now) {
		case admitted:
			ms.lastSent[from] = hb.SentMs
			m = &Member{ID: from, Addrs: hb.Addrs, Load: hb.Load, LastSeen: now, Key: PeerKey(from)}
			ms.members[from] = m
			ms.ring.Store(ms.ring.Load().With(from))
			ev = &MemberEvent{Kind: Joined, Member: *m, At: now}
		case candidacy:
			dial = true
		case refused:
			ms.st.membersRefused.Add(1)
		}
	}
	ms.mu.Unlock()
	if dial {
		ms.confirmCandidate(from)
		return
	}
	if ev == nil {
		return
	}
	if ev.Kind == Joined {
		if len(hb.Addrs) > 0 {
			ms.h.Peerstore().AddAddrs(from, hb.Addrs, 3*ms.cfg.MemberTimeout)
		}
		ms.h.ConnManager().Protect(from, "sou-member")
		ms.log.Info("member joined", "peer", from)
		ms.outbox.wakePeer(from, false) // an outbox may have been waiting for it
	} else {
		ms.h.ConnManager().Unprotect(from, "sou-member")
		ms.log.Info("member left", "peer", from)
		ms.outbox.wakePeer(from, true) // its URL outbox is re-routed
	}
	ms.emit(*ev)
}

// maintenanceLoop drops silent members, keeps connections to DHT routing
// table peers (so gossip reaches them), and prunes rate limiters.
func (ms *membership) maintenanceLoop() {
	t := time.NewTicker(max(ms.cfg.HeartbeatInterval/2, 10*time.Millisecond))
	defer t.Stop()
	lastPrune, lastDial := time.Now(), time.Time{}
	for {
		select {
		case <-ms.ctx.Done():
			return
		case <-t.C:
		}
		ms.expireMembers()
		ms.mu.Lock()
		redial := ms.adm.expire(ms.clock.Now(), ms.cfg.MemberTimeout)
		ms.mu.Unlock()
		for _, p := range redial {
			ms.confirmCandidate(p)
		}
		if time.Since(lastDial) > 2*ms.cfg.HeartbeatInterval {
			lastDial = time.Now()
			ms.dialRoutingTable()
		}
		if time.Since(lastPrune) > time.Minute {
			lastPrune = time.Now()
			ms.limits.prune()
			ms.pruneDepartures()
		}
	}
}

func (ms *membership) expireMembers() {
	now := ms.clock.Now()
	var gone []Member
	ms.mu.Lock()
	for id, m := range ms.members {
		if now.Sub(m.LastSeen) > ms.cfg.MemberTimeout {
			delete(ms.members, id)
			ms.ring.Store(ms.ring.Load().Without(id))
			ms.departed[id] = now
			gone = append(gone, *m)
		}
	}
	ms.mu.Unlock()
	for _, m := range gone {
		ms.h.ConnManager().Unprotect(m.ID, "sou-member")
		ms.log.Info("member timed out", "peer", m.ID, "last_seen", m.LastSeen)
		ms.emit(MemberEvent{Kind: Left, Member: m, At: now})
		ms.outbox.wakePeer(m.ID, true)
		ms.dropStaleConnections(m.ID)
	}
}

// dropStaleConnections closes every connection to a member that went
// silent. A member that crashed and came back within seconds leaves a dead
// connection behind (QUIC has no RST: it lingers until its idle timeout)
// next to its new one. Gossipsub then keeps losing its writer to that peer
// on the dead connection, respawns it while the peer still counts as
// connected, and after four respawns in ten minutes
// (pubsub.MaxBackoffAttempts) stops writing to it for good: the member
// never hears this node's subscription again, and the two views stay split
// (seen as thousands of duplicate fetches under repeated crashes). Closing
// every connection resets gossipsub's state for the peer; dialRoutingTable
// or the peer itself reconnects, and the next heartbeat re-admits it.
func (ms *membership) dropStaleConnections(p peer.ID) {
	if ms.h.Network().Connectedness(p) != network.Connected {
		return
	}
	if err := ms.h.Network().ClosePeer(p); err != nil {
		ms.log.Debug("close connections to a silent member", "peer", p, "err", err)
	}
}

// dialRoutingTable connects to routing-table peers that are neither
// members nor connected: the DHT discovers them, the heartbeat confirms
// them once pubsub runs over the connection.
func (ms *membership) dialRoutingTable() {
	for _, p := range ms.kad.RoutingTable().ListPeers() {
		if ms.isMember(p) || ms.h.Network().Connectedness(p) == network.Connected {
			continue
		}
		if _, busy := ms.dialing.LoadOrStore(p, true); busy {
			continue
		}
		ai := ms.h.Peerstore().PeerInfo(p)
		ms.spawn(func() {
			defer ms.dialing.Delete(ai.ID)
			ctx, cancel := context.WithTimeout(ms.ctx, 5*time.Second)
			defer cancel()
			_ = ms.h.Connect(ctx, ai)
		})
	}
}

// pruneDepartures forgets the last heartbeat times and leave tombstones of
// peers gone for longer than departureMemory: gossipsub's duplicate cache
// has long dropped their messages, so nothing stale can arrive any more,
// and the maps stay as small as the recent membership.
func (ms *membership) pruneDepartures() {
	now := ms.clock.Now()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for p, at := range ms.departed {
		_, member := ms.members[p]
		if member || now.Sub(at) > departureMemory {
			delete(ms.departed, p)
		}
		if !member && now.Sub(at) > departureMemory {
			delete(ms.lastSent, p)
			delete(ms.tombstones, p)
		}
	}
}

// relayCandidates feeds AutoRelay with live members (only public ones can
// actually serve as relays; AutoRelay checks that itself).
func (ms *membership) relayCandidates(ctx context.Context, num int) <-chan peer.AddrInfo {
	ch := make(chan peer.AddrInfo, num)
	ms.mu.Lock()
	for id, m := range ms.members {
		if len(ch) == num {
			break
		}
		ch <- peer.AddrInfo{ID: id, Addrs: m.Addrs}
	}
	ms.mu.Unlock()
	close(ch)
	return ch
}

// departureMemory is how long a departed member's last heartbeat time and
// leave tombstone are kept.
const departureMemory = 10 * time.Minute
