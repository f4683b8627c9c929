package placement

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
)

// xorSpace is Kademlia's keyspace as p2p computes it: a peer's key is
// sha256 of its ID, a host's sha256 of the lowercased host, closeness is
// XOR distance. With keys set, it remembers the keys it computed.
type xorSpace struct{ keys map[string][32]byte }

func (s xorSpace) key(str string) [32]byte {
	if s.keys == nil {
		return sha256.Sum256([]byte(str))
	}
	k, ok := s.keys[str]
	if !ok {
		k = sha256.Sum256([]byte(str))
		s.keys[str] = k
	}
	return k
}

func (s xorSpace) Replicas(members []peer.ID, host string, k int) []peer.ID {
	return s.closestTo(members, s.key(strings.ToLower(host)), k)
}

func (s xorSpace) Neighbours(members []peer.ID, p peer.ID, k int) []peer.ID {
	return s.closestTo(members, s.key(string(p)), k)
}

func distance(p peer.ID, target [32]byte) [32]byte {
	return xorSpace{}.distance(p, target)
}

func (s xorSpace) distance(p peer.ID, target [32]byte) [32]byte {
	d := s.key(string(p))
	for i := range d {
		d[i] ^= target[i]
	}
	return d
}

func closestTo(members []peer.ID, target [32]byte, k int) []peer.ID {
	return xorSpace{}.closestTo(members, target, k)
}

func (s xorSpace) closestTo(members []peer.ID, target [32]byte, k int) []peer.ID {
	type cand struct {
		p peer.ID
		d [32]byte
	}
	cs := make([]cand, len(members))
	for i, p := range members {
		cs[i] = cand{p, s.distance(p, target)}
	}
	slices.SortFunc(cs, func(a, b cand) int { return bytes.Compare(a.d[:], b.d[:]) })
	cs = slices.CompactFunc(cs, func(a, b cand) bool { return a.p == b.p })
	out := make([]peer.ID, min(max(k, 0), len(cs)))
	for i := range out {
		out[i] = cs[i].p
	}
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
