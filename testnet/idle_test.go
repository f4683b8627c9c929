package testnet

import (
	"strings"
	"testing"
	"time"

	"sou/crawl"
	"sou/index"
	"sou/node"
	"sou/p2p"
)

// TestBusyReasons: a node that is not idle is explained by what its status
// holds, each cause named.
func TestBusyReasons(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	names := map[string]string{"12D3KooWPeerAAAAAAAA": "node 2, live"}
	tests := []struct {
		name string
		st   node.Status
		want []string
	}{
		{
			name: "processing and a gated host",
			st: node.Status{Crawl: crawl.Stats{
				Processing: 2, Unsettled: 3, UnsettledLimit: 5, SoonDue: 1, Frontier: 7,
				Busy: []crawl.BusyHost{{Host: "blog-3.sim.test", Queued: 7, Gated: true, ReadyAt: now.Add(300 * time.Millisecond)}},
			}},
			want: []string{"2 responses awaiting processing (credits 3 of 5)", "1 due within the idle horizon",
				"host blog-3.sim.test (7 queued): due in 300ms, held back by the node", "placement:"},
		},
		{
			name: "a host in flight and pages not searchable",
			st: node.Status{Crawl: crawl.Stats{InFlight: 1, Busy: []crawl.BusyHost{{Host: "a.sim.test", Queued: 1, InFlight: true}}},
				Index: index.Stats{Pending: 4}},
			want: []string{"1 hosts in flight", "host a.sim.test (1 queued): in flight", "4 pages not yet searchable"},
		},
		{
			name: "outbox to a node and to a stranger",
			st: node.Status{CrawlIdle: true, Outbox: 5,
				P2P: p2p.Stats{OutboxByPeer: map[string]int{"12D3KooWPeerAAAAAAAA": 3, "12D3KooWGoneBBBBBBBB": 2}}},
			want: []string{"outbox 5 URLs", "3 to …AAAAAAAA (node 2, live)", "2 to …BBBBBBBB (not a node of this run)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := busyReasons(&tc.st, names, now)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("reasons %q lack %q", got, w)
				}
			}
			if tc.st.CrawlIdle && strings.Contains(got, "placement:") {
				t.Errorf("an idle crawler explained: %q", got)
			}
		})
	}
}
