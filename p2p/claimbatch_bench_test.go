package p2p

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// BenchmarkClaim claims fresh keys at another member from as many
// goroutines as there are cores (a node's crawler stores pages on two
// processing workers): signed and routed (claim/2.0.0, what a claim costs
// when the views differ), and in batches (claims/2.0.0 on pipes, the
// normal way).
// It reports the CPU of the whole process, both nodes, per claim.
//
//	go test -run '^$' -bench BenchmarkClaim -count 6 ./p2p/
func BenchmarkClaim(b *testing.B) {
	// No peer rate or claim allowance in the way: this measures the work.
	unlimited := func(c *Config) { c.PeerRate, c.PeerBurst, c.ClaimRate, c.ClaimBurst = 1e9, 1e9, 1e9, 1e9 }
	a := startNode(b, unlimited, nil)
	c := startNode(b, unlimited, []*testNode{a})
	all := []peer.ID{a.ID(), c.ID()}
	waitFor(b, 10*time.Second, "membership", func() bool { return knows(a, all...) && knows(c, all...) })
	value := heldURL(b, all, c.ID(), c.cfg.Replicas, "page")
	for _, path := range []string{"routed", "batch"} {
		b.Run("path="+path, func(b *testing.B) {
			keys := keysAt(all, a.ID(), b.N+64, fmt.Sprintf("bench-%s-%d", path, b.N))
			var next atomic.Int64
			claim := func(ctx context.Context, key []byte) error {
				if path == "batch" {
					_, err := c.Claim(ctx, key, value)
					return err
				}
				req := claimRequest{Key: key, Value: value}
				if err := signClaim(&req, c.cfg.Network, c.claims.priv); err != nil {
					return err
				}
				_, err := c.claims.route(ctx, req)
				return err
			}
			ctx := context.Background()
			before := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(next.Add(1))
					if err := claim(ctx, keys[i%len(keys)]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-before).Microseconds())/float64(b.N), "cpu-µs/claim")
		})
	}
}

func processCPU(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
