package p2p

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// Admission: which heartbeat origins become members.
//
// A heartbeat proves only that someone holds the origin's private key; it
// says nothing of whether a node runs behind it. A peer could relay
// heartbeats signed by thousands of generated keys and each would become a
// member that owns hosts it never crawls. So an origin is admitted only
// while this node has a live connection to it: libp2p's security handshake
// authenticated the peer ID at the other end, so the member is tied to a
// running host that answers for its key. An origin heard but not connected
// is a candidate: this node dials the addresses its heartbeat announced
// (at most candidateDials at once, each candidate again after
// candidateRedial), and admits it once the dial succeeds. A generated key
// with no host behind it is never admitted, and it costs a bounded entry
// (maxCandidates, forgotten after MemberTimeout of silence) and one
// failed dial.
//
// A candidate's heartbeat is not relayed onwards (only members' are), so
// honest nodes never pass on an origin they could not reach. The peer that
// relayed a candidate to this node vouched for it: a relayer whose
// candidates fail their dials relayFailures times within relayWindow is
// blacklisted in gossipsub for relayBan (its messages are then dropped
// before their signatures are checked), which ends a flood of heartbeats
// signed by generated keys after a few rounds.
//
// Admissions are further bounded by Config.MaxMembers and by a join rate
// (Config.JoinRate, JoinBurst): an attacker who runs many real hosts can
// still join with each, up to those bounds (the Sybil limit; RELIABILITY.md
// says what a PSK adds).

const (
	// candidateDials caps the dials to candidates under way at once.
	candidateDials = 4
	// candidateRedial is how long a candidate waits before being dialled
	// again after a failed dial.
	candidateRedial = 10 * time.Second
	// relayFailures failed candidates within relayWindow blacklist their
	// relayer for relayBan.
	relayFailures = 20
	relayWindow   = time.Minute
	relayBan      = 10 * time.Minute
)

// candidate is an origin heard from but not admitted.
type candidate struct {
	hb       heartbeat
	heard    time.Time // last heartbeat
	dialedAt time.Time
	relayer  peer.ID // who first passed its heartbeat on
}

// admission holds the candidates and the join limiter; membership.mu guards it.
type admission struct {
	maxMembers    int
	maxCandidates int
	joins         *rate.Limiter
	candidates    map[peer.ID]*candidate
	// failures counts each relayer's failed candidates since the start of
	// its window.
	failures map[peer.ID]*relayRecord
}

type relayRecord struct {
	since  time.Time
	failed int
}

func newAdmission(cfg Config) *admission {
	return &admission{
		maxMembers:    cfg.MaxMembers,
		maxCandidates: max(64, cfg.MaxMembers/4),
		joins:         rate.NewLimiter(cfg.JoinRate, cfg.JoinBurst),
		candidates:    map[peer.ID]*candidate{},
		failures:      map[peer.ID]*relayRecord{},
	}
}

type verdict int

const (
	admitted  verdict = iota + 1
	candidacy         // not connected: held as a candidate, to be dialled
	refused           // no room (member cap, join rate, candidate cap)
)

// decide judges the heartbeat of an origin that is not a member. members
// is the current member count (this node excluded).
func (a *admission) decide(from peer.ID, hb heartbeat, relayer peer.ID, connected bool, members int, now time.Time) verdict {
	if !connected {
		c := a.candidates[from]
		if c == nil {
			if len(a.candidates) >= a.maxCandidates {
				return refused
			}
			c = &candidate{relayer: relayer}
			a.candidates[from] = c
		}
		c.hb, c.heard = hb, now
		return candidacy
	}
	if members >= a.maxMembers || !a.joins.AllowN(now, 1) {
		return refused
	}
	delete(a.candidates, from)
	return admitted
}

// dialDue reports whether candidate p should be dialled now, and marks it
// dialled.
func (a *admission) dialDue(p peer.ID, now time.Time) bool {
	c := a.candidates[p]
	if c == nil || now.Sub(c.dialedAt) < candidateRedial {
		return false
	}
	c.dialedAt = now
	return true
}

// known reports whether p is a candidate; heartbeats from origins that are
// neither members nor candidates are dropped before any per-origin state
// is made for them once the candidate list is full.
func (a *admission) known(p peer.ID) bool { _, ok := a.candidates[p]; return ok }

func (a *admission) full() bool { return len(a.candidates) >= a.maxCandidates }

// failed records that candidate p did not answer its dial, and reports
// whether its relayer has now vouched for relayFailures such candidates
// within relayWindow; if so, the relayer's candidates are forgotten.
func (a *admission) failed(p peer.ID, now time.Time) (relayer peer.ID, ban bool) {
	c := a.candidates[p]
	if c == nil || c.relayer == "" || c.relayer == p {
		return "", false
	}
	relayer = c.relayer
	r := a.failures[relayer]
	if r == nil || now.Sub(r.since) > relayWindow {
		r = &relayRecord{since: now}
		a.failures[relayer] = r
	}
	r.failed++
	if r.failed < relayFailures {
		return relayer, false
	}
	delete(a.failures, relayer)
	for id, c := range a.candidates {
		if c.relayer == relayer {
			delete(a.candidates, id)
		}
	}
	return relayer, true
}

// expire forgets candidates silent for longer than timeout and returns
// those due for another dial.
func (a *admission) expire(now time.Time, timeout time.Duration) (redial []peer.ID) {
	for r, rec := range a.failures {
		if now.Sub(rec.since) > relayWindow {
			delete(a.failures, r)
		}
	}
	for p, c := range a.candidates {
		switch {
		case now.Sub(c.heard) > timeout:
			delete(a.candidates, p)
		case now.Sub(c.dialedAt) >= candidateRedial:
			redial = append(redial, p)
		}
	}
	return redial
}

// confirmCandidate dials candidate p at the addresses its heartbeat gave
// and admits it if the dial succeeds (onHeartbeat sees it connected).
func (ms *membership) confirmCandidate(p peer.ID) {
	ms.mu.Lock()
	due := ms.adm.dialDue(p, ms.clock.Now())
	var hb heartbeat
	if c := ms.adm.candidates[p]; c != nil {
		hb = c.hb
	}
	ms.mu.Unlock()
	if !due {
		return
	}
	select {
	case ms.candidateSem <- struct{}{}:
	default:
		ms.mu.Lock()
		if c := ms.adm.candidates[p]; c != nil {
			c.dialedAt = time.Time{} // no dial slot: try again at the next maintenance tick
		}
		ms.mu.Unlock()
		return
	}
	ms.spawn(func() {
		defer func() { <-ms.candidateSem }()
		ctx, cancel := context.WithTimeout(ms.ctx, 5*time.Second)
		defer cancel()
		err := ms.h.Connect(ctx, peer.AddrInfo{ID: p, Addrs: hb.Addrs})
		if err != nil || ms.h.Network().Connectedness(p) != network.Connected {
			ms.st.candidateDialsFailed.Add(1)
			ms.log.Debug("candidate member not reachable at its announced addresses", "peer", p, "err", err)
			ms.mu.Lock()
			relayer, ban := ms.adm.failed(p, ms.clock.Now())
			ms.mu.Unlock()
			if ban && relayer != ms.h.ID() {
				ms.st.relayersBanned.Add(1)
				ms.log.Warn("peer blacklisted in gossip: it relayed heartbeats of members that do not exist", "peer", relayer, "for", relayBan)
				ms.ps.BlacklistPeer(relayer)
			}
			return
		}
		ms.onHeartbeat(p, hb, p)
	})
}

// relayBlacklist is gossipsub's blacklist of relayers: a peer added stays
// for relayBan. pubsub's own TimeCachedBlacklist runs a sweeping goroutine
// that nothing can stop; this one expires entries when asked, holds at
// most maxBanned (a full list makes room by dropping expired entries, then
// refuses), and needs no goroutine.
type relayBlacklist struct {
	clock Clock
	mu    sync.Mutex
	until map[peer.ID]time.Time
}

const maxBanned = 4096

func newRelayBlacklist(clock Clock) *relayBlacklist {
	return &relayBlacklist{clock: clock, until: map[peer.ID]time.Time{}}
}

// Add implements pubsub.Blacklist.
func (b *relayBlacklist) Add(p peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if len(b.until) >= maxBanned {
		for q, t := range b.until {
			if !now.Before(t) {
				delete(b.until, q)
			}
		}
		if len(b.until) >= maxBanned {
			return false
		}
	}
	b.until[p] = now.Add(relayBan)
	return true
}

// Contains implements pubsub.Blacklist.
func (b *relayBlacklist) Contains(p peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.until[p]
	if ok && !b.clock.Now().Before(t) {
		delete(b.until, p)
		return false
	}
	return ok
}
