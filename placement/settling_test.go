package placement

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

func testConfig(self peer.ID, joining bool) Config {
	return DefaultConfig(self, 2, xorSpace{}, joining, 3*time.Second)
}

func TestSettling(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	self, a, b := peer.ID("S"), peer.ID("A"), peer.ID("B")
	type step struct {
		do   func(s *settling, cfg Config)
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
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling, c Config) { s.manifest(c, a, []string{"moving"}, at(2)) }, "h", 2, false},
			{func(s *settling, c Config) { s.manifest(c, b, nil, at(3)) }, "h", 3, true},
			{nil, "moving", 3, false},
			{func(s *settling, c Config) { s.settleHost("moving") }, "moving", 4, true},
		}},
		{"a handoff that overtakes its manifest is not paused again", true, []step{
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a}, at(1)) }, "x", 1, false},
			{func(s *settling, c Config) { s.settleHost("moving") }, "x", 2, false},
			{func(s *settling, c Config) { s.manifest(c, a, []string{"moving"}, at(3)) }, "moving", 3, true},
		}},
		{"a dead member sends no manifest", true, []step{
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling, c Config) { s.manifest(c, a, nil, at(2)); s.left(b) }, "h", 2, true},
		}},
		{"a host whose handoff never comes is crawled after HostWait", true, []step{
			{func(s *settling, c Config) {
				s.joined(c, []peer.ID{a}, at(1))
				s.manifest(c, a, []string{"lost"}, at(1))
			}, "lost", 60, false},
			{nil, "lost", 122, true},
		}},
		{"a host named again and again is held back once", true, []step{
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a}, at(1)); s.manifest(c, a, []string{"h"}, at(1)) }, "h", 100, false},
			{func(s *settling, c Config) { s.manifest(c, a, []string{"h"}, at(110)) }, "h", 115, false},
			{nil, "h", 122, true},
			{func(s *settling, c Config) { s.manifest(c, a, []string{"h"}, at(130)) }, "h", 131, true},
		}},
		{"a host handed away is waited for again when it comes back", true, []step{
			{func(s *settling, c Config) {
				s.joined(c, []peer.ID{a}, at(1))
				s.manifest(c, a, []string{"h"}, at(1))
				s.settleHost("h")
			}, "h", 20, true},
			{func(s *settling, c Config) { s.forget("h"); s.manifest(c, a, []string{"h"}, at(30)) }, "h", 31, false},
		}},
		{"manifests wait at most ManifestWait", true, []step{
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a}, at(1)) }, "h", 10, false},
			{nil, "h", 17, true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(self, tc.joining)
			s := newSettling()
			for i, st := range tc.steps {
				if st.do != nil {
					st.do(&s, cfg)
				}
				if got := s.mayCrawl(cfg, t0, at(st.at), st.host); got != st.want {
					t.Fatalf("step %d: mayCrawl(%q) at %.0fs = %v, want %v", i, st.host, st.at, got, st.want)
				}
			}
		})
	}
}

// TestSettlingAwaitsNeighboursOnly: a joiner waits for the manifests of
// its manifestAwaitNeighbours closest members by its current view, no
// more, and forgets a member a closer one pushed out of that set.
func TestSettlingAwaitsNeighboursOnly(t *testing.T) {
	self := peer.ID("self")
	all := namedPeers("m", 40)
	near := xorSpace{}.Neighbours(all, self, manifestAwaitNeighbours)
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
		want      bool // mayCrawl before ManifestWait ends
	}{
		{"the neighbours' manifests suffice", [][]peer.ID{all}, near, true},
		{"one neighbour missing holds the crawl", [][]peer.ID{all}, near[1:], false},
		{"far members' manifests do not replace a neighbour's", [][]peer.ID{all}, append(slices.Clone(far), near[1:]...), false},
		{"a partial view awaits its own closest", [][]peer.ID{far[:10]}, xorSpace{}.Neighbours(far[:10], self, manifestAwaitNeighbours), true},
		{"members pushed out by closer ones are not awaited", [][]peer.ID{far[:10], all}, near, true},
		{"fewer members than neighbours: all awaited", [][]peer.ID{all[:3]}, all[:2], false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(self, true)
			s := newSettling()
			for i, v := range tc.views {
				s.joined(cfg, v, t0.Add(time.Duration(i+1)*time.Second))
			}
			for _, m := range tc.manifests {
				s.manifest(cfg, m, nil, t0.Add(5*time.Second))
			}
			if got := s.mayCrawl(cfg, t0, t0.Add(6*time.Second), "h"); got != tc.want {
				t.Fatalf("mayCrawl = %v, want %v", got, tc.want)
			}
			if !s.mayCrawl(cfg, t0, t0.Add(20*time.Second), "h") {
				t.Fatal("after ManifestWait the crawl must go on")
			}
		})
	}
}

func TestSendsManifest(t *testing.T) {
	joiner := peer.ID("joiner")
	all := namedPeers("m", 60)
	byDistance := xorSpace{}.Neighbours(all, joiner, len(all))
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
			if got := sendsManifest(xorSpace{}, tc.self, joiner, tc.members, tc.moving); got != tc.want {
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
	less := func(a, b [32]byte) bool { return bytes.Compare(a[:], b[:]) < 0 }
	const joins, hostsPerJoin = 300, 100
	for _, size := range []int{16, 64, 200} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var took, outsideAwait int
			for j := 0; j < joins; j++ {
				members := namedPeers(fmt.Sprintf("n%d-j%d-", size, j), size)
				joiner := peer.ID(fmt.Sprintf("joiner-%d-%d", size, j))
				rank := map[peer.ID]int{}
				for r, m := range (xorSpace{}).Neighbours(members, joiner, size) {
					rank[m] = r
				}
				keys := make([][32]byte, size)
				for i, m := range members {
					keys[i] = sha256.Sum256([]byte(m))
				}
				jk := sha256.Sum256([]byte(joiner))
				dist := func(a, b [32]byte) [32]byte {
					for i := range a {
						a[i] ^= b[i]
					}
					return a
				}
				worst := -1
				for h := 0; h < hostsPerJoin; h++ {
					hk := sha256.Sum256([]byte(fmt.Sprintf("host%d.join%d.n%d", h, j, size)))
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
