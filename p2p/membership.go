package p2p

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"golang.org/x/time/rate"
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
func (n *Node) Events() <-chan MemberEvent { return n.events }

// SetLoad sets what the heartbeat announces (OutboxDepth is filled in by
// p2p).
func (n *Node) SetLoad(l Load) {
	n.mu.Lock()
	n.load = l
	n.mu.Unlock()
}

// Members returns the live members, this node included, sorted by ID.
func (n *Node) Members() []Member {
	n.mu.Lock()
	out := make([]Member, 0, len(n.members)+1)
	self := Member{ID: n.h.ID(), Addrs: n.h.Addrs(), Load: n.load, LastSeen: n.clock.Now(), Key: PeerKey(n.h.ID())}
	self.Load.OutboxDepth = uint64(n.OutboxDepth())
	out = append(out, self)
	for _, m := range n.members {
		c := *m
		c.Addrs = slices.Clone(m.Addrs)
		out = append(out, c)
	}
	n.mu.Unlock()
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

func (n *Node) isMember(p peer.ID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.members[p]
	return ok
}

// View is the ownership ring of this node's view (the members and this
// node) as it is now; it does not change when the view does.
func (n *Node) View() *Ring { return n.ring.Load() }

// Owner is the owner of host by this node's view.
func (n *Node) Owner(host string) peer.ID { return n.View().Owner(host) }

// ReplicationFactor is R, the number of members that hold each host.
func (n *Node) ReplicationFactor() int { return n.cfg.Replicas }

// Replicas is the R closest live members to host, owner first.
func (n *Node) Replicas(host string) []peer.ID {
	return n.View().Replicas(host, n.cfg.Replicas)
}

// Holds reports whether p holds host by this node's view: p is this node
// or a member, and among the Replicas members closest to host. A peer this
// node has not admitted holds nothing: what it sends about a host is
// refused until its heartbeat (and connection) make it a member, and an
// honest sender retries until then.
func (n *Node) Holds(p peer.ID, host string) bool {
	if p != n.h.ID() && !n.isMember(p) {
		return false
	}
	return slices.Contains(n.Replicas(host), p)
}

// IsMember reports whether p is a member by this node's view (this node
// included).
func (n *Node) IsMember(p peer.ID) bool { return p == n.h.ID() || n.isMember(p) }

// IsOwner reports whether this node owns host by its own view.
func (n *Node) IsOwner(host string) bool { return n.Owner(host) == n.h.ID() }

func (n *Node) nowMs() uint64 { return uint64(max(time.Now().UnixMilli(), 0)) }

func (n *Node) emit(ev MemberEvent) {
	n.evMu.Lock()
	n.evQueue = append(n.evQueue, ev)
	n.evMu.Unlock()
	select {
	case n.evSignal <- struct{}{}:
	default:
	}
}

// eventPump moves queued events to the public channel so that emitters
// never block on a slow reader.
func (n *Node) eventPump() {
	defer close(n.events)
	for {
		n.evMu.Lock()
		q := n.evQueue
		n.evQueue = nil
		n.evMu.Unlock()
		for _, ev := range q {
			select {
			case n.events <- ev:
			case <-n.ctx.Done():
				return
			}
		}
		select {
		case <-n.evSignal:
		case <-n.ctx.Done():
			return
		}
	}
}

// heartbeatLoop announces this node every HeartbeatInterval ±25 %. The
// jitter matters: nodes started together (a testnet, the simulator, a
// rack after a power cut) would otherwise publish in lockstep, and each
// burst of N heartbeats overflows gossipsub's queues (Stats.GossipDrops),
// which is how a 200-node start-up took five to seven intervals.
func (n *Node) heartbeatLoop() {
	for {
		n.publishHeartbeat()
		jitter := 0.75 + 0.5*rand.Float64()
		if !sleepCtx(n.ctx, time.Duration(jitter*float64(n.cfg.HeartbeatInterval))) {
			return
		}
	}
}

func (n *Node) publishHeartbeat() {
	n.mu.Lock()
	l := n.load
	n.mu.Unlock()
	l.OutboxDepth = uint64(n.OutboxDepth())
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.HeartbeatInterval)
	defer cancel()
	n.hbMu.Lock()
	defer n.hbMu.Unlock()
	if n.leaving {
		return
	}
	hb := heartbeat{SentMs: n.nowMs(), Addrs: n.h.Addrs(), Load: l}
	if err := n.topic.Publish(ctx, encodeHeartbeat(hb)); err != nil && n.ctx.Err() == nil {
		n.log.Debug("publish heartbeat", "err", err)
	}
}

// validateHeartbeat runs inside pubsub before a message is relayed: bad
// or flooding origins are rejected (which also lowers the relaying peer's
// gossipsub score).
func (n *Node) validateHeartbeat(_ context.Context, relayer peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	origin := msg.GetFrom()
	if origin == n.h.ID() {
		return pubsub.ValidationAccept
	}
	if !n.mayHear(origin) {
		n.st.heartbeatsIgnored.Add(1)
		return pubsub.ValidationIgnore
	}
	if !n.allowHeartbeat(origin) {
		return pubsub.ValidationIgnore
	}
	hb, err := decodeHeartbeat(msg.Data)
	if err != nil {
		n.st.rejected.Add(1)
		return pubsub.ValidationReject
	}
	msg.ValidatorData = hb
	if n.isMember(origin) {
		return pubsub.ValidationAccept
	}
	// Not a member yet: admitted here if it can be, and relayed onwards
	// only then. A candidate's heartbeat stays with this node, so that
	// honest members never relay an origin they could not reach, and the
	// relayer of a candidate that fails its dial is the one that vouched
	// for it (relayer accounting, admission.go).
	n.onHeartbeat(origin, hb, relayer)
	if n.isMember(origin) {
		return pubsub.ValidationAccept
	}
	return pubsub.ValidationIgnore
}

// mayHear reports whether a heartbeat from origin is worth decoding: it
// comes from a member or a candidate, or there is room for a new
// candidate. A flood of heartbeats signed by generated keys therefore
// costs no per-origin state once the candidate list is full.
func (n *Node) mayHear(origin peer.ID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, member := n.members[origin]
	return member || n.adm.known(origin) || !n.adm.full()
}

// allowHeartbeat rate-limits heartbeats per origin: a member sends one per
// HeartbeatInterval, so a few times that rate is plenty.
func (n *Node) allowHeartbeat(origin peer.ID) bool {
	key := "hb/" + origin
	n.limMu.Lock()
	defer n.limMu.Unlock()
	l := n.limiters[key]
	if l == nil {
		every := rate.Every(n.cfg.HeartbeatInterval / 4)
		l = &peerLimit{lim: rate.NewLimiter(every, 8)}
		n.limiters[key] = l
	}
	l.lastUsed = time.Now()
	if !l.lim.Allow() {
		n.st.throttledMessages.Add(1)
		return false
	}
	return true
}

func (n *Node) receiveHeartbeats() {
	for {
		msg, err := n.sub.Next(n.ctx)
		if err != nil {
			return
		}
		from := msg.GetFrom()
		if from == n.h.ID() {
			continue
		}
		hb, ok := msg.ValidatorData.(heartbeat)
		if !ok {
			continue
		}
		n.onHeartbeat(from, hb, msg.ReceivedFrom)
	}
}

// onHeartbeat applies a heartbeat of from, relayed to this node by relayer
// (from itself when it came directly).
func (n *Node) onHeartbeat(from peer.ID, hb heartbeat, relayer peer.ID) {
	if n.opts.viewFilter != nil && !n.opts.viewFilter(string(from)) {
		return
	}
	now := n.clock.Now()
	connected := n.h.Network().Connectedness(from) == network.Connected
	var ev *MemberEvent
	dial := false
	n.mu.Lock()
	m, known := n.members[from]
	if hb.SentMs <= n.tombstones[from] || known && hb.SentMs < n.lastSent[from] {
		n.mu.Unlock()
		return // older than a leave or a newer heartbeat: a late duplicate
	}
	switch {
	case hb.Leaving && known:
		n.tombstones[from] = hb.SentMs
		delete(n.members, from)
		n.ring.Store(n.ring.Load().Without(from))
		n.departed[from] = now
		ev = &MemberEvent{Kind: Left, Member: *m, At: now}
	case hb.Leaving:
		delete(n.adm.candidates, from)
	case known:
		n.lastSent[from] = hb.SentMs
		m.Addrs, m.Load, m.LastSeen = hb.Addrs, hb.Load, now
	default:
		switch n.adm.decide(from, hb, relayer, connected, len(n.members), now) {
		case admitted:
			n.lastSent[from] = hb.SentMs
			m = &Member{ID: from, Addrs: hb.Addrs, Load: hb.Load, LastSeen: now, Key: PeerKey(from)}
			n.members[from] = m
			n.ring.Store(n.ring.Load().With(from))
			ev = &MemberEvent{Kind: Joined, Member: *m, At: now}
		case candidacy:
			dial = true
		case refused:
			n.st.membersRefused.Add(1)
		}
	}
	n.mu.Unlock()
	if dial {
		n.confirmCandidate(from)
		return
	}
	if ev == nil {
		return
	}
	if ev.Kind == Joined {
		if len(hb.Addrs) > 0 {
			n.h.Peerstore().AddAddrs(from, hb.Addrs, 3*n.cfg.MemberTimeout)
		}
		n.h.ConnManager().Protect(from, "sou-member")
		n.log.Info("member joined", "peer", from)
		n.outbox.wakePeer(from, false) // an outbox may have been waiting for it
	} else {
		n.h.ConnManager().Unprotect(from, "sou-member")
		n.log.Info("member left", "peer", from)
		n.outbox.wakePeer(from, true) // its URL outbox is re-routed
	}
	n.emit(*ev)
}

// maintenanceLoop drops silent members, keeps connections to DHT routing
// table peers (so gossip reaches them), and prunes rate limiters.
func (n *Node) maintenanceLoop() {
	t := time.NewTicker(max(n.cfg.HeartbeatInterval/2, 10*time.Millisecond))
	defer t.Stop()
	lastPrune, lastDial := time.Now(), time.Time{}
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.expireMembers()
		n.mu.Lock()
		redial := n.adm.expire(n.clock.Now(), n.cfg.MemberTimeout)
		n.mu.Unlock()
		for _, p := range redial {
			n.confirmCandidate(p)
		}
		if time.Since(lastDial) > 2*n.cfg.HeartbeatInterval {
			lastDial = time.Now()
			n.dialRoutingTable()
		}
		if time.Since(lastPrune) > time.Minute {
			lastPrune = time.Now()
			n.pruneLimiters()
			n.pruneDepartures()
		}
	}
}

func (n *Node) expireMembers() {
	now := n.clock.Now()
	var gone []Member
	n.mu.Lock()
	for id, m := range n.members {
		if now.Sub(m.LastSeen) > n.cfg.MemberTimeout {
			delete(n.members, id)
			n.ring.Store(n.ring.Load().Without(id))
			n.departed[id] = now
			gone = append(gone, *m)
		}
	}
	n.mu.Unlock()
	for _, m := range gone {
		n.h.ConnManager().Unprotect(m.ID, "sou-member")
		n.log.Info("member timed out", "peer", m.ID, "last_seen", m.LastSeen)
		n.emit(MemberEvent{Kind: Left, Member: m, At: now})
		n.outbox.wakePeer(m.ID, true)
		n.dropStaleConnections(m.ID)
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
func (n *Node) dropStaleConnections(p peer.ID) {
	if n.h.Network().Connectedness(p) != network.Connected {
		return
	}
	if err := n.h.Network().ClosePeer(p); err != nil {
		n.log.Debug("close connections to a silent member", "peer", p, "err", err)
	}
}

// dialRoutingTable connects to routing-table peers that are neither
// members nor connected: the DHT discovers them, the heartbeat confirms
// them once pubsub runs over the connection.
func (n *Node) dialRoutingTable() {
	for _, p := range n.kad.RoutingTable().ListPeers() {
		if n.isMember(p) || n.h.Network().Connectedness(p) == network.Connected {
			continue
		}
		if _, busy := n.dialing.LoadOrStore(p, true); busy {
			continue
		}
		ai := n.h.Peerstore().PeerInfo(p)
		n.goLoop(func() {
			defer n.dialing.Delete(ai.ID)
			ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
			defer cancel()
			_ = n.h.Connect(ctx, ai)
		})
	}
}

// pruneDepartures forgets the last heartbeat times and leave tombstones of
// peers gone for longer than departureMemory: gossipsub's duplicate cache
// has long dropped their messages, so nothing stale can arrive any more,
// and the maps stay as small as the recent membership.
func (n *Node) pruneDepartures() {
	now := n.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for p, at := range n.departed {
		_, member := n.members[p]
		if member || now.Sub(at) > departureMemory {
			delete(n.departed, p)
		}
		if !member && now.Sub(at) > departureMemory {
			delete(n.lastSent, p)
			delete(n.tombstones, p)
		}
	}
}

// departureMemory is how long a departed member's last heartbeat time and
// leave tombstone are kept.
const departureMemory = 10 * time.Minute
