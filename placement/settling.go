package placement

import (
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// settling keeps two nodes from crawling one host while ownership moves
// to this node. A join only moves hosts to the newcomer (keyspace
// distance), and a leave moves hosts to a replica that already holds
// their pages. So the danger is a node that just joined (or rejoined
// after a crash) crawling a host before the previous owner's crawl state
// arrived, and fetching again what was already fetched.
//
// Protocol: when a node sees a member join, it sends that member a
// handoff manifest (the hosts it is about to hand over, possibly none) if
// it has hosts to hand over or if it is one of the joiner's
// manifestSendNeighbours closest members by its view (sendsManifest). A
// node that has just met the network waits for the manifests of its
// manifestAwaitNeighbours closest members (at most ManifestWait) before
// crawling anything, and a host named in any manifest waits for its
// handoff (at most HostWait, once).
//
// Why only neighbours: a host moves from member M to joiner J only if M
// was the member closest to the host and J is closer still, and in the
// XOR metric such an M is one of J's closest members
// (TestJoinersTakeHostsFromNeighbours checks it on random keys). Sending
// every joiner a manifest from every member costs N² messages when a
// network starts.
//
// A view must have settled before it can tell who a joiner's neighbours
// are: in a view of a handful of members everyone looks like everyone's
// neighbour. So a member whose view is younger than ManifestWait (since
// it first met another member) defers the manifests it would send only as
// a neighbour until its view is that old, then decides by the settled
// view; a manifest with hosts to hand over is never deferred.
//
// The two sizes differ on purpose: a sender decides by its view and the
// joiner by its own, and a sender that sees a few more members near the
// joiner than the joiner does still sends. Correctness does not rest on
// the neighbour sets: a member with hosts to hand over always sends its
// manifest, and the manifest's hosts wait for their handoff whoever sent
// it. What the sets decide is how long a joiner holds back its whole
// crawl.
type settling struct {
	firstSeen  time.Time            // when this node first saw another member
	awaiting   map[peer.ID]bool     // members whose manifest has not arrived
	manifested map[peer.ID]bool     // members whose manifest arrived
	pending    map[string]time.Time // host -> when a manifest first named it
	settled    map[string]bool      // hosts whose handoff arrived (or whose wait ended)
	// founders are the members met in the first ManifestWait after this
	// node first met the network: the members that owned hosts before it
	// joined, and so the only ones that may hand it hosts.
	founders map[peer.ID]bool
	// deferred are joiners met while the view was settling, looked at
	// again once it has.
	deferred []peer.ID
}

// manifestAwaitNeighbours is how many of its closest members a joiner
// waits for; manifestSendNeighbours is how close (in the sender's view) a
// member must be to a joiner to send it a manifest with nothing to hand
// over.
const (
	manifestAwaitNeighbours = 8
	manifestSendNeighbours  = 2 * manifestAwaitNeighbours
)

func newSettling() settling {
	return settling{
		awaiting: map[peer.ID]bool{}, manifested: map[peer.ID]bool{}, pending: map[string]time.Time{},
		settled: map[string]bool{}, founders: map[peer.ID]bool{},
	}
}

// sendsManifest is the sender's side of the rule: self sends joiner a
// manifest when it has hosts to hand over (moving > 0) or when it is among
// the joiner's manifestSendNeighbours closest other members in members
// (self's view; self counts whether listed or not).
func sendsManifest(space Keyspace, self, joiner peer.ID, members []peer.ID, moving int) bool {
	if moving > 0 {
		return true
	}
	others := make([]peer.ID, 0, len(members)+1)
	others = append(others, self)
	for _, m := range members {
		if m != joiner {
			others = append(others, m)
		}
	}
	return slices.Contains(space.Neighbours(others, joiner, manifestSendNeighbours), self)
}

// joined records a member joining, with the members this node sees now
// (itself excluded). In the first ManifestWait after this node first met
// the network, it awaits the manifests of its manifestAwaitNeighbours
// closest members by the current view: a member that a closer newcomer
// pushed out of the neighbours is no longer awaited.
func (s *settling) joined(cfg Config, members []peer.ID, now time.Time) {
	if s.firstSeen.IsZero() {
		s.firstSeen = now
	}
	if now.Sub(s.firstSeen) >= cfg.ManifestWait {
		return
	}
	for _, p := range members {
		s.founders[p] = true
	}
	clear(s.awaiting)
	for _, p := range cfg.Space.Neighbours(members, cfg.Self, manifestAwaitNeighbours) {
		if !s.manifested[p] {
			s.awaiting[p] = true
		}
	}
}

// settledAt is when this node's view is old enough to name a joiner's
// neighbours (zero before it met anyone).
func (s *settling) settledAt(cfg Config) time.Time {
	if s.firstSeen.IsZero() {
		return time.Time{}
	}
	return s.firstSeen.Add(cfg.ManifestWait)
}

// left forgets p: a dead member sends no manifest.
func (s *settling) left(p peer.ID) { delete(s.awaiting, p) }

// manifest records the hosts p is about to hand over. A host is held back
// once, for at most HostWait from the first manifest that names it: a
// later manifest does not restart the wait, so a member that keeps naming
// a host cannot keep it from being crawled.
func (s *settling) manifest(cfg Config, p peer.ID, hosts []string, now time.Time) {
	delete(s.awaiting, p)
	s.manifested[p] = true
	s.expire(cfg, now)
	for _, h := range hosts {
		if _, waiting := s.pending[h]; !waiting && !s.settled[h] { // the handoff may overtake its manifest
			s.pending[h] = now
		}
	}
}

// expire ends the waits that are over.
func (s *settling) expire(cfg Config, now time.Time) {
	for h, since := range s.pending {
		if now.Sub(since) >= cfg.HostWait {
			delete(s.pending, h)
			s.settled[h] = true
		}
	}
	if len(s.awaiting) > 0 && now.Sub(s.firstSeen) >= cfg.ManifestWait {
		clear(s.awaiting)
	}
}

// forget readies host for another handoff to this node: it was handed
// away, and should it come back, its next manifest is waited for again.
func (s *settling) forget(host string) {
	delete(s.settled, host)
	delete(s.pending, host)
}

// settleHost marks host as handed over: it may be crawled at once.
func (s *settling) settleHost(host string) {
	delete(s.pending, host)
	s.settled[host] = true
}

// mayCrawl reports whether host, owned by this node, may be crawled now
// as far as handoffs go.
func (s *settling) mayCrawl(cfg Config, started, now time.Time, host string) bool {
	if cfg.Joining && s.firstSeen.IsZero() && now.Sub(started) < cfg.ManifestWait {
		return false
	}
	if len(s.awaiting) > 0 && now.Sub(s.firstSeen) < cfg.ManifestWait {
		return false
	}
	since, ok := s.pending[host]
	return !ok || now.Sub(since) >= cfg.HostWait
}

// sendManifest decides the manifest for joiner p: at once when this node
// has hosts for it or its view has settled, else once it has.
func (m *Machine) sendManifest(p peer.ID) {
	moving := m.movingTo(p)
	if len(moving) == 0 && m.now.Before(m.settle.settledAt(m.cfg)) {
		m.settle.deferred = append(m.settle.deferred, p)
		return
	}
	if sendsManifest(m.cfg.Space, m.cfg.Self, p, m.members, len(moving)) {
		m.emit(SendManifest{To: p, Hosts: moving})
	}
}

// sendDeferredManifests looks again at the joiners met while the view
// was settling, once it has.
func (m *Machine) sendDeferredManifests() {
	if len(m.settle.deferred) == 0 || m.now.Before(m.settle.settledAt(m.cfg)) {
		return
	}
	joiners := m.settle.deferred
	m.settle.deferred = nil
	for _, j := range joiners {
		if m.isMember(j) && sendsManifest(m.cfg.Space, m.cfg.Self, j, m.members, 0) {
			m.emit(SendManifest{To: j, Hosts: m.movingTo(j)})
		}
	}
}

// movingTo lists the crawler's hosts that p owns by this node's view.
func (m *Machine) movingTo(p peer.ID) []string {
	var out []string
	for _, h := range sortedKeys(m.hosts.crawl) {
		if m.owner(h) == p {
			out = append(out, h)
		}
	}
	return out
}
