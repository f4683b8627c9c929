package p2p

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// claimStored reads the winner a registry keeps for key, if any.
func claimStored(t *testing.T, db *badger.DB, key []byte) (string, bool) {
	t.Helper()
	dk := dataKey(key)
	var v []byte
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(append([]byte(claimPrefix), dk[:]...))
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v), true
}

// keysAt returns n claim keys whose registry among all is at.
func keysAt(all []peer.ID, at peer.ID, n int, tag string) [][]byte {
	var keys [][]byte
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Appendf(nil, "%s-%d", tag, i); ownerOfKey(all, dataKey(k)) == at {
			keys = append(keys, k)
		}
	}
	return keys
}

// claimAtOnce makes every claim i (values[i] for keys[i], at by(i)) on a
// goroutine of its own, and checks that each learns a winner no greater
// than its own value.
func claimAtOnce(ctx context.Context, t *testing.T, by func(i int) *testNode, keys [][]byte, values []string) {
	t.Helper()
	winners := make([]string, len(values))
	var wg sync.WaitGroup
	for i := range values {
		wg.Go(func() {
			w, err := by(i).Claim(ctx, keys[i], values[i])
			if err != nil {
				t.Error(err)
			}
			winners[i] = w
		})
	}
	wg.Wait()
	for i, w := range winners {
		if w != values[i] && !claimBeats(w, values[i]) {
			t.Errorf("claim of %s answered with the greater %s", values[i], w)
		}
	}
}

// startTrio starts three nodes that know each other.
func startTrio(t *testing.T, mutate func(*Config)) (a, b, c *testNode, all []peer.ID) {
	a = startNode(t, mutate, nil)
	b = startNode(t, mutate, []*testNode{a})
	c = startNode(t, mutate, []*testNode{a})
	all = []peer.ID{a.ID(), b.ID(), c.ID()}
	for _, n := range []*testNode{a, b, c} {
		waitFor(t, 10*time.Second, "membership", func() bool { return knows(n, all...) })
	}
	return a, b, c, all
}

// TestClaimBatches: a node's claims to one registry, made at once, go in
// a few batches, and the registry keeps for each key the least value
// claimed, as claims one by one do.
func TestClaimBatches(t *testing.T) {
	a, b, _, all := startTrio(t, nil)
	r := a.cfg.Replicas
	const n = 300
	keys := keysAt(all, a.ID(), n/2, "batched")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	values := make([]string, n)
	claimKeys := make([][]byte, n)
	for i := range n {
		// Two claims per key, of different lengths.
		values[i] = heldURL(t, all, b.ID(), r, fmt.Sprintf("p%d%s", i, map[bool]string{true: "-longer"}[i%2 == 1]))
		claimKeys[i] = keys[i/2]
	}
	claimAtOnce(ctx, t, func(int) *testNode { return b }, claimKeys, values)
	for k, key := range keys {
		least := values[2*k]
		if claimBeats(values[2*k+1], least) {
			least = values[2*k+1]
		}
		if v, ok := claimStored(t, a.db, key); !ok || v != least {
			t.Fatalf("registry keeps %q for key %d, want %q", v, k, least)
		}
	}
	sent, received := b.Stats().ClaimBatchesSent, a.Stats().ClaimBatchesReceived
	if sent == 0 || sent > n/4 || received != sent {
		t.Fatalf("%d claims went in %d batches (%d received), want a few", n, sent, received)
	}
	t.Logf("%d claims in %d batches", n, sent)
}

// TestClaimBatchNotHereGoesRouted: a batch sent to a member that is not
// the key's registry by its own view (the views differ) is answered
// claimNotHere, stored nowhere there, and the claim goes the routed way
// to the registry.
func TestClaimBatchNotHereGoesRouted(t *testing.T) {
	a, b, c, all := startTrio(t, nil)
	key := keysAt(all, a.ID(), 1, "elsewhere")[0]
	value := heldURL(t, all, b.ID(), a.cfg.Replicas, "page")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := c.Stats().ClaimBatchesReceived
	w, err := b.claims.claimVia(ctx, c.ID(), key, value)
	if err != nil || w != value {
		t.Fatalf("claim: %q, %v", w, err)
	}
	if got := c.Stats().ClaimBatchesReceived; got != before+1 {
		t.Fatalf("the wrong registry answered %d batches, want 1", got-before)
	}
	if v, ok := claimStored(t, c.db, key); ok {
		t.Fatalf("the wrong registry stored %q", v)
	}
	if v, ok := claimStored(t, a.db, key); !ok || v != value {
		t.Fatalf("the registry keeps %q, want %q", v, value)
	}
}

// A member sends claim batches of its own making: for hosts it does not
// hold, for keys the receiver is not the registry of, beyond its claim
// allowance, and malformed ones. None of it is stored, each refusal is
// counted, the malformed batches cost their sender its streams, and the
// claims it may make are kept.
func TestHostileClaimBatches(t *testing.T) {
	a, b, x, all := startTrio(t, func(c *Config) {
		c.ThrottleFor = 300 * time.Millisecond
		c.ClaimRate, c.ClaimBurst = 0.001, 6
	})
	r := a.cfg.Replicas
	var foreign string // a host x does not hold
	for i := 0; foreign == ""; i++ {
		if h := fmt.Sprintf("victim%d.test", i); !slices.Contains(ReplicasOf(all, h, r), x.ID()) {
			foreign = h
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	send := func(es []claimEntry) []claimAnswer {
		t.Helper()
		resp, _, err := x.call(ctx, a.ID(), x.protoClaims, encodeClaimBatch(es))
		if err != nil {
			t.Fatalf("batch: %v", err)
		}
		as, err := decodeClaimAnswers(resp, len(es))
		if err != nil {
			t.Fatal(err)
		}
		return as
	}
	keys := keysAt(all, a.ID(), 12, "hostile")
	elsewhere := keysAt(all, b.ID(), 3, "hostile-b")

	// Pages on a host x does not hold: refused, counted, not stored.
	var stolen []claimEntry
	for i, k := range keys[:3] {
		stolen = append(stolen, claimEntry{Key: k, Value: fmt.Sprintf("http://%s/%d", foreign, i)})
	}
	before := a.Stats()
	for i, ans := range send(stolen) {
		if ans.Status != claimRefused {
			t.Fatalf("claim %d for a host x does not hold: status %d", i, ans.Status)
		}
	}
	if got := a.Stats().ClaimsRefused - before.ClaimsRefused; got != 3 {
		t.Fatalf("ClaimsRefused grew by %d, want 3", got)
	}
	// Keys a is not the registry of: answered claimNotHere, not stored.
	var misplaced []claimEntry
	for _, k := range elsewhere {
		misplaced = append(misplaced, claimEntry{Key: k, Value: heldURL(t, all, x.ID(), r, "mine")})
	}
	for i, ans := range send(misplaced) {
		if ans.Status != claimNotHere {
			t.Fatalf("claim %d for another registry's key: status %d", i, ans.Status)
		}
	}
	for _, e := range append(stolen, misplaced...) {
		if v, ok := claimStored(t, a.db, e.Key); ok {
			t.Fatalf("a stored %q", v)
		}
	}
	// Its own pages, beyond its allowance of 6: 6 won, the rest throttled.
	var own []claimEntry
	for i, k := range keys[3:12] {
		own = append(own, claimEntry{Key: k, Value: heldURL(t, all, x.ID(), r, fmt.Sprintf("own%d", i))})
	}
	won, throttled := 0, 0
	for i, ans := range send(own) {
		switch ans.Status {
		case claimWon:
			won++
			if v, ok := claimStored(t, a.db, own[i].Key); !ok || v != own[i].Value || ans.Winner != v {
				t.Fatalf("claim %d won as %q, stored %q", i, ans.Winner, v)
			}
		case claimThrottled:
			throttled++
		}
	}
	if won != 6 || throttled != 3 || a.Stats().ClaimsThrottled-before.ClaimsThrottled != 3 {
		t.Fatalf("%d won, %d throttled (counted %d), want 6 and 3", won, throttled, a.Stats().ClaimsThrottled-before.ClaimsThrottled)
	}

	// Malformed batches: the stream is reset and x throttled.
	malformedBatches := map[string][]byte{
		"value not a URL":    encodeClaimBatch([]claimEntry{{Key: keys[0], Value: "not a url"}}),
		"no claims":          {wireVersion, 0},
		"too many claims":    encodeClaimBatch(make([]claimEntry, maxClaimBatch+1)),
		"count beyond bytes": {wireVersion, 100, 1, 'k', 0},
	}
	for name, raw := range malformedBatches {
		time.Sleep(x.cfg.ThrottleFor + 50*time.Millisecond)
		rejected := a.Stats().RejectedMessages
		if _, _, err := x.call(ctx, a.ID(), x.protoClaims, raw); err == nil {
			t.Fatalf("%s: answered", name)
		}
		waitFor(t, 2*time.Second, name+" counted", func() bool { return a.Stats().RejectedMessages > rejected })
	}
}
