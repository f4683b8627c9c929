package p2p

import (
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// peerLimits holds what each peer may still send: its token bucket, the
// penalty box, its streams and searches under way, its URL and claim
// allowances, and (under "hb/"+origin) each heartbeat origin's rate.
type peerLimits struct {
	cfg Config
	log *slog.Logger
	st  *counters

	mu       sync.Mutex
	limiters map[peer.ID]*peerLimit
}

type peerLimit struct {
	lim            *rate.Limiter
	throttledUntil time.Time
	lastUsed       time.Time
	// streams counts the peer's inbound streams open now, urlBatches
	// its URL batches being read or handled.
	streams, urlBatches int
	// searches counts the peer's search requests under way.
	searches int
	// claims is the claim allowance of the peer as a claim's origin.
	claims *rate.Limiter
	// urlTokens is the peer's URL record allowance (may be negative after
	// a large batch), last refilled at urlRefill.
	urlTokens float64
	urlRefill time.Time
}

func newPeerLimits(cfg Config, log *slog.Logger, st *counters) *peerLimits {
	return &peerLimits{cfg: cfg, log: log, st: st, limiters: map[peer.ID]*peerLimit{}}
}

// allow charges one inbound message from p. A peer that exhausts its
// bucket is throttled (everything refused) for ThrottleFor.
func (pl *peerLimits) allow(p peer.ID) bool {
	now := time.Now()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	l := pl.limiterLocked(p)
	l.lastUsed = now
	if now.Before(l.throttledUntil) {
		pl.st.throttledMessages.Add(1)
		return false
	}
	if !l.lim.AllowN(now, 1) {
		l.throttledUntil = now.Add(pl.cfg.ThrottleFor)
		pl.st.throttledMessages.Add(1)
		pl.st.throttleEvents.Add(1)
		pl.log.Warn("peer throttled for flooding", "peer", p, "for", pl.cfg.ThrottleFor)
		return false
	}
	return true
}

// penalize throttles p at once: a correct peer never sends a malformed
// message, so one is reason enough.
func (pl *peerLimits) penalize(p peer.ID, why error) {
	pl.st.rejected.Add(1)
	pl.mu.Lock()
	l := pl.limiterLocked(p)
	l.lastUsed = time.Now()
	l.throttledUntil = time.Now().Add(pl.cfg.ThrottleFor)
	pl.mu.Unlock()
	pl.st.throttleEvents.Add(1)
	pl.log.Warn("peer throttled for a malformed message", "peer", p, "err", why, "for", pl.cfg.ThrottleFor)
}

// limiterLocked returns p's limits, creating them; mu must be held.
func (pl *peerLimits) limiterLocked(p peer.ID) *peerLimit {
	l := pl.limiters[p]
	if l == nil {
		l = &peerLimit{
			lim:       rate.NewLimiter(pl.cfg.PeerRate, pl.cfg.PeerBurst),
			urlTokens: float64(pl.cfg.PeerURLBurst),
			urlRefill: time.Now(),
		}
		pl.limiters[p] = l
	}
	return l
}

// maxURLBatchesPerPeer caps concurrent URL batches from one peer: an
// honest sender has one in flight (two when a lost ack overlaps a
// resend), and each may inflate to MaxMessageBytes.
const maxURLBatchesPerPeer = 4

// acquireStream admits one more inbound stream from p unless p is at its
// concurrency cap; releaseStream undoes it.
func (pl *peerLimits) acquireStream(p peer.ID) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	l := pl.limiterLocked(p)
	if l.streams >= pl.cfg.MaxStreamsPerPeer {
		pl.st.streamsRefused.Add(1)
		return false
	}
	l.streams++
	return true
}

func (pl *peerLimits) releaseStream(p peer.ID) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	l := pl.limiterLocked(p)
	l.streams--
	l.lastUsed = time.Now()
}

// acquireURLBatch admits one more URL batch from p, before it is read,
// unless p has maxURLBatchesPerPeer being read or handled;
// releaseURLBatch undoes it. A pipe holds a slot only while a batch is
// under way on it, not while it waits for the next.
func (pl *peerLimits) acquireURLBatch(p peer.ID) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	l := pl.limiterLocked(p)
	if l.urlBatches >= maxURLBatchesPerPeer {
		pl.st.streamsRefused.Add(1)
		return false
	}
	l.urlBatches++
	return true
}

func (pl *peerLimits) releaseURLBatch(p peer.ID) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.limiterLocked(p).urlBatches--
}

// acquireSearch admits one more search request from p unless p has
// MaxSearchesPerPeer under way; releaseSearch undoes it.
func (pl *peerLimits) acquireSearch(p peer.ID) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	l := pl.limiterLocked(p)
	if l.searches >= pl.cfg.MaxSearchesPerPeer {
		return false
	}
	l.searches++
	return true
}

func (pl *peerLimits) releaseSearch(p peer.ID) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.limiterLocked(p).searches--
}

// urlAllowance refills p's URL record allowance and reports whether it is
// positive: a cheap check before a batch is inflated. takeURLs then
// decides, atomically, with the batch's true size: while the allowance is
// positive it is charged count records (possibly into debt, so that a
// batch larger than the burst still gets through once), otherwise the
// batch is refused. Concurrent batches cannot all slip past one positive
// allowance.
func (pl *peerLimits) urlAllowance(p peer.ID) bool { return pl.takeURLs(p, 0) }

func (pl *peerLimits) takeURLs(p peer.ID, count int) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	l := pl.limiterLocked(p)
	now := time.Now()
	l.urlTokens = min(l.urlTokens+now.Sub(l.urlRefill).Seconds()*float64(pl.cfg.PeerURLRate), float64(pl.cfg.PeerURLBurst))
	l.urlRefill = now
	if l.urlTokens <= 0 {
		return false
	}
	l.urlTokens -= float64(count)
	return true
}

// allowClaim charges one claim to origin's allowance (ClaimRate,
// ClaimBurst). Every hop charges it, so a flood is cut at the first.
func (pl *peerLimits) allowClaim(origin peer.ID) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	l := pl.limiterLocked(origin)
	if l.claims == nil {
		l.claims = rate.NewLimiter(pl.cfg.ClaimRate, pl.cfg.ClaimBurst)
	}
	l.lastUsed = time.Now()
	return l.claims.Allow()
}

// allowHeartbeat rate-limits heartbeats per origin: a member sends one per
// HeartbeatInterval, so a few times that rate is plenty.
func (pl *peerLimits) allowHeartbeat(origin peer.ID) bool {
	key := "hb/" + origin
	pl.mu.Lock()
	defer pl.mu.Unlock()
	l := pl.limiters[key]
	if l == nil {
		every := rate.Every(pl.cfg.HeartbeatInterval / 4)
		l = &peerLimit{lim: rate.NewLimiter(every, 8)}
		pl.limiters[key] = l
	}
	l.lastUsed = time.Now()
	if !l.lim.Allow() {
		pl.st.throttledMessages.Add(1)
		return false
	}
	return true
}

// throttled counts the peers in the penalty box now.
func (pl *peerLimits) throttled() int {
	now := time.Now()
	n := 0
	pl.mu.Lock()
	for _, l := range pl.limiters {
		if now.Before(l.throttledUntil) {
			n++
		}
	}
	pl.mu.Unlock()
	return n
}

func (pl *peerLimits) prune() {
	cutoff := time.Now().Add(-10 * time.Minute)
	pl.mu.Lock()
	for p, l := range pl.limiters {
		// A debt of URL allowance (at most one batch) is long repaid after
		// ten idle minutes, so forgetting the limiter forgives nothing.
		if l.streams == 0 && l.searches == 0 && l.lastUsed.Before(cutoff) && time.Now().After(l.throttledUntil) {
			delete(pl.limiters, p)
		}
	}
	pl.mu.Unlock()
}
