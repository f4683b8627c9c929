package p2p

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

func openDB(t testing.TB, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func testConfig(dir string) Config {
	c := DefaultLANConfig()
	c.DataDir = dir
	c.Network = "test"
	c.Listen = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	c.HeartbeatInterval = 100 * time.Millisecond
	c.MemberTimeout = 1200 * time.Millisecond
	c.RetryMin = 50 * time.Millisecond
	c.RetryMax = 400 * time.Millisecond
	c.BatchDelay = 10 * time.Millisecond
	return c
}

type testNode struct {
	*Node
	db  *badger.DB
	dir string
}

// startNode starts a node with its own data dir and DB (closed by
// t.Cleanup, after the node).
func startNode(t testing.TB, mutate func(*Config), boot []*testNode, opts ...Option) *testNode {
	t.Helper()
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "db"))
	t.Cleanup(func() { db.Close() })
	return restartNode(t, dir, db, mutate, boot, opts...)
}

func restartNode(t testing.TB, dir string, db *badger.DB, mutate func(*Config), boot []*testNode, opts ...Option) *testNode {
	t.Helper()
	cfg := testConfig(dir)
	for _, b := range boot {
		for _, a := range b.Addrs() {
			cfg.Bootstrap = append(cfg.Bootstrap, a.String())
		}
	}
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := New(context.Background(), db, cfg, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &testNode{Node: n, db: db, dir: dir}
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func knows(n *testNode, ids ...peer.ID) bool {
	have := map[peer.ID]bool{}
	for _, m := range n.Members() {
		have[m.ID] = true
	}
	for _, id := range ids {
		if !have[id] {
			return false
		}
	}
	return true
}

func TestIdentityPersists(t *testing.T) {
	dir := t.TempDir()
	k1, err := loadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("identity.key mode %v, want 0600", fi.Mode().Perm())
	}
	k2, err := loadOrCreateIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equals(k2) {
		t.Fatal("identity changed across loads")
	}
}

// awaitLeft reads n's events until p leaves (events about other members
// are skipped: a loaded test machine may make them flap).
func awaitLeft(t *testing.T, n *testNode, p peer.ID) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-n.Events():
			if ev.Kind == Left && ev.Member.ID == p {
				return
			}
		case <-timeout:
			t.Fatalf("%s never left %s's view", p, n.ID())
		}
	}
}

func TestMembershipJoinAndLeave(t *testing.T) {
	a := startNode(t, nil, nil)
	b := startNode(t, nil, []*testNode{a})
	c := startNode(t, nil, []*testNode{a})
	for _, n := range []*testNode{a, b, c} {
		waitFor(t, 10*time.Second, "full membership", func() bool { return knows(n, a.ID(), b.ID(), c.ID()) })
	}
	joined := map[peer.ID]bool{}
	for len(joined) < 2 {
		select {
		case ev := <-a.Events():
			if ev.Kind == Joined {
				joined[ev.Member.ID] = true
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no join events")
		}
	}
	if !joined[b.ID()] || !joined[c.ID()] {
		t.Fatalf("join events for %v", joined)
	}
	// Crash c: no leave announcement, so the others must time it out.
	crashed := time.Now()
	if err := c.close(false); err != nil {
		t.Fatal(err)
	}
	awaitLeft(t, a, c.ID())
	if since := time.Since(crashed); since < a.cfg.MemberTimeout/2 {
		t.Fatalf("dropped after %v, well before the member timeout %v", since, a.cfg.MemberTimeout)
	}
	waitFor(t, 5*time.Second, "b drops c", func() bool { return !knows(b, c.ID()) })
	// Graceful close: b announces its departure and a drops it at once.
	closed := time.Now()
	b.Close()
	awaitLeft(t, a, b.ID())
	if since := time.Since(closed); since >= a.cfg.MemberTimeout {
		t.Logf("graceful leave took %v: the leave message was lost, timeout applied", since)
	} else {
		t.Logf("graceful leave seen after %v", since)
	}
	if got := a.Members(); len(got) != 1 || got[0].ID != a.ID() {
		t.Fatalf("a's members after both left: %v", got)
	}
}

// hostOwnedBy is findHost for cases that always have a solution.
func hostOwnedBy(t *testing.T, all []peer.ID, want peer.ID, sub []peer.ID, wantSub peer.ID) string {
	t.Helper()
	h, ok := findHost(all, want, sub, wantSub)
	if !ok {
		t.Fatal("no suitable host found")
	}
	return h
}

type collector struct {
	mu   sync.Mutex
	recs []URLRecord
	from []peer.ID
}

func (c *collector) handle(_ context.Context, from peer.ID, recs []URLRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, recs...)
	for range recs {
		c.from = append(c.from, from)
	}
	return nil
}

func (c *collector) snapshot() ([]URLRecord, []peer.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]URLRecord(nil), c.recs...), append([]peer.ID(nil), c.from...)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.recs)
}

// findHost looks for a host name whose owner among all is want and whose
// owner among sub is wantSub.
func findHost(all []peer.ID, want peer.ID, sub []peer.ID, wantSub peer.ID) (string, bool) {
	for i := 0; i < 20000; i++ {
		h := fmt.Sprintf("site%d.test", i)
		if OwnerOf(all, h) == want && OwnerOf(sub, h) == wantSub {
			return h, true
		}
	}
	return "", false
}

func TestGreedyForwardingConvergesWhenViewsDiffer(t *testing.T) {
	// Create three identities first, then give them roles such that some
	// host is owned by c while b is closer to it than a: a, which does not
	// know c, must hand it to b, which passes it on to c.
	dirs := make([]string, 3)
	ids := make([]peer.ID, 3)
	for i := range dirs {
		dirs[i] = t.TempDir()
		k, err := loadOrCreateIdentity(dirs[i])
		if err != nil {
			t.Fatal(err)
		}
		if ids[i], err = peer.IDFromPrivateKey(k); err != nil {
			t.Fatal(err)
		}
	}
	var host string
	var ai, bi, ci int
	for _, perm := range [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		h, ok := findHost(ids, ids[perm[2]], []peer.ID{ids[perm[0]], ids[perm[1]]}, ids[perm[1]])
		if ok {
			host, ai, bi, ci = h, perm[0], perm[1], perm[2]
			break
		}
	}
	if host == "" {
		t.Fatal("no role assignment works (impossible for three distinct keys)")
	}
	open := func(i int) *badger.DB {
		db := openDB(t, filepath.Join(dirs[i], "db"))
		t.Cleanup(func() { db.Close() })
		return db
	}
	b := restartNode(t, dirs[bi], open(bi), nil, nil)
	c := restartNode(t, dirs[ci], open(ci), nil, []*testNode{b})
	cID := string(c.ID())
	a := restartNode(t, dirs[ai], open(ai), nil, []*testNode{b}, withViewFilter(func(p string) bool { return p != cID }))
	waitFor(t, 10*time.Second, "views", func() bool {
		return knows(a, b.ID()) && knows(b, a.ID(), c.ID()) && knows(c, a.ID(), b.ID())
	})
	if knows(a, c.ID()) {
		t.Fatal("view filter failed")
	}
	var atA, atB, atC collector
	a.SetURLHandler(atA.handle)
	b.SetURLHandler(atB.handle)
	c.SetURLHandler(atC.handle)
	recs := []URLRecord{
		{URL: "http://" + host + "/1", Anchor: "one", SourceHost: "src.test", Cash: 0.5},
		{URL: "http://" + host + "/2", Anchor: "two", SourceHost: "src.test", Cash: 0.5},
	}
	if err := a.Forward(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "delivery at the owner", func() bool { return atC.count() == 2 })
	waitFor(t, 5*time.Second, "outboxes drained", func() bool { return a.OutboxDepth() == 0 && b.OutboxDepth() == 0 })
	if atA.count() != 0 || atB.count() != 0 {
		t.Fatalf("records handled by non-owners: a=%d b=%d", atA.count(), atB.count())
	}
	recsAtC, fromAtC := atC.snapshot()
	for i, r := range recsAtC {
		if r.Hops != 1 || fromAtC[i] != b.ID() {
			t.Fatalf("record %s arrived with %d hops from %s, want 1 hop from b", r.URL, r.Hops, fromAtC[i])
		}
	}
	if st := c.Stats(); st.MaxHopsSeen != 1 {
		t.Fatalf("max hops seen at c = %d", st.MaxHopsSeen)
	}
	// At least the two records; more when a slow ack made a resend (at
	// least once delivery), which c's count above shows did not duplicate.
	if st := b.Stats(); st.URLsReforwarded < 2 {
		t.Fatalf("b re-forwarded %d records", st.URLsReforwarded)
	}
}

func TestHopLimitDropsRecords(t *testing.T) {
	b := startNode(t, nil, nil)
	c := startNode(t, nil, []*testNode{b})
	waitFor(t, 10*time.Second, "views", func() bool { return knows(b, c.ID()) && knows(c, b.ID()) })
	host := hostOwnedBy(t, []peer.ID{b.ID(), c.ID()}, c.ID(), []peer.ID{b.ID()}, b.ID())
	// b receives from itself-in-disguise: call handleURLs directly with a
	// record already at the hop limit.
	msg, err := encodeURLBatch([]URLRecord{{URL: "http://" + host + "/", Hops: b.cfg.MaxHops}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.urls.handleURLs(context.Background(), c.ID(), msg); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.URLsDropped != 1 || b.OutboxDepth() != 0 {
		t.Fatalf("dropped=%d outbox=%d", st.URLsDropped, b.OutboxDepth())
	}
}

func TestOutboxAckThenDeleteAndSurvivesRestart(t *testing.T) {
	b := startNode(t, nil, nil)
	var mu sync.Mutex
	accept := false
	attempts := 0
	var got collector
	b.SetURLHandler(func(ctx context.Context, from peer.ID, recs []URLRecord) error {
		mu.Lock()
		attempts++
		ok := accept
		mu.Unlock()
		if !ok {
			return errors.New("not durable yet")
		}
		return got.handle(ctx, from, recs)
	})

	adir := t.TempDir()
	adb := openDB(t, filepath.Join(adir, "db"))
	t.Cleanup(func() { adb.Close() }) // runs after the nodes' cleanups
	a := restartNode(t, adir, adb, nil, []*testNode{b})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })

	const n = 300
	var recs []URLRecord
	host := hostOwnedBy(t, []peer.ID{a.ID(), b.ID()}, b.ID(), []peer.ID{a.ID(), b.ID()}, b.ID())
	for i := 0; i < n; i++ {
		recs = append(recs, URLRecord{URL: fmt.Sprintf("http://%s/page/%d", host, i), Anchor: "p", SourceHost: "a.test", Cash: 0.01})
	}
	if err := a.Forward(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if d := a.OutboxDepth(); d != n {
		t.Fatalf("outbox depth %d after Forward, want %d", d, n)
	}
	waitFor(t, 10*time.Second, "refused attempts", func() bool { mu.Lock(); defer mu.Unlock(); return attempts >= 2 })
	// Not acknowledged: every record is still in the outbox, on disk.
	if d := a.OutboxDepth(); d != n {
		t.Fatalf("outbox depth %d after refused deliveries, want %d", d, n)
	}
	aID := a.ID()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if c := countPrefix(t, adb, outboxPrefix); c != n {
		t.Fatalf("%d outbox keys on disk after close, want %d", c, n)
	}
	mu.Lock()
	accept = true
	mu.Unlock()

	a2 := restartNode(t, adir, adb, nil, []*testNode{b})
	if a2.ID() != aID {
		t.Fatal("identity not persisted")
	}
	if d := a2.OutboxDepth(); d != n {
		t.Fatalf("restarted outbox depth %d, want %d", d, n)
	}
	waitFor(t, 15*time.Second, "delivery after restart", func() bool { return got.count() >= n })
	waitFor(t, 5*time.Second, "outbox empty", func() bool { return a2.OutboxDepth() == 0 })
	if c := countPrefix(t, adb, outboxPrefix); c != 0 {
		t.Fatalf("%d outbox keys left after ack", c)
	}
	// An idle sender ends, and the next Forward starts a new one.
	waitFor(t, 5*time.Second, "idle sender retired", func() bool { return senderCount(a2.Node) == 0 })
	later := URLRecord{URL: fmt.Sprintf("http://%s/page/later", host), Anchor: "p", SourceHost: "a.test", Cash: 0.01}
	if err := a2.Forward(context.Background(), []URLRecord{later}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "delivery by a new sender", func() bool {
		delivered, _ := got.snapshot()
		return slices.ContainsFunc(delivered, func(r URLRecord) bool { return r.URL == later.URL })
	})
	recs = append(recs, later)
	delivered, _ := got.snapshot()
	seen := map[string]int{}
	for _, r := range delivered {
		seen[r.URL]++
	}
	// Delivery is at least once: an ack lost when the sender closes means
	// one redelivery after the restart (the receiver's URL-seen set absorbs
	// it), never a lost record and never a redelivery loop.
	redelivered := 0
	for _, r := range recs {
		if seen[r.URL] < 1 || seen[r.URL] > 2 {
			t.Fatalf("%s delivered %d times", r.URL, seen[r.URL])
		}
		redelivered += seen[r.URL] - 1
	}
	if redelivered > 0 {
		t.Logf("%d records delivered twice (ack lost at close)", redelivered)
	}
	if len(delivered) < n {
		t.Fatalf("%d deliveries for %d records", len(delivered), n)
	}
}

func senderCount(n *Node) int {
	n.outbox.mu.Lock()
	defer n.outbox.mu.Unlock()
	return len(n.outbox.senders)
}

func countPrefix(t *testing.T, db *badger.DB, prefix string) int {
	t.Helper()
	c := 0
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			c++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestForwardBytesPerURLOnTheWire(t *testing.T) {
	// Patient membership: on a loaded machine a member that times out has
	// its outbox re-routed, here to the sender itself, and nothing would
	// be measured on the wire.
	b := startNode(t, patient, nil)
	a := startNode(t, func(c *Config) { patient(c); c.BatchDelay = 200 * time.Millisecond }, []*testNode{b})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	var got collector
	b.SetURLHandler(got.handle)
	a.SetURLHandler(got.handle)
	host := hostOwnedBy(t, []peer.ID{a.ID(), b.ID()}, b.ID(), []peer.ID{a.ID(), b.ID()}, b.ID())
	recs := realisticBatch()
	for i := range recs {
		recs[i].URL = "https://" + host + recs[i].URL[len("https://www.example.com"):]
	}
	if err := a.Forward(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "delivery", func() bool { return got.count() == len(recs) })
	waitFor(t, 5*time.Second, "acks", func() bool { return a.OutboxDepth() == 0 })
	st := a.Stats()
	perURL := float64(st.ForwardBytes) / float64(st.URLsForwarded)
	t.Logf("forwarded %d URLs in %d batches, %d bytes: %.1f bytes/URL", st.URLsForwarded, st.BatchesSent, st.ForwardBytes, perURL)
	if perURL > 40 {
		t.Fatalf("%.1f bytes/URL on the wire", perURL)
	}
}

func TestRequestReturnsAtDeadline(t *testing.T) {
	a := startNode(t, nil, nil)
	b := startNode(t, nil, []*testNode{a})
	b.SetSearchHandler(func(ctx context.Context, from peer.ID, req []byte) ([]byte, error) {
		return append([]byte("echo:"), req...), nil
	})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := a.Request(ctx, b.ID(), []byte("q"))
	cancel()
	if err != nil || string(resp) != "echo:q" {
		t.Fatalf("request: %q %v", resp, err)
	}
	// A peer that reads the request and never answers.
	silent := startNode(t, nil, []*testNode{a})
	silent.h.SetStreamHandler(silent.protoSearch, func(s network.Stream) {
		_, _ = readFrame(bufio.NewReader(s), 1<<20)
		<-time.After(10 * time.Second)
		s.Reset()
	})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, silent.ID()) && knows(silent, a.ID()) })
	const deadline = 400 * time.Millisecond
	ctx, cancel = context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err = a.Request(ctx, silent.ID(), []byte("q"))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
	if took < deadline || took > deadline+300*time.Millisecond {
		t.Fatalf("returned after %v, deadline %v", took, deadline)
	}
}

// TestAnswerBeforeCloseWrite: a handler answers as soon as it has read
// the request and closes its stream, which over QUIC stops the
// requester's write side (STOP_SENDING). A requester slow to close its
// write side after the request (a busy machine) must still read the
// answer. The requester here waits between the two steps of call.
func TestAnswerBeforeCloseWrite(t *testing.T) {
	quicOnly := func(c *Config) { c.Listen = []string{"/ip4/127.0.0.1/udp/0/quic-v1"} }
	a := startNode(t, quicOnly, nil)
	b := startNode(t, quicOnly, []*testNode{a})
	answered := make(chan struct{}, 1)
	b.SetSearchHandler(func(ctx context.Context, from peer.ID, req []byte) ([]byte, error) {
		answered <- struct{}{}
		return append([]byte("echo:"), req...), nil
	})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := a.h.NewStream(ctx, b.ID(), a.protoSearch)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFrame(s, encodeSearchRequest(time.Second, []byte("q"))); err != nil {
		t.Fatal(err)
	}
	<-answered
	time.Sleep(200 * time.Millisecond) // the answer and the stop reach a
	resp, err := a.response(ctx, s, b.ID())
	if err != nil || string(resp) != "echo:q" {
		t.Fatalf("answer %q, %v; want echo:q", resp, err)
	}
}

func TestSendDeliversAndReportsHandlerErrors(t *testing.T) {
	a := startNode(t, nil, nil)
	b := startNode(t, nil, []*testNode{a})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	// The race detector does not see the ordering a socket provides, so
	// the handler's result goes through a mutex.
	var mu sync.Mutex
	var got []byte
	b.SetDeliverHandler("handoff", func(ctx context.Context, from peer.ID, payload []byte) error {
		if from != a.ID() {
			return fmt.Errorf("from %s", from)
		}
		mu.Lock()
		got = append([]byte(nil), payload...)
		mu.Unlock()
		return nil
	})
	b.SetDeliverHandler("broken", func(context.Context, peer.ID, []byte) error { return errors.New("disk full") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Send(ctx, b.ID(), "handoff", []byte("pages")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if string(got) != "pages" {
		t.Fatalf("payload %q", got)
	}
	var remote *RemoteError
	if err := a.Send(ctx, b.ID(), "broken", []byte("x")); !errors.As(err, &remote) {
		t.Fatalf("handler error not reported as RemoteError: %v", err)
	}
	if err := a.Send(ctx, b.ID(), "nobody", []byte("x")); !errors.As(err, &remote) {
		t.Fatalf("unknown topic: %v", err)
	}
}

// heldURL returns a URL on a host that holder holds (is among the R
// closest of all to), so that holder may claim it.
func heldURL(t testing.TB, all []peer.ID, holder peer.ID, r int, tag string) string {
	t.Helper()
	for i := 0; i < 20000; i++ {
		h := fmt.Sprintf("held%d.test", i)
		if slices.Contains(ReplicasOf(all, h, r), holder) {
			return "http://" + h + "/" + tag
		}
	}
	t.Fatal("no host held")
	return ""
}

// TestClaimAcrossNodes: claims routed through the network reach one
// registry, which keeps the least value (see TestClaimKeepsTheLeastValue).
func TestClaimAcrossNodes(t *testing.T) {
	a, b, c, all := startTrio(t, nil)
	r := a.cfg.Replicas
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		key := []byte(fmt.Sprintf("fingerprint-%d", i))
		first := heldURL(t, all, b.ID(), r, "first")
		w1, err := b.Claim(ctx, key, first)
		if err != nil {
			t.Fatal(err)
		}
		// Longer values claimed later lose to the first.
		w2, err := c.Claim(ctx, key, heldURL(t, all, c.ID(), r, "second-longer"))
		if err != nil {
			t.Fatal(err)
		}
		w3, err := a.Claim(ctx, key, heldURL(t, all, a.ID(), r, "third-longer"))
		if err != nil {
			t.Fatal(err)
		}
		if w1 != first || w2 != w1 || w3 != w1 {
			t.Fatalf("claims: %q %q %q", w1, w2, w3)
		}
	}
	// Concurrent claims on a fresh key: each learns a winner no greater
	// than its own value, and afterwards every claim learns the least.
	key := []byte("contested")
	values := make([]string, 9)
	keys := make([][]byte, 9)
	by := func(i int) *testNode { return []*testNode{a, b, c}[i%3] }
	least := ""
	for i := range values {
		values[i], keys[i] = heldURL(t, all, by(i).ID(), r, fmt.Sprintf("v%d", i)), key
		if least == "" || claimBeats(values[i], least) {
			least = values[i]
		}
	}
	claimAtOnce(ctx, t, by, keys, values)
	for i, n := range []*testNode{a, b, c} {
		if w, err := n.Claim(ctx, key, heldURL(t, all, n.ID(), r, "a-late-and-longer-value")); err != nil || w != least {
			t.Fatalf("late claim at node %d won by %q (%v), want the least %s", i, w, err, least)
		}
	}
}

func TestFloodingPeerIsThrottled(t *testing.T) {
	victim := startNode(t, func(c *Config) {
		c.PeerRate = 20
		// A joining peer's own traffic (manifests, claims) stays well
		// under this burst; the flood below does not.
		c.PeerBurst = 30
		c.ThrottleFor = 500 * time.Millisecond
	}, nil)
	victim.SetSearchHandler(func(ctx context.Context, from peer.ID, req []byte) ([]byte, error) { return []byte("ok"), nil })
	flooder := startNode(t, nil, []*testNode{victim})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(flooder, victim.ID()) && knows(victim, flooder.ID()) })
	failed := 0
	const flood = 150
	for i := 0; i < flood; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := flooder.Request(ctx, victim.ID(), []byte("q")); err != nil {
			failed++
		}
		cancel()
	}
	st := victim.Stats()
	if failed == 0 || st.ThrottledMessages == 0 || st.ThrottleEvents == 0 {
		t.Fatalf("flood not throttled: failed=%d stats=%+v", failed, st)
	}
	// After the penalty, as the victim sees it, the flooder is served
	// again. Waiting on the victim's own view rather than a fixed sleep
	// keeps a loaded machine, where the victim handles streams late, from
	// failing the test.
	time.Sleep(victim.cfg.ThrottleFor)
	waitFor(t, 10*time.Second, "penalty over", func() bool { return victim.Stats().ThrottledPeers == 0 })
	// Served within 5 s. As in TestHostileThousandsOfIdleStreams, a stream
	// opened right after a flood of reset ones is itself sometimes reset
	// ("close called for canceled stream", CI rehearsal with the victim no
	// longer throttling), so the request is retried, 100 ms apart to stay
	// under the victim's rate; the flooder must not stay refused.
	deadline := time.Now().Add(5 * time.Second)
	for {
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := flooder.Request(rctx, victim.ID(), []byte("q"))
		rcancel()
		if err == nil && string(resp) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flooder not served after its penalty (failed %d of %d): %q %v %+v", failed, flood, resp, err, victim.Stats())
		}
		t.Logf("after the penalty: %q %v", resp, err)
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Garbage is refused, counted, and gets its sender throttled; the
	// victim keeps serving everyone else.
	s, err := flooder.h.NewStream(ctx, victim.ID(), protocol.ID(victim.protoURLs))
	if err != nil {
		t.Fatal(err)
	}
	_ = writeFrame(s, []byte{wireVersion, 0xde, 0xad})
	_ = s.CloseWrite()
	if _, err := readFrame(bufio.NewReader(s), 1024); err == nil {
		t.Fatal("garbage batch got an answer")
	}
	waitFor(t, 2*time.Second, "garbage counted", func() bool { return victim.Stats().RejectedMessages > 0 })
	if _, err := flooder.Request(ctx, victim.ID(), []byte("q")); err == nil {
		t.Fatal("peer that sent garbage was not throttled")
	}
	throttleEvents := victim.Stats().ThrottleEvents
	bystander := startNode(t, nil, []*testNode{victim})
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(bystander, victim.ID()) && knows(victim, bystander.ID()) })
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := bystander.Request(ctx, victim.ID(), []byte("q")); err != nil || string(resp) != "ok" {
		t.Fatalf("victim stopped serving others (throttle events %d before the bystander joined): %q %v %+v", throttleEvents, resp, err, victim.Stats())
	}
}

func TestPrivateNetworkDropsQUICAndIsolates(t *testing.T) {
	psk := make([]byte, 32)
	for i := range psk {
		psk[i] = byte(i)
	}
	a := startNode(t, func(c *Config) { c.PSK = psk }, nil)
	for _, addr := range a.Addrs() {
		if _, err := addr.ValueForProtocol(0x01cc); err == nil { // quic-v1
			t.Fatalf("QUIC address with a PSK: %s", addr)
		}
	}
	b := startNode(t, func(c *Config) { c.PSK = psk }, []*testNode{a})
	waitFor(t, 10*time.Second, "private membership", func() bool { return knows(a, b.ID()) })
	outsider := startNode(t, func(c *Config) {
		c.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := outsider.h.Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: a.h.Addrs()}); err == nil {
		t.Fatal("a node without the PSK connected to the private network")
	}
}

func TestOutboxOfDeadMemberIsRerouted(t *testing.T) {
	a := startNode(t, nil, nil)
	b := startNode(t, nil, []*testNode{a})
	c := startNode(t, nil, []*testNode{a})
	for _, n := range []*testNode{a, b, c} {
		waitFor(t, 10*time.Second, "membership", func() bool { return knows(n, a.ID(), b.ID(), c.ID()) })
	}
	b.SetURLHandler(func(context.Context, peer.ID, []URLRecord) error { return errors.New("busy") })
	var atA, atC collector
	a.SetURLHandler(atA.handle)
	c.SetURLHandler(atC.handle)
	all := []peer.ID{a.ID(), b.ID(), c.ID()}
	var recs []URLRecord
	for i := 0; len(recs) < 50; i++ {
		h := fmt.Sprintf("r%d.test", i)
		if OwnerOf(all, h) == b.ID() {
			recs = append(recs, URLRecord{URL: "http://" + h + "/", SourceHost: "s.test"})
		}
	}
	if err := a.Forward(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a refused attempt", func() bool { return a.Stats().SendFailures > 0 })
	if err := b.close(false); err != nil { // crash
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "records re-routed to the new owners", func() bool {
		return atA.count()+atC.count() == len(recs) && a.OutboxDepth() == 0
	})
	survivors := []peer.ID{a.ID(), c.ID()}
	recsAtA, _ := atA.snapshot()
	recsAtC, _ := atC.snapshot()
	for _, r := range recsAtA {
		h, _ := hostOf(r.URL)
		if OwnerOf(survivors, h) != a.ID() {
			t.Fatalf("%s delivered to a, owner is c", r.URL)
		}
	}
	for _, r := range recsAtC {
		h, _ := hostOf(r.URL)
		if OwnerOf(survivors, h) != c.ID() {
			t.Fatalf("%s delivered to c, owner is a", r.URL)
		}
	}
}

func TestDefaultListenAddressesAndDHT(t *testing.T) {
	a := startNode(t, func(c *Config) { c.Listen = nil; c.MDNS = true }, nil)
	b := startNode(t, func(c *Config) { c.Listen = nil; c.MDNS = true }, []*testNode{a})
	var tcp, quic bool
	for _, addr := range a.Addrs() {
		s := addr.String()
		if !strings.Contains(s, "/p2p/"+a.ID().String()) {
			t.Fatalf("address without /p2p/: %s", s)
		}
		tcp = tcp || strings.Contains(s, "/tcp/")
		quic = quic || strings.Contains(s, "/quic-v1/")
	}
	if !tcp || !quic {
		t.Fatalf("want TCP and QUIC addresses, got %v", a.Addrs())
	}
	t.Logf("default addresses: %v", a.Addrs())
	waitFor(t, 10*time.Second, "membership", func() bool { return knows(a, b.ID()) && knows(b, a.ID()) })
	waitFor(t, 10*time.Second, "DHT routing tables", func() bool {
		return a.kad.RoutingTable().Find(b.ID()) != "" && b.kad.RoutingTable().Find(a.ID()) != ""
	})
}

func TestSeparateNetworksDoNotMix(t *testing.T) {
	a := startNode(t, nil, nil)
	b := startNode(t, nil, []*testNode{a})
	other := startNode(t, func(c *Config) { c.Network = "other" }, []*testNode{a})
	waitFor(t, 10*time.Second, "same-network membership", func() bool { return knows(a, b.ID()) })
	time.Sleep(3 * a.cfg.HeartbeatInterval)
	if knows(a, other.ID()) || knows(other, a.ID()) || knows(b, other.ID()) {
		t.Fatal("nodes of different networks see each other as members")
	}
	if a.kad.RoutingTable().Find(other.ID()) != "" {
		t.Fatal("DHTs of different networks mixed")
	}
}

// TestClaimKeepsTheLeastValue: the registry's winner is the shortest value
// claimed, then the first in byte order, whatever the arrival order.
func TestClaimKeepsTheLeastValue(t *testing.T) {
	tests := []struct {
		name   string
		claims []string
		want   []string // the winner returned to each claim
	}{
		{"first stays when later ones are longer", []string{"http://a.test/x", "http://mirror-a.test/x"},
			[]string{"http://a.test/x", "http://a.test/x"}},
		{"a shorter one takes over", []string{"http://mirror-a.test/x", "http://a.test/x", "http://big5-a.test/x"},
			[]string{"http://mirror-a.test/x", "http://a.test/x", "http://a.test/x"}},
		{"same length: byte order", []string{"http://b.test/x", "http://a.test/x", "http://c.test/x"},
			[]string{"http://b.test/x", "http://a.test/x", "http://a.test/x"}},
		{"the winner again", []string{"http://a.test/x", "http://a.test/x"}, []string{"http://a.test/x", "http://a.test/x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t, t.TempDir())
			defer db.Close()
			c := &claims{db: db}
			for i, v := range tc.claims {
				got, err := c.store([]byte("fingerprint"), v)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want[i] {
					t.Fatalf("claim %d (%s) won by %q, want %q", i, v, got, tc.want[i])
				}
			}
		})
	}
}
