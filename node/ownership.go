package node

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/p2p"
)

// settling keeps two nodes from crawling one host while ownership moves.
// After a membership change, a host whose owner changed to this node is not
// crawled until the previous owner's handoff arrived or the grace period
// ended; the previous owner stops at once because it no longer owns the host
// in its own view. A node's first sight of other members counts as a change
// of every host (it may be joining a network that crawled for a while).
type settling struct {
	mu      sync.Mutex
	grace   time.Duration
	since   time.Time // start of the current grace window
	prev    []peer.ID // the view before the window started; nil = first join
	first   bool      // the window is a first join
	settled map[string]bool
	members int
}

func newSettling(grace time.Duration) *settling {
	return &settling{grace: grace, settled: map[string]bool{}, members: 1}
}

// changed records a membership change from the view before it.
func (s *settling) changed(before []peer.ID, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.since) >= s.grace {
		// A new window: remember the view it started from.
		s.since = now
		s.first = len(before) <= 1 && s.members <= 1
		s.prev = append([]peer.ID(nil), before...)
		clear(s.settled)
	}
	s.members = len(before)
}

// settle marks host as handed over: it may be crawled at once.
func (s *settling) settle(host string) {
	s.mu.Lock()
	s.settled[host] = true
	s.mu.Unlock()
}

// mayCrawl reports whether this node (self), owner of host in its current
// view, may crawl it now.
func (s *settling) mayCrawl(host string, self peer.ID, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() || now.Sub(s.since) >= s.grace || s.settled[host] {
		return true
	}
	if s.first {
		return false
	}
	return p2p.OwnerOf(s.prev, host) == self
}
