package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// ---- search ---------------------------------------------------------------------

// SetSearchHandler installs the handler of search requests (opaque bytes
// both ways; search defines the payloads).
func (n *Node) SetSearchHandler(h func(ctx context.Context, from peer.ID, req []byte) ([]byte, error)) {
	n.mu.Lock()
	n.searchH = h
	n.mu.Unlock()
}

// Request sends one search request to p and waits for the answer until
// ctx's deadline. A request to this node itself calls the handler directly.
func (n *Node) Request(ctx context.Context, p peer.ID, req []byte) ([]byte, error) {
	if p == n.h.ID() {
		n.mu.Lock()
		h := n.searchH
		n.mu.Unlock()
		if h == nil {
			return nil, errors.New("p2p: no search handler set")
		}
		return h(ctx, p, req)
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(time.Until(dl), maxSearchTimeout)
		if timeout <= 0 {
			return nil, fmt.Errorf("p2p: search request: %w", context.DeadlineExceeded)
		}
	}
	resp, _, err := n.call(ctx, p, n.protoSearch, encodeSearchRequest(timeout, req))
	if err != nil {
		return nil, fmt.Errorf("p2p: search request: %w", err)
	}
	return resp, nil
}

func (n *Node) handleSearch(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	timeout, req, err := decodeSearchRequest(msg)
	if err != nil {
		return nil, err
	}
	if !n.acquireSearch(from) {
		n.st.searchesRefused.Add(1)
		return nil, errSearchBusy
	}
	defer n.releaseSearch(from)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	start, err := n.searches.acquire(ctx, from)
	if err != nil {
		n.st.searchesRefused.Add(1)
		return nil, errSearchBusy
	}
	defer n.searches.release(from, start)
	n.mu.Lock()
	h := n.searchH
	n.mu.Unlock()
	if h == nil {
		return nil, errors.New("no search handler")
	}
	return h(ctx, from, req)
}

// errSearchBusy refuses a search request from a member that already has
// MaxSearchesPerPeer under way here.
var errSearchBusy = errors.New("busy: too many search requests under way from this peer")

// acquireSearch admits one more search request from p unless p has
// MaxSearchesPerPeer under way; releaseSearch undoes it.
func (n *Node) acquireSearch(p peer.ID) bool {
	n.limMu.Lock()
	defer n.limMu.Unlock()
	l := n.limiterLocked(p)
	if l.searches >= n.cfg.MaxSearchesPerPeer {
		return false
	}
	l.searches++
	return true
}

func (n *Node) releaseSearch(p peer.ID) {
	n.limMu.Lock()
	defer n.limMu.Unlock()
	n.limiterLocked(p).searches--
}

// ---- deliver --------------------------------------------------------------------

// SetDeliverHandler installs the handler for one topic of reliable
// delivery (handoff, replication). A message is acknowledged only after
// the handler returns nil.
func (n *Node) SetDeliverHandler(topic string, h func(ctx context.Context, from peer.ID, payload []byte) error) {
	n.mu.Lock()
	n.deliverH[topic] = h
	n.mu.Unlock()
}

// Send delivers payload to p's handler for topic and returns nil only once
// that handler has returned nil. Transport failures are retried with
// backoff until ctx ends; an error returned by the remote handler is not
// retried (it comes back as *RemoteError). Send is not durable across
// restarts: the caller keeps the data until Send succeeds (node deletes
// handed-off pages only afterwards).
func (n *Node) Send(ctx context.Context, p peer.ID, topic string, payload []byte) error {
	if topic == "" || len(topic) > maxTopicBytes {
		return fmt.Errorf("p2p: send: topic length %d out of range", len(topic))
	}
	if p == n.h.ID() {
		_, err := n.handleDeliverDecoded(ctx, p, topic, payload)
		return err
	}
	msg := encodeDeliver(topic, payload)
	backoff := time.Duration(0)
	for {
		_, _, err := n.call(ctx, p, n.protoDeliver, msg)
		if err == nil {
			return nil
		}
		var remote *RemoteError
		if errors.As(err, &remote) || ctx.Err() != nil || n.closed.Load() {
			return fmt.Errorf("p2p: send %s to %s: %w", topic, p, err)
		}
		backoff = n.nextBackoff(backoff)
		if !sleepCtx(ctx, backoff) {
			return fmt.Errorf("p2p: send %s to %s: %w (last error: %v)", topic, p, ctx.Err(), err)
		}
	}
}

func (n *Node) handleDeliver(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	topic, payload, err := decodeDeliver(msg)
	if err != nil {
		return nil, err
	}
	return n.handleDeliverDecoded(ctx, from, topic, payload)
}

func (n *Node) handleDeliverDecoded(ctx context.Context, from peer.ID, topic string, payload []byte) ([]byte, error) {
	n.mu.Lock()
	h := n.deliverH[topic]
	n.mu.Unlock()
	if h == nil {
		return nil, fmt.Errorf("no handler for topic %q", topic)
	}
	return nil, h(ctx, from, payload)
}

// ---- claims ----------------------------------------------------------------------

// Claim keys: "p:c/<sha256(key), 32 bytes>" -> the winning value so far,
// kept for ClaimTTL after it was last written (Badger's TTL). Claims are
// not replicated: if the member holding a claim leaves, or the claim
// expires, the next claim starts afresh, so a page may then be claimed
// twice (the coordinator still collapses duplicates at query time).
const claimPrefix = "p:c/"

// Claim registers value under key at the member closest to sha256(key)
// (greedy, like URL forwarding) and returns the winning value: the least
// of all values claimed there, shortest first, then in byte order. The
// winner therefore does not depend on which claim arrived first, and a
// claim that beats the stored winner replaces it. Use it for global
// duplicate suppression: a caller whose value is not the winner is the
// duplicate (one that won earlier and was beaten later keeps what it did).
//
// value must be an absolute URL on a host this node holds (owns or
// replicates): the claim is signed with the node's identity key, and every
// node on its way refuses it (as a *RemoteError) unless the signer is among
// the Replicas closest members to the URL's host by that node's view
// (with the signer added, so that a member not yet heard of is judged
// fairly). A peer cannot claim, and so suppress, pages on hosts honest
// peers own.
func (n *Node) Claim(ctx context.Context, key []byte, value string) (string, error) {
	if len(key) == 0 || len(key) > maxClaimKeyBytes || len(value) > maxClaimValueBytes {
		return "", fmt.Errorf("p2p: claim: key length %d or value length %d out of range", len(key), len(value))
	}
	if _, err := hostOf(value); err != nil {
		return "", fmt.Errorf("p2p: claim: value must be a URL: %w", err)
	}
	if n.priv == nil {
		return "", errors.New("p2p: claim: the host has no private key to sign with")
	}
	c := claimRequest{Key: key, Value: value}
	if err := signClaim(&c, n.cfg.Network, n.priv); err != nil {
		return "", fmt.Errorf("p2p: claim: %w", err)
	}
	return n.claim(ctx, c)
}

func (n *Node) claim(ctx context.Context, c claimRequest) (string, error) {
	target := n.View().ownerOfKey(dataKey(c.Key))
	if target == n.h.ID() {
		return n.claimLocal(c.Key, c.Value)
	}
	if c.Hops+1 > n.cfg.MaxHops {
		return "", fmt.Errorf("p2p: claim: hop limit %d reached", n.cfg.MaxHops)
	}
	c.Hops++
	// A transport hiccup (a reset or cancelled stream) is retried a few
	// times; an answer from the remote handler is final.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 && !sleepCtx(ctx, time.Duration(50*attempt)*time.Millisecond) {
			break
		}
		var resp []byte
		resp, _, err = n.call(ctx, target, n.protoClaim, encodeClaim(c))
		if err == nil {
			return string(resp), nil
		}
		var remote *RemoteError
		if errors.As(err, &remote) {
			break
		}
	}
	return "", fmt.Errorf("p2p: claim at %s: %w", target, err)
}

// handleClaim checks a claim at every hop: signed by its origin, for a URL
// whose host the origin holds by this node's view; then stores or
// forwards it.
func (n *Node) handleClaim(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	c, err := decodeClaim(msg)
	if err != nil {
		return nil, err
	}
	origin, err := claimOrigin(c, n.cfg.Network)
	if err != nil {
		return nil, err
	}
	host, err := hostOf(c.Value)
	if err != nil {
		return nil, malformed("claim value: %v", err)
	}
	if !n.Holds(origin, host) {
		n.st.claimsRefused.Add(1)
		if n.refusalLog.Allow() {
			n.log.Warn("claim refused: claimant does not hold the host", "origin", origin, "from", from, "host", host)
		}
		return nil, fmt.Errorf("claim refused: %s does not hold host %q", origin, host)
	}
	if n.opts.intakeGate != nil {
		if err := n.opts.intakeGate(); err != nil {
			return nil, fmt.Errorf("claim refused: %w", err)
		}
	}
	if !n.allowClaim(origin) {
		n.st.claimsThrottled.Add(1)
		return nil, fmt.Errorf("claim refused: %s is over its claim rate", origin)
	}
	w, err := n.claim(ctx, c)
	if err != nil {
		return nil, err
	}
	return []byte(w), nil
}

// claimBeats is the order of claim values: shorter first, then bytes.
func claimBeats(a, b string) bool {
	return len(a) < len(b) || len(a) == len(b) && a < b
}

func (n *Node) claimLocal(key []byte, value string) (string, error) {
	dk := dataKey(key)
	k := append([]byte(claimPrefix), dk[:]...)
	n.claimMu.Lock()
	defer n.claimMu.Unlock()
	winner := value
	err := n.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err == nil {
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if !claimBeats(value, string(v)) {
				winner = string(v)
				return nil
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		e := badger.NewEntry(k, []byte(value))
		if n.cfg.ClaimTTL > 0 {
			e = e.WithTTL(n.cfg.ClaimTTL)
		}
		return txn.SetEntry(e)
	})
	if err != nil {
		return "", fmt.Errorf("p2p: claim: %w", err)
	}
	return winner, nil
}

// allowClaim charges one claim to origin's allowance (ClaimRate,
// ClaimBurst). Every hop charges it, so a flood is cut at the first.
func (n *Node) allowClaim(origin peer.ID) bool {
	n.limMu.Lock()
	defer n.limMu.Unlock()
	l := n.limiterLocked(origin)
	if l.claims == nil {
		l.claims = rate.NewLimiter(n.cfg.ClaimRate, n.cfg.ClaimBurst)
	}
	l.lastUsed = time.Now()
	return l.claims.Allow()
}
