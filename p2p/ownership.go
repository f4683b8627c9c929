package p2p

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Key is a point in the Kademlia keyspace.
type Key [32]byte

// PeerKey is sha256 of the peer ID bytes, exactly as kad-dht's
// kbucket.ConvertPeerID computes it.
func PeerKey(p peer.ID) Key { return sha256.Sum256([]byte(p)) }

// HostKey is sha256 of the lowercased host[:port].
func HostKey(host string) Key { return sha256.Sum256([]byte(strings.ToLower(host))) }

// dataKey is the keyspace point of an arbitrary key (claims).
func dataKey(b []byte) Key { return sha256.Sum256(b) }

func xorDistance(a, b Key) Key {
	var d Key
	for i := range a {
		d[i] = a[i] ^ b[i]
	}
	return d
}

// closer reports whether a is strictly closer to target than b.
func closer(a, b, target Key) bool {
	da, db := xorDistance(a, target), xorDistance(b, target)
	return bytes.Compare(da[:], db[:]) < 0
}

// closestN returns up to n of members sorted by XOR distance of their key
// to target, closest first. Ties cannot happen between distinct peers
// (sha256 collisions aside); duplicates in members are collapsed.
func closestN(members []peer.ID, target Key, n int) []peer.ID {
	type cand struct {
		id   peer.ID
		dist Key
	}
	cs := make([]cand, 0, len(members))
	seen := make(map[peer.ID]bool, len(members))
	for _, m := range members {
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		cs = append(cs, cand{m, xorDistance(PeerKey(m), target)})
	}
	slices.SortFunc(cs, func(a, b cand) int { return bytes.Compare(a.dist[:], b.dist[:]) })
	if n > len(cs) {
		n = len(cs)
	}
	out := make([]peer.ID, n)
	for i := range out {
		out[i] = cs[i].id
	}
	return out
}

// ClosestMembers returns up to k of members sorted by the XOR distance of
// their key to key, closest first, duplicates collapsed (none for k <= 0).
// node uses it to find a joiner's XOR neighbours, the only members that
// can hand hosts over to it (see node's settling).
func ClosestMembers(members []peer.ID, key Key, k int) []peer.ID {
	if k <= 0 {
		return nil
	}
	return closestN(members, key, k)
}

// closestTo returns the member whose key is XOR-closest to target, or ""
// when members is empty.
func closestTo(members []peer.ID, target Key) peer.ID {
	var best peer.ID
	var bestDist Key
	for _, m := range members {
		if m == "" {
			continue
		}
		d := xorDistance(PeerKey(m), target)
		if best == "" || bytes.Compare(d[:], bestDist[:]) < 0 {
			best, bestDist = m, d
		}
	}
	return best
}

// OwnerOf is the pure ownership function: the member whose key is
// XOR-closest to HostKey(host). It returns "" for an empty member list.
func OwnerOf(members []peer.ID, host string) peer.ID {
	return closestTo(members, HostKey(host))
}

// ReplicasOf returns the r members closest to the host, owner first.
func ReplicasOf(members []peer.ID, host string, r int) []peer.ID {
	return closestN(members, HostKey(host), r)
}
