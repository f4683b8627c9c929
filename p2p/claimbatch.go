package p2p

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Claim batches. A crawler claims every page it stores, and a signed,
// routed claim costs the page a signature, its verification, a stream
// and a Badger transaction at the registry. A node's own claims therefore
// go to their registry (by its view) on the claims protocol: per registry
// one batch in flight, and the claims made meanwhile wait and go together
// in the next, so a batch is as large as the concurrency of the claimants
// makes it (a node's crawler claims from its few processing workers, so
// most batches hold one claim) and no claim waits for others. The stream's peer is the
// origin, so a batch is not signed; it is checked like a signed claim
// (the origin holds each claimed URL's host by the receiver's view, within
// its claim allowance) and stored in one transaction. A claim the
// receiver is not the registry of (the two views differ) is answered
// claimNotHere and goes the signed, routed way; so does a claim whose
// batch failed in transport.

// claimBatchTimeout bounds one batch's exchange; its claims then go the
// routed way, which retries.
const claimBatchTimeout = 30 * time.Second

// pendingClaim is one claim waiting for its batch's answer.
type pendingClaim struct {
	ctx   context.Context // the claimant's: a claim given up on is not sent
	entry claimEntry
	done  chan claimResult // buffered: the sender never blocks on it
}

type claimResult struct {
	answer claimAnswer
	err    error // transport failure or malformed answer: claim the routed way
}

// claimQueue is the claims waiting for one registry; busy while a sender
// goroutine works through them.
type claimQueue struct {
	waiting []*pendingClaim
	busy    bool
}

// claimBatcher sends this node's claims to their registries in batches.
type claimBatcher struct {
	c  *claims
	mu sync.Mutex
	qs map[peer.ID]*claimQueue
}

// claimAt claims entry at target (the registry by this node's view) in a
// batch and returns the answer, or an error when the batch failed in
// transport.
func (b *claimBatcher) claimAt(ctx context.Context, target peer.ID, e claimEntry) (claimAnswer, error) {
	pc := &pendingClaim{ctx: ctx, entry: e, done: make(chan claimResult, 1)}
	b.mu.Lock()
	if b.qs == nil {
		b.qs = map[peer.ID]*claimQueue{}
	}
	q := b.qs[target]
	if q == nil {
		q = &claimQueue{}
		b.qs[target] = q
	}
	q.waiting = append(q.waiting, pc)
	start := !q.busy
	q.busy = true
	b.mu.Unlock()
	if start && !b.c.spawn(func() { b.send(target) }) {
		b.mu.Lock()
		q.busy = false
		b.mu.Unlock()
		return claimAnswer{}, errors.New("p2p: claim: node closed")
	}
	select {
	case r := <-pc.done:
		return r.answer, r.err
	case <-ctx.Done():
		return claimAnswer{}, ctx.Err()
	}
}

// send sends target's waiting claims, a batch at a time, until none wait.
func (b *claimBatcher) send(target peer.ID) {
	for {
		batch := b.take(target)
		if len(batch) == 0 {
			return
		}
		entries := make([]claimEntry, len(batch))
		for i, pc := range batch {
			entries[i] = pc.entry
		}
		answers, err := b.exchange(target, entries)
		for i, pc := range batch {
			if err != nil {
				pc.done <- claimResult{err: err}
			} else {
				pc.done <- claimResult{answer: answers[i]}
			}
		}
	}
}

// take removes the next batch from target's queue (claims whose claimant
// gave up are dropped), or ends the queue's sender when it is empty.
func (b *claimBatcher) take(target peer.ID) []*pendingClaim {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.qs[target]
	var batch []*pendingClaim
	size, i := 0, 0
	for ; i < len(q.waiting) && len(batch) < maxClaimBatch; i++ {
		pc := q.waiting[i]
		if pc.ctx.Err() != nil {
			continue
		}
		n := len(pc.entry.Key) + len(pc.entry.Value)
		if len(batch) > 0 && size+n > maxClaimBatchBytes {
			break
		}
		batch, size = append(batch, pc), size+n
	}
	q.waiting = q.waiting[i:]
	if len(batch) == 0 {
		delete(b.qs, target)
	}
	return batch
}

// exchange sends one batch and decodes its answer.
func (b *claimBatcher) exchange(target peer.ID, entries []claimEntry) ([]claimAnswer, error) {
	ctx, cancel := context.WithTimeout(b.c.ctx, claimBatchTimeout)
	defer cancel()
	resp, _, err := b.c.call(ctx, target, b.c.batchProto, encodeClaimBatch(entries))
	if err != nil {
		return nil, err
	}
	answers, err := decodeClaimAnswers(resp, len(entries))
	if err != nil {
		return nil, fmt.Errorf("p2p: claim batch answer from %s: %w", target, err)
	}
	b.c.st.claimBatchesSent.Add(1)
	b.c.st.claimsBatched.Add(uint64(len(entries)))
	return answers, nil
}

// handleBatch answers a batch of claims whose origin is the stream's
// peer: each is stored if this node is its key's registry and the origin
// holds its URL's host, within the origin's claim allowance.
func (c *claims) handleBatch(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	entries, err := decodeClaimBatch(msg)
	if err != nil {
		return nil, err
	}
	hosts := make([]string, len(entries))
	for i, e := range entries {
		if hosts[i], err = hostOf(e.Value); err != nil {
			return nil, malformed("claim value: %v", err)
		}
	}
	if c.intakeGate != nil {
		if err := c.intakeGate(); err != nil {
			return nil, fmt.Errorf("claims refused: %w", err)
		}
	}
	answers := make([]claimAnswer, len(entries))
	view, self := c.mem.view(), c.mem.self()
	keep := make([]int, 0, len(entries))
	for i, e := range entries {
		switch {
		case view.ownerOfKey(dataKey(e.Key)) != self:
			answers[i].Status = claimNotHere
		case !c.mem.holds(from, hosts[i]):
			answers[i].Status = claimRefused
			c.st.claimsRefused.Add(1)
			if c.refusalLog.Allow() {
				c.log.Warn("claim refused: claimant does not hold the host", "origin", from, "host", hosts[i])
			}
		case !c.limits.allowClaim(from):
			answers[i].Status = claimThrottled
			c.st.claimsThrottled.Add(1)
		default:
			keep = append(keep, i)
		}
	}
	if len(keep) > 0 {
		kept := make([]claimEntry, len(keep))
		for j, i := range keep {
			kept[j] = entries[i]
		}
		winners, err := c.storeAll(kept)
		if err != nil {
			return nil, err
		}
		for j, i := range keep {
			answers[i] = claimAnswer{Status: claimWon, Winner: winners[j]}
		}
	}
	c.st.claimBatchesReceived.Add(1)
	return encodeClaimAnswers(answers), nil
}

// storeAll is store for many claims, in as few transactions as Badger's
// limits allow; it returns each claim's winner.
func (c *claims) storeAll(entries []claimEntry) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	winners := make([]string, len(entries))
	txn := c.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for i := 0; i < len(entries); {
		w, err := claimUpdate(txn, entries[i].Key, entries[i].Value, c.cfg.ClaimTTL)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return nil, fmt.Errorf("p2p: claims: %w", err)
			}
			txn = c.db.NewTransaction(true)
			continue // this claim again, in the new transaction
		}
		if err != nil {
			return nil, fmt.Errorf("p2p: claims: %w", err)
		}
		winners[i] = w
		i++
	}
	if err := txn.Commit(); err != nil {
		return nil, fmt.Errorf("p2p: claims: %w", err)
	}
	return winners, nil
}
