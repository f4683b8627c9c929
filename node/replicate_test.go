package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"sou/crawl"
)

// TestStoreWaitsForReplica: Store returns only once the host's other
// replica holds the page (group commit), and the owner keeps its own
// marker for a page it did not index, so that it can take the host over
// again after handing it back.
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
	s := &sink{n: owner}
	for i := range 5 {
		p := &crawl.Page{
			URL: fmt.Sprintf("http://%s/page-%d", host, i), Host: host, Status: 200, FetchedAt: time.Now(),
			ContentType: "text/html", Title: fmt.Sprintf("page %d", i), Text: fmt.Sprintf("the text of page number %d", i),
		}
		p.ContentHash = crawl.ContentHash(p.Text)
		if err := s.Store(ctx, p); err != nil {
			t.Fatalf("Store %s: %v", p.URL, err)
		}
		// No sleep: the replica must hold it when Store returns.
		if _, err := replica.ix.Get(ctx, p.URL); err != nil {
			t.Fatalf("replica does not hold %s when Store returned: %v", p.URL, err)
		}
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
	// The wait ends with the context.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := owner.awaitReplicas(cctx, []*replCommit{newReplCommit(replica.net.ID())}); err == nil {
		t.Error("awaitReplicas with a cancelled context returned nil")
	}
}
