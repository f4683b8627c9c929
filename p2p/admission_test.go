package p2p

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestHostileStrangerRefusedEverywhere: a peer that never joined the
// membership gets nothing from any protocol, even with well-formed
// requests, and costs the victim no per-peer state: its streams are reset
// before their frame is read.
func TestHostileStrangerRefusedEverywhere(t *testing.T) {
	victim := startNode(t, nil, nil)
	var handled atomic.Int64
	victim.SetSearchHandler(func(context.Context, peer.ID, []byte) ([]byte, error) { handled.Add(1); return []byte("ok"), nil })
	victim.SetURLHandler(func(context.Context, peer.ID, []URLRecord) error { handled.Add(1); return nil })
	victim.SetDeliverHandler("replica/1", func(context.Context, peer.ID, []byte) error { handled.Add(1); return nil })
	stranger := strangerHost(t, victim)
	batch, err := encodeURLBatch([]URLRecord{{URL: "http://a.test/", SourceHost: "b.test"}})
	if err != nil {
		t.Fatal(err)
	}
	requests := map[string][]byte{
		string(victim.protoURLs):    framed(batch),
		string(victim.protoSearch):  framed(encodeSearchRequest(time.Second, []byte("q"))),
		string(victim.protoDeliver): framed(encodeDeliver("replica/1", []byte("pages"))),
		string(victim.protoClaim):   framed(encodeClaim(claimRequest{Hops: 1, Key: []byte("k"), Value: "http://a.test/"})),
		string(victim.protoClaims):  framed(encodeClaimBatch([]claimEntry{{Key: []byte("k"), Value: "http://a.test/"}})),
	}
	for base, pipe := range victim.pipeOf {
		requests[string(pipe)] = requests[string(base)]
	}
	before := victim.Stats()
	for _, proto := range allProtocols(victim) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		status, body, err := rawExchange(ctx, stranger, victim.ID(), proto, requests[string(proto)])
		cancel()
		if err == nil {
			t.Fatalf("%s answered a stranger: status %d %q", proto, status, body)
		}
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("handlers ran %d times for a stranger", n)
	}
	st := victim.Stats()
	if got := st.NonMemberStreams - before.NonMemberStreams; got != uint64(len(requests)) {
		t.Fatalf("NonMemberStreams grew by %d, want %d", got, len(requests))
	}
	if st.RejectedMessages != before.RejectedMessages {
		t.Fatal("a stranger's request was decoded")
	}
	victim.limits.mu.Lock()
	_, tracked := victim.limits.limiters[stranger.ID()]
	victim.limits.mu.Unlock()
	if tracked {
		t.Fatal("the victim keeps per-peer state for a stranger")
	}
	if victim.Holds(stranger.ID(), "a.test") {
		t.Fatal("a stranger holds a host")
	}
}

// TestHostilePhantomMembers: a member relays heartbeats signed by hundreds
// of generated keys with no node behind them. None becomes a member; the
// victim keeps at most its candidate cap of them, dials each at most once
// per candidateRedial, and blacklists the relayer in gossip once enough of
// them failed.
func TestHostilePhantomMembers(t *testing.T) {
	victim := startNode(t, patient, nil)
	attacker := startNode(t, patient, []*testNode{victim})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(victim, attacker.ID()) && knows(attacker, victim.ID()) })
	const phantoms = 600
	keys := make([]crypto.PrivKey, phantoms)
	ids := make([]peer.ID, phantoms)
	for i := range keys {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
		if ids[i], err = peer.IDFromPrivateKey(k); err != nil {
			t.Fatal(err)
		}
	}
	// Every phantom announces the attacker's own addresses: a dial there
	// reaches a host with another identity, so the handshake fails.
	hb := encodeHeartbeat(heartbeat{SentMs: uint64(time.Now().UnixMilli()), Addrs: attacker.h.Addrs()})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// An attacker does not validate what it publishes.
	if err := attacker.ps.UnregisterTopicValidator(attacker.topicName); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		for i := range keys {
			if err := attacker.topic.Publish(ctx, hb, pubsub.WithSecretKeyAndPeerId(keys[i], ids[i])); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	st := victim.Stats()
	if st.Members > 2 {
		t.Fatalf("victim counts %d members, want at most 2 (itself and the attacker)", st.Members)
	}
	if st.RelayersBanned == 0 {
		t.Fatal("the attacker relaying phantoms was not blacklisted")
	}
	for _, id := range ids {
		if victim.IsMember(id) || victim.Holds(id, "a.test") {
			t.Fatalf("phantom %s is a member", id)
		}
	}
	victim.mem.mu.Lock()
	cands := len(victim.mem.adm.candidates)
	victim.mem.mu.Unlock()
	if cands > victim.mem.adm.maxCandidates {
		t.Fatalf("victim keeps %d candidates, cap %d", cands, victim.mem.adm.maxCandidates)
	}
	if st.CandidateDialsFailed == 0 {
		t.Fatalf("phantoms not refused: %+v", st)
	}
	t.Logf("%d phantom heartbeats ×3: members %d, candidates held %d (cap %d), ignored %d, refused %d, failed dials %d, relayers blacklisted %d",
		phantoms, st.Members, cands, victim.mem.adm.maxCandidates, st.HeartbeatsIgnored, st.MembersRefused, st.CandidateDialsFailed, st.RelayersBanned)
}

// TestMemberCap: a node admits at most MaxMembers others, however many
// real nodes join.
func TestMemberCap(t *testing.T) {
	victim := startNode(t, func(c *Config) { patient(c); c.MaxMembers = 2 }, nil)
	var others []*testNode
	for i := 0; i < 4; i++ {
		others = append(others, startNode(t, patient, []*testNode{victim}))
	}
	waitFor(t, 15*time.Second, "the first two admitted", func() bool { return len(victim.Members()) == 3 })
	waitFor(t, 15*time.Second, "the others refused", func() bool { return victim.Stats().MembersRefused > 0 })
	time.Sleep(time.Second)
	if n := len(victim.Members()); n != 3 {
		t.Fatalf("victim has %d members, cap 2 others", n)
	}
	// The others still see each other: the cap is the victim's own.
	waitFor(t, 15*time.Second, "the others' view", func() bool { return knows(others[3], others[0].ID(), others[1].ID(), others[2].ID()) })
}

// TestClaimQuota: a claim origin beyond its ClaimRate is refused, and a
// stored claim expires after ClaimTTL.
func TestClaimQuota(t *testing.T) {
	a := startNode(t, func(c *Config) { c.ClaimRate, c.ClaimBurst = 0.001, 5; c.ClaimTTL = time.Hour }, nil)
	b := startNode(t, nil, []*testNode{a})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	// Keys whose registry is a, for URLs on a host b holds.
	members := []peer.ID{a.ID(), b.ID()}
	host := hostOwnedBy(t, members, b.ID(), members, b.ID())
	var keys [][]byte
	for i := 0; len(keys) < 8; i++ {
		k := []byte(fmt.Sprintf("fingerprint-%d", i))
		if ownerOfKey(members, dataKey(k)) == a.ID() {
			keys = append(keys, k)
		}
	}
	refused := 0
	for i, k := range keys {
		_, err := b.Claim(context.Background(), k, fmt.Sprintf("http://%s/%d", host, i))
		var remote *RemoteError
		switch {
		case errors.As(err, &remote) && strings.Contains(err.Error(), "claim rate"):
			refused++
		case err != nil:
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	// A claim whose answer is lost is retried and charged again, so on a
	// loaded machine more than the excess may be refused; never fewer.
	if throttled := a.Stats().ClaimsThrottled; refused < len(keys)-5 || throttled < uint64(refused) {
		t.Fatalf("%d of %d claims refused (throttled %d), want at least %d", refused, len(keys), throttled, len(keys)-5)
	}
	// The stored claims carry their expiry.
	dk := dataKey(keys[0])
	err := a.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(append([]byte(claimPrefix), dk[:]...))
		if err != nil {
			return err
		}
		if exp := time.Unix(int64(item.ExpiresAt()), 0); exp.Before(time.Now().Add(50*time.Minute)) || exp.After(time.Now().Add(61*time.Minute)) {
			return fmt.Errorf("claim expires at %v, want in an hour", exp)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOutboxCapPerPeer: a peer's outbox holds at most MaxOutboxPerPeer
// records. This node's own links beyond it are dropped and counted;
// a batch from a member that would need re-forwarding there is refused as
// busy (its sender keeps it).
func TestOutboxCapPerPeer(t *testing.T) {
	a := startNode(t, func(c *Config) { patient(c); c.MaxOutboxPerPeer = 10 }, nil)
	b := startNode(t, patient, []*testNode{a})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	b.SetURLHandler(func(context.Context, peer.ID, []URLRecord) error { return errors.New("not now") })
	members := []peer.ID{a.ID(), b.ID()}
	var recs []URLRecord
	for i := 0; len(recs) < 25; i++ {
		h := fmt.Sprintf("b%d.test", i)
		if OwnerOf(members, h) == b.ID() {
			recs = append(recs, URLRecord{URL: "http://" + h + "/", SourceHost: "a.test"})
		}
	}
	if err := a.Forward(context.Background(), recs[:10]); err != nil {
		t.Fatal(err)
	}
	if err := a.Forward(context.Background(), recs[10:]); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if st.OutboxDepth != 10 || st.URLsDropped != 15 || st.OutboxFull != 15 {
		t.Fatalf("outbox %d, dropped %d, full %d; want 10, 15, 15", st.OutboxDepth, st.URLsDropped, st.OutboxFull)
	}
}

// TestSearchesPerPeer: one member may have at most MaxSearchesPerPeer
// requests under way at a node; more are answered busy at once.
func TestSearchesPerPeer(t *testing.T) {
	victim := startNode(t, func(c *Config) { c.MaxSearchesPerPeer = 2 }, nil)
	release := make(chan struct{})
	victim.SetSearchHandler(func(ctx context.Context, _ peer.ID, _ []byte) ([]byte, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return []byte("ok"), nil
	})
	peerNode := startNode(t, nil, []*testNode{victim})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(victim, peerNode.ID()) && knows(peerNode, victim.ID()) })
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, errs[i] = peerNode.Request(ctx, victim.ID(), []byte("q"))
		}()
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "two refused", func() bool { return victim.Stats().SearchesRefused == 2 })
	close(release)
	wg.Wait()
	busy := 0
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), "busy") {
			busy++
		}
	}
	if busy != 2 {
		t.Fatalf("%d requests refused busy, want 2: %v", busy, errs)
	}
}

type steppedClock struct{ now time.Time }

func (c *steppedClock) Now() time.Time { return c.now }

// TestRelayBlacklist: a relayer stays banned for relayBan, then is
// forgotten; the list never holds more than maxBanned, making room from
// expired entries first.
func TestRelayBlacklist(t *testing.T) {
	clock := &steppedClock{now: time.Unix(1_700_000_000, 0)}
	b := newRelayBlacklist(clock)
	p, q := peer.ID("relayer-p"), peer.ID("relayer-q")
	if !b.Add(p) || !b.Contains(p) || b.Contains(q) {
		t.Fatal("a relayer just added is not banned, or another is")
	}
	clock.now = clock.now.Add(relayBan - time.Second)
	if !b.Contains(p) {
		t.Fatal("ban ended before relayBan")
	}
	clock.now = clock.now.Add(time.Second)
	if b.Contains(p) {
		t.Fatal("ban outlived relayBan")
	}
	for i := range maxBanned {
		if !b.Add(peer.ID(fmt.Sprintf("flood-%d", i))) {
			t.Fatalf("add %d refused below the cap", i)
		}
	}
	if b.Add(q) || b.Contains(q) || len(b.until) != maxBanned {
		t.Fatalf("a full list took another entry (%d held)", len(b.until))
	}
	clock.now = clock.now.Add(relayBan)
	if !b.Add(q) || !b.Contains(q) || len(b.until) != 1 {
		t.Fatalf("expired entries not dropped to make room (%d held)", len(b.until))
	}
}
