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

// bruteOwner is the reference: XOR distance as a big integer, computed
// independently of ownership.go's byte comparison.
func bruteOwner(members []peer.ID, host string) peer.ID {
	hk := sha256.Sum256([]byte(strings.ToLower(host)))
	var best peer.ID
	var bestD *big.Int
	for _, m := range members {
		pk := sha256.Sum256([]byte(m))
		d := new(big.Int).Xor(new(big.Int).SetBytes(pk[:]), new(big.Int).SetBytes(hk[:]))
		if bestD == nil || d.Cmp(bestD) < 0 {
			best, bestD = m, d
		}
	}
	return best
}

func TestOwnerOfMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	all := randomPeers(t, 64)
	for _, size := range []int{1, 2, 3, 7, 64} {
		for trial := 0; trial < 200; trial++ {
			members := make([]peer.ID, size)
			for i := range members {
				members[i] = all[rng.IntN(len(all))]
			}
			host := fmt.Sprintf("Host%d.Example:%d", rng.IntN(1e6), 80+rng.IntN(3))
			want := bruteOwner(members, host)
			if got := OwnerOf(members, host); got != want {
				t.Fatalf("size %d host %s: OwnerOf = %s, brute force = %s", size, host, got, want)
			}
			reps := ReplicasOf(members, host, 2)
			if reps[0] != want {
				t.Fatalf("ReplicasOf owner first: got %s want %s", reps[0], want)
			}
			if len(reps) == 2 {
				rest := make([]peer.ID, 0, len(members))
				for _, m := range members {
					if m != want {
						rest = append(rest, m)
					}
				}
				if second := bruteOwner(rest, host); reps[1] != second {
					t.Fatalf("second replica %s, brute force %s", reps[1], second)
				}
			}
		}
	}
	if OwnerOf(nil, "x") != "" {
		t.Fatal("empty membership must have no owner")
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

func TestGreedyStepsAlwaysGetCloser(t *testing.T) {
	// Any node that does not own a host by its partial view forwards to a
	// member strictly closer to the host than itself, so chains end.
	rng := rand.New(rand.NewPCG(3, 4))
	all := randomPeers(t, 30)
	for trial := 0; trial < 500; trial++ {
		host := fmt.Sprintf("h%d.test", trial)
		hk := HostKey(host)
		cur := all[rng.IntN(len(all))]
		for hops := 0; ; hops++ {
			if hops > len(all) {
				t.Fatal("greedy forwarding did not terminate")
			}
			view := []peer.ID{cur}
			for _, p := range all {
				if rng.IntN(3) == 0 {
					view = append(view, p)
				}
			}
			next := OwnerOf(view, host)
			if next == cur {
				break
			}
			if !closer(PeerKey(next), PeerKey(cur), hk) {
				t.Fatal("greedy step moved away from the host")
			}
			cur = next
		}
	}
}

func TestClosestMembersMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	all := randomPeers(t, 40)
	// bruteDist is the XOR distance as a big integer, independent of
	// ownership.go's byte comparison.
	bruteDist := func(p peer.ID, key Key) *big.Int {
		pk := sha256.Sum256([]byte(p))
		return new(big.Int).Xor(new(big.Int).SetBytes(pk[:]), new(big.Int).SetBytes(key[:]))
	}
	tests := []struct {
		name    string
		members []peer.ID
		k       int
		want    int // length of the answer
	}{
		{"none", nil, 3, 0},
		{"k zero", all[:5], 0, 0},
		{"k negative", all[:5], -1, 0},
		{"fewer members than k", all[:3], 8, 3},
		{"duplicates collapse", append(append([]peer.ID{}, all[:4]...), all[:4]...), 8, 4},
		{"k of many", all, 8, 8},
		{"all of many", all, 40, 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for trial := 0; trial < 50; trial++ {
				key := PeerKey(all[rng.IntN(len(all))])
				got := ClosestMembers(tc.members, key, tc.k)
				if len(got) != tc.want {
					t.Fatalf("got %d members, want %d", len(got), tc.want)
				}
				for i := 1; i < len(got); i++ {
					if bruteDist(got[i-1], key).Cmp(bruteDist(got[i], key)) >= 0 {
						t.Fatalf("answer not sorted closest first at %d", i)
					}
				}
				// Nothing left out is closer than the farthest returned.
				if len(got) == 0 {
					continue
				}
				far := bruteDist(got[len(got)-1], key)
				for _, m := range tc.members {
					if !slices.Contains(got, m) && bruteDist(m, key).Cmp(far) < 0 {
						t.Fatalf("%s is closer than the answer's farthest but was left out", m)
					}
				}
			}
		})
	}
}
