package node

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"

	"sou/crawl"
	"sou/index"
	"sou/p2p"
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
	handoff handoffState
	repl    *replicator
	// replicas are the hosts held here only as a replica.
	replicas replicaHosts
	pulls    pulls
	seeds    seedBudget
	syncs    *syncer
	// ctx is Run's context, for work started from callbacks.
	ctx    context.Context
	settle *settling
	// httpAddr is the bound API address (a string), set by startHTTP.
	httpAddr atomic.Value
	disk     *diskGuard
	recent   recent
	// refusalLog paces the warnings about refused peer data, which come
	// as fast as a hostile member sends.
	refusalLog *rate.Limiter
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
	n := &Node{cfg: cfg, log: log, started: time.Now(), errs: newErrorRing(50), refusalLog: rate.NewLimiter(rate.Every(10*time.Second), 1)}
	n.handoff.kick = make(chan struct{}, 1)
	n.repl = newReplicator()
	n.settle = newSettling(15*time.Second, 2*time.Minute, len(cfg.Bootstrap) > 0, time.Now())
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
	n.syncs = newSyncer(n.db)
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
	if err := n.loadRemembered(recentGrace(pcfg.MemberTimeout)); err != nil {
		return nil, fmt.Errorf("load remembered members: %w", err)
	}
	if err := n.loadReplicaHosts(); err != nil {
		return nil, fmt.Errorf("load replica hosts: %w", err)
	}
	if err := n.loadOutbox(ctx); err != nil {
		return nil, err
	}
	n.net.SetURLHandler(n.receiveURLs)
	n.net.SetURLFilter(n.urlsFrom)
	n.net.SetSearchHandler(func(ctx context.Context, _ peer.ID, req []byte) ([]byte, error) {
		return n.coord.HandleShardRequest(ctx, req)
	})
	n.net.SetDeliverHandler(topicHandoffPages, n.receiveHandoffPages)
	n.net.SetDeliverHandler(topicHandoffHost, n.receiveHandoffHost)
	n.net.SetDeliverHandler(topicReplica, n.receiveReplica)
	n.net.SetDeliverHandler(topicReplicaPull, n.receivePull)
	n.net.SetDeliverHandler(topicManifest, n.receiveManifest)
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

// Run serves until ctx ends, then shuts down cleanly: HTTP first, then the
// crawler (its in-flight work persisted), the network (outboxes are already
// durable), the index (flushed) and Badger.
func (n *Node) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.ctx = ctx
	srv, err := n.startHTTP(ctx)
	if err != nil {
		n.closeAll()
		return err
	}
	n.log.Info("sou node started", "peer", n.net.ID().String(), "ui", "http://"+srv.Addr+"/", "data", n.cfg.DataDir)

	var wg sync.WaitGroup
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
	run(n.watchMembers)
	run(n.rebalanceLoop)
	run(n.replicationLoop)
	run(n.watchDisk)
	run(n.syncs.run)
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

func (n *Node) runCtx() context.Context {
	if n.ctx == nil {
		return context.Background()
	}
	return n.ctx
}

// AddSeeds normalises urls and hands each to its owner: this node's
// crawler, or the network. It returns how many were accepted.
func (n *Node) AddSeeds(ctx context.Context, urls []string) (int, error) {
	if err := n.intakeOK(); err != nil {
		return 0, err
	}
	var local []crawl.Discovered
	var remote []p2p.URLRecord
	var bad []string
	for _, raw := range urls {
		u, err := crawl.NormalizeURL(strings.TrimSpace(raw), nil)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q: %v", raw, err))
			continue
		}
		host := crawl.HostKey(u)
		d := crawl.Discovered{URL: u.String(), Cash: 1}
		if n.net.IsOwner(host) {
			local = append(local, d)
		} else {
			remote = append(remote, p2p.URLRecord{URL: d.URL, Cash: d.Cash})
		}
	}
	if len(local) > 0 {
		if err := n.crawler.Add(ctx, local); err != nil {
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

// receiveURLs takes a batch forwarded by a peer: p2p has already re-routed
// what we do not own, and checked each record where it first
// arrived (urlsFrom), so everything here is ours.
func (n *Node) receiveURLs(ctx context.Context, _ p2pPeer, recs []p2p.URLRecord) error {
	if err := n.intakeOK(); err != nil {
		return err // the sender keeps the batch in its outbox
	}
	ds := make([]crawl.Discovered, 0, len(recs))
	anchors := map[string][]string{}
	for _, r := range recs {
		ds = append(ds, crawl.Discovered{URL: r.URL, Anchor: r.Anchor, SourceHost: r.SourceHost, Cash: r.Cash, Depth: r.Depth})
		if r.Anchor != "" && r.SourceHost != "" {
			anchors[r.URL] = append(anchors[r.URL], r.Anchor)
		}
	}
	if err := n.crawler.Add(ctx, ds); err != nil {
		return err
	}
	if err := n.addAnchors(ctx, anchors); err != nil {
		return err
	}
	return n.syncAcknowledged(ctx, len(recs) > 0)
}

// urlsFrom is the URL filter (p2p.SetURLFilter): which records of a batch
// a member may send. A link it found itself (Hops 0) must come from a page
// of a host it crawls (crawls): a member cannot put words in the mouth of
// hosts it does not crawl, as links to this node's hosts or as their
// anchor text. A record without a source host is a seed a user submitted
// at the sender, and seeds are budgeted per sender (seedBudget). A record
// passed on by a member on the way (Hops > 0) must come from a member
// among the R+1 closest to its host: members forward a record to the
// owner by their view, and the first receiver was the owner in the
// origin's view. Each host is judged once per batch.
func (n *Node) urlsFrom(from peer.ID, recs []p2p.URLRecord) []bool {
	view := n.net.View()
	r := n.net.ReplicationFactor()
	crawled := map[string]bool{}
	near := map[string]bool{}
	keep := make([]bool, len(recs))
	for i, rec := range recs {
		switch {
		case rec.Hops > 0:
			h := hostOf(rec.URL)
			ok, seen := near[h]
			if !seen {
				ok = rank(view, h, r+1, from) >= 0
				near[h] = ok
			}
			keep[i] = ok
		case rec.SourceHost == "":
			keep[i] = n.seeds.allow(from)
		default:
			ok, seen := crawled[rec.SourceHost]
			if !seen {
				ok = n.crawls(view, from, rec.SourceHost)
				crawled[rec.SourceHost] = ok
			}
			keep[i] = ok
		}
	}
	return keep
}

// seedBudget bounds the seeds each member may submit through this node:
// seedsPerSecond, saved up to seedBurst (a user's batch of seeds).
type seedBudget struct {
	mu  sync.Mutex
	per map[peer.ID]*rate.Limiter
}

const (
	seedsPerSecond = 10
	seedBurst      = 10_000
)

func (b *seedBudget) allow(p peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.per == nil {
		b.per = map[peer.ID]*rate.Limiter{}
	}
	l := b.per[p]
	if l == nil {
		l = rate.NewLimiter(seedsPerSecond, seedBurst)
		b.per[p] = l
	}
	return l.Allow()
}

// forget drops p's budget (it left).
func (b *seedBudget) forget(p peer.ID) {
	b.mu.Lock()
	delete(b.per, p)
	b.mu.Unlock()
}

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

// watchMembers reacts to membership changes: hosts we no longer own are
// handed to their new owner, and a joiner gets a handoff manifest when this
// node has hosts for it or holds hosts and is one of its donors (see
// settling). Joiners met while this node's own view was still settling
// are looked at again once it has: only then does the view say who their
// donors are.
func (n *Node) watchMembers(ctx context.Context) {
	var unsettled []peer.ID // joiners met before the view settled
	var settled <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-settled:
			settled = nil
			n.sendSettledManifests(ctx, unsettled)
			unsettled = nil
		case ev, ok := <-n.net.Events():
			if !ok {
				return
			}
			n.log.Info("membership", "event", ev.Kind.String(), "member", ev.Member.ID)
			switch ev.Kind {
			case p2p.Joined:
				others, donors := awaitedDonors(n.net.ID(), n.net.View(), n.net.Members())
				now := time.Now()
				n.settle.joined(n.net.ID(), others, donors, now)
				if at := n.settle.viewSettledAt(); now.Before(at) {
					unsettled = append(unsettled, ev.Member.ID)
					if settled == nil {
						settled = time.After(at.Sub(now))
					}
				}
				go n.sendManifest(ctx, ev.Member.ID)
				n.memberEvent(ev.Member.ID, true)
			case p2p.Left:
				n.settle.left(ev.Member.ID)
				n.memberEvent(ev.Member.ID, false)
			}
			n.coord.Invalidate()
			n.kickRebalance()
		}
	}
}

// hostOf returns the HostKey of a URL string, or "" when it does not parse.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return crawl.HostKey(u)
}
