package testnet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/eval"
	"sou/index"
	"sou/node"
	"sou/p2p"
	"sou/search"
	"sou/testnet/attack"
	"sou/testnet/simweb"
)

// RunConfig describes one `sou testnet run`.
type RunConfig struct {
	Nodes     int
	Hosts     int
	Pages     int
	Seed      int64
	Sites     string
	Misbehave []string
	// Binary is the sou executable to start nodes from.
	Binary string
	// Dir holds the node data directories; "" = a temporary directory,
	// removed at the end unless Keep or the run failed.
	Dir  string
	Keep bool
	// Timeout bounds the whole crawl phase.
	Timeout time.Duration
	// Crashes kills a random node with SIGKILL this many times at random
	// instants during the crawl, restarting it each time.
	Crashes int
	// JoinAt adds a node, KillAt kills one (no restart), at a crawl
	// fraction ("30%") or a time ("20s"). RestartAt kills one and restarts
	// it on its data once the others have seen it leave (a takeover, then
	// a rejoin and a handback).
	JoinAt, KillAt, RestartAt string
	// ReportDir, when set, receives report.json, report.md and the plots
	// (see WriteReportDir).
	ReportDir string
	// Queries is the size of the query phase (0 = no query phase).
	Queries int
	// KillAfterCrawl kills one node after the query phase and checks that
	// searches answer before the deadline with the missing member in their
	// coverage, and that once its replica took over they return the same
	// top 10 as before the kill.
	KillAfterCrawl bool
	// Qrels are known-item judgment files (sou/eval's format), each scored
	// over the part QrelsSplit ("" = all) in the search section (the first
	// also as its mrr10, s10, s1 and ndcg10); ReportDir gets their misses.
	Qrels      []string
	QrelsSplit eval.Split
	// QrelsLang gives sets' readers a language (SET=LANGUAGE, see
	// eval.ParseReaders), sent with their queries.
	QrelsLang []string
	// Hostile is how many attackers (testnet/attack) join the network
	// once it has formed and attack it through the crawl and the query
	// phase; HostileClasses selects their attack classes (nil = all).
	Hostile        int
	HostileClasses []string
	// NodeProcs is every node process's GOMAXPROCS; 0 = the machine's
	// cores shared among the nodes (NodeProcs), or all of them with
	// hostile members (nodeProcs).
	NodeProcs int
	// Progress receives a line now and then; nil = silent.
	Progress io.Writer
	Log      *slog.Logger
}

// trigger is a scenario instant: a fraction of the expected pages fetched,
// or a time since the crawl started.
type trigger struct {
	fraction float64
	after    time.Duration
	set      bool
}

func parseTrigger(flag, s string) (trigger, error) {
	if s == "" {
		return trigger{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 || v >= 100 {
			return trigger{}, fmt.Errorf("--%s %q: want a percentage between 0 and 100 (exclusive) or a duration", flag, s)
		}
		return trigger{fraction: v / 100, set: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return trigger{}, fmt.Errorf("--%s %q: want a percentage like 30%% or a duration like 20s", flag, s)
	}
	return trigger{after: d, set: true}, nil
}

func (t trigger) due(fraction float64, elapsed time.Duration) bool {
	if !t.set {
		return false
	}
	if t.after > 0 {
		return elapsed >= t.after
	}
	return fraction >= t.fraction
}

// nodeProcs is NodeProcs as configured; else all the cores with hostile
// members, else the cores' share. A hostile run measures the defences,
// and with a share of one core a node's floods and its shard answers take
// turns on its single P: the answers then miss the search deadline under
// attack, which says more about that share than about the defences
// (RELIABILITY.md, "The hostile testnet on a share of the cores").
func (c *RunConfig) nodeProcs() int {
	if c.NodeProcs == 0 && c.Hostile > 0 {
		return runtime.NumCPU()
	}
	return cmp.Or(c.NodeProcs, NodeProcs(c.Nodes))
}

// Validate reports the first problem with c.
func (c *RunConfig) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > 64:
		return errors.New("--nodes must be between 1 and 64")
	case c.Hosts < 0 || c.Pages < 0:
		return errors.New("--hosts and --pages must not be negative")
	case c.Hosts == 0 && c.Sites == "":
		return errors.New("give --hosts and --pages, or --sites FILE")
	case c.Hosts > 0 && c.Pages < c.Hosts:
		return errors.New("--pages must be at least --hosts")
	case c.Crashes < 0 || c.Queries < 0:
		return errors.New("--crashes and --queries must not be negative")
	case c.Hostile < 0 || c.Hostile > 8:
		return errors.New("--hostile must be between 0 and 8")
	case c.NodeProcs < 0 || c.NodeProcs > 1024:
		return errors.New("--node-procs must be between 0 (the cores shared among the nodes) and 1024")
	}
	for _, cl := range c.HostileClasses {
		if cl != "all" && !slices.Contains(attack.Classes, cl) {
			return fmt.Errorf("--hostile-classes: unknown class %q (want all or some of %s)", cl, strings.Join(attack.Classes, ", "))
		}
	}
	sets := map[string]bool{}
	for _, q := range c.Qrels {
		// Read now: a bad line should not wait for the end of the crawl.
		set, err := eval.ReadFile(q)
		if err != nil {
			return fmt.Errorf("--qrels: %w", err)
		}
		sets[set.Name] = true
		if c.Queries == 0 {
			return errors.New("--qrels needs the query phase (--queries > 0)")
		}
	}
	readers, err := eval.ParseReaders(c.QrelsLang)
	if err != nil {
		return fmt.Errorf("--qrels-lang: %w", err)
	}
	for set := range readers {
		if !sets[set] {
			return fmt.Errorf("--qrels-lang: no --qrels file is set %s", set)
		}
	}
	if c.QrelsSplit != "" {
		if _, err := eval.ParseSplit(string(c.QrelsSplit)); err != nil {
			return fmt.Errorf("--qrels-split: %w", err)
		}
	}
	if _, err := parseTrigger("join-at", c.JoinAt); err != nil {
		return err
	}
	if _, err := parseTrigger("kill-at", c.KillAt); err != nil {
		return err
	}
	if _, err := parseTrigger("restart-at", c.RestartAt); err != nil {
		return err
	}
	if (c.KillAt != "" || c.RestartAt != "" || c.KillAfterCrawl) && c.Nodes < 2 {
		return errors.New("--kill-at, --restart-at and --kill-after-crawl need at least 2 nodes")
	}
	return nil
}

// progressLogger writes a line of progress to w (nil: nowhere). The
// returned function may be called from several goroutines (the attackers,
// the query runners); w need not be safe for that.
func progressLogger(w io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, a ...any) {
		if w == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format+"\n", a...)
	}
}

// Run starts the simulated web and the nodes, seeds the crawl, waits until
// the network is idle, runs the query phase and returns the report.
func Run(ctx context.Context, cfg RunConfig) (_ *Report, runErr error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 15 * time.Minute
	}
	logf := progressLogger(cfg.Progress)
	dir := cfg.Dir
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("--dir: %w", err)
		}
	} else {
		d, err := os.MkdirTemp("", "sou-testnet-")
		if err != nil {
			return nil, fmt.Errorf("testnet directory: %w", err)
		}
		dir = d
		if !cfg.Keep {
			// A failed run keeps its node logs: they are its evidence.
			defer func() {
				if runErr == nil {
					os.RemoveAll(d)
				}
			}()
		}
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	web, err := simweb.Start(ctx, simweb.Config{
		Seed: cfg.Seed, Hosts: cfg.Hosts, Pages: cfg.Pages, Sites: cfg.Sites,
		Misbehave: cfg.Misbehave, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("simulated web: %w", err)
	}
	defer web.Close()
	truth := web.Truth()
	// The web has read every page to build its truth: the testbed's work,
	// not the crawl's, so this process's CPU until now is reported apart.
	setupCPU := selfCPUSeconds()
	logf("simulated web: http %s, dns %s, %d required pages on %d hosts", web.HTTPAddr(), web.DNSAddr(), truth.Required, len(truth.Hosts))

	nodeProcs := cfg.nodeProcs()
	l := newLauncher(cfg.Binary, dir, web.DNSAddr(), nodeProcs)
	defer l.stopAll()
	for i := 0; i < cfg.Nodes; i++ {
		if _, err := l.start(ctx, i, l.bootstrapAddrs()); err != nil {
			return nil, err
		}
	}
	if err := waitMembers(ctx, l, cfg.Nodes, 30*time.Second); err != nil {
		return nil, err
	}
	logf("%d nodes up in network %s; dir %s", cfg.Nodes, l.network, dir)

	rep := &Report{Nodes: cfg.Nodes, NodeProcs: nodeProcs, Hosts: cfg.Hosts, Pages: cfg.Pages, Seed: cfg.Seed}
	procs := newProcSampler()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go procs.run(sampleCtx, l, time.Second)
	seeds := web.Seeds()
	var hostile *hostileRun
	if cfg.Hostile > 0 {
		// Every host's home page is a seed: an attacker owns hosts, and a
		// portal it owns would hide the honest hosts it lists.
		for _, h := range truth.Hosts {
			seeds = append(seeds, "http://"+h.Host+"/")
		}
		hostile = startHostile(ctx, cfg, l, truth, logf)
		defer hostile.stop()
	}
	if err := postSeeds(ctx, l.all()[0], seeds); err != nil {
		return nil, fmt.Errorf("seed the crawl: %w", err)
	}
	kills := &killLog{}
	idleSince, err := crawlToCompletion(ctx, cfg, l, web, rep, kills, hostile, logf)
	if err != nil {
		return nil, err
	}
	procs.sample(l)
	atCrawlEnd := procs.figures()
	crawlCPU := selfCPUSeconds() - setupCPU
	for _, f := range atCrawlEnd {
		crawlCPU += f.CPUSeconds
	}
	if cfg.Keep {
		if err := writeWebLogs(web, dir); err != nil {
			logf("write request log: %v", err)
		}
	}
	fetches := fetchesFrom(web.Requests(0))
	fast := crawl.FastConfig().Politeness
	judged := truth
	var view *honestView
	if hostile != nil {
		v, err := hostile.view(ctx, l)
		if err != nil {
			return nil, err
		}
		view = v
		judged, _ = honestTruth(truth, v)
	}
	rep.Crawl = crawlChecks(judged, fetches, func(host string) time.Duration {
		d := fast.MinDelay
		if h, ok := truth.Host(host); ok && h.CrawlDelay > 0 {
			d = max(d, min(time.Duration(h.CrawlDelay*float64(time.Second)), fast.MaxCrawlDelay))
		}
		return d
	}, nodeBodyCap(), crawl.FastConfig().Fetch.FirstByteTimeout)
	rep.Crawl.classify(fetches, kills.list())
	if first := rep.Crawl.firstRequest; !first.IsZero() && idleSince.After(first) {
		rep.Crawl.SearchableSeconds = round3(idleSince.Sub(first).Seconds())
	}
	rep.Crawl.CPUSecondsAll = round3(crawlCPU)
	rep.Crawl.CPUSecondsSetup = round3(setupCPU)
	if rep.Crawl.PagesFetched > 0 {
		rep.Crawl.CPUMsPerPage = round3(1000 * crawlCPU / float64(rep.Crawl.PagesFetched))
	}
	if rep.Crawl.CorpusHTML, err = corpusHTML(truth.Hosts, fetches, nodeBodyCap()); err != nil {
		// The report stands without this figure; say why it is missing.
		rep.Events = append(rep.Events, err.Error())
		logf("%v", err)
	}
	statuses := liveStatuses(ctx, l)
	for _, st := range statuses {
		for class, n := range st.Crawl.ErrorsByClass {
			rep.Crawl.ErrorsByClass[class] += n
		}
	}
	rep.Network = networkReport(statuses)
	// The final ownership: the nodes alive now (and, in a hostile run, the
	// attackers that are members too).
	var finalMembers []peer.ID
	if view != nil {
		finalMembers = view.members
	} else {
		var ids []string
		for _, p := range l.live() {
			ids = append(ids, p.PeerID)
		}
		finalMembers = peerIDs(ids)
	}
	own := ownershipOf(truth, finalMembers)
	if cfg.Queries > 0 {
		sr, err := queryPhase(ctx, l, judged, cfg.Queries, cfg.Seed, view)
		if err != nil {
			return nil, err
		}
		rep.Search = sr
		if len(cfg.Qrels) > 0 {
			split := cfg.QrelsSplit
			if split == "" {
				split = eval.All
			}
			readers, err := eval.ParseReaders(cfg.QrelsLang)
			if err != nil {
				return nil, fmt.Errorf("--qrels-lang: %w", err)
			}
			if err := scoreQrels(ctx, l.live()[0], cfg.Qrels, readers, split, sr, logf); err != nil {
				return nil, err
			}
		}
		if cfg.KillAfterCrawl {
			// Fresh queries for the searches during the outage: the
			// baseline's answers are in the result cache.
			fresh := querySet(truth, 20, cfg.Seed+7919)
			kr, err := killAfterCrawl(ctx, l, querySet(truth, cfg.Queries, cfg.Seed), fresh, logf)
			if err != nil {
				return nil, err
			}
			rep.Search.AfterKill = kr
		}
	}
	if hostile != nil {
		hr := hostile.report(ctx, l, view, procs.figures())
		_, hr.HonestHosts = honestTruth(truth, view)
		rep.Hostile = hr
		hostile.stop()
	}
	stopSampling()
	rep.PerNode = perNodeReport(ctx, l, atCrawlEnd, procs.figures(), requestsByClient(fetches))
	own.fill(rep.Network, rep.PerNode)
	rep.judge(cfg)
	if cfg.ReportDir != "" {
		if err := WriteReportDir(cfg.ReportDir, rep, web.Requests(0)); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// judge sets OK from the checks the scenario asked for.
func (r *Report) judge(cfg RunConfig) {
	fail := func(s string) { r.Failures = append(r.Failures, s) }
	if r.Crawl.Coverage < 1 {
		fail(fmt.Sprintf("coverage %.4f < 1", r.Crawl.Coverage))
	}
	c := &r.Crawl
	if allowed := allowedAvoidable(cfg, c.PagesExpected); c.DuplicatesAvoidable > allowed {
		fail(fmt.Sprintf("%d avoidable duplicate fetches (not in flight at a kill), the scenario allows %d", c.DuplicatesAvoidable, allowed))
	}
	if most := orphansPerKill(); c.DuplicatesInFlightMaxPerKill > most {
		fail(fmt.Sprintf("one kill orphaned %d fetches, more than the %d it can", c.DuplicatesInFlightMaxPerKill, most))
	}
	if r.Crawl.RobotsViolations > 0 {
		fail(fmt.Sprintf("%d robots violations", r.Crawl.RobotsViolations))
	}
	if r.Crawl.PolitenessViolations > 0 {
		fail(fmt.Sprintf("%d politeness violations", r.Crawl.PolitenessViolations))
	}
	if s := r.Search; s != nil {
		if s.CoverageMin < 1 && cfg.KillAt == "" {
			fail(fmt.Sprintf("search coverage %.3f < 1", s.CoverageMin))
		}
		if !s.RankConsistent {
			fail("nodes disagree on the top 10")
		}
		if k := s.AfterKill; k != nil {
			if !k.PartialReported {
				fail("searches right after the kill did not report the missing member")
			}
			if k.Late > 0 {
				fail(fmt.Sprintf("%d searches after the kill answered past their deadline", k.Late))
			}
			if !k.SameTop10 {
				fail(fmt.Sprintf("after the takeover %d of %d queries return a different top 10", k.Changed, k.Queries))
			}
		}
	}
	r.judgeHostile(fail)
	r.OK = len(r.Failures) == 0
}

// allowedAvoidable is how many duplicate fetches not in flight at a kill
// (see classifyDuplicates) a scenario may cause. Without churn, and with
// crashes alone (nodes SIGKILLed and restarted at once): none. A node that
// joins (attackers join a hostile run), or one that dies for good or long
// enough for its replica to take over, may cost 0.1% of the pages (issue
// 5): ownership moves, and the views of the members differ for a moment.
//
// The duplicates in flight at a kill are not counted here: a SIGKILL
// orphans every response under way at that instant (the web answered, the
// process that would have stored the answer is gone), so the restarted node
// or the replica fetches the URL again, or the page would be lost. judge
// bounds them per kill by orphansPerKill.
func allowedAvoidable(cfg RunConfig, pages int) int {
	if cfg.JoinAt != "" || cfg.KillAt != "" || cfg.RestartAt != "" || cfg.Hostile > 0 {
		return pages / 1000
	}
	return 0
}

// orphansPerKill bounds the fetches one SIGKILL can orphan: the requests
// on the wire and the responses fetched but not yet stored and replicated
// hold the crawler's admission credits, at most one per fetch worker (the
// node itself fetches the first again after its restart; the replica that
// takes its hosts over before it is back fetches both). The bound is
// looser than that, twice the workers plus three per processing worker,
// so that it also covers what the credits do not: the fetched marks of
// failed fetches, replicated a moment after Store returns. On top come the
// pages of the Stores that returned before their replicas held them
// (node.DetachedStores). The workers are those of a testnet node's
// crawler on this machine.
func orphansPerKill() int {
	return 2*crawl.FastConfig().Workers + 3*node.ProcessWorkers() + node.DetachedStores()
}

func waitMembers(ctx context.Context, l *launcher, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ok := true
		for _, p := range l.live() {
			st, err := p.status(ctx)
			if err != nil || st.Members < want {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes did not see all %d members within %v", want, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func liveStatuses(ctx context.Context, l *launcher) []*node.Status {
	var out []*node.Status
	for _, p := range l.live() {
		if st, err := p.status(ctx); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// notIdleEvery is how often a crawl that has fetched every required page
// but does not end logs what keeps its nodes busy.
const notIdleEvery = 15 * time.Second

// crawlToCompletion polls the nodes until every live node is idle with an
// empty outbox and the web has seen no request for a while, running the
// scenario's joins, kills and crashes on the way. It returns the moment
// the nodes were found idle for good (quietDetector).
func crawlToCompletion(ctx context.Context, cfg RunConfig, l *launcher, web *simweb.Web, rep *Report, kills *killLog, hostile *hostileRun, logf func(string, ...any)) (time.Time, error) {
	joinAt, _ := parseTrigger("join-at", cfg.JoinAt)
	killAt, _ := parseTrigger("kill-at", cfg.KillAt)
	restartAt, _ := parseTrigger("restart-at", cfg.RestartAt)
	var restarting *nodeProc
	var restartDue time.Time
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed))
	// Crash instants: spread over the expected crawl by fraction fetched.
	var crashAt []float64
	for i := 0; i < cfg.Crashes; i++ {
		crashAt = append(crashAt, 0.05+0.85*rng.Float64())
	}
	sort.Float64s(crashAt)
	expected := max(1, web.Truth().Required)
	prog := newProgress(web.Truth(), nodeBodyCap())
	start := time.Now()
	deadline := start.Add(cfg.Timeout)
	quiet := newQuietDetector()
	lastProgress := time.Time{}
	lastWhy := time.Now()
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			why := whyNotIdle(ctx, l, hostile, time.Now())
			logf("%5.1fs  not idle: %s", time.Since(start).Seconds(), why)
			return time.Time{}, fmt.Errorf("crawl did not finish within %v: %s (node logs in %s)", cfg.Timeout, why, l.root)
		}
		reqs, fetched := prog.update(web)
		fraction := float64(fetched) / float64(expected)
		elapsed := time.Since(start)
		if time.Since(lastProgress) > 2*time.Second {
			logf("%5.1fs  %d/%d required pages fetched (%.1f%%), %d requests", elapsed.Seconds(), fetched, expected, 100*fraction, reqs)
			lastProgress = time.Now()
		}
		if joinAt.due(fraction, elapsed) {
			joinAt.set = false
			i := len(l.all())
			if _, err := l.start(ctx, i, l.bootstrapAddrs()); err != nil {
				return time.Time{}, fmt.Errorf("join node %d: %w", i, err)
			}
			rep.Events = append(rep.Events, fmt.Sprintf("%.1fs: node %d joined at %.0f%%", elapsed.Seconds(), i, 100*fraction))
			logf("node %d joined", i)
		}
		if killAt.due(fraction, elapsed) {
			killAt.set = false
			// Never node 0 (the seed entry point), and not a node that
			// joined during this run: the scenario is "a node joins, and
			// another dies".
			var candidates []*nodeProc
			for _, p := range l.live() {
				if p.Index != 0 && p.Index < cfg.Nodes {
					candidates = append(candidates, p)
				}
			}
			if len(candidates) == 0 {
				return time.Time{}, errors.New("--kill-at: no node to kill")
			}
			victim := candidates[rng.IntN(len(candidates))]
			kills.kill(victim)
			rep.Events = append(rep.Events, fmt.Sprintf("%.1fs: node %d killed (SIGKILL) at %.0f%%", elapsed.Seconds(), victim.Index, 100*fraction))
			logf("node %d killed", victim.Index)
		}
		if restartAt.due(fraction, elapsed) && len(l.live()) > 1 {
			restartAt.set = false
			live := l.live()
			restarting = live[1+rng.IntN(len(live)-1)] // never node 0, the seed entry point
			kills.kill(restarting)
			// Back after the membership timeout, so that the others have
			// declared it gone and its replicas have taken over.
			restartDue = time.Now().Add(p2p.DefaultLANConfig().MemberTimeout + 2*time.Second)
			rep.Events = append(rep.Events, fmt.Sprintf("%.1fs: node %d killed (SIGKILL) at %.0f%%, to be restarted", elapsed.Seconds(), restarting.Index, 100*fraction))
			logf("node %d killed, restart in %v", restarting.Index, time.Until(restartDue).Round(time.Second))
		}
		if restarting != nil && time.Now().After(restartDue) {
			if err := kills.restart(ctx, restarting, l.bootstrapAddrs()); err != nil {
				return time.Time{}, fmt.Errorf("restart node %d: %w", restarting.Index, err)
			}
			rep.Events = append(rep.Events, fmt.Sprintf("%.1fs: node %d restarted", time.Since(start).Seconds(), restarting.Index))
			logf("node %d restarted", restarting.Index)
			restarting = nil
		}
		if len(crashAt) > 0 && fraction >= crashAt[0] {
			crashAt = crashAt[1:]
			live := l.live()
			victim := live[rng.IntN(len(live))]
			kills.kill(victim)
			if err := kills.restart(ctx, victim, l.bootstrapAddrs()); err != nil {
				return time.Time{}, fmt.Errorf("restart node %d after SIGKILL: %w", victim.Index, err)
			}
			rep.Events = append(rep.Events, fmt.Sprintf("%.1fs: node %d killed (SIGKILL) and restarted at %.0f%%", elapsed.Seconds(), victim.Index, 100*fraction))
			logf("node %d killed and restarted", victim.Index)
		}
		// Every kill the scenario asked for happens, even when the crawl
		// got ahead of them (each restart takes a few seconds).
		allIdle := restarting == nil && len(crashAt) == 0 && (hostile == nil || hostile.ready())
		for _, p := range l.live() {
			st, err := p.status(ctx)
			if err != nil || !idle(st, hostile) {
				allIdle = false
				break
			}
		}
		// Once everything required is fetched and every kill is done, a
		// crawl that does not end says why every so often.
		if !allIdle && fetched >= expected && len(crashAt) == 0 && time.Since(lastWhy) >= notIdleEvery {
			logf("%5.1fs  not idle: %s", time.Since(start).Seconds(), whyNotIdle(ctx, l, hostile, time.Now()))
			lastWhy = time.Now()
		}
		if quiet.done(allIdle, reqs, time.Now()) {
			logf("%5.1fs  crawl finished: %d/%d required pages, %d requests", time.Since(start).Seconds(), fetched, expected, reqs)
			return quiet.since, nil
		}
	}
}

func networkReport(sts []*node.Status) *NetworkReport {
	nr := &NetworkReport{MembersSeenByEach: []int{}}
	for _, st := range sts {
		nr.MembersSeenByEach = append(nr.MembersSeenByEach, st.Members)
		nr.URLsForwarded += st.P2P.URLsForwarded
		nr.ForwardBytes += st.P2P.ForwardBytes
		nr.ForwardHopsMax = max(nr.ForwardHopsMax, st.P2P.MaxHopsSeen)
		nr.HandoffPages += st.HandoffPages
	}
	if nr.URLsForwarded > 0 {
		nr.BytesPerURL = round3(float64(nr.ForwardBytes) / float64(nr.URLsForwarded))
	}
	return nr
}

// queryPhase runs a fixed query set, drawn from the titles of required
// pages, against every live node and checks latency, coverage and that every
// node returns the same top 10.
func queryPhase(ctx context.Context, l *launcher, truth *simweb.Truth, n int, seed int64, view *honestView) (*SearchReport, error) {
	queries := querySet(truth, n, seed)
	sr := &SearchReport{Queries: len(queries), CoverageMin: 1, RankConsistent: true, view: view, nodeOf: map[string]int{}}
	var lat []float64
	var mu sync.Mutex
	for _, p := range l.all() {
		sr.nodeOf[p.PeerID] = p.Index
	}
	nodes := l.live()
	for _, q := range queries {
		var tops [][]string
		for _, p := range nodes {
			v := url.Values{"q": {q}, "n": {"10"}}
			t0 := time.Now()
			var resp search.Response
			if err := p.getJSON(ctx, "/api/search?"+v.Encode(), &resp); err != nil {
				return nil, fmt.Errorf("query %q at node %d: %w", q, p.Index, err)
			}
			ms := float64(time.Since(t0).Microseconds()) / 1000
			mu.Lock()
			lat = append(lat, ms)
			mu.Unlock()
			sr.noteLatency(q, p.Index, ms, &resp)
			if inc := sr.noteCoverage(q, p.Index, &resp); inc != nil {
				noteRefusals(ctx, l, inc)
			}
			tops = append(tops, sr.observe(&resp))
		}
		sr.compareTops(tops)
	}
	sort.Float64s(lat)
	sr.LatenciesMS = lat
	sr.P50MS, sr.P95MS, sr.P99MS = percentile(lat, .50), percentile(lat, .95), percentile(lat, .99)
	return sr, nil
}

// noteRefusals adds to each missing shard of a live node its refusal
// counts now.
func noteRefusals(ctx context.Context, l *launcher, inc *IncompleteSearch) {
	for i, m := range inc.Missing {
		if m.Node == nil || *m.Node >= len(l.all()) {
			continue
		}
		st, err := l.all()[*m.Node].status(ctx)
		if err != nil {
			continue
		}
		inc.Missing[i].Refusals = &Refusals{
			NonMemberStreams: st.P2P.NonMemberStreams, StreamsRefused: st.P2P.StreamsRefused,
			ThrottledMessages: st.P2P.ThrottledMessages, SearchesRefused: st.P2P.SearchesRefused,
		}
	}
}

// querySet draws n queries from the titles of indexable required pages:
// the first two words of the title, as the analyzer segments it, so that a
// Chinese title is cut at word boundaries and not in the middle of a word.
func querySet(truth *simweb.Truth, n int, seed int64) []string {
	var titles []string
	for _, p := range truth.Pages {
		if p.Required && p.Title != "" && !p.Noindex && p.MirrorOf == "" && p.NearDuplicateOf == "" {
			titles = append(titles, p.Title)
		}
	}
	if len(titles) == 0 {
		return nil
	}
	an := index.SharedAnalyzer()
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b9))
	out := make([]string, 0, n)
	for tries := 0; len(out) < n && tries < 20*n; tries++ {
		t := titles[rng.IntN(len(titles))]
		var words []string
		for _, tok := range an.AnalyzeQuery(t) {
			if len(words) == 2 {
				break
			}
			words = append(words, tok.Term)
		}
		if len(words) > 0 {
			out = append(out, strings.Join(words, " "))
		}
	}
	return out
}

// progress follows the request log incrementally: how many requests so far
// and how many distinct required pages have been fetched.
type progress struct {
	required map[string]bool
	got      map[string]bool
	next     int
	maxBody  int64
}

// nodeBodyCap is the body cap of the testnet's nodes, which crawl with
// crawl.FastConfig: the most of a response a node reads (fetch.delivered).
func nodeBodyCap() int64 { return crawl.FastConfig().Fetch.MaxBodyBytes }

// newProgress counts the required pages of t as responses deliver them to
// crawlers whose body cap is maxBody (fetch.delivered).
func newProgress(t *simweb.Truth, maxBody int64) *progress {
	p := &progress{required: map[string]bool{}, got: map[string]bool{}, maxBody: maxBody}
	for _, pg := range t.Pages {
		if pg.Required {
			p.required[pg.URL] = true
		}
	}
	return p
}

func (p *progress) update(web *simweb.Web) (requests, fetched int) {
	for _, f := range fetchesFrom(web.Requests(p.next)) {
		p.next++
		if f.delivered(p.maxBody) && p.required[f.URL] {
			p.got[f.URL] = true
		}
	}
	return p.next, len(p.got)
}

// writeWebLogs keeps the web's request log and truth listing next to the
// node data, for inspection.
func writeWebLogs(web *simweb.Web, dir string) error {
	for name, write := range map[string]func(io.Writer) error{"requests.json": web.WriteRequests, "truth.json": web.WriteTruth} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := write(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// topTens asks node p each query and returns the result URLs.
func topTens(ctx context.Context, p *nodeProc, queries []string, timeout time.Duration) ([][]string, []search.Response, error) {
	tops := make([][]string, len(queries))
	resps := make([]search.Response, len(queries))
	for i, q := range queries {
		v := url.Values{"q": {q}, "n": {"10"}, "timeout": {timeout.String()}}
		if err := p.getJSON(ctx, "/api/search?"+v.Encode(), &resps[i]); err != nil {
			return nil, nil, fmt.Errorf("query %q at node %d: %w", q, p.Index, err)
		}
		for _, r := range resps[i].Results {
			tops[i] = append(tops[i], r.URL)
		}
	}
	return tops, resps, nil
}

// scoredList shows a result list with scores and shards, so that a changed
// top 10 says which score moved.
func scoredList(r search.Response) string {
	parts := make([]string, len(r.Results))
	for i, res := range r.Results {
		shard := res.Shard
		if len(shard) > 6 {
			shard = shard[len(shard)-6:]
		}
		parts[i] = fmt.Sprintf("%s %.6f @%s", res.URL, res.Score, shard)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// killAfterCrawl is the search half of a node failure (issue 6).
func killAfterCrawl(ctx context.Context, l *launcher, queries, fresh []string, logf func(string, ...any)) (*AfterKillReport, error) {
	live := l.live()
	asker, victim := live[0], live[len(live)-1]
	const deadline = 500 * time.Millisecond
	before, beforeResp, err := topTens(ctx, asker, queries, deadline)
	if err != nil {
		return nil, err
	}
	victim.kill()
	logf("node %d killed after the crawl; searching from node %d", victim.Index, asker.Index)
	kr := &AfterKillReport{Queries: len(queries), Killed: victim.Index}
	for _, q := range fresh {
		v := url.Values{"q": {q}, "n": {"10"}, "timeout": {deadline.String()}}
		t0 := time.Now()
		var resp search.Response
		if err := asker.getJSON(ctx, "/api/search?"+v.Encode(), &resp); err != nil {
			return nil, err
		}
		took := time.Since(t0)
		kr.MaxLatencyMS = max(kr.MaxLatencyMS, round3(float64(took.Microseconds())/1000))
		if took > deadline+200*time.Millisecond {
			kr.Late++
		}
		if !resp.Coverage.Complete {
			kr.PartialReported = true
		}
	}
	// Wait for the membership to drop the dead node and the replica to
	// take over its hosts.
	wait := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for _, p := range l.live() {
			st, err := p.status(ctx)
			if err != nil || st.Members != len(live)-1 || !st.Idle {
				ok = false
				break
			}
		}
		if ok || time.Now().After(wait) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(4 * time.Second) // a postings flush of the taken-over pages
	after, afterResp, err := topTens(ctx, asker, queries, 2*time.Second)
	if err != nil {
		return nil, err
	}
	for i := range queries {
		if strings.Join(before[i], "\n") != strings.Join(after[i], "\n") {
			kr.Changed++
			if len(kr.Examples) < 3 {
				kr.Examples = append(kr.Examples, fmt.Sprintf("%q: before %s; after %s", queries[i], scoredList(beforeResp[i]), scoredList(afterResp[i])))
			}
		}
	}
	kr.SameTop10 = kr.Changed == 0
	return kr, nil
}
