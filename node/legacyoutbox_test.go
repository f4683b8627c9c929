package node

import (
	"context"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/node/peermsg"
)

// TestLegacyReplicaOutboxMoves: the replica outbox an earlier version kept
// under "n:o/" is in p2p's outbox under topicReplica after a restart, and
// its keys are gone.
func TestLegacyReplicaOutboxMoves(t *testing.T) {
	cfg := testConfig(t)
	n, err := New(context.Background(), cfg, quietLogger())
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	legacy := func(id string) []byte { return []byte(prefixLegacyOutbox + replica.String() + "\x00" + id) }
	sitemap := peermsg.EncodeSitemap(peermsg.Sitemap{Host: "a.example", URL: "http://a.example/sitemap.xml", Listed: []string{"http://a.example/x"}})
	err = n.db.Update(func(txn *badger.Txn) error {
		for k, v := range map[string][]byte{
			"dhttp://a.example/page":        nil,
			"fhttp://a.example/gone":        nil,
			"shttp://a.example/sitemap.xml": sitemap,
		} {
			if err := txn.Set(legacy(k), v); err != nil {
				return err
			}
		}
		return txn.Set([]byte(prefixLegacyOutbox+"not-a-peer\x00dhttp://a.example/x"), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	n.closeAll()

	n, err = New(context.Background(), cfg, quietLogger())
	if err != nil {
		t.Fatalf("node.New again: %v", err)
	}
	defer n.closeAll()
	if _, byPeer := n.net.Outbox().Depth(topicReplica); byPeer[replica] != 3 {
		t.Fatalf("replica outbox after the move: %v, want 3 records for %s", byPeer, replica)
	}
	err = n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixLegacyOutbox)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			t.Errorf("legacy key left: %q", it.Item().Key())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
