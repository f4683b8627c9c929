package node

import (
	"slices"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/p2p"
)

// settling keeps two nodes from crawling one host while ownership moves to
// this node. With p2p's ownership (the closest virtual key clockwise) a
// join only moves hosts to the newcomer, and a leave moves hosts to a
// replica that already holds their pages. So the danger is a node that
// just joined (or rejoined after a crash) crawling a host before the
// previous owner's crawl state arrived, and fetching again what was
// already fetched.
//
// Protocol: when a node sees a member join, it sends that member a handoff
// manifest — the hosts it is about to hand over, possibly none — if it has
// hosts to hand over, or if it holds any host and is one of the joiner's
// donors to manifestSendDepth by its view (sendsManifest). A node that has
// just met the network waits for the manifests of its donors to
// manifestAwaitDepth whose heartbeat announced a host (bounded by
// manifestWait) before crawling anything, and a host named in any
// manifest, awaited or not, waits for its handoff (bounded by hostWait).
//
// Why donors: a host moves from member M to joiner J only if one of J's
// virtual keys is the first clockwise from the host, and M owns the first
// virtual key of the others clockwise from that one (p2p's Ring.Donors,
// depth 1). So J takes hosts from at most p2p.VirtualKeys members, and
// any view that holds the same members names exactly them
// (TestDonorsAreThePreviousOwners). With fewer members than virtual keys
// that is most of the network: ownership balanced over many small arcs
// takes a joiner's share from many members.
//
// Why only members that hold hosts: at a network's start no member holds
// a host, every member joins every other, and almost every member is
// almost everyone's donor, so manifests "with nothing to hand over" would
// be N² messages (the WAN simulator did not come up at 128 nodes when every
// member sent every joiner one). A member that holds no host sends none,
// and a joiner does not wait for one whose heartbeat (p2p.Load.Hosts)
// announced none. A member that gets its first hosts between its last
// heartbeat and a join still sends its manifest if it has hosts for the
// joiner; only the joiner's crawl may have started by then.
//
// A view must have settled before it can tell who a joiner's donors are.
// At a network's start every node's view is a handful of members, in
// which everyone is everyone's donor. So a member whose view is younger
// than manifestWait (since it first met another member) defers the
// manifests it would send only as a donor until its view is that old,
// then decides by the settled view (viewSettledAt); a manifest with hosts
// to hand over is never deferred. A joiner whose donors are young waits
// at most manifestWait; in a settled network, where churn happens,
// nothing is deferred.
//
// The two depths differ on purpose. A sender decides by its view and the
// joiner by its own; a sender that sees one more member next to one of the
// joiner's virtual keys than the joiner does is that key's second donor,
// and still sends, so the joiner is rarely left waiting for a manifest
// that will not come. When it is (views far apart, or the joiner's view
// still filling at a network's start), it waits manifestWait: time, not
// correctness. And correctness does not rest on the donor sets: a member
// with hosts to hand over always sends its manifest, and the manifest's
// hosts wait for their handoff (pending) whoever sent it. What the sets
// decide is how long a joiner holds back its whole crawl: if a member it
// did not await has hosts to hand over and its manifest arrives after the
// joiner started crawling, the joiner may fetch pages of those hosts again
// until the manifest arrives.
type settling struct {
	mu sync.Mutex
	// joining is true for a node started with bootstrap peers: until it
	// meets them (or manifestWait passes) it may own every host in its
	// lonely view, and must crawl none.
	joining      bool
	started      time.Time
	manifestWait time.Duration
	hostWait     time.Duration
	firstSeen    time.Time            // when this node first saw another member
	awaiting     map[peer.ID]bool     // members whose manifest has not arrived
	pending      map[string]time.Time // host -> when its manifest named it
	settled      map[string]bool      // hosts whose handoff arrived
	manifested   map[peer.ID]bool     // members whose manifest arrived
	// founders are the members met in the first manifestWait after this
	// node first met the network: the members that owned hosts before it
	// joined, and so the only ones that may hand it hosts (handoffFrom).
	founders map[peer.ID]bool
}

// manifestAwaitDepth is how deep a joiner's donors it waits for;
// manifestSendDepth is how deep (in the sender's view) a member must be
// among a joiner's donors to send it a manifest with nothing to hand
// over. See settling for the reasoning.
const (
	manifestAwaitDepth = 1
	manifestSendDepth  = 2
)

// sendsManifest is the sender's side of the rule: a member sends a joiner
// a manifest when it has hosts to hand over (moving > 0), or when it holds
// any host and is among the joiner's donors to manifestSendDepth by its
// view.
func sendsManifest(moving int, holdsHosts, donor bool) bool {
	return moving > 0 || holdsHosts && donor
}

func newSettling(manifestWait, hostWait time.Duration, joining bool, now time.Time) *settling {
	return &settling{manifestWait: manifestWait, hostWait: hostWait, joining: joining, started: now, awaiting: map[peer.ID]bool{}, pending: map[string]time.Time{}, settled: map[string]bool{}, manifested: map[peer.ID]bool{}, founders: map[peer.ID]bool{}}
}

// joined records a member joining, with the members this node (self)
// sees now and those of its donors (to manifestAwaitDepth, by the same
// view) that announced a host. In the first manifestWait after this node
// first met the network, it awaits those donors' manifests: membership
// events arrive one by one, but ownership already follows the whole view,
// and a member that a newcomer displaced as a donor is no longer awaited
// (it sends a manifest anyway if it has hosts to hand over).
func (s *settling) joined(self peer.ID, members, donors []peer.ID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstSeen.IsZero() {
		s.firstSeen = now
	}
	if now.Sub(s.firstSeen) >= s.manifestWait {
		return
	}
	for _, p := range members {
		if p != self {
			s.founders[p] = true
		}
	}
	clear(s.awaiting)
	for _, p := range donors {
		if p != self && !s.manifested[p] {
			s.awaiting[p] = true
		}
	}
}

// awaitedDonors returns the members of view other than self, and those
// of them a joiner (self) awaits a manifest from: its donors to
// manifestAwaitDepth whose heartbeat announced a host (see settling).
func awaitedDonors(self peer.ID, view *p2p.Ring, members []p2p.Member) (others, donors []peer.ID) {
	awaited := view.Donors(self, manifestAwaitDepth)
	for _, m := range members {
		if m.ID == self || !view.Has(m.ID) {
			continue
		}
		others = append(others, m.ID)
		if m.Load.Hosts > 0 && slices.Contains(awaited, m.ID) {
			donors = append(donors, m.ID)
		}
	}
	return others, donors
}

// viewSettledAt is when this node's view is old enough to name a joiner's
// donors: manifestWait after it first met another member (zero before
// it met anyone).
func (s *settling) viewSettledAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstSeen.IsZero() {
		return time.Time{}
	}
	return s.firstSeen.Add(s.manifestWait)
}

// founder reports whether p was met while this node joined.
func (s *settling) founder(p peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.founders[p]
}

// left forgets p: a dead member sends no manifest.
func (s *settling) left(p peer.ID) {
	s.mu.Lock()
	delete(s.awaiting, p)
	s.mu.Unlock()
}

// manifest records the hosts p is about to hand over. A host is held back
// once, for at most hostWait from the first manifest that names it: a
// later manifest does not restart the wait, so a member that keeps naming
// a host cannot keep it from being crawled. Expired waits are pruned here,
// so the pending set holds only the last hostWait's hosts.
func (s *settling) manifest(p peer.ID, hosts []string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.awaiting, p)
	s.manifested[p] = true
	for h, since := range s.pending {
		if now.Sub(since) >= s.hostWait {
			delete(s.pending, h)
			s.settled[h] = true
		}
	}
	for _, h := range hosts {
		if _, waiting := s.pending[h]; !waiting && !s.settled[h] { // the handoff may overtake its manifest
			s.pending[h] = now
		}
	}
}

// forget readies host for another handoff to this node: it was handed
// away, and should it come back, its next manifest is waited for again.
func (s *settling) forget(host string) {
	s.mu.Lock()
	delete(s.settled, host)
	delete(s.pending, host)
	s.mu.Unlock()
}

// settle marks host as handed over: it may be crawled at once.
func (s *settling) settle(host string) {
	s.mu.Lock()
	delete(s.pending, host)
	s.settled[host] = true
	s.mu.Unlock()
}

// mayCrawl reports whether host, owned by this node in its current view,
// may be crawled now.
func (s *settling) mayCrawl(host string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.joining && s.firstSeen.IsZero() && now.Sub(s.started) < s.manifestWait {
		return false
	}
	if len(s.awaiting) > 0 {
		if now.Sub(s.firstSeen) < s.manifestWait {
			return false
		}
		clear(s.awaiting)
	}
	if since, ok := s.pending[host]; ok {
		if now.Sub(since) < s.hostWait {
			return false
		}
		delete(s.pending, host)
		s.settled[host] = true
	}
	return true
}

// recent holds members that may still be alive although this node does
// not see them: the membership it knew when it last stopped ("n:m/<peer
// ID>" keys, written on every join and leave), and members that left in the
// last few seconds. A host is crawled only if this node also owns it among
// them, until each one is seen again or its grace period ends.
//
// Why: a node restarted after a crash sees only itself at first and would
// own, for a few heartbeats, the hosts of every member it has not heard
// from yet; and a member killed and restarted is declared gone by the
// others after MemberTimeout, when its replica takes its hosts over, only to
// hand them back a second later. Both crawl what the owner already fetched
// (measured: most duplicate fetches under repeated SIGKILLs). A member that
// is really gone costs its hosts one grace period of crawling.
//
// A restarted node also waits for the hosts it owns until their other
// replicas among the remembered members are seen: a page stored before
// that is replicated to nobody who would take the host over, and on a
// loaded machine the others may have taken the host over meanwhile
// (TestSIGKILLs: pages fetched by a node 1.5 s after its restart, fetched
// again by the member that took its hosts when it was killed next).
type recent struct {
	mu    sync.Mutex
	until map[peer.ID]time.Time
	// unseen are the members remembered from the last run and not yet
	// seen in this one.
	unseen map[peer.ID]bool
	grace  time.Duration
	// joined is when each current member joined this node's view.
	joined map[peer.ID]time.Time
}

const prefixMember = "n:m/"

// recentGrace: a live member's heartbeat arrives within MemberTimeout, and
// a restarted node is back within a few seconds.
func recentGrace(memberTimeout time.Duration) time.Duration { return 2 * memberTimeout }

// loadRemembered reads the membership of the last run.
func (n *Node) loadRemembered(grace time.Duration) error {
	n.recent.until = map[peer.ID]time.Time{}
	n.recent.unseen = map[peer.ID]bool{}
	n.recent.joined = map[peer.ID]time.Time{}
	n.recent.grace = grace
	until := time.Now().Add(grace)
	return n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixMember)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			id, err := peer.Decode(string(it.Item().Key()[len(prefixMember):]))
			if err == nil && id != n.net.ID() {
				n.recent.until[id] = until
				n.recent.unseen[id] = true
			}
		}
		return nil
	})
}

// memberEvent keeps the remembered membership and the recently left
// members current.
func (n *Node) memberEvent(id peer.ID, joined bool) {
	n.recent.mu.Lock()
	if joined {
		delete(n.recent.until, id)
		delete(n.recent.unseen, id)
		if n.recent.joined != nil {
			n.recent.joined[id] = time.Now()
		}
	} else {
		n.recent.until[id] = time.Now().Add(n.recent.grace)
		delete(n.recent.joined, id)
	}
	n.recent.mu.Unlock()
	if !joined {
		n.seeds.forget(id)
	}
	key := []byte(prefixMember + id.String())
	err := n.db.Update(func(txn *badger.Txn) error {
		if joined {
			return txn.Set(key, nil)
		}
		return txn.Delete(key)
	})
	if err != nil {
		n.errs.add("remember member", err)
	}
}

// joinedWithin reports whether member p joined this node's view less than
// d ago.
func (n *Node) joinedWithin(p peer.ID, d time.Duration) bool {
	n.recent.mu.Lock()
	defer n.recent.mu.Unlock()
	at, ok := n.recent.joined[p]
	return ok && time.Since(at) < d
}

// ownsAmongRecent reports whether this node owns host when the members
// that may still be alive count as members too, and none of the host's
// other replicas among them is a member remembered from the last run and
// not seen yet.
func (n *Node) ownsAmongRecent(host string) bool {
	now := time.Now()
	var ids, unseen []peer.ID
	n.recent.mu.Lock()
	for id, until := range n.recent.until {
		if now.After(until) {
			delete(n.recent.until, id)
			delete(n.recent.unseen, id)
			continue
		}
		ids = append(ids, id)
		if n.recent.unseen[id] {
			unseen = append(unseen, id)
		}
	}
	n.recent.mu.Unlock()
	if len(ids) == 0 {
		return true
	}
	for _, m := range n.net.Members() {
		ids = append(ids, m.ID)
	}
	reps := p2p.ReplicasOf(ids, host, n.net.ReplicationFactor())
	if len(reps) == 0 || reps[0] != n.net.ID() {
		return false
	}
	for _, r := range reps[1:] {
		if slices.Contains(unseen, r) {
			return false
		}
	}
	return true
}
