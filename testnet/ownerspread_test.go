package testnet

import (
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/p2p"
	"sou/testnet/simweb"
)

func testPeers(t *testing.T, n int) []peer.ID {
	t.Helper()
	out := make([]peer.ID, n)
	for i := range out {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = peer.IDFromPrivateKey(k); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestOwnershipOf: the spreads come from the truth listing and
// p2p.OwnerOf over the final members, with hosts keyed as the nodes key
// them (the web's port included).
func TestOwnershipOf(t *testing.T) {
	members := testPeers(t, 3)
	a, b := members[0], members[1]
	// hostOwnedBy finds a host name, served on port 8080, that owner owns.
	used := map[string]bool{}
	hostOwnedBy := func(owner peer.ID) string {
		for i := 0; ; i++ {
			h := fmt.Sprintf("h%d.sim.test", i)
			if !used[h] && p2p.OwnerOf(members, h+":8080") == owner {
				used[h] = true
				return h
			}
		}
	}
	truth := &simweb.Truth{}
	add := func(host string, required, optional int) {
		truth.Hosts = append(truth.Hosts, simweb.HostTruth{Host: host})
		for i := 0; i < required+optional; i++ {
			truth.Pages = append(truth.Pages, simweb.PageTruth{URL: fmt.Sprintf("http://%s:8080/%d", host, i), Host: host, Required: i < required})
		}
	}
	add(hostOwnedBy(a), 1, 0)
	add(hostOwnedBy(a), 1, 2)
	add(hostOwnedBy(a), 6, 0)
	add(hostOwnedBy(b), 2, 0)
	// A link to a name the web does not serve belongs to no host.
	truth.Pages = append(truth.Pages, simweb.PageTruth{URL: "http://nx.sim.test:8080/", Host: "nx.sim.test", Required: true})

	o := ownershipOf(truth, members)
	nr := &NetworkReport{}
	perNode := []NodeFigures{{Peer: a.String()}, {Peer: b.String()}, {Peer: members[2].String()}}
	o.fill(nr, perNode)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"host spread: 3 of 4 hosts over a mean of 4/3", nr.OwnerSpread, 2.25},
		{"page spread: 8 of 10 pages over a mean of 10/3", nr.OwnerSpreadPages, 2.4},
		{"page floor: the largest host's 6 pages over 10/3", nr.OwnerSpreadPagesFloor, 1.8},
		{"a's hosts", float64(perNode[0].TruthHosts), 3},
		{"a's pages", float64(perNode[0].TruthPages), 8},
		{"b's hosts", float64(perNode[1].TruthHosts), 1},
		{"b's pages", float64(perNode[1].TruthPages), 2},
		{"the third member owns nothing", float64(perNode[2].TruthHosts), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if got := ownershipOf(truth, nil).spread(func(s ownerShare) int { return s.Hosts }); got != 0 {
		t.Errorf("no members: spread %v, want 0", got)
	}
}
