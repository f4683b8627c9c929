package node

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
	"sou/p2p"
	"sou/placement"
	"sou/search"
)

// Node is one running sou node.
type Node struct {
	cfg     Config
	log     *slog.Logger
	db      *badger.DB
	ix      *index.Index
	local   *search.Local
	crawler *crawl.Crawler
	net     *p2p.Node
	coord   *search.Coordinator
	started time.Time
	errs    *errorRing
	metrics *metrics
	// place decides where hosts live (placement) and carries it out, on
	// what data holds of them; inbound takes what members send.
	place   *placer
	data    *hostData
	inbound *peerData
	syncs   *syncer
	// httpAddr is the bound API address (a string), set by startHTTP.
	httpAddr atomic.Value
	disk     *diskGuard
}

// processWorkersPerCore and processWorkersWaiting set the crawler's
// processing workers: three per core for the CPU work of parsing and
// analysing, and 18 more that may wait on the network meanwhile. A
// worker's Store waits for the content claim's answer and, when
// DetachedStores others already returned before their replicas held
// them (storeItem), for the replica's acknowledgement (given after the
// replica's group-commit sync, which waits for company: syncGap); it
// holds no core meanwhile. How many may wait depends on the network's
// round trips, not on the cores. A node alone never waits, and its extra
// workers only queue for the cores.
const (
	processWorkersPerCore = 3
	processWorkersWaiting = 18
)

// ProcessWorkers is the number of processing workers a node's crawler
// runs on this machine.
func ProcessWorkers() int {
	return processWorkersPerCore*runtime.GOMAXPROCS(0) + processWorkersWaiting
}

// New opens the node's storage and network. Call Run to serve, and it
// closes everything when it returns. Options are for the WAN simulator
// (WithHost, WithInMemoryStore); a real node passes none.
func New(ctx context.Context, cfg Config, log *slog.Logger, opts ...Option) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o nodeOptions
	for _, opt := range opts {
		opt(&o)
	}
	n := &Node{cfg: cfg, log: log, started: time.Now(), errs: newErrorRing(50)}
	closeOnErr := func(f func() error) {
		if err != nil {
			_ = f()
		}
	}
	minFree := cfg.MinFreeDisk
	if o.inMemory {
		minFree = 0 // nothing is written under DataDir
	}
	n.disk = newDiskGuard(cfg.DataDir, minFree)
	n.db, err = openDB(cfg.DataDir, o.inMemory, cfg.Sync == SyncAlways, log)
	if err != nil {
		return nil, err
	}
	n.syncs = newSyncer(n.db, syncGap)
	defer closeOnErr(n.db.Close)

	n.ix, err = index.Open(n.db, IndexOptions(), log.With("component", "index"))
	if err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	defer closeOnErr(n.ix.Close)
	n.local = search.NewLocal(n.ix, search.DefaultParams())

	pcfg := p2p.DefaultLANConfig()
	if cfg.WAN {
		pcfg = p2p.DefaultWANConfig()
	}
	pcfg.DataDir = cfg.DataDir
	pcfg.Network = cfg.Network
	pcfg.MDNS = cfg.MDNS
	if len(cfg.Listen) > 0 {
		pcfg.Listen = cfg.Listen
	}
	pcfg.Bootstrap = cfg.Bootstrap
	if cfg.PSKFile != "" {
		psk, err := readPSK(cfg.PSKFile)
		if err != nil {
			return nil, err
		}
		pcfg.PSK = psk
	}
	if o.p2pTune != nil {
		o.p2pTune(&pcfg)
	}
	popts := []p2p.Option{p2p.WithIntakeGate(n.intakeOK)}
	if o.host != nil {
		popts = append(popts, p2p.WithHost(o.host))
	}
	n.net, err = p2p.New(ctx, n.db, pcfg, log.With("component", "p2p"), popts...)
	if err != nil {
		return nil, fmt.Errorf("start libp2p: %w", err)
	}
	defer closeOnErr(n.net.Close)

	ccfg := crawl.DefaultConfig()
	if cfg.Fast {
		ccfg = crawl.FastConfig()
	}
	ccfg.Resolver.Server = cfg.DNS
	ccfg.Fetch.AllowLoopback = cfg.AllowLoopback
	ccfg.Fetch.AllowPrivate = cfg.AllowPrivate
	if cfg.SourceIP != "" {
		ccfg.Fetch.SourceIP = netip.MustParseAddr(cfg.SourceIP) // checked by Validate
	}
	if cfg.Workers > 0 {
		ccfg.Workers = cfg.Workers
	}
	if cfg.MinDelay > 0 {
		ccfg.Politeness.MinDelay = cfg.MinDelay
	}
	if cfg.MaxPagesPerHost > 0 {
		ccfg.Filter.MaxPagesPerHost = cfg.MaxPagesPerHost
	}
	ccfg.ProcessWorkers = ProcessWorkers()
	if o.crawlTune != nil {
		o.crawlTune(&ccfg)
	}
	n.crawler, err = crawl.New(n.db, ccfg, &sink{n: n}, log.With("component", "crawl"))
	if err != nil {
		return nil, fmt.Errorf("start crawler: %w", err)
	}
	defer closeOnErr(n.crawler.Close)
	n.coord = search.NewCoordinator(n.local, &shardTransport{n: n}, search.DefaultCoordinatorConfig(), n.net.IsOwner)
	n.metrics = newMetrics(n)
	n.data = &hostData{db: n.db, ix: n.ix, crawler: n.crawler, log: log.With("component", "placement")}
	pl := placement.DefaultConfig(n.net.ID(), pcfg.Replicas, &keyspace{}, len(cfg.Bootstrap) > 0, pcfg.MemberTimeout)
	pl.Drain = ccfg.Fetch.TotalTimeout + time.Second
	pl.WaitMax = ReplicaWaitMax
	if o.placeTune != nil {
		o.placeTune(&pl)
	}
	n.place, err = newPlacer(pl, n.net, n.data, log.With("component", "placement"), n.errs)
	if err != nil {
		return nil, err
	}
	n.place.intakeLow = n.disk.Low
	n.place.member = func(ev p2p.MemberEvent) {
		if ev.Kind == p2p.Left {
			n.inbound.seeds.forget(ev.Member.ID)
		}
		n.coord.Invalidate()
	}
	n.inbound = &peerData{
		place: n.place, data: n.data, net: n.net, ix: n.ix, crawler: n.crawler,
		intake: n.intakeOK, acked: n.syncAcknowledged, changed: n.coord.Invalidate,
	}
	n.inbound.register(n.net)
	n.net.Outbox().SetTopic(topicReplica, n.place.replicaTopic(n.ix))
	if moved, err := moveLegacyOutbox(n.db, n.net.Outbox()); err != nil {
		return nil, err
	} else if moved > 0 {
		log.Info("moved the replica outbox of an earlier version into p2p's", "records", moved)
	}
	n.net.SetSearchHandler(func(ctx context.Context, _ peer.ID, req []byte) ([]byte, error) {
		return n.coord.HandleShardRequest(ctx, req)
	})
	return n, nil
}

func readPSK(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--psk: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("--psk %s: want 64 hex digits (32 bytes)", path)
	}
	return key, nil
}

// indexOwnedLoop indexes, every ownedCheckInterval, the held replica
// pages of the hosts this node has come to own (hostData.indexOwned).
func (n *Node) indexOwnedLoop(ctx context.Context) {
	t := time.NewTicker(ownedCheckInterval)
	defer t.Stop()
	for {
		if err := n.data.indexOwned(ctx, n.net.IsOwner); err != nil && ctx.Err() == nil {
			n.log.Error("indexing held pages", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ownedCheckInterval is how often a node looks for held pages of hosts it
// owns; a takeover indexes them at once.
const ownedCheckInterval = 2 * time.Second

// Run serves until ctx ends, then shuts down cleanly: HTTP first, then the
// crawler (its in-flight work persisted), the network (outboxes are already
// durable), the index (flushed) and Badger.
func (n *Node) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	srv, err := n.startHTTP(ctx, &wg)
	if err != nil {
		n.closeAll()
		return err
	}
	n.log.Info("sou node started", "peer", n.net.ID().String(), "ui", "http://"+srv.Addr+"/", "data", n.cfg.DataDir)

	errc := make(chan error, 1)
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := n.crawler.Run(ctx); err != nil {
			select {
			case errc <- fmt.Errorf("crawler: %w", err):
			default:
			}
			cancel()
		}
	}()
	run(func(ctx context.Context) { runValueLogGC(ctx, n.db, 5*time.Minute) })
	run(n.publishLoad)
	run(n.place.run)
	run(func(ctx context.Context) { n.place.flushItems(ctx, n.data) })
	run(n.watchDisk)
	run(n.syncs.run)
	run(n.indexOwnedLoop)
	if len(n.cfg.Seeds) > 0 {
		if _, err := n.AddSeeds(ctx, n.cfg.Seeds); err != nil {
			n.log.Warn("seeds", "err", err)
		}
	}
	<-ctx.Done()
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer shutCancel()
	_ = srv.Shutdown(shutCtx)
	wg.Wait()
	n.closeAll()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func (n *Node) closeAll() {
	n.place.close()
	if err := n.crawler.Close(); err != nil {
		n.log.Warn("close crawler", "err", err)
	}
	if err := n.net.Close(); err != nil {
		n.log.Warn("close p2p", "err", err)
	}
	if err := n.ix.Close(); err != nil {
		n.log.Warn("close index", "err", err)
	}
	if err := n.db.Close(); err != nil {
		n.log.Warn("close badger", "err", err)
	}
}

// AddSeeds normalises urls and hands each to its owner: this node's
// crawler, or the network. It returns how many were accepted.
func (n *Node) AddSeeds(ctx context.Context, urls []string) (int, error) {
	if err := n.intakeOK(); err != nil {
		return 0, err
	}
	var local, remote []p2p.URLRecord
	var bad []string
	for _, raw := range urls {
		u, err := crawl.NormalizeURL(strings.TrimSpace(raw), nil)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q: %v", raw, err))
			continue
		}
		rec := p2p.URLRecord{URL: u.String(), Cash: 1}
		if n.net.IsOwner(crawl.HostKey(u)) {
			local = append(local, rec)
		} else {
			remote = append(remote, rec)
		}
	}
	if len(local) > 0 {
		if err := n.inbound.receiveURLs(ctx, n.net.ID(), local); err != nil {
			return 0, fmt.Errorf("add seeds: %w", err)
		}
	}
	if len(remote) > 0 {
		if err := n.net.Forward(ctx, remote); err != nil {
			return len(local), fmt.Errorf("forward seeds: %w", err)
		}
	}
	accepted := len(local) + len(remote)
	if len(bad) > 0 {
		return accepted, &BadURLsError{Bad: bad}
	}
	return accepted, nil
}

// BadURLsError lists submitted URLs that could not be used.
type BadURLsError struct{ Bad []string }

func (e *BadURLsError) Error() string { return "bad URLs: " + strings.Join(e.Bad, "; ") }

// publishLoad keeps the heartbeat's load figures current.
func (n *Node) publishLoad(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			cs := n.crawler.Stats()
			is := n.ix.Stats()
			n.net.SetLoad(p2p.Load{Pages: uint64(max(is.Docs, 0)), Frontier: uint64(max(cs.Frontier, 0)), Hosts: uint64(max(cs.Hosts, 0))})
		}
	}
}
