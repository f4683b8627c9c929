package testnet

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"sou/testnet/simweb"
)

func smallSim() SimConfig {
	return SimConfig{
		// Small enough for -race on a shared two-core machine; the scale
		// runs are docs/SCALING.md's.
		Nodes: 8, Hosts: 16, Pages: 160, Seed: 3,
		LatencyMin: 5 * time.Millisecond, LatencyMax: 20 * time.Millisecond,
		Bandwidth: 10e6 / 8, Loss: 0.01,
		Queries: 10, Timeout: 4 * time.Minute,
	}
}

// TestSimSmallNetwork runs the simulator end to end and holds it to the
// done-when of issue 8 at small scale, and checks that it leaves nothing
// running behind it.
func TestSimSmallNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end simulation")
	}
	goroutinesBefore := runtime.NumGoroutine()
	rep, err := Sim(context.Background(), smallSim())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if !rep.OK {
		t.Fatalf("report not ok: %v\n%s", rep.Failures, b)
	}
	if rep.Crawl.Coverage != 1 {
		t.Errorf("coverage %v, want 1", rep.Crawl.Coverage)
	}
	if rep.Crawl.DuplicateRate > 0.001 {
		t.Errorf("duplicate rate %v > 0.1%%", rep.Crawl.DuplicateRate)
	}
	for i, m := range rep.Network.MembersSeenByEach {
		if m != 8 {
			t.Errorf("node %d sees %d members, want 8", i, m)
		}
	}
	if rep.Search == nil || rep.Search.CoverageMin != 1 || rep.Search.Queries == 0 {
		t.Errorf("search section %+v, want coverage 1 over the queries", rep.Search)
	}
	s := rep.Sim
	if s.Coordination.ByProtocol[classURLs].Bytes == 0 || s.Coordination.ByProtocol[classPubsub].Bytes == 0 {
		t.Errorf("no URL or membership traffic counted: %+v", s.Coordination.ByProtocol)
	}
	for _, class := range []string{classURLs, classDeliver} {
		// On pipes a stream carries many messages.
		if c := s.Coordination.ByProtocol[class]; c.Messages == 0 || c.Messages < c.Streams {
			t.Errorf("%s: %+v, want messages counted, at least one per stream end", class, c)
		}
	}
	if s.Coordination.BytesPerPage <= 0 || s.OwnerLookup.URLsForwarded == 0 || s.OwnerLookup.MeanHops < 1 {
		t.Errorf("coordination %+v, owner lookup %+v", s.Coordination, s.OwnerLookup)
	}
	if s.Query == nil || s.Query.ShardRequestsPerQ != 8 || s.Query.BytesPerQuery <= 0 {
		t.Errorf("query cost %+v, want 8 shard requests per query and some bytes", s.Query)
	}
	if s.Resources.Samples == 0 || s.Resources.PeakRSSMB <= 0 {
		t.Errorf("resources %+v", s.Resources)
	}
	if len(rep.Requests) != rep.Crawl.Requests {
		t.Errorf("%d requests kept for the report directory, crawl section counts %d", len(rep.Requests), rep.Crawl.Requests)
	}
	// The web saw the nodes at their own addresses (a node may own no
	// host of sixteen, so not necessarily all eight).
	clients := map[string]bool{}
	for _, f := range fetchesFrom(rep.Requests) {
		clients[f.Client] = true
	}
	if len(clients) < 3 || len(clients) > 8 || clients["127.0.0.1"] {
		t.Errorf("the web saw client addresses %v, want between 3 and 8 node addresses", clients)
	}

	// Nothing left running: goroutines come back to where they were
	// (within a few of the runtime's and the libraries' own).
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > goroutinesBefore+5 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutinesBefore+5 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines before the simulation, %d after:\n%s", goroutinesBefore, n, firstStacks(string(buf), 30))
	}
}

func firstStacks(dump string, n int) string {
	parts := strings.Split(dump, "\n\n")
	if len(parts) > n {
		parts = parts[:n]
	}
	return strings.Join(parts, "\n\n")
}

func TestSimConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*SimConfig)
		want string
	}{
		{"ok", func(*SimConfig) {}, ""},
		{"no nodes", func(c *SimConfig) { c.Nodes = 0 }, "--nodes"},
		{"too many nodes", func(c *SimConfig) { c.Nodes = maxSimNodes + 1 }, "--nodes"},
		{"pages below hosts", func(c *SimConfig) { c.Pages = 10 }, "--pages"},
		{"latency reversed", func(c *SimConfig) { c.LatencyMin, c.LatencyMax = time.Second, time.Millisecond }, "--latency"},
		{"loss too high", func(c *SimConfig) { c.Loss = 0.6 }, "--loss"},
		{"negative bandwidth", func(c *SimConfig) { c.Bandwidth = -1 }, "--bandwidth"},
		{"churn on two nodes", func(c *SimConfig) { c.Nodes, c.Churn = 2, 1 }, "--churn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := smallSim()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one about %s", err, tc.want)
			}
		})
	}
}

func TestSimLatencyMatrix(t *testing.T) {
	lo, hi := 20*time.Millisecond, 200*time.Millisecond
	m := simweb.LatencyMatrix(7, lo, hi)
	again := simweb.LatencyMatrix(7, lo, hi)
	other := simweb.LatencyMatrix(8, lo, hi)
	distinct := map[time.Duration]bool{}
	differs := false
	for i := 0; i < 20; i++ {
		for j := 0; j < 20; j++ {
			ip, host := "127.1.1."+string(rune('a'+i)), "h"+string(rune('a'+j))+".test"
			d := m(ip, host)
			if d < lo || d > hi {
				t.Fatalf("latency %v outside [%v, %v]", d, lo, hi)
			}
			if again(ip, host) != d {
				t.Fatal("the matrix is not deterministic")
			}
			if other(ip, host) != d {
				differs = true
			}
			distinct[d] = true
		}
	}
	if len(distinct) < 300 || !differs {
		t.Errorf("%d distinct latencies of 400, seed changes them: %v", len(distinct), differs)
	}
}

func TestParseSimFlags(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi time.Duration
		bad    bool
	}{
		{"20ms..200ms", 20 * time.Millisecond, 200 * time.Millisecond, false},
		{"50ms", 50 * time.Millisecond, 50 * time.Millisecond, false},
		{"0..1s", 0, time.Second, false},
		{"200ms..20ms", 0, 0, true},
		{"fast", 0, 0, true},
		{"20ms..", 0, 0, true},
	} {
		lo, hi, err := ParseLatencyRange(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && (lo != tc.lo || hi != tc.hi)) {
			t.Errorf("ParseLatencyRange(%q) = %v, %v, %v", tc.in, lo, hi, err)
		}
	}
	for _, tc := range []struct {
		in  string
		bps float64
		bad bool
	}{
		{"10Mbit", 10e6 / 8, false},
		{"1Gbit", 1e9 / 8, false},
		{"512kbit", 512e3 / 8, false},
		{"2MB", 2e6, false},
		{"0", 0, false},
		{"10", 0, true},
		{"-1Mbit", 0, true},
		{"10Mfurlong", 0, true},
	} {
		got, err := ParseBandwidth(tc.in)
		if (err != nil) != tc.bad || got != tc.bps {
			t.Errorf("ParseBandwidth(%q) = %v, %v", tc.in, got, err)
		}
	}
	for _, tc := range []struct {
		in   string
		frac float64
		bad  bool
	}{
		{"1%", 0.01, false},
		{"0.5", 0.005, false},
		{"0", 0, false},
		{"60%", 0, true},
		{"x", 0, true},
	} {
		got, err := ParseLossPercent(tc.in)
		if (err != nil) != tc.bad || got != tc.frac {
			t.Errorf("ParseLossPercent(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestSimMembership: the WAN preset while the network's heartbeat
// deliveries fit the budget, N²/budget beyond, the timeout six intervals.
func TestSimMembership(t *testing.T) {
	tests := []struct {
		nodes             int
		interval, timeout time.Duration
	}{
		{1, 5 * time.Second, 30 * time.Second},
		{64, 5 * time.Second, 30 * time.Second},
		{128, 20 * time.Second, 2 * time.Minute},
		{200, 48800 * time.Millisecond, 292800 * time.Millisecond},
		{256, 79900 * time.Millisecond, 479400 * time.Millisecond},
	}
	for _, tc := range tests {
		interval, timeout := simMembership(tc.nodes)
		if interval != tc.interval || timeout != tc.timeout {
			t.Errorf("simMembership(%d) = %v, %v; want %v, %v", tc.nodes, interval, timeout, tc.interval, tc.timeout)
		}
		if perSecond := float64(tc.nodes*tc.nodes) / interval.Seconds(); tc.nodes > 64 && perSecond > simHeartbeatBudget*1.01 {
			t.Errorf("%d nodes: %.0f heartbeat deliveries per second, over the budget", tc.nodes, perSecond)
		}
	}
}

// TestStartupBootstrap: node 0 first, then up to startupPeers distinct
// other running nodes, never a node twice.
func TestStartupBootstrap(t *testing.T) {
	mn := mocknet.New()
	defer mn.Close()
	var nodes []*simNode
	for i := 0; i < 10; i++ {
		h, err := genSimPeer(mn)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &simNode{index: i, host: h})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, running := range [][]*simNode{nodes[:1], nodes[:2], nodes[:4], nodes} {
		boot := startupBootstrap(rng, running, nodes[0])
		if len(boot) != min(len(running), 1+startupPeers) {
			t.Fatalf("%d running: %d bootstrap peers", len(running), len(boot))
		}
		if boot[0] != bootstrapOf(nodes[0].host) {
			t.Fatal("node 0 must come first")
		}
		seen := map[string]bool{}
		for _, b := range boot {
			if seen[b] {
				t.Fatalf("bootstrap peer %s twice", b)
			}
			seen[b] = true
		}
	}
}
