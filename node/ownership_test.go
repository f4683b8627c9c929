package node

import (
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
			{func(s *settling) { s.joined(self, []peer.ID{a, b}, []peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling) { s.manifest(a, []string{"moving"}, at(2)) }, "h", 2, false},
			{func(s *settling) { s.manifest(b, nil, at(3)) }, "h", 3, true},
			{nil, "moving", 3, false},
			{func(s *settling) { s.settle("moving") }, "moving", 4, true},
		}},
		{"a handoff that overtakes its manifest is not paused again", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a}, []peer.ID{a}, at(1)) }, "x", 1, false},
			{func(s *settling) { s.settle("moving") }, "x", 2, false},
			{func(s *settling) { s.manifest(a, []string{"moving"}, at(3)) }, "moving", 3, true},
		}},
		{"a dead member sends no manifest", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a, b}, []peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling) { s.manifest(a, nil, at(2)); s.left(b) }, "h", 2, true},
		}},
		{"a host whose handoff never comes is crawled after hostWait", true, []step{
			{func(s *settling) {
				s.joined(self, []peer.ID{a}, []peer.ID{a}, at(1))
				s.manifest(a, []string{"lost"}, at(1))
			}, "lost", 60, false},
			{nil, "lost", 122, true},
		}},
		{"a host named again and again is held back once", true, []step{
			{func(s *settling) {
				s.joined(self, []peer.ID{a}, []peer.ID{a}, at(1))
				s.manifest(a, []string{"h"}, at(1))
			}, "h", 100, false},
			{func(s *settling) { s.manifest(a, []string{"h"}, at(110)) }, "h", 115, false},
			{nil, "h", 122, true},
			{func(s *settling) { s.manifest(a, []string{"h"}, at(130)) }, "h", 131, true},
		}},
		{"a host handed away is waited for again when it comes back", true, []step{
			{func(s *settling) {
				s.joined(self, []peer.ID{a}, []peer.ID{a}, at(1))
				s.manifest(a, []string{"h"}, at(1))
				s.settle("h")
			}, "h", 20, true},
			{func(s *settling) { s.forget("h"); s.manifest(a, []string{"h"}, at(30)) }, "h", 31, false},
		}},
		{"members that are not awaited donors are not waited for", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a, b}, []peer.ID{a}, at(1)) }, "h", 1, false},
			{func(s *settling) { s.manifest(a, nil, at(2)) }, "h", 2, true},
		}},
		{"manifests wait at most manifestWait", true, []step{
			{func(s *settling) { s.joined(self, []peer.ID{a}, []peer.ID{a}, at(1)) }, "h", 10, false},
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

// namedPeers are peer IDs for pure ownership logic: p2p hashes the ID's
// bytes, so any distinct strings spread over the ring.
func namedPeers(prefix string, n int) []peer.ID {
	out := make([]peer.ID, n)
	for i := range out {
		out[i] = peer.ID(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// TestSettlingAwaitsDonorsOnly: a joiner waits for the manifests of the
// donors it was given, no more, and forgets a donor a later view no
// longer names.
func TestSettlingAwaitsDonorsOnly(t *testing.T) {
	self := peer.ID("self")
	all := namedPeers("m", 40)
	donors, others := all[:8], all[8:]
	t0 := time.Unix(1700000000, 0)
	tests := []struct {
		name    string
		donors  [][]peer.ID // successive donor sets, one joined call each
		between []peer.ID   // manifests after the first joined call
		after   []peer.ID   // manifests after the last
		want    bool        // mayCrawl before manifestWait ends
	}{
		{"the donors' manifests suffice", [][]peer.ID{donors}, nil, donors, true},
		{"one donor missing holds the crawl", [][]peer.ID{donors}, nil, donors[1:], false},
		{"others' manifests do not replace a donor's", [][]peer.ID{donors}, nil, append(slices.Clone(others), donors[1:]...), false},
		{"donors a later view no longer names are not awaited", [][]peer.ID{others[:10], donors}, nil, donors, true},
		{"a donor whose manifest came before is not awaited again", [][]peer.ID{donors[:4], donors}, donors[:4], donors[4:], true},
		{"no donor: nothing to wait for", [][]peer.ID{nil}, nil, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSettling(15*time.Second, 2*time.Minute, true, t0)
			for i, d := range tc.donors {
				s.joined(self, all, d, t0.Add(time.Duration(i+1)*time.Second))
				if i == 0 {
					for _, m := range tc.between {
						s.manifest(m, nil, t0.Add(time.Second))
					}
				}
			}
			for _, m := range tc.after {
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

// TestAwaitedDonors: a joiner awaits its donors by its view that announced
// a host, and only those.
func TestAwaitedDonors(t *testing.T) {
	self := peer.ID("joiner")
	all := namedPeers("m", 300)
	view := p2p.NewRing(append(slices.Clone(all), self))
	donors := view.Donors(self, manifestAwaitDepth)
	if len(donors) == 0 || len(donors) >= len(all) {
		t.Fatalf("%d donors of %d members", len(donors), len(all))
	}
	withHosts := func(ids ...peer.ID) []p2p.Member {
		var ms []p2p.Member
		for i, id := range append([]peer.ID{self}, all...) {
			m := p2p.Member{ID: id}
			if slices.Contains(ids, id) {
				m.Load.Hosts = uint64(i + 1)
			}
			ms = append(ms, m)
		}
		return ms
	}
	tests := []struct {
		name    string
		members []p2p.Member
		want    []peer.ID
	}{
		{"every member holds hosts: all donors", withHosts(all...), donors},
		{"none holds a host: none awaited", withHosts(), nil},
		{"donors without hosts are not awaited", withHosts(donors[1:]...), donors[1:]},
		{"members that are not donors are not awaited", withHosts(self, all[0], donors[0]), []peer.ID{donors[0]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			others, got := awaitedDonors(self, view, tc.members)
			if len(others) != len(all) {
				t.Fatalf("%d others, want %d", len(others), len(all))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("awaited %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSendsManifest(t *testing.T) {
	tests := []struct {
		name         string
		moving       int
		holds, donor bool
		want         bool
	}{
		{"hosts to hand over", 1, true, false, true},
		{"a donor with hosts, none moving", 0, true, true, true},
		{"a donor without hosts", 0, false, true, false},
		{"not a donor", 0, true, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sendsManifest(tc.moving, tc.holds, tc.donor); got != tc.want {
				t.Fatalf("sendsManifest = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSendDepthCoversOneUnseenMember: a member that is a joiner's donor
// in the joiner's view is one in the view of a sender that sees one more
// member, at the sending depth; so a sender whose view has one member the
// joiner's lacks still sends the manifest the joiner waits for.
func TestSendDepthCoversOneUnseenMember(t *testing.T) {
	for trial := 0; trial < 30; trial++ {
		members := namedPeers(fmt.Sprintf("t%d-", trial), 20+trial)
		joiner, extra := peer.ID(fmt.Sprintf("joiner-%d", trial)), peer.ID(fmt.Sprintf("extra-%d", trial))
		joinerView := p2p.NewRing(append(slices.Clone(members), joiner))
		senderView := joinerView.With(extra)
		sending := senderView.Donors(joiner, manifestSendDepth)
		for _, d := range joinerView.Donors(joiner, manifestAwaitDepth) {
			if !slices.Contains(sending, d) {
				t.Fatalf("trial %d: %s is awaited but would not send", trial, d)
			}
		}
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
