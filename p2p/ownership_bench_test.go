package p2p

import (
	"fmt"
	"testing"
)

// The cost of one ownership call, per member count: the pure functions
// over a member list (what node's own lists pay), the ring's lookups
// (what Owner, IsOwner, Replicas and Holds pay on the node's view), and
// the ring's update when a member joins or leaves.
func BenchmarkOwnership(b *testing.B) {
	for _, n := range []int{4, 16, 64, 256} {
		members := randomPeers(b, n)
		hosts := make([]string, 1024)
		for i := range hosts {
			hosts[i] = fmt.Sprintf("host-%d.example", i)
		}
		b.Run(fmt.Sprintf("OwnerOf/members=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = OwnerOf(members, hosts[i%len(hosts)])
			}
		})
		b.Run(fmt.Sprintf("ReplicasOf/members=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = ReplicasOf(members, hosts[i%len(hosts)], 2)
			}
		})
		ring := NewRing(members)
		b.Run(fmt.Sprintf("Ring.Owner/members=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = ring.Owner(hosts[i%len(hosts)])
			}
		})
		b.Run(fmt.Sprintf("Ring.Replicas/members=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = ring.Replicas(hosts[i%len(hosts)], 2)
			}
		})
		without := ring.Without(members[0])
		b.Run(fmt.Sprintf("Ring.With/members=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = without.With(members[0])
			}
		})
		b.Run(fmt.Sprintf("Ring.Donors/members=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = ring.Donors(members[i%n], 2)
			}
		})
	}
}
