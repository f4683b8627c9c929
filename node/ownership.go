package node

import (
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
// Protocol: whenever a node sees a member join, it sends that member a
// handoff manifest — the hosts it is about to hand over, possibly none.
// A node that has just met the network waits for the manifests of the
// members it met (bounded by manifestWait) before crawling anything, and a
// host named in a manifest waits for its handoff (bounded by hostWait).
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
}

func newSettling(manifestWait, hostWait time.Duration, joining bool, now time.Time) *settling {
	return &settling{manifestWait: manifestWait, hostWait: hostWait, joining: joining, started: now, awaiting: map[peer.ID]bool{}, pending: map[string]time.Time{}, settled: map[string]bool{}, manifested: map[peer.ID]bool{}}
}

// joined records a member joining, with the members this node sees now
// (self excluded). Every member seen in the first manifestWait after this
// node first met the network is awaited: membership events arrive one by
// one, but ownership already follows the whole view.
func (s *settling) joined(members []peer.ID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstSeen.IsZero() {
		s.firstSeen = now
	}
	if now.Sub(s.firstSeen) < s.manifestWait {
		for _, p := range members {
			if !s.manifested[p] {
				s.awaiting[p] = true
			}
		}
	}
}

// left forgets p: a dead member sends no manifest.
func (s *settling) left(p peer.ID) {
	s.mu.Lock()
	delete(s.awaiting, p)
	s.mu.Unlock()
}

// manifest records the hosts p is about to hand over.
func (s *settling) manifest(p peer.ID, hosts []string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.awaiting, p)
	s.manifested[p] = true
	for _, h := range hosts {
		if !s.settled[h] { // the handoff may overtake its manifest
			s.pending[h] = now
		}
	}
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
type recent struct {
	mu    sync.Mutex
	until map[peer.ID]time.Time
	grace time.Duration
}

const prefixMember = "n:m/"

// recentGrace: a live member's heartbeat arrives within MemberTimeout, and
// a restarted node is back within a few seconds.
func recentGrace(memberTimeout time.Duration) time.Duration { return 2 * memberTimeout }

// loadRemembered reads the membership of the last run.
func (n *Node) loadRemembered(grace time.Duration) error {
	n.recent.until = map[peer.ID]time.Time{}
	n.recent.grace = grace
	until := time.Now().Add(grace)
	return n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixMember)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			id, err := peer.Decode(string(it.Item().Key()[len(prefixMember):]))
			if err == nil && id != n.net.ID() {
				n.recent.until[id] = until
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
	} else {
		n.recent.until[id] = time.Now().Add(n.recent.grace)
	}
	n.recent.mu.Unlock()
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

// ownsAmongRecent reports whether this node owns host when the members
// that may still be alive count as members too.
func (n *Node) ownsAmongRecent(host string) bool {
	now := time.Now()
	var ids []peer.ID
	n.recent.mu.Lock()
	for id, until := range n.recent.until {
		if now.After(until) {
			delete(n.recent.until, id)
			continue
		}
		ids = append(ids, id)
	}
	n.recent.mu.Unlock()
	if len(ids) == 0 {
		return true
	}
	for _, m := range n.net.Members() {
		ids = append(ids, m.ID)
	}
	return p2p.OwnerOf(ids, host) == n.net.ID()
}
