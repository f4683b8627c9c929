package node

import (
	"context"
	"slices"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/placement"
)

// TestPlacementStateSurvivesRestart: what placement saves (the members of
// the view, each host's role) is what it gets back at the next start;
// replica hosts of the earlier key scheme are read as replicas and
// rewritten when they change.
func TestPlacementStateSurvivesRestart(t *testing.T) {
	n, _ := newHandlerNode(t, testConfig(t))
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte(prefixLegacyReplica+"old.test"), nil) }); err != nil {
		t.Fatal(err)
	}
	steps := []placement.Action{
		placement.SaveMember{Peer: other, In: true},
		placement.SaveHost{Host: "crawled.test", Role: placement.Crawled},
		placement.SaveHost{Host: "replica.test", Role: placement.Replica},
		placement.SaveHost{Host: "gone.test", Role: placement.Crawled},
		placement.SaveHost{Host: "gone.test", Role: placement.None},
	}
	for _, a := range steps {
		if err := n.data.save(a); err != nil {
			t.Fatal(err)
		}
	}
	saved, err := n.data.saved()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(saved.Members, []peer.ID{other}) {
		t.Errorf("members %v, want %v", saved.Members, other)
	}
	want := map[string]placement.Role{"crawled.test": placement.Crawled, "replica.test": placement.Replica, "old.test": placement.Replica}
	if len(saved.Hosts) != len(want) {
		t.Errorf("hosts %v, want %v", saved.Hosts, want)
	}
	for h, r := range want {
		if saved.Hosts[h] != r {
			t.Errorf("role of %s: %v, want %v", h, saved.Hosts[h], r)
		}
	}
	if err := n.data.save(placement.SaveHost{Host: "old.test", Role: placement.Crawled}); err != nil {
		t.Fatal(err)
	}
	if saved, err = n.data.saved(); err != nil || saved.Hosts["old.test"] != placement.Crawled {
		t.Fatalf("a legacy replica host made crawled: %v, %v", saved.Hosts["old.test"], err)
	}
}

// TestFoundersSurviveRestart: a member met while this node joined may
// still hand it hosts after this node restarts, though it is not met
// again in the new run's first minutes (it may be restarting itself).
func TestFoundersSurviveRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	ctx := context.Background()
	a, _ := runNode(t, testConfig(t))
	cfgB := testConfig(t)
	cfgB.Bootstrap = bootstrapAddrs(a)
	b, _, stop := startNode(t, cfgB)
	waitMembers(t, 2, a, b)
	founder := func(n *Node) bool {
		saved, err := n.data.saved()
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(saved.Founders, a.net.ID())
	}
	waitFor(t, 10*time.Second, "the member met while joining to be saved as a founder", func() bool { return founder(b) })
	stop()
	cfgB.Bootstrap = nil
	again, _ := newHandlerNode(t, cfgB)
	if !founder(again) {
		t.Fatal("founder forgotten across a restart")
	}
	// The restarted node meets another member first and a only after its
	// first ManifestWait: a may still hand it hosts.
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if !ask(ctx, again.place, false, func(m *placement.Machine) bool {
		now := time.Now()
		m.Step(now, placement.Joined{Peer: other})
		later := now.Add(time.Minute)
		m.Step(later, placement.Joined{Peer: a.net.ID()})
		return m.Allowed(later, placement.KindHandoff, a.net.ID(), "any.example")
	}) {
		t.Fatal("a founder of the last run may not hand hosts after a restart")
	}
}
