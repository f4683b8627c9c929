package placement

import (
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Kind is a kind of message about a host, for Allowed.
type Kind int

// Who may send this node data about a host, by its own view. Nothing is
// taken on the receiver's say alone (that it holds the host): each kind
// of message comes from the one member whose role makes it the source,
// and the sender must be a member.
const (
	// KindReplica: replica items (pages, fetch markers, anchors,
	// sitemaps, queued URLs, hints) flow from a host's owner to its other
	// holders: the sender is among the R members closest to the host and
	// closer to it than this node, and this node among the R+1 closest
	// (one more than R, for a view that knows a joiner the sender's does
	// not yet, and for a stand-in). A replica cannot write to its owner,
	// a member cannot write to hosts it does not hold, and no member can
	// make a node store hosts it does not hold. Answers to a pull this
	// node made are taken from the members it asked, and those of a
	// host whose handoff this node awaits from the members whose
	// manifests named it: the previous owner stores what it fetched
	// before it heard of this node until its handoff (Targets).
	KindReplica Kind = iota
	// KindHandoff: handoffs (pages, crawl state, manifests) flow from a
	// host's previous owner to a member that joined: the sender is a
	// founder of this node's view (met while it joined, in this run or
	// an earlier one) and among the R+1 closest to the host of the
	// founders still members, this node excluded; this node is among the
	// R+1 closest. A member that joined after this node never owned a
	// host before it, so it cannot hand it one. One more than R because
	// founders also count the members that joined while this node was
	// settling: one of them closer to the host than its previous owner
	// would otherwise have this node refuse the real handoff for good.
	KindHandoff
	// KindPull: a pull comes from a member among the R closest to the
	// host (its owner after a takeover, a replica about to become it, or
	// a new holder).
	KindPull
	// KindLink: a link found on the host (a forwarded URL's source host):
	// the sender crawls it (its owner, or the closest but for members,
	// this node included, that joined within Grace + Drain: the previous
	// owner crawls until it hears of the join, within Grace, and the
	// requests it began by then end within Drain, their links forwarded
	// to the hosts' owners), so a member cannot put words in the mouth of
	// hosts it does not crawl. A previous owner whose handoff is late (it
	// restarted, or this node refused it for a while) crawls the host
	// until it hands it over: its links are taken while this node awaits
	// the handoff from it, and for Grace + Drain after it handed the host
	// in.
	KindLink
	// KindRelay: a URL record passed on by a member on the way: members
	// forward a record to the closest member they know, so the sender is
	// among the R+1 closest to its host.
	KindRelay
)

// Allowed reports whether member from may send this node a message of
// kind about host, at now.
func (m *Machine) Allowed(now time.Time, kind Kind, from peer.ID, host string) bool {
	if host == "" || from == m.cfg.Self || !m.isMember(from) {
		return false
	}
	r := m.cfg.R
	switch kind {
	case KindReplica:
		return replicaFrom(m.cfg.Space, m.members, m.cfg.Self, from, host, r) || m.hosts.asked[ask{from, host}] > 0 ||
			m.awaitsHandoffFrom(now, host, from)
	case KindHandoff:
		if !m.settle.founders[from] {
			return false
		}
		founders := slices.DeleteFunc(slices.Clone(m.members), func(p peer.ID) bool { return !m.settle.founders[p] })
		return handoffFrom(m.cfg.Space, m.members, founders, m.cfg.Self, from, host, r)
	case KindPull:
		return rank(m.cfg.Space, m.members, host, r, from) >= 0
	case KindLink:
		var recent []peer.ID // joined within Grace + Drain, this node included
		window := m.cfg.Grace + m.cfg.Drain
		if !m.settle.firstSeen.IsZero() && now.Sub(m.settle.firstSeen) < window {
			recent = append(recent, m.cfg.Self)
		}
		for p, at := range m.joinedAt {
			if now.Sub(at) < window {
				recent = append(recent, p)
			}
		}
		if in, ok := m.hosts.handedIn[host]; ok && in.from == from && now.Sub(in.at) < window ||
			m.awaitsHandoffFrom(now, host, from) {
			return true
		}
		return crawlsIn(m.cfg.Space, m.members, from, host, recent)
	case KindRelay:
		return rank(m.cfg.Space, m.members, host, r+1, from) >= 0
	}
	return false
}

// rank is the position of p among the members closest to host (0 for the
// closest), or -1 when p is not among the first k.
func rank(space Keyspace, members []peer.ID, host string, k int, p peer.ID) int {
	return slices.Index(space.Replicas(members, host, k), p)
}

// replicaFrom says whether from may send self replica items of host in
// the view members (self and from among them), with replication factor r.
func replicaFrom(space Keyspace, members []peer.ID, self, from peer.ID, host string, r int) bool {
	rf, rs := rank(space, members, host, r+1, from), rank(space, members, host, r+1, self)
	return rf >= 0 && rf < r && rs >= 0 && rf < rs
}

// handoffFrom says whether from may hand self host: founders are the
// founders of self's view that are still members.
func handoffFrom(space Keyspace, members, founders []peer.ID, self, from peer.ID, host string, r int) bool {
	if !slices.Contains(founders, from) {
		return false
	}
	prior := slices.DeleteFunc(slices.Clone(founders), func(p peer.ID) bool { return p == self })
	return rank(space, prior, host, r+1, from) >= 0 && rank(space, members, host, r+1, self) >= 0
}

// crawlsIn says whether from crawls host in the view members: it is the
// owner, or the closest but for members that joined so recently (recent)
// that from may not have heard of them yet or still ends the requests it
// began before it did.
func crawlsIn(space Keyspace, members []peer.ID, from peer.ID, host string, recent []peer.ID) bool {
	for _, p := range space.Replicas(members, host, len(recent)+1) {
		if p == from {
			return true
		}
		if !slices.Contains(recent, p) {
			return false
		}
	}
	return false
}

// Waiting reports whether a manifest holds host back now (its handoff has
// not arrived).
func (m *Machine) Waiting(now time.Time, host string) bool {
	a := m.settle.pending[host]
	return a != nil && now.Sub(a.since) < m.cfg.HostWait
}

// awaitsHandoffFrom reports whether a manifest from p holds host back now.
func (m *Machine) awaitsHandoffFrom(now time.Time, host string, p peer.ID) bool {
	return m.Waiting(now, host) && slices.Contains(m.settle.pending[host].namedBy, p)
}

// ForgetFounders makes every member met so far a late joiner, as if this
// node had met the network before them: a test of Allowed(KindHandoff, ...)
// on a network whose nodes started together.
func (m *Machine) ForgetFounders() { clear(m.settle.founders) }
