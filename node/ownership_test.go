package node

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/p2p"
)

func TestSettling(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	self, a, b := peer.ID("S"), peer.ID("A"), peer.ID("B")
	const wait, hostWait = 15 * time.Second, 2 * time.Minute
	type step struct {
		do   func(s *settling)
		host string
		at   float64
		want bool
	}
	tests := []struct {
		name    string
		joining bool
		steps   []step
	}{
		{"first node alone crawls at once", false, []step{
			{nil, "h", 0, true},
		}},
		{"joining node waits to meet the network", true, []step{
			{nil, "h", 1, false},
			{nil, "h", 16, true}, // nobody answered: the network is this node
		}},
		{"waits for every member's manifest, then crawls hosts not named", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling) { s.manifest(a, []string{"moving"}, at(2)) }, "h", 2, false},
			{func(s *settling) { s.manifest(b, nil, at(3)) }, "h", 3, true},
			{nil, "moving", 3, false},
			{func(s *settling) { s.settle("moving") }, "moving", 4, true},
		}},
		{"a handoff that overtakes its manifest is not paused again", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a}, at(1)) }, "x", 1, false},
			{func(s *settling) { s.settle("moving") }, "x", 2, false},
			{func(s *settling) { s.manifest(a, []string{"moving"}, at(3)) }, "moving", 3, true},
		}},
		{"a dead member sends no manifest", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling) { s.manifest(a, nil, at(2)); s.left(b) }, "h", 2, true},
		}},
		{"a host whose handoff never comes is crawled after hostWait", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a}, at(1)); s.manifest(a, []string{"lost"}, at(1)) }, "lost", 60, false},
			{nil, "lost", 122, true},
		}},
		{"a host named again and again is held back once", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a}, at(1)); s.manifest(a, []string{"h"}, at(1)) }, "h", 100, false},
			{func(s *settling) { s.manifest(a, []string{"h"}, at(110)) }, "h", 115, false},
			{nil, "h", 122, true},
			{func(s *settling) { s.manifest(a, []string{"h"}, at(130)) }, "h", 131, true},
		}},
		{"a host handed away is waited for again when it comes back", true, []step{
			{func(s *settling) {
				s.joined(self, []peer.ID{a}, at(1))
				s.manifest(a, []string{"h"}, at(1))
				s.settle("h")
			}, "h", 20, true},
			{func(s *settling) { s.forget("h"); s.manifest(a, []string{"h"}, at(30)) }, "h", 31, false},
		}},
		{"manifests wait at most manifestWait", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a}, at(1)) }, "h", 10, false},
			{nil, "h", 17, true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSettling(wait, hostWait, tc.joining, t0)
			for i, st := range tc.steps {
				if st.do != nil {
					st.do(s)
				}
				if got := s.mayCrawl(st.host, at(st.at)); got != st.want {
					t.Fatalf("step %d: mayCrawl(%q) at %.0fs = %v, want %v", i, st.host, st.at, got, st.want)
				}
			}
		})
	}
}

// namedPeers are peer IDs for pure ownership logic: p2p.PeerKey is sha256
// of the ID's bytes, so any distinct strings spread over the keyspace.
func namedPeers(prefix string, n int) []peer.ID {
	out := make([]peer.ID, n)
	for i := range out {
		out[i] = peer.ID(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// TestSettlingAwaitsNeighboursOnly: a joiner waits for the manifests of
// its manifestAwaitNeighbours closest members by its current view, no
// more, and forgets a member a closer one pushed out of that set.
func TestSettlingAwaitsNeighboursOnly(t *testing.T) {
	self := peer.ID("self")
	all := namedPeers("m", 40)
	near := p2p.ClosestMembers(all, p2p.PeerKey(self), manifestAwaitNeighbours)
	var far []peer.ID
	for _, m := range all {
		if !slices.Contains(near, m) {
			far = append(far, m)
		}
	}
	t0 := time.Unix(1700000000, 0)
	tests := []struct {
		name      string
		views     [][]peer.ID // successive views, one joined call each
		manifests []peer.ID
		want      bool // mayCrawl before manifestWait ends
	}{
		{"the neighbours' manifests suffice", [][]peer.ID{all}, near, true},
		{"one neighbour missing holds the crawl", [][]peer.ID{all}, near[1:], false},
		{"far members' manifests do not replace a neighbour's", [][]peer.ID{all}, append(slices.Clone(far), near[1:]...), false},
		{"a partial view awaits its own closest", [][]peer.ID{far[:10]}, p2p.ClosestMembers(far[:10], p2p.PeerKey(self), manifestAwaitNeighbours), true},
		{"members pushed out by closer ones are not awaited", [][]peer.ID{far[:10], all}, near, true},
		{"fewer members than neighbours: all awaited", [][]peer.ID{all[:3]}, all[:2], false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSettling(15*time.Second, 2*time.Minute, true, t0)
			for i, v := range tc.views {
				s.joined(self, v, t0.Add(time.Duration(i+1)*time.Second))
			}
			for _, m := range tc.manifests {
				s.manifest(m, nil, t0.Add(5*time.Second))
			}
			if got := s.mayCrawl("h", t0.Add(6*time.Second)); got != tc.want {
				t.Fatalf("mayCrawl = %v, want %v", got, tc.want)
			}
			if !s.mayCrawl("h", t0.Add(20*time.Second)) {
				t.Fatal("after manifestWait the crawl must go on")
			}
		})
	}
}

func TestSendsManifest(t *testing.T) {
	joiner := peer.ID("joiner")
	all := namedPeers("m", 60)
	byDistance := p2p.ClosestMembers(all, p2p.PeerKey(joiner), len(all))
	view := append(slices.Clone(all), joiner)
	tests := []struct {
		name    string
		self    peer.ID
		members []peer.ID
		moving  int
		want    bool
	}{
		{"closest member", byDistance[0], view, 0, true},
		{"last of the send neighbours", byDistance[manifestSendNeighbours-1], view, 0, true},
		{"first beyond them", byDistance[manifestSendNeighbours], view, 0, false},
		{"farthest member", byDistance[len(byDistance)-1], view, 0, false},
		{"farthest member with hosts to hand over", byDistance[len(byDistance)-1], view, 1, true},
		{"self counted even if missing from the list", byDistance[0], byDistance[1:], 0, true},
		{"a small view: everyone is a neighbour", byDistance[len(byDistance)-1], byDistance[len(byDistance)-5:], 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sendsManifest(tc.self, joiner, tc.members, tc.moving); got != tc.want {
				t.Fatalf("sendsManifest = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJoinersTakeHostsFromNeighbours checks the premise of the manifest
// rule on random keys: the members a joiner takes hosts from are among its
// manifestAwaitNeighbours closest members in all but a rare join, and
// always among its manifestSendNeighbours closest.
func TestJoinersTakeHostsFromNeighbours(t *testing.T) {
	dist := func(a, b p2p.Key) p2p.Key {
		var d p2p.Key
		for i := range a {
			d[i] = a[i] ^ b[i]
		}
		return d
	}
	less := func(a, b p2p.Key) bool { return bytes.Compare(a[:], b[:]) < 0 }
	const joins, hostsPerJoin = 300, 100
	for _, size := range []int{16, 64, 200} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var took, outsideAwait int
			for j := 0; j < joins; j++ {
				members := namedPeers(fmt.Sprintf("n%d-j%d-", size, j), size)
				joiner := peer.ID(fmt.Sprintf("joiner-%d-%d", size, j))
				jk := p2p.PeerKey(joiner)
				keys := make([]p2p.Key, size)
				for i, m := range members {
					keys[i] = p2p.PeerKey(m)
				}
				rank := map[peer.ID]int{}
				for r, m := range p2p.ClosestMembers(members, jk, size) {
					rank[m] = r
				}
				worst := -1
				for h := 0; h < hostsPerJoin; h++ {
					hk := p2p.HostKey(fmt.Sprintf("host%d.join%d.n%d", h, j, size))
					best := 0
					for i := range keys {
						if less(dist(keys[i], hk), dist(keys[best], hk)) {
							best = i
						}
					}
					if less(dist(jk, hk), dist(keys[best], hk)) {
						worst = max(worst, rank[members[best]])
					}
				}
				if worst < 0 {
					continue
				}
				took++
				if worst >= manifestSendNeighbours {
					t.Fatalf("join %d took a host from its %d-th closest member", j, worst+1)
				}
				if worst >= manifestAwaitNeighbours {
					outsideAwait++
				}
			}
			if took == 0 || outsideAwait*100 > took {
				t.Fatalf("%d of %d joins took hosts from beyond the %d awaited neighbours (want at most 1%%)", outsideAwait, took, manifestAwaitNeighbours)
			}
			t.Logf("%d members: %d of %d joins took hosts from beyond the awaited neighbours", size, outsideAwait, took)
		})
	}
}

// TestRecentMembersHoldTheirHosts: a member remembered from the last run,
// or one that just left, keeps its hosts from being crawled here until it
// is seen again or its grace period ends; the membership is written to
// Badger so that a restart remembers it.
func TestRecentMembersHoldTheirHosts(t *testing.T) {
	n, _ := newHandlerNode(t, testConfig(t))
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// A host the other member would own.
	var host string
	for i := 0; host == ""; i++ {
		h := fmt.Sprintf("h%d.example", i)
		if p2p.OwnerOf([]peer.ID{n.net.ID(), other}, h) == other {
			host = h
		}
	}
	if !n.ownsAmongRecent(host) {
		t.Fatal("alone, the node must own every host")
	}
	n.memberEvent(other, true) // joined: remembered on disk
	n.recent.grace = 300 * time.Millisecond
	n.memberEvent(other, false) // left: held for the grace period
	if n.ownsAmongRecent(host) {
		t.Fatal("a member that just left still holds its hosts during the grace period")
	}
	time.Sleep(400 * time.Millisecond)
	if !n.ownsAmongRecent(host) {
		t.Fatal("the grace period ended, the host is this node's")
	}
	// What a restart would read: joined members are on disk, left ones not.
	n.memberEvent(other, true)
	n.recent.until = nil
	if err := n.loadRemembered(time.Minute); err != nil {
		t.Fatal(err)
	}
	if n.ownsAmongRecent(host) {
		t.Fatal("after a restart, a remembered member holds its hosts")
	}
	// A host this node owns, whose other replica is the remembered member:
	// not crawled until that member is seen (or its grace ends), since a
	// page stored meanwhile would have no other holder.
	var mine string
	for i := 0; mine == ""; i++ {
		h := fmt.Sprintf("m%d.example", i)
		if p2p.OwnerOf([]peer.ID{n.net.ID(), other}, h) == n.net.ID() {
			mine = h
		}
	}
	if n.ownsAmongRecent(mine) {
		t.Fatal("after a restart, a host was crawled before its remembered replica was seen")
	}
	n.memberEvent(other, true)
	if !n.ownsAmongRecent(mine) {
		t.Fatal("the remembered replica was seen, the host is this node's to crawl")
	}
}
