package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sou/node/peermsg"
	"sou/p2p"
)

// TestPullsOutliveTheHint: a hint makes its receiver pull the hosts
// named; the pulls run under the placer's context, not the handler's, so
// they end (and the machine hears it) after the message was answered and
// its context cancelled.
func TestPullsOutliveTheHint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := threeNodes(t)
	byID := map[string]*Node{}
	for _, n := range nodes {
		byID[n.net.ID().String()] = n
	}
	// Hosts whose owner is nodes[0], held by another node too.
	members := memberIDs(nodes[0])
	var hosts []string
	var holder *Node
	for i := 0; len(hosts) < 10; i++ {
		h := fmt.Sprintf("hinted-%d.example", i)
		reps := p2p.ReplicasOf(members, h, 2)
		if reps[0] != nodes[0].net.ID() || (holder != nil && reps[1] != holder.net.ID()) {
			continue
		}
		holder = byID[reps[1].String()]
		hosts = append(hosts, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := holder.inbound.receiveHint(ctx, nodes[0].net.ID(), peermsg.EncodeManifest(peermsg.Manifest{Hosts: hosts}))
	cancel() // the message was answered
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the pulls to end", func() bool {
		s := holder.place.summary(context.Background())
		return s.Pulls == 0 && s.Replica >= len(hosts)
	})
}
