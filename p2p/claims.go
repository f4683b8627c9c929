package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"golang.org/x/time/rate"
)

// Claim keys: "p:c/<sha256(key), 32 bytes>" -> the winning value so far,
// kept for ClaimTTL after it was last written (Badger's TTL). Claims are
// not replicated: if the member holding a claim leaves, or the claim
// expires, the next claim starts afresh, so a page may then be claimed
// twice (the coordinator still collapses duplicates at query time).
const claimPrefix = "p:c/"

// caller sends one framed request to a peer and returns its answer and
// the bytes written (Node.call).
type caller func(ctx context.Context, p peer.ID, proto protocol.ID, req []byte) (resp []byte, wrote int, err error)

// claims is the claim registry: it signs this node's claims, routes
// claims to the member closest to their key, checks them at every hop and
// keeps the winners of the keys this node is closest to.
type claims struct {
	cfg        Config
	log        *slog.Logger
	st         *counters
	db         *badger.DB
	priv       crypto.PrivKey // nil: the host has no key, claims are disabled
	mem        *membership    // the view: where a key lives, who holds a host
	limits     *peerLimits    // the origins' claim allowances
	call       caller
	proto      protocol.ID // signed claims, routed
	batchProto protocol.ID // batches of the stream peer's own claims
	intakeGate func() error
	refusalLog *rate.Limiter
	ctx        context.Context   // the node's: ends at Close
	spawn      func(func()) bool // runs a goroutine the node waits for; false once closed
	batcher    claimBatcher

	mu sync.Mutex // one read-modify-write of a winner at a time
}

// Claim registers value under key at the member closest to sha256(key)
// (greedy, like URL forwarding) and returns the winning value: the least
// of all values claimed there, shortest first, then in byte order. The
// winner therefore does not depend on which claim arrived first, and a
// claim that beats the stored winner replaces it. Use it for global
// duplicate suppression: a caller whose value is not the winner is the
// duplicate (one that won earlier and was beaten later keeps what it did).
//
// value must be an absolute URL on a host this node holds (owns or
// replicates). The claim goes to the registry in a batch of this node's
// claims (claimbatch.go), which the registry accepts from this node only
// for hosts it holds; where the registry's view differs, or the batch
// fails in transport, the claim is signed with the node's identity key
// and routed, and every node on its way refuses it (as a *RemoteError)
// unless the signer is among the Replicas closest members to the URL's
// host by that node's view. A peer cannot claim, and so suppress, pages
// on hosts honest peers own.
func (n *Node) Claim(ctx context.Context, key []byte, value string) (string, error) {
	return n.claims.register(ctx, key, value)
}

func (c *claims) register(ctx context.Context, key []byte, value string) (string, error) {
	if len(key) == 0 || len(key) > maxClaimKeyBytes || len(value) > maxClaimValueBytes {
		return "", fmt.Errorf("p2p: claim: key length %d or value length %d out of range", len(key), len(value))
	}
	if _, err := hostOf(value); err != nil {
		return "", fmt.Errorf("p2p: claim: value must be a URL: %w", err)
	}
	if c.priv == nil {
		return "", errors.New("p2p: claim: the host has no private key to sign with")
	}
	return c.claimVia(ctx, c.mem.view().ownerOfKey(dataKey(key)), key, value)
}

// claimVia claims at target, the key's registry by this node's view: in
// a batch, and the signed, routed way if target answers that it is not
// the registry by its view or the batch fails in transport.
func (c *claims) claimVia(ctx context.Context, target peer.ID, key []byte, value string) (string, error) {
	if target != c.mem.self() && c.batchProto != "" {
		a, err := c.batcher.claimAt(ctx, target, claimEntry{Key: key, Value: value})
		switch {
		case ctx.Err() != nil:
			return "", fmt.Errorf("p2p: claim: %w", ctx.Err())
		case errors.As(err, new(*RemoteError)):
			return "", err // the registry refused the whole batch (its intake gate)
		case err != nil:
			c.log.Debug("claim batch failed; claiming the routed way", "registry", target, "err", err)
		case a.Status == claimWon:
			return a.Winner, nil
		case a.Status == claimRefused:
			return "", &RemoteError{Peer: target, Msg: fmt.Sprintf("claim refused: %s does not hold the host of %q", c.mem.self(), value), Refused: true}
		case a.Status == claimThrottled:
			return "", &RemoteError{Peer: target, Msg: fmt.Sprintf("claim refused: %s is over its claim rate", c.mem.self()), Refused: true}
		}
	}
	req := claimRequest{Key: key, Value: value}
	if err := signClaim(&req, c.cfg.Network, c.priv); err != nil {
		return "", fmt.Errorf("p2p: claim: %w", err)
	}
	return c.route(ctx, req)
}

// route stores the claim here if this node is closest to its key, and
// otherwise passes it on to the closest member it knows.
func (c *claims) route(ctx context.Context, req claimRequest) (string, error) {
	target := c.mem.view().ownerOfKey(dataKey(req.Key))
	if target == c.mem.self() {
		return c.store(req.Key, req.Value)
	}
	if req.Hops+1 > c.cfg.MaxHops {
		return "", fmt.Errorf("p2p: claim: hop limit %d reached", c.cfg.MaxHops)
	}
	req.Hops++
	// A transport hiccup (a reset or cancelled stream) is retried a few
	// times; an answer from the remote handler is final.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 && !sleepCtx(ctx, time.Duration(50*attempt)*time.Millisecond) {
			break
		}
		var resp []byte
		resp, _, err = c.call(ctx, target, c.proto, encodeClaim(req))
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

// handle checks a claim at every hop: signed by its origin, for a URL
// whose host the origin holds by this node's view; then stores or
// forwards it.
func (c *claims) handle(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	req, err := decodeClaim(msg)
	if err != nil {
		return nil, err
	}
	origin, err := claimOrigin(req, c.cfg.Network)
	if err != nil {
		return nil, err
	}
	host, err := hostOf(req.Value)
	if err != nil {
		return nil, malformed("claim value: %v", err)
	}
	if !c.mem.holds(origin, host) {
		c.st.claimsRefused.Add(1)
		if c.refusalLog.Allow() {
			c.log.Warn("claim refused: claimant does not hold the host", "origin", origin, "from", from, "host", host)
		}
		return nil, fmt.Errorf("claim refused: %s does not hold host %q", origin, host)
	}
	if c.intakeGate != nil {
		if err := c.intakeGate(); err != nil {
			return nil, fmt.Errorf("claim refused: %w", err)
		}
	}
	if !c.limits.allowClaim(origin) {
		c.st.claimsThrottled.Add(1)
		return nil, fmt.Errorf("claim refused: %s is over its claim rate", origin)
	}
	w, err := c.route(ctx, req)
	if err != nil {
		return nil, err
	}
	return []byte(w), nil
}

// claimBeats is the order of claim values: shorter first, then bytes.
func claimBeats(a, b string) bool {
	return len(a) < len(b) || len(a) == len(b) && a < b
}

// store keeps value under key unless the stored winner beats it, and
// returns the winner.
func (c *claims) store(key []byte, value string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var winner string
	err := c.db.Update(func(txn *badger.Txn) error {
		var err error
		winner, err = claimUpdate(txn, key, value, c.cfg.ClaimTTL)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("p2p: claim: %w", err)
	}
	return winner, nil
}

// claimUpdate stores value under key in txn unless the winner stored
// there beats it, and returns the winner.
func claimUpdate(txn *badger.Txn, key []byte, value string, ttl time.Duration) (string, error) {
	dk := dataKey(key)
	k := append([]byte(claimPrefix), dk[:]...)
	item, err := txn.Get(k)
	if err == nil {
		v, err := item.ValueCopy(nil)
		if err != nil {
			return "", err
		}
		if !claimBeats(value, string(v)) {
			return string(v), nil
		}
	} else if !errors.Is(err, badger.ErrKeyNotFound) {
		return "", err
	}
	e := badger.NewEntry(k, []byte(value))
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	if err := txn.SetEntry(e); err != nil {
		return "", err
	}
	return value, nil
}
