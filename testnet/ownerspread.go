package testnet

import (
	"net/url"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/p2p"
	"sou/testnet/simweb"
)

// ownerShare is what the final ownership gives one member of the
// simulated web: its hosts and their required pages.
type ownerShare struct {
	Hosts int
	Pages int
}

// ownership splits the simulated web by the final ownership: each host
// of the truth listing (keyed as the nodes key it, crawl.HostKey of its
// pages' URLs) goes to p2p.OwnerOf over members, with its required pages.
// Nothing here comes from the nodes: the truth says which hosts and pages
// there are, the membership at the end who owns them.
type ownership struct {
	shares map[peer.ID]ownerShare
	// largestPages is the most required pages on one host.
	largestPages int
	members      int
}

func ownershipOf(truth *simweb.Truth, members []peer.ID) ownership {
	o := ownership{shares: map[peer.ID]ownerShare{}, members: len(members)}
	if len(members) == 0 {
		return o
	}
	known := map[string]bool{}
	for _, h := range truth.Hosts {
		known[h.Host] = true
	}
	pagesOf := map[string]int{} // host key -> required pages
	for _, p := range truth.Pages {
		if !known[p.Host] {
			continue // a link to a name the web does not serve
		}
		u, err := url.Parse(p.URL)
		if err != nil {
			continue
		}
		key := crawl.HostKey(u)
		if _, seen := pagesOf[key]; !seen {
			pagesOf[key] = 0
		}
		if p.Required {
			pagesOf[key]++
		}
	}
	for key, pages := range pagesOf {
		owner := p2p.OwnerOf(members, key)
		s := o.shares[owner]
		s.Hosts++
		s.Pages += pages
		o.shares[owner] = s
		o.largestPages = max(o.largestPages, pages)
	}
	return o
}

// spread is the largest share over the mean share of the members (members
// that own nothing count in the mean): 1 is a perfect split.
func (o ownership) spread(of func(ownerShare) int) float64 {
	if o.members == 0 {
		return 0
	}
	total, most := 0, 0
	for _, s := range o.shares {
		total += of(s)
		most = max(most, of(s))
	}
	if total == 0 {
		return 0
	}
	return round3(float64(most) * float64(o.members) / float64(total))
}

// pagesFloor is the least spread of required pages any split by host
// could reach: a member that owns the largest host holds at least its
// pages.
func (o ownership) pagesFloor() float64 {
	total := 0
	for _, s := range o.shares {
		total += s.Pages
	}
	if total == 0 || o.members == 0 {
		return 0
	}
	return round3(max(1, float64(o.largestPages)*float64(o.members)/float64(total)))
}

// fill sets the network section's spreads and each per_node entry's truth
// shares.
func (o ownership) fill(nr *NetworkReport, perNode []NodeFigures) {
	if nr != nil {
		nr.OwnerSpread = o.spread(func(s ownerShare) int { return s.Hosts })
		nr.OwnerSpreadPages = o.spread(func(s ownerShare) int { return s.Pages })
		nr.OwnerSpreadPagesFloor = o.pagesFloor()
	}
	for i := range perNode {
		id, err := peer.Decode(perNode[i].Peer)
		if err != nil {
			continue
		}
		s := o.shares[id]
		perNode[i].TruthHosts, perNode[i].TruthPages = s.Hosts, s.Pages
	}
}

// requestsByClient counts the web's requests by client address: each node
// fetches from its own loopback address, so this is each node's crawl
// work as the web saw it.
func requestsByClient(fetches []fetch) map[string]int {
	out := map[string]int{}
	for _, f := range fetches {
		out[f.Client]++
	}
	return out
}

// peerIDs decodes the peer IDs of nodes, skipping any that do not parse.
func peerIDs(ids []string) []peer.ID {
	out := make([]peer.ID, 0, len(ids))
	for _, s := range ids {
		if id, err := peer.Decode(s); err == nil && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
