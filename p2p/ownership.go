package p2p

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Key is a point in the Kademlia keyspace.
type Key [32]byte

// PeerKey is sha256 of the peer ID bytes, exactly as kad-dht's
// kbucket.ConvertPeerID computes it. The DHT places peers by it; ownership
// derives each member's virtual keys from it (VirtualKeys).
func PeerKey(p peer.ID) Key { return sha256.Sum256([]byte(p)) }

// HostKey is sha256 of the lowercased host[:port].
func HostKey(host string) Key { return sha256.Sum256([]byte(strings.ToLower(host))) }

// dataKey is the keyspace point of an arbitrary key (claims).
func dataKey(b []byte) Key { return sha256.Sum256(b) }

// ringPoint is where a key sits on the ownership ring: its first 64 bits.
func (k Key) ringPoint() uint64 { return binary.BigEndian.Uint64(k[:8]) }

// VirtualKeys is how many points each member has on the ownership ring.
const VirtualKeys = 128

// golden is 2^64 divided by the golden ratio, splitmix64's increment.
const golden = 0x9e3779b97f4a7c15

// mix64 is splitmix64's finalizer: a bijection of uint64 with full
// avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// virtualKeys are p's points on the ring, derived from 128 bits of its
// peer key: distinct for one member (mix64 is a bijection), and no cheaper
// to place at will than the peer key itself.
func virtualKeys(p peer.ID) [VirtualKeys]uint64 {
	k := PeerKey(p)
	w0, w1 := binary.BigEndian.Uint64(k[0:8]), binary.BigEndian.Uint64(k[8:16])
	var out [VirtualKeys]uint64
	for i := range out {
		out[i] = mix64(w0 ^ mix64(w1+uint64(i+1)*golden))
	}
	return out
}

// distanceFrom is how far clockwise from the ring point at the nearest of
// vks lies (0 when one is at it).
func distanceFrom(vks *[VirtualKeys]uint64, at uint64) uint64 {
	d := vks[0] - at
	for _, v := range vks[1:] {
		d = min(d, v-at)
	}
	return d
}

// ranked is a member with its distance to one ring point.
type ranked struct {
	id peer.ID
	d  uint64
}

// compareRanked orders by distance, then by peer ID (equal distances need
// two members' virtual keys to collide): a strict total order that every
// node computes alike.
func compareRanked(a, b ranked) int {
	if c := cmp.Compare(a.d, b.d); c != 0 {
		return c
	}
	return strings.Compare(string(a.id), string(b.id))
}

// closestAt returns up to n distinct members of members, closest to the
// ring point at first, by scanning every member's virtual keys. It is the
// definition Ring's lookups must agree with.
func closestAt(members []peer.ID, at uint64, n int) []peer.ID {
	if n <= 0 {
		return nil
	}
	cs := make([]ranked, 0, len(members))
	for _, m := range members {
		if m != "" {
			vks := virtualKeys(m)
			cs = append(cs, ranked{m, distanceFrom(&vks, at)})
		}
	}
	slices.SortFunc(cs, compareRanked)
	cs = slices.Compact(cs) // a member listed twice sorts next to itself
	out := make([]peer.ID, min(n, len(cs)))
	for i := range out {
		out[i] = cs[i].id
	}
	return out
}

// OwnerOf is the pure ownership function: the member closest to the
// host's ring point (see the package doc, "Ownership"). It returns "" for
// an empty member list. It derives every member's virtual keys anew; a
// Ring answers the same from precomputed ones.
func OwnerOf(members []peer.ID, host string) peer.ID {
	if o := closestAt(members, HostKey(host).ringPoint(), 1); len(o) > 0 {
		return o[0]
	}
	return ""
}

// ReplicasOf returns the r members closest to the host, owner first.
func ReplicasOf(members []peer.ID, host string, r int) []peer.ID {
	return closestAt(members, HostKey(host).ringPoint(), r)
}

// ownerOfKey is the member closest to an arbitrary key (claims).
func ownerOfKey(members []peer.ID, k Key) peer.ID {
	if o := closestAt(members, k.ringPoint(), 1); len(o) > 0 {
		return o[0]
	}
	return ""
}

// Ring is a membership's virtual keys, sorted: the ownership of every host
// by that membership, answered in O(log(members·VirtualKeys)). A Ring is
// immutable; With and Without return new ones. The zero Ring (and a nil
// *Ring) has no members.
type Ring struct {
	ids []peer.ID // distinct members, in no particular order
	// points[i] is a virtual key of ids[owner[i]]; sorted by key, then by
	// the owner's peer ID.
	points []uint64
	owner  []uint32
	// hostPoints remembers recent hosts' ring points: a search asks who
	// owns each host of its shard for every query, and hashing a host
	// costs more than the rest of a lookup.
	hostPoints pointMemo
}

// pointMemoSlots is the size of a ring's direct-mapped memo of host
// points: a bounded few hundred KiB however many hosts are asked about (a
// crawler asks about every host it links to).
const pointMemoSlots = 4096

// pointMemo maps a host, by a hash of its name, to one slot holding the
// last host that hashed there and its ring point; a collision only costs
// a miss, since the slot's host is compared.
type pointMemo [pointMemoSlots]atomic.Pointer[memoEntry]

type memoEntry struct {
	host  string
	point uint64
}

// slot is where host is remembered (FNV-1a of its name).
func (m *pointMemo) slot(host string) *atomic.Pointer[memoEntry] {
	h := uint32(2166136261)
	for i := 0; i < len(host); i++ {
		h = (h ^ uint32(host[i])) * 16777619
	}
	return &m[h%pointMemoSlots]
}

// hostPoint is HostKey(host).ringPoint(), remembered in the ring's memo.
func (r *Ring) hostPoint(host string) uint64 {
	slot := r.hostPoints.slot(host)
	if e := slot.Load(); e != nil && e.host == host {
		return e.point
	}
	at := HostKey(host).ringPoint()
	slot.Store(&memoEntry{host: strings.Clone(host), point: at})
	return at
}

// NewRing builds the ring of members (duplicates and "" dropped).
func NewRing(members []peer.ID) *Ring {
	r := &Ring{}
	for _, m := range members {
		if m != "" && !slices.Contains(r.ids, m) {
			r.ids = append(r.ids, m)
		}
	}
	type pt struct {
		key uint64
		m   uint32
	}
	pts := make([]pt, 0, len(r.ids)*VirtualKeys)
	for i, m := range r.ids {
		for _, v := range virtualKeys(m) {
			pts = append(pts, pt{v, uint32(i)})
		}
	}
	slices.SortFunc(pts, func(a, b pt) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(string(r.ids[a.m]), string(r.ids[b.m]))
	})
	r.points = make([]uint64, len(pts))
	r.owner = make([]uint32, len(pts))
	for i, p := range pts {
		r.points[i], r.owner[i] = p.key, p.m
	}
	return r
}

// Len is the number of members.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return len(r.ids)
}

// Has reports whether p is a member of the ring.
func (r *Ring) Has(p peer.ID) bool { return r != nil && slices.Contains(r.ids, p) }

// Members returns the ring's members, sorted by peer ID.
func (r *Ring) Members() []peer.ID {
	if r == nil {
		return nil
	}
	out := slices.Clone(r.ids)
	slices.Sort(out)
	return out
}

// Owner is OwnerOf(members, host) for the ring's members.
func (r *Ring) Owner(host string) peer.ID {
	if r == nil || len(r.points) == 0 {
		return ""
	}
	at := r.hostPoint(host)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= at }) % len(r.points)
	return r.ids[r.owner[i]]
}

// Replicas is ReplicasOf(members, host, k) for the ring's members.
func (r *Ring) Replicas(host string, k int) []peer.ID {
	if r == nil {
		return nil
	}
	return r.closest(r.hostPoint(host), k, "")
}

// ownerOfKey is the member closest to an arbitrary key (claims).
func (r *Ring) ownerOfKey(k Key) peer.ID {
	if o := r.closest(k.ringPoint(), 1, ""); len(o) > 0 {
		return o[0]
	}
	return ""
}

// closest returns up to k distinct members other than skip, closest to
// the ring point at first: the owners of the virtual keys met walking
// clockwise from at.
func (r *Ring) closest(at uint64, k int, skip peer.ID) []peer.ID {
	if r == nil {
		return nil
	}
	others := len(r.ids)
	if skip != "" && slices.Contains(r.ids, skip) {
		others--
	}
	return r.walk(at, min(k, others), skip)
}

// walk collects want distinct members other than skip, walking clockwise
// from the ring point at; want must not exceed the members other than
// skip.
func (r *Ring) walk(at uint64, want int, skip peer.ID) []peer.ID {
	if want <= 0 || len(r.points) == 0 {
		return nil
	}
	out := make([]peer.ID, 0, want)
	start := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= at })
	for step := 0; step < len(r.points) && len(out) < want; step++ {
		m := r.ids[r.owner[(start+step)%len(r.points)]]
		if m != skip && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Donors returns the members p takes hosts from when it joins the others
// of the ring, and more: for each of p's virtual keys, the depth members
// other than p closest to it. With depth 1 these are exactly the members
// that own, among the others, a host that p owns among all (a host moves
// to p only from the first other virtual key clockwise from p's own next
// to it). Sorted by peer ID; p itself is never among them, whether the
// ring holds it or not.
func (r *Ring) Donors(p peer.ID, depth int) []peer.ID {
	if r == nil {
		return nil
	}
	others := len(r.ids)
	if slices.Contains(r.ids, p) {
		others--
	}
	var out []peer.ID
	for _, v := range virtualKeys(p) {
		for _, m := range r.walk(v, min(depth, others), p) {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Only returns the ring of the members keep accepts.
func (r *Ring) Only(keep func(peer.ID) bool) *Ring {
	if r == nil {
		return nil
	}
	var ids []peer.ID
	index := make([]int, len(r.ids)) // old member index -> new, or -1
	for i, m := range r.ids {
		index[i] = -1
		if keep(m) {
			index[i] = len(ids)
			ids = append(ids, m)
		}
	}
	points := make([]uint64, 0, len(ids)*VirtualKeys)
	owner := make([]uint32, 0, len(ids)*VirtualKeys)
	for i, m := range r.owner {
		if index[m] >= 0 {
			points, owner = append(points, r.points[i]), append(owner, uint32(index[m]))
		}
	}
	return &Ring{ids: ids, points: points, owner: owner}
}

// With returns the ring with p added (r itself when p is already in it).
func (r *Ring) With(p peer.ID) *Ring {
	if p == "" || r.Has(p) {
		return r
	}
	if r == nil {
		return NewRing([]peer.ID{p})
	}
	vks := virtualKeys(p)
	slices.Sort(vks[:])
	idx := uint32(len(r.ids))
	// Locals, not the new Ring's fields: appending to a field of a heap
	// object pays a write barrier per element while the GC runs.
	points := make([]uint64, 0, len(r.points)+VirtualKeys)
	owner := make([]uint32, 0, len(r.points)+VirtualKeys)
	i, j := 0, 0
	for i < len(r.points) || j < len(vks) {
		// Take the new key first when it sorts first: by key, then by ID.
		takeNew := i == len(r.points) ||
			j < len(vks) && (vks[j] < r.points[i] || vks[j] == r.points[i] && p < r.ids[r.owner[i]])
		if takeNew {
			points, owner = append(points, vks[j]), append(owner, idx)
			j++
		} else {
			points, owner = append(points, r.points[i]), append(owner, r.owner[i])
			i++
		}
	}
	return &Ring{ids: append(slices.Clone(r.ids), p), points: points, owner: owner}
}

// Without returns the ring with p removed (r itself when p is not in it).
func (r *Ring) Without(p peer.ID) *Ring {
	at := -1
	if r != nil {
		at = slices.Index(r.ids, p)
	}
	if at < 0 {
		return r
	}
	gone := uint32(at)
	points := make([]uint64, 0, len(r.points)-VirtualKeys)
	owner := make([]uint32, 0, len(r.points)-VirtualKeys)
	for i, m := range r.owner {
		switch {
		case m == gone:
			continue
		case m > gone:
			m--
		}
		points, owner = append(points, r.points[i]), append(owner, m)
	}
	return &Ring{ids: slices.Delete(slices.Clone(r.ids), at, at+1), points: points, owner: owner}
}
