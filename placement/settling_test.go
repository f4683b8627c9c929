package placement

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

func testConfig(self peer.ID, joining bool) Config {
	return DefaultConfig(self, 2, ringSpace{}, joining, 3*time.Second)
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
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a, b}, []peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling, c Config) { s.manifest(c, a, []string{"moving"}, at(2)) }, "h", 2, false},
			{func(s *settling, c Config) { s.manifest(c, b, nil, at(3)) }, "h", 3, true},
			{nil, "moving", 3, false},
			{func(s *settling, c Config) { s.settleHost("moving") }, "moving", 4, true},
		}},
		{"a handoff that overtakes its manifest is not paused again", true, []step{
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a}, []peer.ID{a}, at(1)) }, "x", 1, false},
			{func(s *settling, c Config) { s.settleHost("moving") }, "x", 2, false},
			{func(s *settling, c Config) { s.manifest(c, a, []string{"moving"}, at(3)) }, "moving", 3, true},
		}},
		{"a dead member sends no manifest", true, []step{
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a, b}, []peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling, c Config) { s.manifest(c, a, nil, at(2)); s.left(b) }, "h", 2, true},
		}},
		{"a host whose handoff never comes is crawled after HostWait", true, []step{
			{func(s *settling, c Config) {
				s.joined(c, []peer.ID{a}, []peer.ID{a}, at(1))
				s.manifest(c, a, []string{"lost"}, at(1))
			}, "lost", 60, false},
			{nil, "lost", 122, true},
		}},
		{"a host whose sender is gone is crawled before HostWait", true, []step{
			{func(s *settling, c Config) {
				s.joined(c, []peer.ID{a}, []peer.ID{a}, at(1))
				s.manifest(c, a, []string{"lost"}, at(1))
			}, "lost", 20, false},
			{func(s *settling, c Config) { s.gone(a) }, "lost", 21, true},
		}},
		{"a host named by a member still alive waits for its handoff", true, []step{
			{func(s *settling, c Config) {
				s.joined(c, []peer.ID{a, b}, []peer.ID{a, b}, at(1))
				s.manifest(c, a, []string{"h"}, at(1))
				s.manifest(c, b, []string{"h"}, at(2))
			}, "h", 20, false},
			{func(s *settling, c Config) { s.gone(a) }, "h", 21, false},
			{func(s *settling, c Config) { s.gone(b) }, "h", 22, true},
		}},
		{"a sender gone after one of its handoffs releases the others", true, []step{
			{func(s *settling, c Config) {
				s.joined(c, []peer.ID{a}, []peer.ID{a}, at(1))
				s.manifest(c, a, []string{"h", "other"}, at(1))
				s.settleHost("h")
			}, "other", 20, false},
			{func(s *settling, c Config) { s.gone(a) }, "h", 21, true},
			{nil, "other", 21, true},
		}},
		{"a host named again and again is held back once", true, []step{
			{func(s *settling, c Config) {
				s.joined(c, []peer.ID{a}, []peer.ID{a}, at(1))
				s.manifest(c, a, []string{"h"}, at(1))
			}, "h", 100, false},
			{func(s *settling, c Config) { s.manifest(c, a, []string{"h"}, at(110)) }, "h", 115, false},
			{nil, "h", 122, true},
			{func(s *settling, c Config) { s.manifest(c, a, []string{"h"}, at(130)) }, "h", 131, true},
		}},
		{"a host handed away is waited for again when it comes back", true, []step{
			{func(s *settling, c Config) {
				s.joined(c, []peer.ID{a}, []peer.ID{a}, at(1))
				s.manifest(c, a, []string{"h"}, at(1))
				s.settleHost("h")
			}, "h", 20, true},
			{func(s *settling, c Config) { s.forget("h"); s.manifest(c, a, []string{"h"}, at(30)) }, "h", 31, false},
		}},
		{"manifests wait at most ManifestWait", true, []step{
			{func(s *settling, c Config) { s.joined(c, []peer.ID{a}, []peer.ID{a}, at(1)) }, "h", 10, false},
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

// TestSettlingAwaitsDonorsOnly: a joiner waits for the manifests of its
// donors by its current view that announced a host, no more, and forgets
// a donor a newcomer displaced.
func TestSettlingAwaitsDonorsOnly(t *testing.T) {
	self := peer.ID("self")
	space := ringSpace{}
	all := namedPeers("m", 40)
	donors := space.Donors(append(slices.Clone(all), self), self, manifestAwaitDepth)
	var others []peer.ID
	for _, m := range all {
		if !slices.Contains(donors, m) {
			others = append(others, m)
		}
	}
	if len(donors) < 3 || len(others) < 10 {
		t.Fatalf("%d donors of %d members: pick other names", len(donors), len(all))
	}
	partial := others[:10]
	partialDonors := space.Donors(append(slices.Clone(partial), self), self, manifestAwaitDepth)
	t0 := time.Unix(1700000000, 0)
	tests := []struct {
		name      string
		views     [][]peer.ID // successive views, one joined call each
		holding   []peer.ID
		manifests []peer.ID
		want      bool // mayCrawl before ManifestWait ends
	}{
		{"the donors' manifests suffice", [][]peer.ID{all}, all, donors, true},
		{"one donor missing holds the crawl", [][]peer.ID{all}, all, donors[1:], false},
		{"other members' manifests do not replace a donor's", [][]peer.ID{all}, all, append(slices.Clone(others), donors[1:]...), false},
		{"a donor that announced no host is not awaited", [][]peer.ID{all}, slices.DeleteFunc(slices.Clone(all), func(p peer.ID) bool { return p == donors[0] }), donors[1:], true},
		{"nobody holds a host: nothing awaited", [][]peer.ID{all}, nil, nil, true},
		{"a partial view awaits its own donors", [][]peer.ID{partial}, all, partialDonors, true},
		{"donors displaced by newcomers are not awaited", [][]peer.ID{partial, all}, all, donors, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(self, 2, space, true, 3*time.Second)
			s := newSettling()
			for i, v := range tc.views {
				s.joined(cfg, v, tc.holding, t0.Add(time.Duration(i+1)*time.Second))
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
	tests := []struct {
		name              string
		moving            int
		holdsHosts, donor bool
		want              bool
	}{
		{"hosts to hand over", 1, true, false, true},
		{"a donor that holds hosts", 0, true, true, true},
		{"a donor that holds none", 0, false, true, false},
		{"not a donor", 0, true, false, false},
	}
	for _, tc := range tests {
		if got := sendsManifest(tc.moving, tc.holdsHosts, tc.donor); got != tc.want {
			t.Errorf("%s: sendsManifest = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestJoinersTakeHostsFromDonors checks the premise of the manifest rule:
// every member a joiner takes a host from is among its donors (depth 1)
// by any view of the same members.
func TestJoinersTakeHostsFromDonors(t *testing.T) {
	space := ringSpace{cache: map[string][]uint64{}}
	const joins, hostsPerJoin = 40, 200
	for _, size := range []int{4, 16, 64} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			took := 0
			for j := range joins {
				members := namedPeers(fmt.Sprintf("n%d-j%d-", size, j), size)
				joiner := peer.ID(fmt.Sprintf("joiner-%d-%d", size, j))
				after := append(slices.Clone(members), joiner)
				donors := space.Donors(after, joiner, 1)
				for h := range hostsPerJoin {
					host := fmt.Sprintf("host%d.join%d.n%d", h, j, size)
					if space.Replicas(after, host, 1)[0] != joiner {
						continue
					}
					took++
					if from := space.Replicas(members, host, 1)[0]; !slices.Contains(donors, from) {
						t.Fatalf("join %d took %s from %s, not among its donors %v", j, host, from, donors)
					}
				}
			}
			if took == 0 {
				t.Fatal("no join took a host")
			}
		})
	}
}
