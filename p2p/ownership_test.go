package p2p

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func randomPeers(t testing.TB, n int) []peer.ID {
	t.Helper()
	out := make([]peer.ID, n)
	for i := range out {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = id
	}
	return out
}

// namedPeers are peer IDs for pure ownership logic: ownership hashes the
// ID's bytes, so any distinct strings spread over the ring.
func namedPeers(prefix string, n int) []peer.ID {
	out := make([]peer.ID, n)
	for i := range out {
		out[i] = peer.ID(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

var two64 = new(big.Int).Lsh(big.NewInt(1), 64)

// refDistance is the reference distance, computed independently of
// ownership.go's arithmetic: (v - at) mod 2^64 as big integers, minimised
// over p's virtual keys.
func refDistance(p peer.ID, at uint64) *big.Int {
	var best *big.Int
	a := new(big.Int).SetUint64(at)
	for _, v := range virtualKeys(p) {
		d := new(big.Int).Sub(new(big.Int).SetUint64(v), a)
		d.Mod(d, two64)
		if best == nil || d.Cmp(best) < 0 {
			best = d
		}
	}
	return best
}

// refClosest is the reference order: distinct members by refDistance,
// then peer ID.
func refClosest(members []peer.ID, at uint64) []peer.ID {
	var ids []peer.ID
	for _, m := range members {
		if m != "" && !slices.Contains(ids, m) {
			ids = append(ids, m)
		}
	}
	slices.SortFunc(ids, func(a, b peer.ID) int {
		if c := refDistance(a, at).Cmp(refDistance(b, at)); c != 0 {
			return c
		}
		return strings.Compare(string(a), string(b))
	})
	return ids
}

func hostPoint(host string) uint64 { return HostKey(host).ringPoint() }

func TestOwnerOfMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	all := randomPeers(t, 64)
	for _, size := range []int{1, 2, 3, 7, 64} {
		for trial := 0; trial < 100; trial++ {
			members := make([]peer.ID, size)
			for i := range members {
				members[i] = all[rng.IntN(len(all))] // duplicates on purpose
			}
			host := fmt.Sprintf("Host%d.Example:%d", rng.IntN(1e6), 80+rng.IntN(3))
			want := refClosest(members, hostPoint(strings.ToLower(host)))
			if got := OwnerOf(members, host); got != want[0] {
				t.Fatalf("size %d host %s: OwnerOf = %s, reference %s", size, host, got, want[0])
			}
			for _, r := range []int{1, 2, 3, len(want), len(want) + 1} {
				if got := ReplicasOf(members, host, r); !slices.Equal(got, want[:min(r, len(want))]) {
					t.Fatalf("size %d host %s: ReplicasOf(%d) = %v, reference %v", size, host, r, got, want)
				}
			}
		}
	}
	if OwnerOf(nil, "x") != "" || NewRing(nil).Owner("x") != "" || (*Ring)(nil).Owner("x") != "" {
		t.Fatal("empty membership must have no owner")
	}
	if ReplicasOf(all, "x", 0) != nil || NewRing(all).Replicas("x", -1) != nil {
		t.Fatal("no replicas asked, none given")
	}
}

// TestRingMatchesOwnerOf: the ring's lookups answer what the scanning
// functions answer, built at once or member by member, and after members
// leave.
func TestRingMatchesOwnerOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all := namedPeers("ring-", 200)
	tests := []struct {
		name    string
		members []peer.ID
	}{
		{"one", all[:1]},
		{"two", all[:2]},
		{"seven with duplicates", append(slices.Clone(all[:7]), all[2], all[5])},
		{"sixty-four", all[:64]},
		{"two hundred", all},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			built := NewRing(tc.members)
			var grown *Ring
			for _, m := range tc.members {
				grown = grown.With(m)
			}
			// Members that come and go leave the ring as if never there.
			churned := NewRing(append(slices.Clone(tc.members), all[190:]...))
			for _, m := range all[190:] {
				if !slices.Contains(tc.members, m) {
					churned = churned.Without(m)
				}
			}
			// A subset of a larger ring is the ring of the subset.
			only := NewRing(append(slices.Clone(tc.members), all[190:]...)).Only(func(p peer.ID) bool { return slices.Contains(tc.members, p) })
			distinct := len(refClosest(tc.members, 0))
			trials := 200
			if distinct >= 64 {
				trials = 30 // the scanning functions are the slow side
			}
			for trial := 0; trial < trials; trial++ {
				host := fmt.Sprintf("h%d.test", rng.IntN(1e9))
				for _, r := range []*Ring{built, grown, churned, only} {
					if r.Len() != distinct {
						t.Fatalf("ring has %d members, want %d", r.Len(), distinct)
					}
					if got, want := r.Owner(host), OwnerOf(tc.members, host); got != want {
						t.Fatalf("%s: Ring.Owner = %s, OwnerOf = %s", host, got, want)
					}
					for _, k := range []int{2, 3, distinct, distinct + 2} {
						if got, want := r.Replicas(host, k), ReplicasOf(tc.members, host, k); !slices.Equal(got, want) {
							t.Fatalf("%s: Ring.Replicas(%d) = %v, ReplicasOf = %v", host, k, got, want)
						}
					}
				}
			}
			if !slices.Equal(built.Members(), grown.Members()) || !slices.Equal(built.Members(), churned.Members()) || !slices.Equal(built.Members(), only.Members()) {
				t.Fatal("rings of one membership list different members")
			}
		})
	}
}

// TestVirtualKeysAreFixed pins the derivation: every node must compute
// the same owners, so a change here is a change of the network protocol.
func TestVirtualKeysAreFixed(t *testing.T) {
	vks := virtualKeys(peer.ID("sou"))
	got := []uint64{vks[0], vks[1], vks[VirtualKeys-1]}
	want := []uint64{0x25072e84247e3025, 0xfc82ccd1ae7ce2b4, 0xa40c0f0f483cc5d7}
	if !slices.Equal(got, want) {
		t.Fatalf("virtual keys of %q: got %#x, want %#x", "sou", got, want)
	}
	seen := map[uint64]bool{}
	for _, v := range vks {
		if seen[v] {
			t.Fatal("one member's virtual keys collide")
		}
		seen[v] = true
	}
}

func TestHostKeyLowercasesAndPeerKeyMatchesKbucket(t *testing.T) {
	if HostKey("Example.COM:8080") != HostKey("example.com:8080") {
		t.Fatal("host key must ignore case")
	}
	p := randomPeers(t, 1)[0]
	want := sha256.Sum256([]byte(p))
	if k := PeerKey(p); !bytes.Equal(k[:], want[:]) {
		t.Fatal("peer key must be sha256 of the ID bytes")
	}
}

// closerThan reports whether a is strictly closer than b to the ring
// point at, in the order every node uses.
func closerThan(a, b peer.ID, at uint64) bool {
	va, vb := virtualKeys(a), virtualKeys(b)
	return compareRanked(ranked{a, distanceFrom(&va, at)}, ranked{b, distanceFrom(&vb, at)}) < 0
}

// TestGreedyForwardingTerminates: a node that does not own a host by its
// own view forwards it to the owner by that view, which is strictly
// closer to the host than itself in an order that does not depend on any
// view. So however the views differ (each node its own, or one that
// changes at every hop), a chain visits no node twice and ends within as
// many hops as there are members.
func TestGreedyForwardingTerminates(t *testing.T) {
	all := namedPeers("fwd-", 40)
	tests := []struct {
		name string
		view func(rng *rand.Rand, at peer.ID) []peer.ID
	}{
		{"each node its own partial view", nil},
		{"a view redrawn at every hop", func(rng *rand.Rand, at peer.ID) []peer.ID {
			v := []peer.ID{at}
			for _, p := range all {
				if rng.IntN(3) == 0 {
					v = append(v, p)
				}
			}
			return v
		}},
		{"views of two members each", func(rng *rand.Rand, at peer.ID) []peer.ID {
			return []peer.ID{at, all[rng.IntN(len(all))]}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			fixed := map[peer.ID]*Ring{}
			for _, p := range all {
				v := []peer.ID{p}
				for _, q := range all {
					if rng.IntN(4) == 0 {
						v = append(v, q)
					}
				}
				fixed[p] = NewRing(v)
			}
			longest := 0
			for trial := 0; trial < 500; trial++ {
				host := fmt.Sprintf("h%d.test", trial)
				at := hostPoint(host)
				cur := all[rng.IntN(len(all))]
				visited := map[peer.ID]bool{cur: true}
				for hops := 0; ; hops++ {
					view := fixed[cur]
					if tc.view != nil {
						view = NewRing(tc.view(rng, cur))
					}
					next := view.Owner(host)
					if next == cur {
						longest = max(longest, hops)
						break
					}
					if !closerThan(next, cur, at) {
						t.Fatalf("%s: a step from %s to %s did not get closer", host, cur, next)
					}
					if visited[next] {
						t.Fatalf("%s: the chain came back to %s", host, next)
					}
					visited[next] = true
					cur = next
				}
			}
			t.Logf("longest chain %d hops", longest)
		})
	}
}

// TestDonorsAreThePreviousOwners: every host a joiner owns among all was
// owned, among the others, by one of its depth-1 donors, without
// exception; a deeper set contains the shallower one.
func TestDonorsAreThePreviousOwners(t *testing.T) {
	for _, size := range []int{1, 4, 16, 64, 200} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			for j := 0; j < 20; j++ {
				others := namedPeers(fmt.Sprintf("n%d-j%d-", size, j), size)
				joiner := peer.ID(fmt.Sprintf("joiner-%d-%d", size, j))
				before := NewRing(others)
				after := before.With(joiner)
				donors := before.Donors(joiner, 1)
				if d := after.Donors(joiner, 1); !slices.Equal(d, donors) {
					t.Fatalf("donors depend on whether the ring holds the joiner: %v vs %v", d, donors)
				}
				if slices.Contains(donors, joiner) || len(donors) > min(size, VirtualKeys) {
					t.Fatalf("%d donors (joiner among them: %v)", len(donors), slices.Contains(donors, joiner))
				}
				deeper := before.Donors(joiner, 2)
				for _, d := range donors {
					if !slices.Contains(deeper, d) {
						t.Fatalf("donor %s missing at depth 2", d)
					}
				}
				took := 0
				for h := 0; h < 2000; h++ {
					host := fmt.Sprintf("host%d.join%d.n%d", h, j, size)
					if after.Owner(host) != joiner {
						continue
					}
					took++
					if prev := before.Owner(host); !slices.Contains(donors, prev) {
						t.Fatalf("%s moved from %s, not a donor", host, prev)
					}
				}
				if took == 0 {
					t.Fatal("a joiner took no host of 2000")
				}
			}
		})
	}
}

// spreadOf is the most hosts one member owns over the mean.
func spreadOf(owners []peer.ID, members int) float64 {
	count := map[peer.ID]int{}
	most := 0
	for _, o := range owners {
		count[o]++
		most = max(most, count[o])
	}
	return float64(most) * float64(members) / float64(len(owners))
}

// xorOwner is the ownership this package had before virtual keys: the
// member whose sha256 peer key is XOR-closest to the host key. It is here
// only as the baseline of TestOwnershipSpread.
func xorOwner(members []peer.ID, keys []Key, hk Key) peer.ID {
	best := 0
	var bestD Key
	for i, k := range keys {
		var d Key
		for b := range d {
			d[b] = k[b] ^ hk[b]
		}
		if i == 0 || bytes.Compare(d[:], bestD[:]) < 0 {
			best, bestD = i, d
		}
	}
	return members[best]
}

// TestOwnershipSpread: over many random memberships, the most loaded
// member owns at most target× the mean number of hosts in the share of
// them each row asks. With 10,000 hosts the target is issue 22's 1.5 for
// 4, 16 and 64 members; the rows of the testnets' sizes (200 hosts on 4
// nodes, 400 on 16 and 64) are bounded by the hosts themselves: with 6
// hosts per member on average, even an ideal random split puts twice the
// mean on someone. -v prints the distributions, and the one-key XOR
// baseline's beside them.
func TestOwnershipSpread(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	quantile := func(s []float64, q float64) float64 { return s[int(q*float64(len(s)-1))] }
	tests := []struct {
		members, hosts int
		target         float64
		share          float64 // of memberships at or under target
	}{
		{4, 10000, 1.5, 0.95},
		{16, 10000, 1.5, 0.95},
		{64, 10000, 1.5, 0.95},
		{4, 200, 1.5, 0.9},
		{16, 400, 1.5, 0.6},
		{64, 400, 2.5, 0.8},
	}
	for _, tc := range tests {
		n := tc.members
		t.Run(fmt.Sprintf("%d members %d hosts", n, tc.hosts), func(t *testing.T) {
			var ring, xor []float64
			under := 0
			for seed := 0; seed < seeds; seed++ {
				members := namedPeers(fmt.Sprintf("spread-%d-%d-", n, seed), n)
				keys := make([]Key, n)
				for i, m := range members {
					keys[i] = PeerKey(m)
				}
				r := NewRing(members)
				byRing := make([]peer.ID, tc.hosts)
				byXOR := make([]peer.ID, tc.hosts)
				for h := range byRing {
					host := fmt.Sprintf("site-%d-%d.example", seed, h)
					byRing[h] = r.Owner(host)
					if testing.Verbose() { // the baseline is only printed
						byXOR[h] = xorOwner(members, keys, HostKey(host))
					}
				}
				s := spreadOf(byRing, n)
				ring = append(ring, s)
				xor = append(xor, spreadOf(byXOR, n))
				if s <= tc.target {
					under++
				}
			}
			slices.Sort(ring)
			slices.Sort(xor)
			t.Logf("%d members, %d hosts, %d memberships: max/mean p50 %.2f p90 %.2f max %.2f, at most %.1f: %d (one XOR key each, -v only: p50 %.2f p90 %.2f max %.2f)",
				n, tc.hosts, seeds, quantile(ring, .5), quantile(ring, .9), ring[len(ring)-1], tc.target, under,
				quantile(xor, .5), quantile(xor, .9), xor[len(xor)-1])
			if float64(under) < tc.share*float64(seeds) {
				t.Fatalf("%d of %d memberships at most %.1f× the mean, want %.0f%%", under, seeds, tc.target, 100*tc.share)
			}
		})
	}
}

// TestRingOwnerMemo: the ring remembers host points in a few thousand slots;
// asking about more hosts than slots, twice and in another order, answers
// what the walk answers every time (a slot shared by two hosts is a miss,
// never the other host's owner).
func TestRingOwnerMemo(t *testing.T) {
	members := namedPeers("memo-", 16)
	r := NewRing(members)
	hosts := make([]string, 3*pointMemoSlots)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("site-%d.test", i)
	}
	want := make(map[string]peer.ID, len(hosts))
	for _, h := range hosts {
		want[h] = r.closest(HostKey(h).ringPoint(), 1, "")[0]
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for pass := range 3 {
		for _, i := range rng.Perm(len(hosts)) {
			if got := r.Owner(hosts[i]); got != want[hosts[i]] {
				t.Fatalf("pass %d: Owner(%s) = %s, want %s", pass, hosts[i], got, want[hosts[i]])
			}
			if got := r.Replicas(hosts[i], 2); got[0] != want[hosts[i]] || !slices.Equal(got, r.closest(HostKey(hosts[i]).ringPoint(), 2, "")) {
				t.Fatalf("pass %d: Replicas(%s) = %v", pass, hosts[i], got)
			}
		}
	}
	if r.Owner("") != r.closest(HostKey("").ringPoint(), 1, "")[0] {
		t.Fatal("the empty host has an owner like any other")
	}
	var empty *Ring
	if empty.Owner("a.test") != "" || (&Ring{}).Owner("a.test") != "" {
		t.Fatal("a ring without members owns nothing")
	}
}
