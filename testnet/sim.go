package testnet

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"sou/crawl"
	"sou/node"
	"sou/p2p"
	"sou/search"
	"sou/testnet/simweb"
)

// SimConfig describes one `sou testnet sim`.
type SimConfig struct {
	Nodes int
	Hosts int
	Pages int
	Seed  int64
	// Misbehave lists the simulated web's misbehaviour classes (nil = none:
	// the simulator is about scale; `sou testnet run` covers misbehaviour).
	Misbehave []string
	// LatencyMin..LatencyMax bounds both the one-way latency of every
	// node-to-node link and the delay before the web answers a node (the
	// C_ij matrix); each pair gets a deterministic value from the seed.
	LatencyMin, LatencyMax time.Duration
	// Loss is the probability (0..1) that a packet on a node-to-node link
	// is lost (see simStream for how that is emulated).
	Loss float64
	// Bandwidth caps every node-to-node link, in bytes per second
	// (0 = unlimited).
	Bandwidth float64
	// Churn is how many nodes join and how many leave per minute during the
	// crawl (0 = none).
	Churn float64
	// Queries is the size of the query phase (0 = none); each query is
	// asked at QueryNodes nodes spread over the network (0 = min(Nodes, 5)).
	Queries    int
	QueryNodes int
	// Workers is the crawl workers per node (0 = 8).
	Workers int
	// Timeout bounds the crawl phase (0 = 15 minutes).
	Timeout time.Duration
	// Progress receives a line now and then; nil = silent.
	Progress io.Writer
	// Log receives the nodes' logs; nil = discarded.
	Log *slog.Logger
}

// maxSimNodes bounds --nodes (and joins): the loopback addresses of the
// nodes span four /24s.
const maxSimNodes = 1000

// Validate reports the first problem with c.
func (c *SimConfig) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > maxSimNodes:
		return fmt.Errorf("--nodes must be between 1 and %d", maxSimNodes)
	case c.Hosts < 1:
		return errors.New("--hosts must be at least 1")
	case c.Pages < c.Hosts:
		return errors.New("--pages must be at least --hosts")
	case c.LatencyMin < 0 || c.LatencyMax < c.LatencyMin:
		return errors.New("--latency: want MIN..MAX with 0 <= MIN <= MAX")
	case c.LatencyMax > 10*time.Second:
		return errors.New("--latency: at most 10s")
	case c.Loss < 0 || c.Loss >= 0.5:
		return errors.New("--loss must be at least 0% and below 50%")
	case c.Bandwidth < 0:
		return errors.New("--bandwidth must not be negative")
	case c.Churn < 0 || c.Churn > 600:
		return errors.New("--churn must be between 0 and 600 per minute")
	case c.Churn > 0 && c.Nodes < 3:
		return errors.New("--churn needs at least 3 nodes")
	case c.Queries < 0 || c.QueryNodes < 0 || c.Workers < 0 || c.Timeout < 0:
		return errors.New("--queries, --workers and --timeout must not be negative")
	}
	return nil
}

// SimReport is what `sou testnet sim --json` prints: the sections of
// `sou testnet run` (crawl, network, search, ok) plus the sim section.
type SimReport struct {
	*Report
	Sim *SimSection `json:"sim"`
	// Requests is the simulated web's request log, for WriteReportDir.
	Requests []simweb.Request `json:"-"`
}

// SimSection holds the DSpider measures and the scale figures.
type SimSection struct {
	Nodes          int        `json:"nodes"`
	NodesAtEnd     int        `json:"nodes_at_end"`
	LatencyMS      [2]float64 `json:"latency_ms"`
	LossPercent    float64    `json:"loss_percent"`
	BandwidthBitsS float64    `json:"bandwidth_bits_per_s"`
	ChurnPerMinute float64    `json:"churn_per_minute"`
	Joins          int        `json:"joins"`
	Leaves         int        `json:"leaves"`
	WorkersPerNode int        `json:"workers_per_node"`
	// QueryDeadlineMS is the search deadline of the query phase.
	QueryDeadlineMS float64 `json:"query_deadline_ms"`
	// StartupSeconds is from the first node's start until every node saw
	// every member.
	StartupSeconds float64 `json:"startup_seconds"`
	// HeartbeatIntervalS and MemberTimeoutS are the nodes' membership
	// timing (simMembership: the WAN preset, stretched with N).
	HeartbeatIntervalS float64 `json:"heartbeat_interval_s"`
	MemberTimeoutS     float64 `json:"member_timeout_s"`
	// CrawlPagesPerSecond is required pages fetched per second of crawl
	// (the crawl section's pages_per_second), and per node.
	CrawlPagesPerSecond        float64        `json:"crawl_pages_per_second"`
	CrawlPagesPerSecondPerNode float64        `json:"crawl_pages_per_second_per_node"`
	Resources                  SimResources   `json:"resources"`
	Coordination               SimCoordinator `json:"coordination"`
	OwnerLookup                SimOwnerLookup `json:"owner_lookup"`
	Query                      *SimQuery      `json:"query,omitempty"`
	// Emulation says what the simulator emulates and how.
	Emulation []string `json:"emulation"`
}

// SimResources is the process's resource use, sampled every two seconds,
// and its share per node (all nodes live in one process, so per-node
// figures are the process's peaks divided by the most nodes alive at once).
type SimResources struct {
	Samples            int     `json:"samples"`
	PeakRSSMB          float64 `json:"peak_rss_mb"`
	PeakHeapMB         float64 `json:"peak_heap_mb"`
	PeakGoroutines     int     `json:"peak_goroutines"`
	RSSPerNodeMB       float64 `json:"rss_per_node_mb"`
	HeapPerNodeMB      float64 `json:"heap_per_node_mb"`
	GoroutinesPerNode  float64 `json:"goroutines_per_node"`
	CPUSeconds         float64 `json:"cpu_seconds"`
	CPUSecondsPerKPage float64 `json:"cpu_seconds_per_1000_pages"`
	// Badger reports no size for an in-memory store, so a node's storage
	// is given as its index: documents and encoded postings bytes.
	DocsPerNodeAvg          float64 `json:"docs_per_node_avg"`
	DocsPerNodeMax          int64   `json:"docs_per_node_max"`
	PostingsBytesPerNodeAvg float64 `json:"postings_bytes_per_node_avg"`
	PostingsBytesPerNodeMax int64   `json:"postings_bytes_per_node_max"`
}

// SimCoordinator is the coordination traffic between nodes during the
// crawl phase (from the first node's start to the end of the crawl),
// measured on the simulated links by protocol.
type SimCoordinator struct {
	// Messages counts each written stream end of a request/response
	// protocol (URLs, deliver, claim, search, DHT) as one message, and
	// each write of a long-lived gossipsub stream as one.
	Messages        uint64                  `json:"messages"`
	Bytes           uint64                  `json:"bytes"`
	MessagesPerPage float64                 `json:"messages_per_page"`
	BytesPerPage    float64                 `json:"bytes_per_page"`
	ByProtocol      map[string]TrafficCount `json:"by_protocol"`
	// GossipDrops sums the nodes' p2p.Stats.GossipDrops at the end of the
	// crawl: membership messages gossipsub dropped at a full queue.
	GossipDrops uint64 `json:"gossip_drops"`
}

// SimOwnerLookup: how a URL found on a foreign host reached its owner.
// Ownership is computed from each node's membership view (one hop when
// views agree); a node that receives a URL it does not own by its own view
// re-forwards it greedily.
type SimOwnerLookup struct {
	URLsForwarded   uint64  `json:"urls_forwarded"`
	URLsReforwarded uint64  `json:"urls_reforwarded"`
	URLsDropped     uint64  `json:"urls_dropped"`
	MeanHops        float64 `json:"mean_hops"`
	MaxHops         int     `json:"max_hops"`
}

// SimQuery is the query phase's cost.
type SimQuery struct {
	Searches          int     `json:"searches"`
	ShardRequestsPerQ float64 `json:"shard_requests_per_query"`
	BytesPerQuery     float64 `json:"bytes_per_query"`
	MessagesPerQuery  float64 `json:"messages_per_query"`
	MaxMS             float64 `json:"max_ms"`
	// WarmupSearches is how many unmeasured searches opened the phase (one
	// per asking node, see queryPhase), WarmupCoverageMin the smallest
	// share of shards that answered one of them within the deadline, and
	// WarmupMaxMS the slowest.
	WarmupSearches    int     `json:"warmup_searches"`
	WarmupCoverageMin float64 `json:"warmup_coverage_min"`
	WarmupMaxMS       float64 `json:"warmup_max_ms"`
}

// simNode is one node of the simulation.
type simNode struct {
	index  int
	ip     string
	host   host.Host // the mocknet host (the node sees it wrapped)
	n      *node.Node
	cancel context.CancelFunc
	done   chan struct{}
	runErr error
	alive  bool
}

// simulation is one running `sou testnet sim`.
type simulation struct {
	cfg     SimConfig
	mn      mocknet.Mocknet
	web     *simweb.Web
	network string
	ipBase  [2]int
	lat     func(a, b string) time.Duration
	traffic *traffic
	log     *slog.Logger
	logf    func(string, ...any)
	stop    chan struct{}

	mu     sync.Mutex
	nodes  []*simNode
	peerIP map[peer.ID]string
}

// Sim runs the WAN simulator: the simulated web with per-(node, host)
// latency, Nodes real nodes in this process on emulated links, the crawl
// to completion (with churn if asked), the query phase, and the report.
func Sim(ctx context.Context, cfg SimConfig) (*SimReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 15 * time.Minute
	}
	if cfg.Workers == 0 {
		cfg.Workers = 8
	}
	if cfg.QueryNodes == 0 {
		cfg.QueryNodes = min(cfg.Nodes, 5)
	}
	if len(cfg.Misbehave) == 0 {
		cfg.Misbehave = []string{"none"}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	s := &simulation{
		cfg: cfg, log: log,
		network: fmt.Sprintf("sim-%08x", r.Uint32()),
		ipBase:  [2]int{100 + r.IntN(100), 1 + r.IntN(250-maxSimNodes/250)},
		lat:     simweb.LatencyMatrix(cfg.Seed, cfg.LatencyMin, cfg.LatencyMax),
		stop:    make(chan struct{}),
		peerIP:  map[peer.ID]string{},
		logf:    progressLogger(cfg.Progress),
	}
	s.traffic = newTraffic(cfg.Loss, s.peerLatency, s.stop)
	web, err := simweb.Start(ctx, simweb.Config{
		Seed: cfg.Seed, Hosts: cfg.Hosts, Pages: cfg.Pages, Misbehave: cfg.Misbehave,
		Logger: log, Latency: s.lat,
	})
	if err != nil {
		return nil, fmt.Errorf("simulated web: %w", err)
	}
	defer web.Close()
	s.web = web
	s.mn = mocknet.New()
	defer s.shutdown()
	return s.run(ctx)
}

// nodeIP is node i's loopback address: 127.R.(S + i/250).(5 + i%250).
func (s *simulation) nodeIP(i int) string {
	return fmt.Sprintf("127.%d.%d.%d", s.ipBase[0], s.ipBase[1]+i/250, 5+i%250)
}

// pairLatency is the symmetric one-way latency between two nodes.
func (s *simulation) pairLatency(a, b string) time.Duration {
	if a > b {
		a, b = b, a
	}
	return s.lat(a, "node:"+b)
}

func (s *simulation) peerLatency(a, b peer.ID) time.Duration {
	s.mu.Lock()
	ia, ib := s.peerIP[a], s.peerIP[b]
	s.mu.Unlock()
	return s.pairLatency(ia, ib)
}

func (s *simulation) live() []*simNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*simNode
	for _, n := range s.nodes {
		if n.alive {
			out = append(out, n)
		}
	}
	return out
}

// addHost creates node i's mocknet host and links it to every live node
// (and to the hosts of nodes being created with it, others).
func (s *simulation) addHost(i int, others []*simNode) (*simNode, error) {
	h, err := genSimPeer(s.mn)
	if err != nil {
		return nil, err
	}
	sn := &simNode{index: i, ip: s.nodeIP(i), host: h, done: make(chan struct{})}
	s.mu.Lock()
	s.peerIP[h.ID()] = sn.ip
	s.mu.Unlock()
	for _, o := range append(s.live(), others...) {
		l, err := s.mn.LinkPeers(h.ID(), o.host.ID())
		if err != nil {
			return nil, fmt.Errorf("mocknet link: %w", err)
		}
		// Latency is simStream's (pipelined); mocknet applies the bandwidth.
		l.SetOptions(mocknet.LinkOptions{Bandwidth: s.cfg.Bandwidth})
	}
	return sn, nil
}

// bootstrapOf is the bootstrap address of a node's host.
func bootstrapOf(h host.Host) string {
	return h.Addrs()[0].String() + "/p2p/" + h.ID().String()
}

// genSimPeer adds a mocknet host with an Ed25519 identity, as a real node
// has (p2p's identity.key). mocknet's GenPeer makes ECDSA P-256 keys, whose
// signature checks were 13% of a 64-node simulation's CPU: every node
// verifies every member's signed heartbeat.
func genSimPeer(mn mocknet.Mocknet) (host.Host, error) {
	sk, _, err := crypto.GenerateEd25519Key(cryptorand.Reader)
	if err != nil {
		return nil, fmt.Errorf("mocknet peer key: %w", err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		return nil, fmt.Errorf("mocknet peer ID: %w", err)
	}
	// mocknet's own scheme: an address in 100::/64 (discard-only, RFC
	// 6666) ending in the ID's last bytes.
	ip := make(net.IP, net.IPv6len)
	ip[0], ip[1] = 0x01, 0x00
	suffix := []byte(id)[len(id)-8:]
	copy(ip[net.IPv6len-len(suffix):], suffix)
	addr, err := ma.NewMultiaddr(fmt.Sprintf("/ip6/%s/tcp/4242", ip))
	if err != nil {
		return nil, fmt.Errorf("mocknet peer address: %w", err)
	}
	h, err := mn.AddPeer(sk, addr)
	if err != nil {
		return nil, fmt.Errorf("mocknet peer: %w", err)
	}
	return h, nil
}

// simHeartbeatBudget is how many membership heartbeats per second the
// whole simulated network may deliver: N nodes each hearing N-1 members
// every interval cost the one process N²/interval signed gossip messages
// (with their gossipsub relays and IHAVE gossip), while on a real network
// each node pays N/interval on its own CPU. The budget is what this
// simulator sustained with the WAN preset: 64 nodes at 5 s (819 per
// second, pubsub already most of the CPU); 128 nodes at 5 s (3277 per
// second) never settled on the 2-core machine.
const simHeartbeatBudget = 820

// simMembership is the simulated nodes' heartbeat interval and member
// timeout: the WAN preset (5 s, 30 s) while N²/5 s fits the budget, and
// beyond it the interval that does, N²/simHeartbeatBudget, with the
// timeout in the preset's proportion (6 intervals). A slower heartbeat
// changes how fast joins and leaves are noticed, not what the crawl or the
// searches do once membership has converged; the report gives both
// values.
func simMembership(nodes int) (interval, timeout time.Duration) {
	wan := p2p.DefaultWANConfig()
	interval = wan.HeartbeatInterval
	if need := time.Duration(float64(nodes) * float64(nodes) / simHeartbeatBudget * float64(time.Second)); need > interval {
		interval = need.Round(100 * time.Millisecond)
	}
	return interval, interval * (wan.MemberTimeout / wan.HeartbeatInterval)
}

// startupPeers is how many random running nodes a node starting with the
// network is bootstrapped to, besides node 0: enough that the network is
// connected without node 0 and that the first DHT lookups do not all pass
// through it, few enough that start-up makes O(N) connections.
const startupPeers = 3

// startupBootstrap picks the bootstrap peers of a node starting with the
// network: node 0 and up to startupPeers other running nodes at random.
// Only running nodes: a connection made before a node's gossipsub runs is
// never used for membership (the peer that dialled found no pubsub
// protocol there and does not try again on that connection).
func startupBootstrap(rng *rand.Rand, running []*simNode, first *simNode) []string {
	boot := []string{bootstrapOf(first.host)}
	var others []*simNode
	for _, sn := range running {
		if sn != first {
			others = append(others, sn)
		}
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	for _, sn := range others[:min(startupPeers, len(others))] {
		boot = append(boot, bootstrapOf(sn.host))
	}
	return boot
}

// startNode starts the node on sn's host and marks it alive.
func (s *simulation) startNode(ctx context.Context, sn *simNode, bootstrap []string) error {
	cfg := node.Config{
		// Never created: the store is in memory and the identity is the
		// mocknet host's.
		DataDir:       filepath.Join(os.TempDir(), "sou-sim-in-memory", s.network, strconv.Itoa(sn.index)),
		HTTPAddr:      sn.ip + ":0",
		Network:       s.network,
		DNS:           s.web.DNSAddr(),
		Bootstrap:     bootstrap,
		WAN:           true,
		Fast:          true,
		AllowLoopback: true,
		SourceIP:      sn.ip,
		Workers:       s.cfg.Workers,
	}
	n, err := node.New(ctx, cfg, s.log.With("node", sn.index), node.WithHost(&simHost{Host: sn.host, t: s.traffic}), node.WithInMemoryStore(), node.WithCrawlConfig(simFetchTimeouts), node.WithP2PConfig(func(c *p2p.Config) {
		c.HeartbeatInterval, c.MemberTimeout = simMembership(s.cfg.Nodes)
	}))
	if err != nil {
		return fmt.Errorf("node %d: %w", sn.index, err)
	}
	nctx, cancel := context.WithCancel(ctx)
	sn.n, sn.cancel = n, cancel
	go func() {
		defer close(sn.done)
		sn.runErr = n.Run(nctx)
	}()
	s.mu.Lock()
	sn.alive = true
	s.nodes = append(s.nodes, sn)
	sort.Slice(s.nodes, func(i, j int) bool { return s.nodes[i].index < s.nodes[j].index })
	s.mu.Unlock()
	return nil
}

// simFetchTimeouts gives the simulated nodes the real web's fetch
// timeouts (crawl.DefaultConfig: 10 s connect, 20 s first byte, 60 s in
// all) instead of the LAN testnet's 2/3/5 s: hundreds of nodes and the web
// share one process on a shared machine, and a crawler starved of CPU for
// three seconds gave up on responses the web had completed, then fetched
// them again (0.5-1.3% duplicates at 8-32 nodes, every one a "timeout").
// The politeness rules stay the testnet's (crawl.FastConfig).
func simFetchTimeouts(c *crawl.Config) {
	d := crawl.DefaultConfig().Fetch
	c.Fetch.ConnectTimeout, c.Fetch.FirstByteTimeout, c.Fetch.TotalTimeout = d.ConnectTimeout, d.FirstByteTimeout, d.TotalTimeout
}

// kill stops a node abruptly: its links go first, then its host, so no
// goodbye reaches anyone, then its context; its in-memory store is lost.
func (s *simulation) kill(sn *simNode) {
	s.mu.Lock()
	if !sn.alive {
		s.mu.Unlock()
		return
	}
	sn.alive = false
	s.mu.Unlock()
	for _, o := range s.mn.Peers() {
		if o != sn.host.ID() {
			_ = s.mn.UnlinkPeers(sn.host.ID(), o)
		}
	}
	_ = sn.host.Close()
	sn.cancel()
	<-sn.done
}

// shutdown stops every node, then the mocknet; the web is closed by Sim.
func (s *simulation) shutdown() {
	close(s.stop)
	s.mu.Lock()
	nodes := append([]*simNode(nil), s.nodes...)
	s.mu.Unlock()
	for _, sn := range nodes {
		if sn.cancel != nil {
			sn.cancel()
		}
	}
	for _, sn := range nodes {
		if sn.cancel != nil {
			<-sn.done
		}
	}
	_ = s.mn.Close()
}

func (s *simulation) run(ctx context.Context) (*SimReport, error) {
	cfg := s.cfg
	truth := s.web.Truth()
	s.logf("simulated web: http %s, dns %s, %d required pages on %d hosts; latency %v..%v", s.web.HTTPAddr(), s.web.DNSAddr(), truth.Required, len(truth.Hosts), cfg.LatencyMin, cfg.LatencyMax)
	hbInterval, memberTimeout := simMembership(cfg.Nodes)
	sec := &SimSection{
		HeartbeatIntervalS: hbInterval.Seconds(), MemberTimeoutS: memberTimeout.Seconds(),
		Nodes: cfg.Nodes, LossPercent: round3(cfg.Loss * 100), BandwidthBitsS: cfg.Bandwidth * 8,
		ChurnPerMinute: cfg.Churn, WorkersPerNode: cfg.Workers,
		QueryDeadlineMS: float64(s.queryDeadline().Milliseconds()),
		LatencyMS:       [2]float64{float64(cfg.LatencyMin.Microseconds()) / 1000, float64(cfg.LatencyMax.Microseconds()) / 1000},
		Emulation:       emulationNotes(cfg),
	}
	res := newResourceSampler()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampleWG sync.WaitGroup
	sampleWG.Add(1)
	go func() { defer sampleWG.Done(); res.run(sampleCtx, func() int { return len(s.live()) }) }()
	defer func() { stopSampling(); sampleWG.Wait() }()

	// Hosts and links first (every pair linked with its own latency: a
	// link only says what a connection would cost, and makes none), then
	// the nodes, a few at a time, each bootstrapped to node 0 and a few
	// random nodes already running (startupPeers). Nothing connects the
	// rest: the DHT's bootstrap and routing-table refresh, gossipsub's mesh
	// and sou's own protocols open the connections a node needs, as on a
	// real network. (Connecting every pair up front, as this simulator
	// once did, made N²/2 connections, serialised on mocknet's per-peer
	// locks: 161 s at 64 nodes, not done after 8 minutes at 128.)
	start := time.Now()
	var created []*simNode
	for i := 0; i < cfg.Nodes; i++ {
		sn, err := s.addHost(i, created)
		if err != nil {
			return nil, err
		}
		created = append(created, sn)
	}
	s.logf("%6.1fs  %d hosts linked", time.Since(start).Seconds(), len(created))
	if err := s.startNode(ctx, created[0], nil); err != nil {
		return nil, err
	}
	bootRNG := rand.New(rand.NewPCG(uint64(cfg.Seed), 0xb007))
	var bootMu sync.Mutex
	var startedMu sync.Mutex
	started := 1
	if err := parallel(ctx, 8, len(created)-1, func(k int) error {
		bootMu.Lock()
		boot := startupBootstrap(bootRNG, s.live(), created[0])
		bootMu.Unlock()
		if err := s.startNode(ctx, created[k+1], boot); err != nil {
			return err
		}
		startedMu.Lock()
		started++
		if started%50 == 0 {
			s.logf("%6.1fs  %d/%d nodes started", time.Since(start).Seconds(), started, len(created))
		}
		startedMu.Unlock()
		return nil
	}); err != nil {
		return nil, err
	}
	s.logf("%6.1fs  %d nodes started", time.Since(start).Seconds(), len(created))
	// Every node must have heard every other's heartbeat: allow six
	// intervals besides the connecting (the first heartbeat of a node
	// that has no gossipsub mesh yet reaches no one; measured: 5.2
	// intervals at 128 nodes, 5.6 at 200).
	if err := s.waitMembers(ctx, cfg.Nodes, 60*time.Second+time.Duration(cfg.Nodes)*500*time.Millisecond+6*hbInterval); err != nil {
		return nil, err
	}
	sec.StartupSeconds = round3(time.Since(start).Seconds())
	s.logf("%d nodes up in %.1fs, every node sees every member (network %s)", cfg.Nodes, sec.StartupSeconds, s.network)

	rep := &Report{Nodes: cfg.Nodes, Hosts: cfg.Hosts, Pages: cfg.Pages, Seed: cfg.Seed}
	if _, err := created[0].n.AddSeeds(ctx, s.web.Seeds()); err != nil {
		return nil, fmt.Errorf("seed the crawl: %w", err)
	}
	cpu0 := processCPU()
	if err := s.crawl(ctx, rep, sec); err != nil {
		return nil, err
	}
	cpuCrawl := processCPU() - cpu0
	crawlTraffic := s.traffic.snapshot()

	reqs := s.web.Requests(0)
	fast := crawl.FastConfig().Politeness
	rep.Crawl = crawlChecks(truth, fetchesFrom(reqs), func(host string) time.Duration {
		d := fast.MinDelay
		if h, ok := truth.Host(host); ok && h.CrawlDelay > 0 {
			d = max(d, min(time.Duration(h.CrawlDelay*float64(time.Second)), fast.MaxCrawlDelay))
		}
		return d
	}, nodeBodyCap(), crawl.DefaultConfig().Fetch.FirstByteTimeout)

	// After churn the survivors' views must agree again before the
	// statistics and the searches mean anything.
	liveN := len(s.live())
	if cfg.Churn > 0 {
		if err := s.waitMembers(ctx, liveN, 90*time.Second); err != nil {
			s.logf("views did not converge after churn: %v", err)
		}
	}
	statuses := s.statuses(ctx)
	requests := requestsByClient(fetchesFrom(reqs))
	var finalMembers []peer.ID
	for _, sn := range s.live() {
		finalMembers = append(finalMembers, sn.host.ID())
		st := sn.n.Status(ctx)
		rep.PerNode = append(rep.PerNode, NodeFigures{
			Node: sn.index, Peer: st.PeerID, HostsOwned: st.OwnedHosts, PagesStored: st.Index.Docs + int64(st.Index.Held), PagesHeld: st.Index.Held,
			PostingsBytes: st.Index.PostingsBytes, WebRequests: requests[sn.ip],
			PagesAnalysed: st.Index.PutsAnalysed, FormsReplayed: st.Index.FormsReplayed, FormsRefused: st.Index.FormsRefused,
			ClaimBatches: st.P2P.ClaimBatchesSent, ClaimsBatched: st.P2P.ClaimsBatched,
			DeliveriesReceived: st.P2P.DeliveriesReceived, SyncRounds: st.SyncRounds, StoresDetached: st.StoresDetached,
			AnchorUpdates: st.Index.AnchorUpdates,
		})
	}
	var docs, postings int64
	for _, st := range statuses {
		for class, n := range st.Crawl.ErrorsByClass {
			rep.Crawl.ErrorsByClass[class] += n
		}
		stored := st.Index.Docs + int64(st.Index.Held)
		docs += stored
		postings += st.Index.PostingsBytes
		sec.Resources.DocsPerNodeMax = max(sec.Resources.DocsPerNodeMax, stored)
		sec.Resources.PostingsBytesPerNodeMax = max(sec.Resources.PostingsBytesPerNodeMax, st.Index.PostingsBytes)
	}
	if len(statuses) > 0 {
		sec.Resources.DocsPerNodeAvg = round3(float64(docs) / float64(len(statuses)))
		sec.Resources.PostingsBytesPerNodeAvg = round3(float64(postings) / float64(len(statuses)))
	}
	rep.Network = networkReport(statuses)
	ownershipOf(truth, finalMembers).fill(rep.Network, rep.PerNode)
	for _, st := range statuses {
		sec.OwnerLookup.URLsForwarded += st.P2P.URLsForwarded
		sec.OwnerLookup.URLsReforwarded += st.P2P.URLsReforwarded
		sec.OwnerLookup.URLsDropped += st.P2P.URLsDropped
		sec.OwnerLookup.MaxHops = max(sec.OwnerLookup.MaxHops, st.P2P.MaxHopsSeen)
	}
	if f := sec.OwnerLookup.URLsForwarded; f > 0 {
		// Every forwarded record takes one hop to the sender's choice of
		// owner; each re-forward is one more.
		sec.OwnerLookup.MeanHops = round3(1 + float64(sec.OwnerLookup.URLsReforwarded)/float64(f))
	}
	sec.Coordination = coordination(crawlTraffic, rep.Crawl.PagesFetched)
	for _, st := range statuses {
		sec.Coordination.GossipDrops += st.P2P.GossipDrops
	}
	sec.NodesAtEnd = liveN
	sec.CrawlPagesPerSecond = rep.Crawl.PagesPerSecond
	if liveN > 0 {
		sec.CrawlPagesPerSecondPerNode = round3(rep.Crawl.PagesPerSecond / float64(liveN))
	}

	if cfg.Queries > 0 {
		sr, q, err := s.queryPhase(ctx, truth)
		if err != nil {
			return nil, err
		}
		rep.Search, sec.Query = sr, q
	}
	stopSampling()
	sampleWG.Wait()
	sec.Resources = res.report(sec.Resources)
	sec.Resources.CPUSeconds = round3(cpuCrawl)
	if rep.Crawl.PagesFetched > 0 {
		sec.Resources.CPUSecondsPerKPage = round3(1000 * cpuCrawl / float64(rep.Crawl.PagesFetched))
	}
	out := &SimReport{Report: rep, Sim: sec, Requests: reqs}
	out.judge(cfg)
	return out, nil
}

func emulationNotes(cfg SimConfig) []string {
	hb, timeout := simMembership(cfg.Nodes)
	notes := []string{
		"nodes: real sou nodes (Badger in memory, index, crawler, p2p, search coordinator) in one process, on go-libp2p mocknet hosts",
		"node links: every pair linked; a one-way latency drawn per pair from the latency range (deterministic from the seed) delays every write, pipelined and in order per stream (at most 64 writes in flight), as on a TCP connection",
		fmt.Sprintf("membership: the WAN preset's heartbeat (5s) and member timeout (30s), stretched so that the network delivers at most %d heartbeats per second in all (interval N²/%d s, timeout six intervals): here %v and %v", simHeartbeatBudget, simHeartbeatBudget, hb, timeout),
		"crawl: the testnet's politeness (crawl.FastConfig) with the real web's fetch timeouts (crawl.DefaultConfig: 10s connect, 20s first byte, 60s total)",
		"web: real HTTP and DNS on loopback, each node fetching from its own 127.x source address; the web delays each response by the (node, host) entry of the C_ij matrix drawn from the latency range",
	}
	if cfg.Bandwidth > 0 {
		notes = append(notes, "bandwidth: mocknet's per-link token bucket (both directions of a link share it) delays each write by its transmission time; the web's loopback links are not capped")
	}
	if cfg.Loss > 0 {
		notes = append(notes, "loss: libp2p runs over reliable transports, so a lost packet shows as a retransmission delay: a write on a node-to-node stream containing a lost 1460-byte packet is held back max(200ms, RTT)+RTT, blocking the stream behind it; the web's links have no loss")
	}
	if cfg.Churn > 0 {
		notes = append(notes, "churn: a leave unlinks the node and closes its host without a goodbye, then stops it (its in-memory store is gone); a join is a fresh node with a new identity bootstrapped to three live nodes; node 0 (the seed entry point) never leaves")
	}
	return notes
}

// parallel runs f(0..n-1) with at most width at a time and returns the
// first error.
func parallel(ctx context.Context, width, n int, f func(int) error) error {
	var wg sync.WaitGroup
	sem := make(chan struct{}, width)
	var once sync.Once
	var first error
	for i := 0; i < n; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		case sem <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				once.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	return first
}

func (s *simulation) statuses(ctx context.Context) []*node.Status {
	var out []*node.Status
	for _, sn := range s.live() {
		st := sn.n.Status(ctx)
		out = append(out, &st)
	}
	return out
}

// membersOK reports whether every live node sees want members.
func (s *simulation) membersOK(want int) (bool, string) {
	for _, sn := range s.live() {
		if st := sn.n.Status(context.Background()); st.Members != want {
			return false, fmt.Sprintf("node %d sees %d", sn.index, st.Members)
		}
	}
	return true, ""
}

func (s *simulation) waitMembers(ctx context.Context, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ok, why := s.membersOK(want)
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes did not all see %d members within %v (%s)", want, limit, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// crawl polls the nodes until every live node is idle and the web has
// seen no request for two seconds, running the churn on the way.
func (s *simulation) crawl(ctx context.Context, rep *Report, sec *SimSection) error {
	cfg := s.cfg
	expected := max(1, s.web.Truth().Required)
	prog := newProgress(s.web.Truth(), nodeBodyCap())
	start := time.Now()
	deadline := start.Add(cfg.Timeout)
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0xc4a2))
	var churnEvery time.Duration
	nextChurn := time.Time{}
	if cfg.Churn > 0 {
		churnEvery = time.Duration(float64(time.Minute) / (2 * cfg.Churn))
		nextChurn = start.Add(churnEvery)
	}
	leaveNext := true
	quiet := newQuietDetector()
	lastProgress := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			reqs, fetched := prog.update(s.web)
			return fmt.Errorf("crawl did not finish within %v: %d/%d required pages, %d requests", cfg.Timeout, fetched, expected, reqs)
		}
		reqs, fetched := prog.update(s.web)
		elapsed := time.Since(start)
		if time.Since(lastProgress) > 5*time.Second {
			var frontier, active, inFlight, processing, outbox, parked int64
			sts := s.statuses(ctx)
			for _, st := range sts {
				frontier += st.Crawl.Frontier
				active += st.Crawl.ActiveHosts
				inFlight += st.Crawl.InFlight
				processing += st.Crawl.Processing
				parked += st.Crawl.Parked
				outbox += int64(st.Outbox)
			}
			s.logf("%6.1fs  %d/%d required pages fetched (%.1f%%), %d requests, %d nodes; frontier %d URLs on %d hosts, %d in flight, %d processing, %d parked, outbox %d",
				elapsed.Seconds(), fetched, expected, 100*float64(fetched)/float64(expected), reqs, len(sts), frontier, active, inFlight, processing, parked, outbox)
			lastProgress = time.Now()
		}
		// Churn only while there is crawling left to disturb.
		if churnEvery > 0 && fetched < expected && time.Now().After(nextChurn) {
			nextChurn = nextChurn.Add(churnEvery)
			if leaveNext {
				if ev := s.leave(rng, elapsed, fetched, expected); ev != "" {
					sec.Leaves++
					rep.Events = append(rep.Events, ev)
				}
			} else {
				ev, err := s.join(ctx, rng, elapsed, fetched, expected)
				if err != nil {
					return err
				}
				sec.Joins++
				rep.Events = append(rep.Events, ev)
			}
			leaveNext = !leaveNext
		}
		allIdle := true
		for _, sn := range s.live() {
			if st := sn.n.Status(ctx); !st.Idle {
				allIdle = false
				break
			}
		}
		if quiet.done(allIdle, reqs, time.Now()) {
			s.logf("%6.1fs  crawl finished: %d/%d required pages, %d requests", time.Since(start).Seconds(), fetched, expected, reqs)
			return nil
		}
	}
}

func (s *simulation) leave(rng *rand.Rand, elapsed time.Duration, fetched, expected int) string {
	var candidates []*simNode
	for _, sn := range s.live() {
		if sn.index != 0 {
			candidates = append(candidates, sn)
		}
	}
	if len(candidates) < 2 {
		return ""
	}
	victim := candidates[rng.IntN(len(candidates))]
	s.kill(victim)
	s.logf("node %d left", victim.index)
	return fmt.Sprintf("%.1fs: node %d left (no goodbye) at %.0f%%", elapsed.Seconds(), victim.index, 100*float64(fetched)/float64(expected))
}

func (s *simulation) join(ctx context.Context, rng *rand.Rand, elapsed time.Duration, fetched, expected int) (string, error) {
	s.mu.Lock()
	i := len(s.nodes)
	s.mu.Unlock()
	if i >= maxSimNodes {
		return "", fmt.Errorf("--churn: more than %d nodes in one simulation", maxSimNodes)
	}
	sn, err := s.addHost(i, nil)
	if err != nil {
		return "", err
	}
	live := s.live()
	var boot []string
	for k := 0; k < 3 && k < len(live); k++ {
		boot = append(boot, bootstrapOf(live[rng.IntN(len(live))].host))
	}
	if err := s.startNode(ctx, sn, boot); err != nil {
		return "", err
	}
	s.logf("node %d joined", i)
	return fmt.Sprintf("%.1fs: node %d joined at %.0f%%", elapsed.Seconds(), i, 100*float64(fetched)/float64(expected)), nil
}

func coordination(t map[string]TrafficCount, pages int) SimCoordinator {
	c := SimCoordinator{ByProtocol: t}
	for name, tc := range t {
		c.Bytes += tc.Bytes
		if name == classPubsub {
			c.Messages += tc.Writes
		} else {
			c.Messages += tc.Messages
		}
	}
	if pages > 0 {
		c.MessagesPerPage = round3(float64(c.Messages) / float64(pages))
		c.BytesPerPage = round3(float64(c.Bytes) / float64(pages))
	}
	return c
}

// queryPhase asks every query at QueryNodes nodes spread over the
// network, in process (node.Search, the same code as GET /api/search),
// and measures latency, coverage, agreement and the fan-out's traffic.
func (s *simulation) queryPhase(ctx context.Context, truth *simweb.Truth) (*SearchReport, *SimQuery, error) {
	queries := querySet(truth, s.cfg.Queries, s.cfg.Seed)
	live := s.live()
	k := min(s.cfg.QueryNodes, len(live))
	askers := make([]*simNode, k)
	for i := range askers {
		askers[i] = live[i*len(live)/k]
	}
	sr := &SearchReport{Queries: len(queries), CoverageMin: 1, RankConsistent: true, nodeOf: map[string]int{}}
	for _, n := range live {
		sr.nodeOf[n.host.ID().String()] = n.index
	}
	q := &SimQuery{WarmupCoverageMin: 1}
	// One unmeasured search per asking node first. A node that never
	// searched has no connection to about half the members (those outside
	// its DHT routing table), and its first search opens them all at once:
	// in mocknet each a connection, an identify exchange and stream
	// negotiations, which at 128 and 200 nodes took longer than the
	// deadline (the first search at each node answered by 0-34% of the
	// shards, later ones by all). A node that has been serving searches
	// has those connections; the warm-up's coverage is reported
	// (warmup_coverage_min). Its query is not in the measured set, so the
	// result cache cannot answer a measured query.
	for i, a := range askers {
		t0 := time.Now()
		resp, err := a.n.Search(ctx, search.Request{Query: fmt.Sprintf("warmup%d", i), Page: 1, N: 10, Timeout: s.queryDeadline()})
		if err != nil {
			return nil, nil, fmt.Errorf("warm-up search at node %d: %w", a.index, err)
		}
		q.WarmupSearches++
		q.WarmupMaxMS = max(q.WarmupMaxMS, round3(float64(time.Since(t0).Microseconds())/1000))
		if c := resp.Coverage; c.Asked > 0 {
			q.WarmupCoverageMin = min(q.WarmupCoverageMin, round3(float64(c.Answered)/float64(c.Asked)))
		}
	}
	// Let the warm-up's late shard requests finish before measuring.
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(s.queryDeadline()):
	}
	before := s.traffic.snapshot()
	var lat []float64
	var asked int
	for _, query := range queries {
		var tops [][]string
		for _, a := range askers {
			t0 := time.Now()
			resp, err := a.n.Search(ctx, search.Request{Query: query, Page: 1, N: 10, Timeout: s.queryDeadline()})
			if err != nil {
				return nil, nil, fmt.Errorf("query %q at node %d: %w", query, a.index, err)
			}
			took := time.Since(t0)
			lat = append(lat, float64(took.Microseconds())/1000)
			sr.noteLatency(query, a.index, float64(took.Microseconds())/1000, resp)
			sr.noteCoverage(query, a.index, resp)
			q.Searches++
			if c := resp.Coverage; !c.Complete {
				s.logf("query %q at node %d: %d of %d shards answered in %v (%d timed out, %d failed%s)", query, a.index, c.Answered, c.Asked, took.Round(time.Millisecond), c.TimedOut, c.Failed, firstShardError(c.Shards))
			}
			asked += resp.Coverage.Asked
			tops = append(tops, sr.observe(resp))
		}
		sr.compareTops(tops)
	}
	after := s.traffic.snapshot()
	sort.Float64s(lat)
	sr.LatenciesMS = lat
	sr.P50MS, sr.P95MS, sr.P99MS = percentile(lat, .50), percentile(lat, .95), percentile(lat, .99)
	if q.Searches > 0 {
		sb := after[classSearch].Bytes - before[classSearch].Bytes
		sm := after[classSearch].Streams - before[classSearch].Streams
		q.ShardRequestsPerQ = round3(float64(asked) / float64(q.Searches))
		q.BytesPerQuery = round3(float64(sb) / float64(q.Searches))
		q.MessagesPerQuery = round3(float64(sm) / float64(q.Searches))
		q.MaxMS = round3(lat[len(lat)-1])
	}
	return sr, q, nil
}

// firstShardError is ", first error: ..." for a search's first shard that
// failed or timed out, for the progress log.
func firstShardError(shards []search.ShardStatus) string {
	for _, st := range shards {
		if st.State != "answered" && st.Error != "" {
			return fmt.Sprintf(", first error: %s after %.0fms", st.Error, st.LatencyMS)
		}
	}
	return ""
}

// queryDeadline is the query phase's search deadline: the LAN default of
// 800 ms is less than two round trips plus a retransmission at 200 ms
// latency, so a WAN coordinator waits 2 s plus six one-way latencies
// (within the coordinator's 10 s cap).
func (s *simulation) queryDeadline() time.Duration {
	return min(10*time.Second, max(800*time.Millisecond, 2*time.Second+6*s.cfg.LatencyMax))
}

// judge sets OK: coverage 1.0, duplicates within the scenario's allowance
// (issue 8's done-when: 0.1% of the pages; with churn, plus per leave the
// responses in flight at its workers, the price of losing a node without
// warning), no robots or politeness violations, and searches that reach
// every shard and agree.
func (r *SimReport) judge(cfg SimConfig) {
	fail := func(s string) { r.Failures = append(r.Failures, s) }
	if r.Crawl.Coverage < 1 {
		fail(fmt.Sprintf("coverage %.4f < 1", r.Crawl.Coverage))
	}
	allowed := r.Crawl.PagesExpected / 1000
	if cfg.Churn > 0 {
		allowed += r.Sim.Leaves * cfg.Workers
	}
	if r.Crawl.DuplicateFetches > allowed {
		fail(fmt.Sprintf("%d duplicate fetches, the scenario allows %d", r.Crawl.DuplicateFetches, allowed))
	}
	if r.Crawl.RobotsViolations > 0 {
		fail(fmt.Sprintf("%d robots violations", r.Crawl.RobotsViolations))
	}
	if r.Crawl.PolitenessViolations > 0 {
		fail(fmt.Sprintf("%d politeness violations", r.Crawl.PolitenessViolations))
	}
	if s := r.Search; s != nil {
		if s.CoverageMin < 1 {
			fail(fmt.Sprintf("search coverage %.3f < 1", s.CoverageMin))
		}
		if !s.RankConsistent {
			fail("nodes disagree on the top 10")
		}
	}
	r.OK = len(r.Failures) == 0
}

// WriteSimReportDir writes the report directory of a simulation
// (WriteReportDir: the Markdown summary and the plots) with report.json
// holding the whole simulation report, sim section included, exactly as
// --json prints it.
func WriteSimReportDir(dir string, rep *SimReport) error {
	if err := WriteReportDir(dir, rep.Report, rep.Requests); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, reportJSONFile), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("--report-dir: %w", err)
	}
	return nil
}
