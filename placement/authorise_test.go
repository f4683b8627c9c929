package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestWhoMaySend: the rules of replicaFrom and handoffFrom on one view.
// That the receiver holds the host never suffices.
func TestWhoMaySend(t *testing.T) {
	members := namedPeers("m", 8)
	const host, r = "h.test", 2
	space := ringSpace{}
	o := space.Replicas(members, host, len(members)) // closest first
	replica := []struct {
		name       string
		self, from peer.ID
		want       bool
	}{
		{"owner to its replica", o[1], o[0], true},
		{"replica to its owner", o[0], o[1], false},
		{"third closest to the owner", o[0], o[2], false},
		{"third closest to the replica", o[1], o[2], false},
		{"owner to the third closest (a joiner the owner does not know yet, or a stand-in)", o[2], o[0], true},
		{"replica to the third closest", o[2], o[1], true},
		{"owner to a member far from the host", o[4], o[0], false},
		{"far member to the owner", o[0], o[6], false},
	}
	for _, tc := range replica {
		if got := replicaFrom(space, members, tc.self, tc.from, host, r); got != tc.want {
			t.Errorf("replica %s: %v, want %v", tc.name, got, tc.want)
		}
	}
	handoff := []struct {
		name       string
		founders   []peer.ID
		self, from peer.ID
		want       bool
	}{
		{"previous owner to the joiner that displaced it", members, o[0], o[1], true},
		{"previous replica to that joiner", members, o[0], o[2], true},
		{"third before the join (a founder that joined after self displaced the previous owner)", members, o[0], o[3], true},
		{"fourth before the join", members, o[0], o[4], false},
		{"a member that joined after self (not a founder)", []peer.ID{o[0], o[3], o[4]}, o[0], o[1], false},
		{"the closest founder when closer members joined later", []peer.ID{o[0], o[5], o[6]}, o[0], o[5], true},
		{"to a member that does not hold the host", members, o[5], o[0], false},
	}
	for _, tc := range handoff {
		if got := handoffFrom(space, members, tc.founders, tc.self, tc.from, host, r); got != tc.want {
			t.Errorf("handoff %s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCrawlsIn: whose links about a host are taken as found on it.
func TestCrawlsIn(t *testing.T) {
	members := namedPeers("m", 6)
	const host = "h.test"
	space := ringSpace{}
	o := space.Replicas(members, host, len(members))
	tests := []struct {
		name   string
		from   peer.ID
		recent []peer.ID
		want   bool
	}{
		{"the owner", o[0], nil, true},
		{"the replica", o[1], nil, false},
		{"the replica while the owner just joined (the replica crawled it until then)", o[1], []peer.ID{o[0]}, true},
		{"the third closest while the owner just joined", o[2], []peer.ID{o[0]}, false},
		{"the third closest while the two closer just joined", o[2], []peer.ID{o[0], o[1]}, true},
		{"the third closest while the owner and a far member just joined", o[2], []peer.ID{o[0], o[5]}, false},
		{"a far member", o[5], nil, false},
	}
	for _, tc := range tests {
		if got := crawlsIn(space, members, tc.from, host, tc.recent); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAllowed: the machine's view decides, a stranger is never allowed,
// pull answers are taken from the members asked while the pull is under
// way, and handoffs only from founders.
func TestAllowed(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	members := namedPeers("m", 6)
	const host = "h.test"
	space := ringSpace{}
	o := space.Replicas(members, host, len(members))
	self := o[1] // the replica
	m := New(testConfig(self, true), Saved{Hosts: map[string]Role{host: Replica}}, t0)
	for _, p := range members {
		m.Step(t0, Joined{Peer: p})
	}
	late := farFrom(space, members, host, 5)
	m.Step(t0.Add(20*time.Second), Joined{Peer: late}) // after ManifestWait: not a founder
	now := t0.Add(21 * time.Second)
	// A takeover of host, once o[0] is gone, pulls from the members
	// closest to it.
	tests := []struct {
		name string
		kind Kind
		from peer.ID
		host string
		want bool
	}{
		{"replica items from the owner", KindReplica, o[0], host, true},
		{"replica items from a far member", KindReplica, o[5], host, false},
		{"replica items from a stranger", KindReplica, "stranger", host, false},
		{"replica items without a host", KindReplica, o[0], "", false},
		{"a handoff from a founder that held the host", KindHandoff, o[0], host, true},
		{"a pull from the owner", KindPull, o[0], host, true},
		{"a pull from a far member", KindPull, o[5], host, false},
		{"a link from the owner", KindLink, o[0], host, true},
		{"a link from this node's peer the replica", KindLink, o[2], host, false},
		{"a relayed record from the third closest", KindRelay, o[2], host, true},
		{"a relayed record from a far member", KindRelay, o[5], host, false},
	}
	for _, tc := range tests {
		if got := m.Allowed(now, tc.kind, tc.from, tc.host); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if lateHost := hostOwnedBy(t, space, append(members, late), late); m.Allowed(now, KindHandoff, late, lateHost) {
		t.Error("a member that joined after this node hands it a host")
	}
	m.ForgetFounders()
	if m.Allowed(now, KindHandoff, o[0], host) {
		t.Error("a handoff from a member that is no founder any more")
	}

	// A pull: the members asked may send replica items of the host while
	// it is under way, not after.
	m.Step(now, Left{Peer: o[0]})
	if m.Allowed(now, KindReplica, o[3], host) {
		t.Fatal("a member that is no holder may send replica items before it was asked")
	}
	m.Step(now.Add(10*time.Second), Tick{}) // the grace of o[0] ended: take the host over
	var pull *Pull
	for _, a := range m.Ready() {
		if p, ok := a.(Pull); ok && p.Host == host {
			pull = &p
		}
	}
	if pull == nil {
		t.Fatal("no pull before taking the host over")
	}
	asked := o[3] // not among the holders once o[0] is gone
	if !slices.Contains(pull.From, asked) {
		t.Fatalf("the pull asks %v, not %s", pull.From, asked)
	}
	if !m.Allowed(now, KindReplica, asked, host) {
		t.Errorf("the answer of %s, asked in the pull, is refused", asked)
	}
	m.Step(now.Add(11*time.Second), Pulled{Host: host})
	if m.Allowed(now, KindReplica, asked, host) {
		t.Errorf("%s may still send replica items after the pull", asked)
	}
}

// farFrom is a peer that would not be among the k closest to host if it
// joined members.
func farFrom(space Keyspace, members []peer.ID, host string, k int) peer.ID {
	for _, p := range namedPeers("late", 100) {
		if rank(space, append(members, p), host, k, p) < 0 {
			return p
		}
	}
	panic("no far peer")
}

// hostOwnedBy finds a host p owns among members.
func hostOwnedBy(t *testing.T, space Keyspace, members []peer.ID, p peer.ID) string {
	t.Helper()
	for i := 0; i < 10000; i++ {
		h := "h" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + ".test"
		if r := space.Replicas(members, h, 1); r[0] == p {
			return h
		}
	}
	t.Fatalf("no host owned by %s", p)
	return ""
}

// BenchmarkWhoMaySend is what the per-item authorisation costs in a view
// of 64 members: a replica item, a handoff item, a forwarded link.
func BenchmarkWhoMaySend(b *testing.B) {
	members := namedPeers("m", 64)
	const host = "h.test"
	space := ringSpace{}
	o := space.Replicas(members, host, 3)
	b.Run("replica", func(b *testing.B) {
		for b.Loop() {
			replicaFrom(space, members, o[1], o[0], host, 2)
		}
	})
	b.Run("handoff", func(b *testing.B) {
		for b.Loop() {
			handoffFrom(space, members, members, o[0], o[1], host, 2)
		}
	})
	b.Run("link", func(b *testing.B) {
		for b.Loop() {
			crawlsIn(space, members, o[0], host, nil)
		}
	})
}
