package placement

import (
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// settling keeps two nodes from crawling one host while ownership moves
// to this node. A join only moves hosts to the newcomer, and a leave
// moves hosts to a replica that already holds their pages. So the danger
// is a node that just joined (or rejoined after a crash) crawling a host
// before the previous owner's crawl state arrived, and fetching again
// what was already fetched.
//
// Protocol: when a node sees a member join, it sends that member a
// handoff manifest (the hosts it is about to hand over, possibly none) if
// it has hosts to hand over, or if it holds any host and is one of the
// joiner's donors to manifestSendDepth by its view (sendsManifest). A
// node that has just met the network waits for the manifests of its
// donors to manifestAwaitDepth whose heartbeat announced a host (at most
// ManifestWait) before crawling anything, and a host named in any
// manifest waits for its handoff (at most HostWait, once), or until every
// member that named it is gone: a member that died before its handoff
// sends none, and its replicas hold what it stored, so the host is taken
// over from them once its grace ends rather than after HostWait.
//
// Why donors: a host moves from member M to joiner J only if one of J's
// virtual keys is the first clockwise from the host and M owns the first
// virtual key of the others clockwise from that one (Keyspace.Donors,
// depth 1), so any view that holds the same members names exactly the
// members a joiner takes hosts from. Why only members that hold hosts:
// at a network's start no member holds one, every member joins every
// other and almost every member is almost everyone's donor, so manifests
// with nothing to hand over would be N² messages.
//
// A view must have settled before it can tell who a joiner's donors are:
// in a view of a handful of members everyone is everyone's donor. So a
// member whose view is younger than ManifestWait (since it first met
// another member) defers the manifests it would send only as a donor
// until its view is that old, then decides by the settled view; a
// manifest with hosts to hand over is never deferred.
//
// The two depths differ on purpose: a sender decides by its view and the
// joiner by its own, and a sender that sees one more member next to one
// of the joiner's virtual keys than the joiner does still sends.
// Correctness does not rest on the donor sets: a member with hosts to
// hand over always sends its manifest, and the manifest's hosts wait for
// their handoff whoever sent it. What the sets decide is how long a
// joiner holds back its whole crawl.
type settling struct {
	firstSeen  time.Time           // when this node first saw another member
	awaiting   map[peer.ID]bool    // members whose manifest has not arrived
	manifested map[peer.ID]bool    // members whose manifest arrived
	pending    map[string]*awaited // hosts named in a manifest, handoff not in yet
	settled    map[string]bool     // hosts whose handoff arrived (or whose wait ended)
	// founders are the members met in the first ManifestWait after this
	// node first met the network, in this run or an earlier one (Saved):
	// the members that may have owned hosts before it joined, and so the
	// only ones that may hand it hosts. Kept across restarts because a
	// founder killed while this node restarted still holds what it owned
	// meanwhile, and must be able to hand it back.
	founders map[peer.ID]bool
	// deferred are joiners met while the view was settling, looked at
	// again once it has.
	deferred []peer.ID
}

// awaited is a host a manifest named whose handoff has not arrived.
type awaited struct {
	since   time.Time // when a manifest first named it
	namedBy []peer.ID // the members whose manifests named it
}

// manifestAwaitDepth is how deep among its donors a joiner waits for
// manifests; manifestSendDepth is how deep (in the sender's view) a
// member must be among a joiner's donors to send it a manifest with
// nothing to hand over.
const (
	manifestAwaitDepth = 1
	manifestSendDepth  = 2
)

func newSettling() settling {
	return settling{
		awaiting: map[peer.ID]bool{}, manifested: map[peer.ID]bool{}, pending: map[string]*awaited{},
		settled: map[string]bool{}, founders: map[peer.ID]bool{},
	}
}

// sendsManifest is the sender's side of the rule: a member sends a joiner
// a manifest when it has hosts to hand over (moving > 0), or when it holds
// any host and is among the joiner's donors to manifestSendDepth by its
// view.
func sendsManifest(moving int, holdsHosts, donor bool) bool {
	return moving > 0 || holdsHosts && donor
}

// joined records a member joining, with the members this node sees now
// (itself excluded) and those whose heartbeat announced a host. In the
// first ManifestWait after this node first met the network, it awaits
// the manifests of its donors to manifestAwaitDepth by the current view
// that announced a host: a member that a newcomer displaced as a donor is
// no longer awaited. It returns the members that became founders.
func (s *settling) joined(cfg Config, members, holding []peer.ID, now time.Time) (founders []peer.ID) {
	if s.firstSeen.IsZero() {
		s.firstSeen = now
	}
	if now.Sub(s.firstSeen) >= cfg.ManifestWait {
		return nil
	}
	for _, p := range members {
		if !s.founders[p] {
			s.founders[p] = true
			founders = append(founders, p)
		}
	}
	clear(s.awaiting)
	for _, p := range cfg.Space.Donors(append(slices.Clone(members), cfg.Self), cfg.Self, manifestAwaitDepth) {
		if slices.Contains(holding, p) && !s.manifested[p] {
			s.awaiting[p] = true
		}
	}
	return founders
}

// settledAt is when this node's view is old enough to name a joiner's
// donors (zero before it met anyone).
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
		a := s.pending[h]
		if a == nil {
			if s.settled[h] {
				continue // the handoff overtook its manifest
			}
			a = &awaited{since: now}
			s.pending[h] = a
		}
		if !slices.Contains(a.namedBy, p) {
			a.namedBy = append(a.namedBy, p)
		}
	}
}

// gone ends the waits of the hosts that only p named: p is no longer a
// member and its grace has ended, so no handoff will come from it.
func (s *settling) gone(p peer.ID) {
	for h, a := range s.pending {
		a.namedBy = slices.DeleteFunc(a.namedBy, func(q peer.ID) bool { return q == p })
		if len(a.namedBy) == 0 {
			s.settleHost(h)
		}
	}
}

// expire ends the waits that are over.
func (s *settling) expire(cfg Config, now time.Time) {
	for h, a := range s.pending {
		if now.Sub(a.since) >= cfg.HostWait {
			s.settleHost(h)
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
	a := s.pending[host]
	return a == nil || now.Sub(a.since) >= cfg.HostWait
}

// sendManifest decides the manifest for joiner p: at once when this node
// has hosts for it or its view has settled, else once it has.
func (m *Machine) sendManifest(p peer.ID) {
	moving := m.movingTo(p)
	if len(moving) == 0 && m.now.Before(m.settle.settledAt(m.cfg)) {
		m.settle.deferred = append(m.settle.deferred, p)
		return
	}
	if sendsManifest(len(moving), len(m.hosts.crawl) > 0, m.isDonor(p)) {
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
		if m.isMember(j) && sendsManifest(0, len(m.hosts.crawl) > 0, m.isDonor(j)) {
			m.emit(SendManifest{To: j, Hosts: m.movingTo(j)})
		}
	}
}

// isDonor reports whether this node is among joiner's donors to
// manifestSendDepth by its view.
func (m *Machine) isDonor(joiner peer.ID) bool {
	return slices.Contains(m.cfg.Space.Donors(m.members, joiner, manifestSendDepth), m.cfg.Self)
}

// movingTo lists the crawler's hosts that p owns by this node's view and
// that this node will hand off to it: those it crawled. The others (URLs
// forwarded here, never crawled) are abandoned to p as links, with no
// handoff for p to wait for (nextHandoff).
func (m *Machine) movingTo(p peer.ID) []string {
	var out []string
	for _, h := range sortedKeys(m.hosts.crawl) {
		if m.owner(h) == p && m.hosts.role[h] == Crawled {
			out = append(out, h)
		}
	}
	return out
}
