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
// this node. With XOR ownership a join only moves hosts to the newcomer, and
// a leave moves hosts to a replica that already holds their pages. So the
// danger is a node that just joined (or rejoined after a crash) crawling a
// host before the previous owner's crawl state arrived, and fetching again
// what was already fetched.
//
// Protocol: when a node sees a member join, it sends that member a handoff
// manifest — the hosts it is about to hand over, possibly none — if it has
// hosts to hand over or if it is one of the joiner's manifestSendNeighbours
// XOR-closest members by its view (sendsManifest). A node that has just met
// the network waits for the manifests of its manifestAwaitNeighbours
// XOR-closest members (bounded by manifestWait) before crawling anything,
// and a host named in any manifest, awaited or not, waits for its handoff
// (bounded by hostWait).
//
// Why only neighbours: a host moves from member M to joiner J only if M
// was the member closest to the host's key and J is closer still, and in
// the XOR metric such an M shares the longest key prefix with J of all
// members but a few: it is one of J's closest members. Measured with
// random keys (2000 joins into each of N = 8, 32, 64, 200 and 1000 random
// members, 200 random hosts per join;
// TestJoinersTakeHostsFromNeighbours checks it), the previous owners of
// all the hosts a joiner took were among its 4 closest members in 98% of
// the joins at N = 200 that took any host, among its 6 closest in 99.5%,
// and among its 8 closest in all but one of the 10,000 joins.
//
// Before this rule every member sent every joiner a manifest and a joiner
// awaited all of them: at a network's start, where every node joins every
// other, N² messages over N² connections (the WAN simulator did not come
// up at 128 nodes). Now a joiner receives about manifestSendNeighbours
// manifests plus one per member that really moves hosts to it.
//
// A view must have settled before it can tell who a joiner's neighbours
// are. At a network's start every node's view is a handful of members, in
// which almost everyone looks like everyone's neighbour: a member that
// sees v others is among a joiner's manifestSendNeighbours closest with
// odds of about 16/v, so while its view grows to N members it would send
// about 16·(1 + ln(N/16)) manifests, and the network N times that (a
// 128-node start-up had about 900 manifests in flight at once). So a
// member whose view is
// younger than manifestWait (since it first met another member) defers
// the manifests it would send only as a neighbour until its view is that
// old, then decides by the settled view (viewSettledAt); a manifest with
// hosts to hand over is never deferred. A joiner whose neighbours are
// young waits at most manifestWait, as before; in a settled network,
// where churn happens, nothing is deferred.
//
// The two sizes differ on purpose. A sender decides by its view and the
// joiner by its own; a sender that sees up to manifestSendNeighbours -
// manifestAwaitNeighbours more members near the joiner than the joiner
// does still sends, so the joiner is rarely left waiting for a manifest
// that will not come. When it is (views far apart, or the joiner's view
// still filling at a network's start), it waits manifestWait: time, not
// correctness. And correctness does not rest on the neighbour sets: a
// member with hosts to hand over always sends its manifest, and the
// manifest's hosts wait for their handoff (pending) whoever sent it. What
// the sets decide is how long a joiner holds back its whole crawl: if a
// member outside the joiner's awaited set has hosts to hand over and its
// manifest arrives after the joiner started crawling, the joiner may fetch
// pages of those hosts again until the manifest arrives — the rare case
// measured above.
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

// manifestAwaitNeighbours is how many of its XOR-closest members a joiner
// waits for; manifestSendNeighbours is how close (in the sender's view) a
// member must be to a joiner to send it a manifest with nothing to hand
// over. See settling for the reasoning.
const (
	manifestAwaitNeighbours = 8
	manifestSendNeighbours  = 2 * manifestAwaitNeighbours
)

// sendsManifest is the sender's side of the rule: self sends joiner a
// manifest when it has hosts to hand over (moving > 0) or when it is among
// the joiner's manifestSendNeighbours closest other members in members
// (self's view; self counts whether listed or not).
func sendsManifest(self, joiner peer.ID, members []peer.ID, moving int) bool {
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
	return slices.Contains(p2p.ClosestMembers(others, p2p.PeerKey(joiner), manifestSendNeighbours), self)
}

func newSettling(manifestWait, hostWait time.Duration, joining bool, now time.Time) *settling {
	return &settling{manifestWait: manifestWait, hostWait: hostWait, joining: joining, started: now, awaiting: map[peer.ID]bool{}, pending: map[string]time.Time{}, settled: map[string]bool{}, manifested: map[peer.ID]bool{}, founders: map[peer.ID]bool{}}
}

// joined records a member joining, with the members this node (self) sees
// now, self excluded. In the first manifestWait after this node first met
// the network, it awaits the manifests of its manifestAwaitNeighbours
// closest members by the current view: membership events arrive one by
// one, but ownership already follows the whole view, and a member that a
// closer newcomer pushed out of the neighbours is no longer awaited (it
// sends a manifest anyway if it has hosts to hand over).
func (s *settling) joined(self peer.ID, members []peer.ID, now time.Time) {
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
	for _, p := range p2p.ClosestMembers(members, p2p.PeerKey(self), manifestAwaitNeighbours) {
		if p != self && !s.manifested[p] {
			s.awaiting[p] = true
		}
	}
}

// viewSettledAt is when this node's view is old enough to name a joiner's
// neighbours: manifestWait after it first met another member (zero before
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
