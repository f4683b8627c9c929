package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"sou/crawl"
	"sou/p2p"
)

// TestStoreWaitsForReplica: without a free slot for a detached wait, Store
// returns only once the host's other replica holds the page (group
// commit), and the owner keeps its own marker for a page it did not
// index, so that it can take the host over again after handing it back.
// With slots, Stores return first, no more at a time than the slots, and
// the replica gets every page all the same.
func TestStoreWaitsForReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := threeNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner := nodes[0]
	var host string
	for i := 0; host == ""; i++ {
		if h := fmt.Sprintf("site-%d.example", i); owner.net.IsOwner(h) {
			host = h
		}
	}
	var replica *Node
	for _, p := range owner.net.Replicas(host) {
		for _, n := range nodes[1:] {
			if n.net.ID() == p {
				replica = n
			}
		}
	}
	if replica == nil {
		t.Fatalf("no other replica of %s among %v", host, owner.net.Replicas(host))
	}
	setDetached := func(n int) {
		t.Helper()
		if err := owner.place.do(ctx, func() { owner.place.maxDetached = n }); err != nil {
			t.Fatal(err)
		}
	}
	setDetached(0)
	s := &sink{n: owner}
	for i := range 5 {
		p := htmlPage(host, fmt.Sprintf("/page-%d", i), fmt.Sprintf("page %d", i), fmt.Sprintf("the text of page number %d", i))
		if err := s.Store(ctx, p); err != nil {
			t.Fatalf("Store %s: %v", p.URL, err)
		}
		// No sleep: the replica must hold it when Store returns.
		if _, err := replica.ix.Get(ctx, p.URL); err != nil {
			t.Fatalf("replica does not hold %s when Store returned: %v", p.URL, err)
		}
	}
	if n := owner.place.storesDetached.Load(); n != 0 {
		t.Fatalf("%d Stores returned first without a slot", n)
	}
	// It synced its logs before acknowledging them (--sync acked, the
	// default), in rounds its status counts.
	if r := replica.Status(ctx).SyncRounds; r == 0 {
		t.Errorf("replica status: %d sync rounds for 5 acknowledged stores", r)
	}
	// The replica holds the pages without postings, with the owner's
	// analysed forms: indexing them, were it to own the host, analyses
	// none of them.
	if st := replica.ix.Stats(); st.Held != 5 || st.Docs != 0 || st.PutsAnalysed != 0 {
		t.Errorf("replica holds %d pages, has %d indexed, analysed %d; want 5, 0, 0", st.Held, st.Docs, st.PutsAnalysed)
	}
	if err := replica.data.indexOwned(ctx, func(h string) bool { return h == host }); err != nil {
		t.Fatalf("indexing the held pages: %v", err)
	}
	if held := replica.ix.Held(); len(held) != 0 {
		t.Fatalf("still held after indexing: %v", held)
	}
	if st := replica.ix.Stats(); st.FormsReplayed != 5 || st.FormsRefused != 0 || st.PutsAnalysed != 0 {
		t.Errorf("replica replayed %d forms, refused %d, analysed %d pages; want 5, 0, 0", st.FormsReplayed, st.FormsRefused, st.PutsAnalysed)
	}
	noindex := &crawl.Page{URL: "http://" + host + "/hidden", Host: host, Status: 200, NoIndex: true}
	if err := s.Store(ctx, noindex); err != nil {
		t.Fatalf("Store %s: %v", noindex.URL, err)
	}
	key := []byte(prefixFetchedMarker + host + "\x00" + noindex.URL)
	for _, n := range []*Node{replica, owner} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := n.db.View(func(txn *badger.Txn) error { _, err := txn.Get(key); return err })
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s has no fetch marker for %s: %v", n.PeerID(), noindex.URL, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// With two slots, Stores return first, at most two at a time: one
	// that found none waited, and the replica held its page (and those
	// queued before it) when it returned. Every page reaches the replica.
	setDetached(2)
	var urls []string
	for i := range 12 {
		p := htmlPage(host, fmt.Sprintf("/detached-%d", i), fmt.Sprintf("detached %d", i), fmt.Sprintf("the text of detached page %d", i))
		before := owner.place.storesDetached.Load()
		if err := s.Store(ctx, p); err != nil {
			t.Fatalf("Store %s: %v", p.URL, err)
		}
		urls = append(urls, p.URL)
		var open int
		if err := owner.place.do(ctx, func() { open = len(owner.place.detached) }); err != nil {
			t.Fatal(err)
		}
		if open > 2 {
			t.Fatalf("%d detached waits open, want at most 2", open)
		}
		if owner.place.storesDetached.Load() > before {
			continue // returned first
		}
		for _, u := range urls {
			if _, err := replica.ix.Get(ctx, u); err != nil {
				t.Fatalf("replica does not hold %s when a Store that waited returned: %v", u, err)
			}
		}
	}
	if n := owner.place.storesDetached.Load(); n == 0 {
		t.Error("no Store returned first with 2 slots")
	}
	deadline := time.Now().Add(5 * time.Second)
	waitHolds(t, replica, urls, deadline, "stored while its Store returned first")
	for {
		var open int
		if err := owner.place.do(ctx, func() { open = len(owner.place.detached) }); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d detached waits still open after every page was held", open)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The wait ends with the context.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := owner.place.storeItem(cctx, host, [][]byte{record(recMarker, "http://"+host+"/cancelled")}, func() error { return nil }, false); err == nil {
		t.Error("a Store with a cancelled context returned nil")
	}
}

// TestOutboxSurvivesOwnerRestart is the two-fault case: a replica is away
// while its host's owner stores pages, and the owner is stopped before the
// replica is back. The pages the replica missed must reach it once both
// run again (the owner's outbox, kept in Badger), or the replica would
// fetch them again when it takes the host over.
func TestOutboxSurvivesOwnerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes and restarts two")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bootNode, _ := runNode(t, testConfig(t))
	boot := bootstrapAddrs(bootNode)
	cfgs := []Config{testConfig(t), testConfig(t)}
	nodes := make([]*Node, 2)
	stops := make([]func(), 2)
	for i := range cfgs {
		cfgs[i].Bootstrap = boot
		nodes[i], _, stops[i] = startNode(t, cfgs[i])
		t.Cleanup(stops[i])
	}
	waitMembers(t, 3, bootNode, nodes[0], nodes[1])
	// A host whose two replicas (R = 2 of 3) are the nodes to restart.
	var host string
	ownerAt := 0
	for i := 0; host == ""; i++ {
		h := fmt.Sprintf("outbox-%d.example", i)
		if reps := nodes[0].net.Replicas(h); len(reps) == 2 && !slices.Contains(reps, bootNode.net.ID()) {
			host = h
			if reps[0] == nodes[1].net.ID() {
				ownerAt = 1
			}
		}
	}
	replicaAt := 1 - ownerAt
	owner, replicaID := nodes[ownerAt], nodes[replicaAt].net.ID()
	s := &sink{n: owner}
	store := func(i int) string {
		p := htmlPage(host, fmt.Sprintf("/page-%d", i), fmt.Sprintf("page %d", i), fmt.Sprintf("stored while the replica was away, page %d", i))
		if err := s.Store(ctx, p); err != nil {
			t.Fatalf("Store %s: %v", p.URL, err)
		}
		return p.URL
	}
	outboxKeys := func(n *Node) int {
		_, byPeer := n.net.Outbox().Depth(topicReplica)
		return byPeer[replicaID]
	}
	// While the replica is there, so that the owner has seen it as one;
	// Store may return before it is delivered.
	store(0)
	for delivered := time.Now().Add(10 * time.Second); outboxKeys(owner) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(delivered) {
			t.Fatal("the first page never reached the replica")
		}
	}
	stops[replicaAt]()
	var urls []string
	for i := range 3 {
		urls = append(urls, store(i+1))
	}
	notFetched := &crawl.Page{URL: "http://" + host + "/gone", Host: host, Status: 404}
	if err := s.Store(ctx, notFetched); err != nil {
		t.Fatalf("Store %s: %v", notFetched.URL, err)
	}
	// Store returned: the owner's outbox holds every item for the replica.
	if got := outboxKeys(owner); got != len(urls)+1 {
		t.Fatalf("owner's outbox for the away replica holds %d items, want %d", got, len(urls)+1)
	}
	stops[ownerAt]()

	replica, _, stop := startNode(t, cfgs[replicaAt])
	t.Cleanup(stop)
	owner, _, stop = startNode(t, cfgs[ownerAt])
	t.Cleanup(stop)
	waitMembers(t, 3, replica, owner)
	deadline := time.Now().Add(30 * time.Second)
	markerKey := []byte(prefixFetchedMarker + host + "\x00" + notFetched.URL)
	waitHolds(t, replica, urls, deadline, "stored while it was away")
	for {
		err := replica.db.View(func(txn *badger.Txn) error { _, err := txn.Get(markerKey); return err })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never received the fetch marker of %s: %v", notFetched.URL, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Acknowledged items leave the outbox.
	for outboxKeys(owner) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("owner's outbox still holds %d items after delivery", outboxKeys(owner))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestQueuedURLsHeldByReplicaOnReturn: a URL queued here that no page
// stored here tells of (one a member forwarded, a redirect's target, a
// link a script names) is held by the host's replica, as a queued URL,
// when the call that queued it returns: the member that forwarded it
// forgets it once acknowledged, and the crawler queues a redirect's
// target right after, so should this node die the replica's takeover is
// the only one to know it.
func TestQueuedURLsHeldByReplicaOnReturn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := threeNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, sender := nodes[0], nodes[2]
	var host string
	var replica *Node
	for i := 0; replica == nil; i++ {
		h := fmt.Sprintf("queued-%d.example", i)
		if !owner.net.IsOwner(h) {
			continue
		}
		if reps := owner.net.Replicas(h); len(reps) > 1 && reps[1] == nodes[1].net.ID() {
			host, replica = h, nodes[1]
		}
	}
	// A URL past the depth bound is not kept at all: the crawler refuses
	// it, and a takeover, which cannot know its depth, would queue it.
	beyond := crawl.DefaultConfig().Filter.MaxDepth + 1
	tests := []struct {
		name  string
		queue func(u string) error
		kept  bool
	}{
		{"forwarded by a member", func(u string) error {
			return owner.inbound.receiveURLs(ctx, sender.net.ID(), []p2p.URLRecord{{URL: u}})
		}, true},
		{"a redirect's target", func(u string) error {
			return (&sink{n: owner}).Queue(ctx, host, "http://"+host+"/old", []crawl.Discovered{{URL: u, SourceHost: host}})
		}, true},
		{"a link of a page not indexed", func(u string) error {
			return (&sink{n: owner}).storeUnindexed(ctx, &crawl.Page{URL: "http://" + host + "/dup", Host: host, Depth: beyond - 2,
				Links: []crawl.Link{{URL: u}}})
		}, true},
		{"forwarded past the depth bound", func(u string) error {
			return owner.inbound.receiveURLs(ctx, sender.net.ID(), []p2p.URLRecord{{URL: u, Depth: beyond}})
		}, false},
		{"a redirect's target past the depth bound", func(u string) error {
			return (&sink{n: owner}).Queue(ctx, host, "http://"+host+"/old", []crawl.Discovered{{URL: u, SourceHost: host, Depth: beyond}})
		}, false},
		{"a link of a page not indexed, past the depth bound", func(u string) error {
			return (&sink{n: owner}).storeUnindexed(ctx, &crawl.Page{URL: "http://" + host + "/dup", Host: host, Depth: beyond - 1,
				Links: []crawl.Link{{URL: u}}})
		}, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := fmt.Sprintf("http://%s/queued-%d.html", host, i)
			if err := tc.queue(u); err != nil {
				t.Fatal(err)
			}
			// No sleep: the replica must hold it on return.
			for _, n := range []*Node{owner, replica} {
				held, err := n.data.hostKeys(prefixQueued, host)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(held, u) != tc.kept {
					t.Fatalf("%s holds %v of %s on return: %s kept = %v, want %v", n.net.ID(), held, host, u, !tc.kept, tc.kept)
				}
			}
		})
	}

	// A URL kept before is neither written nor replicated again (a
	// mirror's pages link to the same navigation as the pages they copy);
	// once a forget deleted the host's queued keys, it is kept anew.
	u := "http://" + host + "/kept-once.html"
	keep := func() {
		t.Helper()
		page := &crawl.Page{URL: "http://" + host + "/copy.html", Host: host, Links: []crawl.Link{{URL: u}}}
		if err := (&sink{n: owner}).storeUnindexed(ctx, page); err != nil {
			t.Fatal(err)
		}
	}
	version := func(n *Node) uint64 {
		t.Helper()
		var v uint64
		err := n.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(hostKey(prefixQueued, host, u))
			if err == nil {
				v = item.Version()
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s: queued key of %s: %v", n.net.ID(), u, err)
		}
		return v
	}
	keep()
	ownerV, replicaV := version(owner), version(replica)
	keep()
	if v := version(owner); v != ownerV {
		t.Errorf("owner wrote the queued key of %s again: version %d, then %d", u, ownerV, v)
	}
	if v := version(replica); v != replicaV {
		t.Errorf("replica was sent the queued key of %s again: version %d, then %d", u, replicaV, v)
	}
	if err := owner.data.forget(ctx, host); err != nil {
		t.Fatal(err)
	}
	keep()
	if held, err := owner.data.hostKeys(prefixQueued, host); err != nil {
		t.Fatal(err)
	} else if !slices.Contains(held, u) {
		t.Errorf("after forgetting %s, keeping %s again left %v: the URL was taken for kept", host, u, held)
	}
}

// waitHolds waits until n holds the page at every one of urls, and fails
// the test at deadline; what says which pages they are.
func waitHolds(t *testing.T, n *Node, urls []string, deadline time.Time, what string) {
	t.Helper()
	for _, u := range urls {
		for {
			_, err := n.ix.Get(context.Background(), u)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica never held %s, %s: %v", u, what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
