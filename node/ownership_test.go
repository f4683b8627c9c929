package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/p2p"
)

func TestSettling(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	a, b := peer.ID("A"), peer.ID("B")
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
			{func(s *settling) { s.joined([]peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling) { s.manifest(a, []string{"moving"}, at(2)) }, "h", 2, false},
			{func(s *settling) { s.manifest(b, nil, at(3)) }, "h", 3, true},
			{nil, "moving", 3, false},
			{func(s *settling) { s.settle("moving") }, "moving", 4, true},
		}},
		{"a handoff that overtakes its manifest is not paused again", true, []step{
			{func(s *settling) { s.joined([]peer.ID{a}, at(1)) }, "x", 1, false},
			{func(s *settling) { s.settle("moving") }, "x", 2, false},
			{func(s *settling) { s.manifest(a, []string{"moving"}, at(3)) }, "moving", 3, true},
		}},
		{"a dead member sends no manifest", true, []step{
			{func(s *settling) { s.joined([]peer.ID{a, b}, at(1)) }, "h", 1, false},
			{func(s *settling) { s.manifest(a, nil, at(2)); s.left(b) }, "h", 2, true},
		}},
		{"a host whose handoff never comes is crawled after hostWait", true, []step{
			{func(s *settling) { s.joined([]peer.ID{a}, at(1)); s.manifest(a, []string{"lost"}, at(1)) }, "lost", 60, false},
			{nil, "lost", 122, true},
		}},
		{"manifests wait at most manifestWait", true, []step{
			{func(s *settling) { s.joined([]peer.ID{a}, at(1)) }, "h", 10, false},
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
}
