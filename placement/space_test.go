package placement

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ringSpace is consistent hashing as p2p's Ring computes it, with fewer
// virtual keys: each member has ringKeys points on a 64-bit ring, and a
// host belongs to the member with the first point clockwise from the
// host's. A member's donors are, for each of its points, the first
// members of the others clockwise from it. With cache set, it remembers
// the points it computed.
type ringSpace struct{ cache map[string][]uint64 }

const ringKeys = 8

func (s ringSpace) points(p peer.ID) []uint64 {
	if pts, ok := s.cache[string(p)]; ok {
		return pts
	}
	pts := make([]uint64, ringKeys)
	for i := range pts {
		k := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", p, i)))
		pts[i] = binary.BigEndian.Uint64(k[:8])
	}
	if s.cache != nil {
		s.cache[string(p)] = pts
	}
	return pts
}

func hostPoint(host string) uint64 {
	k := sha256.Sum256([]byte(strings.ToLower(host)))
	return binary.BigEndian.Uint64(k[:8])
}

// closestAt is up to k distinct members of members (skip left out) whose
// points come first clockwise from at.
func (s ringSpace) closestAt(members []peer.ID, at uint64, k int, skip peer.ID) []peer.ID {
	type cand struct {
		p peer.ID
		d uint64
	}
	cs := make([]cand, 0, len(members))
	for _, p := range members {
		if p == skip {
			continue
		}
		d := ^uint64(0)
		for _, v := range s.points(p) {
			d = min(d, v-at)
		}
		cs = append(cs, cand{p, d})
	}
	slices.SortFunc(cs, func(a, b cand) int {
		if a.d != b.d {
			if a.d < b.d {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a.p), string(b.p))
	})
	cs = slices.CompactFunc(cs, func(a, b cand) bool { return a.p == b.p })
	out := make([]peer.ID, min(max(k, 0), len(cs)))
	for i := range out {
		out[i] = cs[i].p
	}
	return out
}

func (s ringSpace) Replicas(members []peer.ID, host string, k int) []peer.ID {
	return s.closestAt(members, hostPoint(host), k, "")
}

func (s ringSpace) Donors(members []peer.ID, p peer.ID, depth int) []peer.ID {
	var out []peer.ID
	for _, v := range s.points(p) {
		for _, m := range s.closestAt(members, v, depth, p) {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// namedPeers are peer IDs for pure ownership logic: any distinct strings
// spread over the keyspace.
func namedPeers(prefix string, n int) []peer.ID {
	out := make([]peer.ID, n)
	for i := range out {
		out[i] = peer.ID(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}
