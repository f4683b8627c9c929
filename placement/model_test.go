package placement

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The model: a small network of nodes, each a Machine driven the way node
// drives it (its actions carried out over a simulated network and store),
// crawling a small web, with members joining, crashing and restarting,
// and one killed for good, in an order drawn from a seed, on a fake clock.
// It checks:
//
//   - nothing is fetched twice, except a URL whose earlier fetch was in
//     flight (requested, not yet stored) when its node was killed;
//   - once the views agree and stay so, every host has exactly one node
//     that may crawl it;
//   - at the end, every page stored is held by the R members closest to
//     its host, and every page of the web was fetched.
//
// SOU_MODEL_SEEDS=a-b runs seeds a to b (default 1 to modelSeeds);
// SOU_MODEL_SEED=s runs seed s alone, with a trace of what happened.

const (
	modelSeeds  = 300
	modelHosts  = 10
	modelPages  = 14 // per host: page j links to 2j+1 and 2j+2; page 0 to two other hosts
	modelSlots  = 6  // nodes that may ever run
	modelR      = 2
	memberLimit = 3 * time.Second // the membership timeout
	pullTimeout = 10 * time.Second
	heal        = 10 * time.Second // after a node is back, until the hosts have R holders again
	sendTimeout = 3 * time.Second
)

func modelConfig(space ringSpace, self peer.ID, joining bool) Config {
	c := DefaultConfig(self, modelR, space, joining, memberLimit)
	c.HostWait = 30 * time.Second
	c.Drain = time.Second
	c.Resync = 20 * time.Second
	return c
}

func TestModel(t *testing.T) {
	first, seeds := uint64(1), uint64(modelSeeds)
	if testing.Short() {
		seeds = 40
	}
	if s := os.Getenv("SOU_MODEL_SEEDS"); s != "" {
		a, b, _ := strings.Cut(s, "-")
		lo, err1 := strconv.ParseUint(a, 10, 64)
		hi, err2 := strconv.ParseUint(b, 10, 64)
		if err1 != nil || err2 != nil || hi < lo {
			t.Fatalf("SOU_MODEL_SEEDS=%q: want a range such as 1-1000", s)
		}
		first, seeds = lo, hi-lo+1
	}
	if s := os.Getenv("SOU_MODEL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SOU_MODEL_SEED=%q: %v", s, err)
		}
		first, seeds = n, 1
	}
	// SOU_MODEL_ALL=1 goes on past a failing seed and lists every one
	// with its first failure, for a sweep of many seeds.
	all := os.Getenv("SOU_MODEL_ALL") != ""
	var stats modelStats
	for seed := first; seed < first+seeds; seed++ {
		w := newWorld(seed, seeds == 1)
		w.run()
		stats.add(w)
		if len(w.failures) == 0 {
			continue
		}
		if all {
			t.Errorf("seed %d: %s", seed, w.failures[0])
			continue
		}
		for _, l := range w.trace {
			t.Log(l)
		}
		t.Fatalf("seed %d (SOU_MODEL_SEED=%d go test -run TestModel ./placement/ for a trace):\n%s", seed, seed, strings.Join(w.failures, "\n"))
	}
	t.Logf("%d seeds: %s", seeds, stats)
}

type modelStats struct {
	runs, fetches, inFlightDups, crashes, kills, joins, handoffs, takeovers, hints, events int
	newOwnerTaken, newOwnerRefused                                                         int
}

func (s *modelStats) add(w *world) {
	s.runs++
	s.fetches += w.fetchCount
	s.inFlightDups += w.inFlightDups
	s.crashes += w.crashes
	s.kills += w.kills
	s.joins += w.joins
	s.handoffs += w.handoffs
	s.takeovers += w.takeovers
	s.hints += w.hints
	s.events += w.events
	s.newOwnerTaken += w.newOwnerTaken
	s.newOwnerRefused += w.newOwnerRefused
}

func (s modelStats) String() string {
	return fmt.Sprintf("%d events, %d fetches (%d again after a kill in flight), %d crashes, %d kills, %d joins, %d handoffs, %d takeovers, %d hints, items stored before a handoff: %d taken by the new owner, %d refused",
		s.events, s.fetches, s.inFlightDups, s.crashes, s.kills, s.joins, s.handoffs, s.takeovers, s.hints, s.newOwnerTaken, s.newOwnerRefused)
}

// ---- the world: clock, events, web -------------------------------------------

type world struct {
	rng      *rand.Rand
	start    time.Time
	now      time.Time
	q        eventQueue
	seq      uint64
	nodes    []*simNode
	space    ringSpace
	tracing  bool
	trace    []string
	failures []string

	fetched    map[string][]*fetchRec // url -> its fetches
	fetchCount int
	finished   bool
	calm       time.Time // no fault before
	lastDown   time.Time // the last start of a node that was down
	// counters for the log
	inFlightDups, crashes, kills, joins, handoffs, takeovers, hints, events int
	newOwnerTaken, newOwnerRefused                                          int
}

type fetchRec struct {
	node        *simNode
	at          time.Time
	interrupted bool // its node was killed before it was stored
	stored      bool
	storedAt    time.Time
}

type scheduled struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventQueue []scheduled

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(scheduled)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func newWorld(seed uint64, tracing bool) *world {
	t0 := time.Unix(1700000000, 0)
	w := &world{rng: rand.New(rand.NewPCG(seed, 0x90d)), start: t0, now: t0, tracing: tracing, fetched: map[string][]*fetchRec{},
		space: ringSpace{cache: map[string][]uint64{}}}
	for i := range modelSlots {
		w.nodes = append(w.nodes, &simNode{w: w, id: peer.ID(fmt.Sprintf("node-%d-%d", seed, i)), slot: i, durable: newDurable()})
	}
	return w
}

func (w *world) at(d time.Duration, fn func()) {
	w.seq++
	heap.Push(&w.q, scheduled{at: w.now.Add(d), seq: w.seq, fn: fn})
}

// jitter is a random duration in [lo, hi).
func (w *world) jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)))
}

func (w *world) logf(format string, args ...any) {
	if w.tracing {
		w.trace = append(w.trace, fmt.Sprintf("%8.3fs ", w.now.Sub(w.start).Seconds())+fmt.Sprintf(format, args...))
	}
}

func (w *world) fail(format string, args ...any) {
	if len(w.failures) < 10 {
		w.failures = append(w.failures, fmt.Sprintf("%8.3fs ", w.now.Sub(w.start).Seconds())+fmt.Sprintf(format, args...))
	}
}

func hostName(i int) string { return fmt.Sprintf("h%d.test", i) }

func pageURL(host string, j int) string { return fmt.Sprintf("http://%s/%d", host, j) }

func urlHost(u string) string {
	rest := strings.TrimPrefix(u, "http://")
	h, _, _ := strings.Cut(rest, "/")
	return h
}

func urlPage(u string) int {
	_, p, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "/")
	j, _ := strconv.Atoi(p)
	return j
}

// links are the links of a page: two children on its host, and from the
// home page two other hosts' home pages.
func links(u string) []string {
	h, j := urlHost(u), urlPage(u)
	var out []string
	for _, c := range []int{2*j + 1, 2*j + 2} {
		if c < modelPages {
			out = append(out, pageURL(h, c))
		}
	}
	if j == 0 {
		i, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(h, "h"), ".test"))
		out = append(out, pageURL(hostName((i+1)%modelHosts), 0), pageURL(hostName((i+3)%modelHosts), 0))
	}
	return out
}

func (w *world) up() []*simNode {
	var out []*simNode
	for _, n := range w.nodes {
		if n.up {
			out = append(out, n)
		}
	}
	return out
}

func (w *world) node(id peer.ID) *simNode {
	for _, n := range w.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// run plays one scenario: three nodes start, faults come for a while,
// then the network is left alone until the crawl is done.
func (w *world) run() {
	w.nodes[0].start(false)
	for _, n := range w.nodes[1:3] {
		w.at(w.jitter(0, 300*time.Millisecond), func() { n.start(true) })
	}
	// Seeds, once the first three see each other (as the testnet does).
	var seed func()
	seed = func() {
		for _, n := range w.nodes[:3] {
			if !n.up || len(n.m.Members()) < 3 {
				w.at(100*time.Millisecond, seed)
				return
			}
		}
		for i := range modelHosts {
			w.nodes[0].forward(fwdURL{url: pageURL(hostName(i), 0)})
		}
	}
	w.at(100*time.Millisecond, seed)
	faultsEnd := 40*time.Second + w.jitter(0, 40*time.Second)
	var fault func()
	fault = func() {
		if w.now.Sub(w.start) < faultsEnd {
			w.fault()
			w.at(w.jitter(500*time.Millisecond, 6*time.Second), fault)
		}
	}
	w.at(w.jitter(time.Second, 5*time.Second), fault)
	// The end: the crawl done and the network quiet for long enough that
	// the holders of every host were hinted and pulled.
	var watch func()
	var stable, quiet time.Time
	watch = func() {
		w.checkOneCrawler(&stable)
		switch {
		case w.now.Sub(w.start) < faultsEnd+10*time.Second || !w.done():
			quiet = time.Time{}
		case quiet.IsZero():
			quiet = w.now
		case w.now.Sub(quiet) > modelConfig(ringSpace{}, "", true).Resync+10*time.Second:
			w.finished = true
		}
		w.at(time.Second, watch)
	}
	w.at(time.Second, watch)
	deadline := w.start.Add(20 * time.Minute)
	for w.q.Len() > 0 && len(w.failures) == 0 && !w.finished {
		ev := heap.Pop(&w.q).(scheduled)
		w.now = ev.at
		w.events++
		ev.fn()
		if w.now.After(deadline) {
			w.fail("the crawl did not finish: %s %s", w.missing(), w.busy())
			break
		}
	}
	if len(w.failures) == 0 {
		w.checkEnd()
	}
}

// fault is one random fault: a crash restarted within the grace (at most
// two nodes down at once), a crash restarted after longer, a kill for
// good, or a join. R = 2 holders survive one long fault at a time: a long
// one comes only while every node is up and none went down in the last
// heal, and nothing else comes while it lasts or for a while after, until
// the hosts have their R holders again.
func (w *world) fault() {
	up := w.up()
	down := 0
	for _, n := range w.nodes {
		if n.started && !n.up && !n.dead {
			down++
		}
	}
	if w.now.Before(w.calm) {
		return
	}
	var fresh *simNode
	for _, n := range w.nodes {
		if !n.started {
			fresh = n
			break
		}
	}
	healed := down == 0 && w.now.Sub(w.lastDown) > heal
	switch r := w.rng.IntN(10); {
	case r < 6 && len(up) > 2 && down < 2:
		n := up[w.rng.IntN(len(up))]
		w.crashes++
		n.crash()
		w.at(w.jitter(100*time.Millisecond, 4*time.Second), func() { n.start(true) })
	case r < 7 && len(up) > 2 && healed:
		n := up[w.rng.IntN(len(up))]
		w.crashes++
		n.crash()
		away := w.jitter(8*time.Second, 40*time.Second) // longer than the grace
		w.calm = w.now.Add(away + 30*time.Second)
		w.at(away, func() { n.start(true) })
	case r < 8 && len(up) > 3 && healed && w.kills == 0:
		n := up[1+w.rng.IntN(len(up)-1)]
		w.kills++
		n.dead = true
		n.crash()
		w.calm = w.now.Add(30 * time.Second)
	case fresh != nil:
		w.joins++
		fresh.start(true)
	}
}

// done: every page fetched, nothing under way, every view the same.
func (w *world) done() bool {
	if w.missing() != "" {
		return false
	}
	up := w.up()
	for _, n := range up {
		if len(n.fetching) > 0 || len(n.durable.processing) > 0 || !n.quiet() {
			return false
		}
		if !slices.Equal(n.m.Members(), w.upIDs()) {
			return false
		}
	}
	return true
}

// busy says what keeps the nodes from being done.
func (w *world) busy() string {
	var out []string
	for _, n := range w.up() {
		if !slices.Equal(n.m.Members(), w.upIDs()) {
			out = append(out, fmt.Sprintf("%s sees %v", n.name(), w.names(n.m.Members())))
		}
		for p, items := range n.durable.outbox {
			if len(items) > 0 {
				out = append(out, fmt.Sprintf("%s has %d items for %s", n.name(), len(items), w.names([]peer.ID{p})))
			}
		}
		for p, u := range n.durable.urls {
			if len(u) > 0 {
				out = append(out, fmt.Sprintf("%s has %d URLs for %s", n.name(), len(u), w.names([]peer.ID{p})))
			}
		}
		if len(n.waits) > 0 || n.handing != "" || len(n.m.hosts.pulls) > 0 || len(n.fetching) > 0 || len(n.durable.processing) > 0 {
			out = append(out, fmt.Sprintf("%s: %d waits, handing %q, %d pulls, %d fetching, %d processing", n.name(), len(n.waits), n.handing, len(n.m.hosts.pulls), len(n.fetching), len(n.durable.processing)))
		}
	}
	return strings.Join(out, "; ")
}

func (w *world) upIDs() []peer.ID {
	var ids []peer.ID
	for _, n := range w.up() {
		ids = append(ids, n.id)
	}
	slices.Sort(ids)
	return ids
}

// missing lists the pages no live node has stored.
func (w *world) missing() string {
	var miss []string
	for i := range modelHosts {
		for j := range modelPages {
			u := pageURL(hostName(i), j)
			stored := false
			for _, n := range w.up() {
				stored = stored || n.durable.index[u]
			}
			if !stored {
				miss = append(miss, u)
			}
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return fmt.Sprintf("%d pages never stored, e.g. %v", len(miss), miss[:min(3, len(miss))])
}

// fetch records a request for u by n, failing on a duplicate that no kill
// explains.
func (w *world) fetch(n *simNode, u string) *fetchRec {
	w.fetchCount++
	prev := w.fetched[u]
	f := &fetchRec{node: n, at: w.now}
	w.fetched[u] = append(prev, f)
	if len(prev) > 0 {
		last := prev[len(prev)-1]
		// A request its node was killed in is stored when the node is
		// back, before the others have met it again: until then their
		// takeovers cannot ask it for the page.
		cfg := modelConfig(ringSpace{}, "", true)
		inFlight := last.interrupted && (!last.stored || w.now.Sub(last.storedAt) < cfg.Grace+cfg.Drain)
		if !inFlight {
			var holders []string
			for _, o := range w.nodes {
				if o.durable.index[u] {
					holders = append(holders, fmt.Sprintf("%s (up %v)", o.name(), o.up))
				}
			}
			w.fail("%s fetched again by %s; fetched by %s at %.3fs (stored %v), no kill in between; held by %v",
				u, n.name(), last.node.name(), last.at.Sub(w.start).Seconds(), last.stored, holders)
		} else {
			w.inFlightDups++
		}
	}
	w.logf("%s fetches %s", n.name(), u)
	return f
}

// checkOneCrawler: once every view has been the set of live nodes for
// longer than any wait, each host has exactly one node that may crawl it.
func (w *world) checkOneCrawler(stable *time.Time) {
	ids := w.upIDs()
	for _, n := range w.up() {
		if !slices.Equal(n.m.Members(), ids) {
			*stable = time.Time{}
			return
		}
	}
	if stable.IsZero() {
		*stable = w.now
	}
	cfg := modelConfig(ringSpace{}, "", true)
	if w.now.Sub(*stable) < cfg.HostWait+cfg.ManifestWait+pullTimeout+10*time.Second {
		return
	}
	for i := range modelHosts {
		h := hostName(i)
		var crawlers []string
		for _, n := range w.up() {
			if n.m.MayCrawl(w.now, h) {
				crawlers = append(crawlers, n.name())
			}
		}
		if len(crawlers) != 1 {
			w.fail("views agree since %.3fs, and %s may be crawled by %v", stable.Sub(w.start).Seconds(), h, crawlers)
		}
	}
}

// checkEnd: every page stored is on the R members closest to its host.
func (w *world) checkEnd() {
	ids := w.upIDs()
	for i := range modelHosts {
		h := hostName(i)
		for _, p := range w.space.Replicas(ids, h, modelR) {
			n := w.node(p)
			for j := range modelPages {
				u := pageURL(h, j)
				if !n.durable.index[u] {
					w.fail("%s holds %s but not its page %s", n.name(), h, u)
					w.dumpHost(h)
				}
			}
		}
	}
}

// ---- a node ------------------------------------------------------------------

type simNode struct {
	w         *world
	id        peer.ID
	slot      int
	started   bool
	up        bool
	startedAt time.Time
	dead      bool
	inc       int // incarnation: work of an earlier one is dropped
	durable   *durable
	// what a run holds in memory
	m           *Machine
	fetching    map[string]*fetchRec // requests under way
	storing     map[string]*fetchRec // fetched, being stored
	waits       map[uint64]func(missed []peer.ID)
	copies      map[uint64]string // what each wait is for
	nextWait    uint64
	sending     map[peer.ID]bool
	sendingURLs map[peer.ID]bool
	retryAt     map[peer.ID]time.Time
	backoff     map[peer.ID]time.Duration
	handing     string
}

// durable is what survives a crash: the store.
type durable struct {
	saved      Saved
	index      map[string]bool          // stored pages
	queuedAt   map[string]bool          // URLs queued at a host's owner, kept by its replicas
	crawl      map[string]*crawlState   // the crawler's hosts
	processing map[string]*fetchRec     // fetched, not stored yet (processed again at start)
	outbox     map[peer.ID][]outboxItem // replica outbox
	urls       map[peer.ID][]fwdURL     // URL outbox (forwarded links)
	seq        uint64
}

// fwdURL is a forwarded URL record: a link found on source (a seed when
// empty), relayed by hops members on the way.
type fwdURL struct {
	url, source string
	hops        int
}

type crawlState struct {
	queued map[string]bool
	done   map[string]bool
}

type outboxItem struct {
	seq  uint64
	url  string
	page bool      // a page, or a URL queued at the owner
	view []peer.ID // the sender's view when it chose the target
	// newOwner: the target was the host's new owner, which takes the
	// item only while it awaits the sender's handoff (Target.NewOwner).
	newOwner bool
}

func newDurable() *durable {
	return &durable{index: map[string]bool{}, queuedAt: map[string]bool{}, crawl: map[string]*crawlState{}, processing: map[string]*fetchRec{},
		outbox: map[peer.ID][]outboxItem{}, urls: map[peer.ID][]fwdURL{}}
}

var errRefused = errors.New("refused")

func (n *simNode) name() string { return fmt.Sprintf("n%d", n.slot) }

// later runs fn after d if this incarnation is still running then.
func (n *simNode) later(d time.Duration, fn func()) {
	inc := n.inc
	n.w.at(d, func() {
		if n.up && n.inc == inc {
			fn()
		}
	})
}

func (n *simNode) start(joining bool) {
	if n.up || n.dead {
		return
	}
	w := n.w
	n.started, n.up = true, true
	n.startedAt = w.now
	w.lastDown = w.now
	n.inc++
	n.m = New(modelConfig(w.space, n.id, joining), n.durable.saved, w.now)
	n.fetching, n.storing, n.waits = map[string]*fetchRec{}, map[string]*fetchRec{}, map[uint64]func([]peer.ID){}
	n.copies = map[uint64]string{}
	n.sending, n.retryAt, n.backoff = map[peer.ID]bool{}, map[peer.ID]time.Time{}, map[peer.ID]time.Duration{}
	n.sendingURLs = map[peer.ID]bool{}
	n.handing = ""
	w.logf("%s starts (joining %v)", n.name(), joining)
	var held []peer.ID
	for p, items := range n.durable.outbox {
		if len(items) > 0 {
			held = append(held, p)
		}
	}
	slices.Sort(held)
	n.step(OutboxHeld{Peers: held})
	// Membership: each live node and this one hear of each other.
	for _, o := range w.up() {
		if o == n {
			continue
		}
		o.hear(n)
		n.hear(o)
	}
	for _, u := range slices.Sorted(maps.Keys(n.durable.processing)) {
		f := n.durable.processing[u]
		n.later(w.jitter(time.Millisecond, 50*time.Millisecond), func() { n.store(u, f) })
	}
	var tick, crawl, pump func()
	tick = func() { n.step(Tick{}); n.later(100*time.Millisecond, tick) }
	crawl = func() { n.crawlOnce(); n.later(w.jitter(20*time.Millisecond, 80*time.Millisecond), crawl) }
	pump = func() { n.pump(); n.later(100*time.Millisecond, pump) }
	n.later(w.jitter(0, 100*time.Millisecond), tick)
	n.later(w.jitter(0, 80*time.Millisecond), crawl)
	n.later(w.jitter(0, 100*time.Millisecond), pump)
}

// hear makes n learn of o, after a heartbeat or two, if o is still up by
// then (a member o's earlier incarnation left a Left on its way, which
// the heartbeat overtakes).
func (n *simNode) hear(o *simNode) {
	inc := o.inc
	n.later(n.w.jitter(100*time.Millisecond, 1500*time.Millisecond), func() {
		if o.up && o.inc == inc {
			n.step(Joined{Peer: o.id, Holding: n.w.holding()})
		}
	})
}

// holding are the live nodes whose crawler holds a host (what their
// heartbeats announce).
func (w *world) holding() []peer.ID {
	var out []peer.ID
	for _, o := range w.up() {
		if len(o.durable.crawl) > 0 {
			out = append(out, o.id)
		}
	}
	return out
}

// crash kills n: what it had in memory is gone. The others drop it from
// their views after the membership timeout, unless it is back and heard
// by then.
func (n *simNode) crash() {
	w := n.w
	w.logf("%s killed", n.name())
	for _, f := range n.fetching {
		f.interrupted = true
	}
	for _, f := range n.durable.processing {
		f.interrupted = true
	}
	n.up = false
	n.inc++
	n.m = nil
	inc := n.inc
	for _, o := range w.up() {
		o.later(memberLimit+w.jitter(0, 500*time.Millisecond), func() {
			if n.up && n.inc == inc+1 && w.now.Sub(n.startedAt) > 500*time.Millisecond && o.m.isMember(n.id) {
				return // back, and heard meanwhile
			}
			w.logf("%s sees %s leave", o.name(), n.name())
			o.step(Left{Peer: n.id})
			if n.up {
				o.hear(n)
			}
		})
	}
}

// quiet: nothing waits in its outboxes or for an answer.
func (n *simNode) quiet() bool {
	for _, items := range n.durable.outbox {
		if len(items) > 0 {
			return false
		}
	}
	for _, u := range n.durable.urls {
		if len(u) > 0 {
			return false
		}
	}
	return len(n.waits) == 0 && n.handing == ""
}

// ---- the driver: actions as node carries them out ------------------------------

func (n *simNode) step(ev Event) {
	if !n.up {
		return
	}
	n.m.Step(n.w.now, ev)
	for {
		acts := n.m.Ready()
		if len(acts) == 0 {
			return
		}
		for _, a := range acts {
			n.do(a)
		}
	}
}

func (n *simNode) do(a Action) {
	w := n.w
	d := n.durable
	switch a := a.(type) {
	case SaveMember:
		if a.In {
			d.saved.Members = appendNew(d.saved.Members, a.Peer)
		} else {
			d.saved.Members = slices.DeleteFunc(d.saved.Members, func(p peer.ID) bool { return p == a.Peer })
		}
	case SaveFounder:
		d.saved.Founders = appendNew(d.saved.Founders, a.Peer)
	case SaveHost:
		if d.saved.Hosts == nil {
			d.saved.Hosts = map[string]Role{}
		}
		if a.Role == None {
			delete(d.saved.Hosts, a.Host)
		} else {
			d.saved.Hosts[a.Host] = a.Role
		}
	case ListHosts:
		n.m.Step(w.now, Hosts{Hosts: slices.Sorted(maps.Keys(d.crawl))})
	case SendManifest:
		w.logf("%s sends %s a manifest %v", n.name(), w.node(a.To).name(), a.Hosts)
		n.send(a.To, func(to *simNode) error {
			var ok []string
			for _, h := range a.Hosts {
				if to.m.Allowed(w.now, KindHandoff, n.id, h) {
					ok = append(ok, h)
				}
			}
			to.step(Manifest{From: n.id, Hosts: ok})
			return nil
		}, func(error) {})
	case HandOff:
		n.handOff(a)
	case Abandon:
		w.logf("%s abandons %s", n.name(), a.Host)
		n.handing = a.Host
		if cs := d.crawl[a.Host]; cs != nil {
			for _, u := range slices.Sorted(maps.Keys(cs.queued)) {
				n.forward(fwdURL{url: u})
			}
			if len(cs.queued) == 0 && a.Refused && len(cs.done) > 0 {
				// node's hostData.abandon: the owner hears of the host
				n.forward(fwdURL{url: slices.Sorted(maps.Keys(cs.done))[0]})
			}
		}
		delete(d.crawl, a.Host)
		n.handing = ""
		n.m.Step(w.now, HandedOff{Host: a.Host})
	case ForgetHost:
		w.logf("%s forgets %s", n.name(), a.Host)
		for u := range d.index {
			if urlHost(u) == a.Host {
				delete(d.index, u)
			}
		}
	case Hint:
		w.hints++
		w.logf("%s hints %s about %v", n.name(), w.node(a.To).name(), a.Hosts)
		n.send(a.To, func(to *simNode) error {
			var ok []string
			for _, h := range a.Hosts {
				if to.m.Allowed(w.now, KindReplica, n.id, h) {
					ok = append(ok, h)
				}
			}
			to.step(Hinted{From: n.id, Hosts: ok})
			return nil
		}, func(error) {})
	case Pull:
		n.pull(a)
	case TakeOver:
		n.takeOver(a.Host)
	case Release:
		if done := n.waits[a.ID]; done != nil {
			delete(n.waits, a.ID)
			done(a.Missed)
		}
	case Copy:
		u := n.copies[a.ID]
		n.enqueue(Target{Peer: a.To}, u, true)
		w.logf("%s copies %s to %s", n.name(), u, w.node(a.To).name())
		n.m.Step(w.now, Await{ID: a.ID, Host: urlHost(u), Pending: map[peer.ID]uint64{a.To: d.seq}})
	case DropOutbox:
		delete(d.outbox, a.Peer)
	default:
		panic(fmt.Sprintf("unknown action %T", a))
	}
}

func appendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// send delivers a message after a network delay: deliver runs at to if it
// is up and n is a member of its view; answer gets deliver's error, or an
// error when to did not take the message (after sendTimeout).
func (n *simNode) send(to peer.ID, deliver func(to *simNode) error, answer func(error)) {
	w := n.w
	dest := w.node(to)
	n.later(w.jitter(2*time.Millisecond, 150*time.Millisecond), func() {
		if dest == nil || !dest.up || !dest.m.isMember(n.id) {
			n.later(sendTimeout, func() { answer(errors.New("not delivered")) })
			return
		}
		err := deliver(dest)
		n.later(w.jitter(2*time.Millisecond, 100*time.Millisecond), func() { answer(err) })
	})
}

// crawlOnce starts a request for a queued URL of a host this node may
// crawl (two at a time at most).
func (n *simNode) crawlOnce() {
	if len(n.fetching) >= 2 {
		return
	}
	w := n.w
	hosts := slices.Sorted(maps.Keys(n.durable.crawl))
	if len(hosts) == 0 {
		return
	}
	off := w.rng.IntN(len(hosts))
	for i := range hosts {
		h := hosts[(i+off)%len(hosts)]
		cs := n.durable.crawl[h]
		if len(cs.queued) == 0 || !n.m.MayCrawl(w.now, h) {
			continue
		}
		for _, u := range slices.Sorted(maps.Keys(cs.queued)) {
			if n.fetching[u] != nil {
				continue
			}
			f := w.fetch(n, u)
			n.fetching[u] = f
			n.later(w.jitter(20*time.Millisecond, 300*time.Millisecond), func() {
				delete(n.fetching, u)
				// The response is in: the URL is done and waits to be
				// processed, in one transaction.
				if cs := n.durable.crawl[h]; cs != nil {
					delete(cs.queued, u)
					cs.done[u] = true
				}
				n.durable.processing[u] = f
				n.later(w.jitter(time.Millisecond, 40*time.Millisecond), func() { n.store(u, f) })
			})
			return
		}
	}
}

// store is the sink's Store: the item goes to the outbox of each target,
// the page into the index, and the wait for the replicas begins; once it
// ends the links are queued or forwarded.
func (n *simNode) store(u string, f *fetchRec) {
	w := n.w
	d := n.durable
	if n.storing[u] != nil {
		return
	}
	n.storing[u] = f
	h := urlHost(u)
	pending := map[peer.ID]uint64{}
	var names []string
	for _, t := range n.m.Targets(w.now, h) {
		n.enqueue(t, u, true)
		names = append(names, fmt.Sprintf("%s(wait %v)", w.node(t.Peer).name(), t.Wait))
		if t.Wait {
			pending[t.Peer] = d.seq
		}
	}
	w.logf("%s stores %s for %v", n.name(), u, names)
	d.index[u] = true
	n.nextWait++
	id := n.nextWait
	n.copies[id] = u
	n.waits[id] = func(missed []peer.ID) {
		delete(n.copies, id)
		w.logf("%s stored %s (missed %v)", n.name(), u, missed)
		delete(n.storing, u)
		delete(d.processing, u)
		f.stored, f.storedAt = true, w.now
		n.queueLinks(u)
	}
	n.step(Await{ID: id, Host: h, Pending: pending})
}

func (n *simNode) enqueue(t Target, u string, page bool) {
	d := n.durable
	d.seq++
	d.outbox[t.Peer] = append(d.outbox[t.Peer], outboxItem{seq: d.seq, url: u, page: page, view: n.m.Members(), newOwner: t.NewOwner})
}

// replicate sends an item to the host's replicas without a wait.
func (n *simNode) replicate(u string, page bool) {
	for _, t := range n.m.Targets(n.w.now, urlHost(u)) {
		n.enqueue(t, u, page)
	}
}

// queueLinks queues the links of a stored page on hosts this node owns,
// and forwards the others.
func (n *simNode) queueLinks(u string) {
	for _, l := range links(u) {
		if n.owns(urlHost(l)) {
			n.add(l)
		} else {
			n.forward(fwdURL{url: l, source: urlHost(u)})
		}
	}
}

func (n *simNode) owns(h string) bool { return n.m.owner(h) == n.id }

// add puts u in the frontier unless it was seen.
func (n *simNode) add(u string) {
	if cs := n.crawlState(urlHost(u)); !cs.done[u] {
		cs.queued[u] = true
	}
}

// crawlState is the crawler's state of h, made if it had none.
func (n *simNode) crawlState(h string) *crawlState {
	cs := n.durable.crawl[h]
	if cs == nil {
		cs = &crawlState{queued: map[string]bool{}, done: map[string]bool{}}
		n.durable.crawl[h] = cs
	}
	return cs
}

// forward is p2p's Forward: durable, to the owner by this node's view,
// retried, passed on by a receiver that does not own it.
func (n *simNode) forward(r fwdURL) {
	if n.owns(urlHost(r.url)) {
		n.receiveURL(r)
		return
	}
	o := n.m.owner(urlHost(r.url))
	n.durable.urls[o] = append(n.durable.urls[o], r)
}

// urlsFrom is node's filter of forwarded records: a relayed record from
// a member near its host, a link from the crawler of its source host, a
// seed from anyone. What it refuses is dropped, as node drops it.
func (n *simNode) urlsFrom(from peer.ID, r fwdURL) bool {
	switch {
	case r.hops > 0:
		return n.m.Allowed(n.w.now, KindRelay, from, urlHost(r.url))
	case r.source == "":
		return true
	}
	return n.m.Allowed(n.w.now, KindLink, from, r.source)
}

// receiveURL takes a URL a member forwarded: queued (and kept by the
// host's replicas, so that a takeover queues it again should this node
// die before fetching it) if this node owns its host, passed on if not.
func (n *simNode) receiveURL(r fwdURL) {
	u := r.url
	if !n.owns(urlHost(u)) {
		r.hops++
		n.forward(r)
		return
	}
	if cs := n.crawlState(urlHost(u)); !cs.done[u] && !cs.queued[u] {
		cs.queued[u] = true
		n.replicate(u, false)
	}
}

// pump delivers the outboxes: one batch in flight per peer, backing off
// after a failure.
func (n *simNode) pump() {
	w := n.w
	d := n.durable
	for _, p := range slices.Sorted(maps.Keys(d.urls)) {
		urls := d.urls[p]
		if len(urls) == 0 {
			delete(d.urls, p)
			continue
		}
		if n.sendingURLs[p] {
			continue
		}
		if !n.m.isMember(p) {
			delete(d.urls, p) // re-routed by the current view
			for _, r := range urls {
				n.forward(r)
			}
			continue
		}
		batch := slices.Clone(urls)
		n.sendingURLs[p] = true
		n.send(p, func(to *simNode) error {
			for _, r := range batch {
				if !to.urlsFrom(n.id, r) {
					w.logf("%s drops %s from %s (source %q, hops %d)", to.name(), r.url, n.name(), r.source, r.hops)
					continue
				}
				to.receiveURL(r)
			}
			return nil
		}, func(err error) {
			n.sendingURLs[p] = false
			if err == nil { // they leave the outbox once acknowledged
				d.urls[p] = d.urls[p][len(batch):]
			}
		})
	}
	for _, p := range slices.Sorted(maps.Keys(d.outbox)) {
		items := d.outbox[p]
		if len(items) == 0 || n.sending[p] || w.now.Before(n.retryAt[p]) {
			continue
		}
		batch := slices.Clone(items[:min(len(items), 32)])
		last := batch[len(batch)-1].seq
		n.sending[p] = true
		n.send(p, func(to *simNode) error { return to.receiveReplica(n.id, batch) }, func(err error) {
			n.sending[p] = false
			if err != nil {
				n.backoff[p] = min(max(2*n.backoff[p], 200*time.Millisecond), 10*time.Second)
				n.retryAt[p] = w.now.Add(n.backoff[p])
				n.step(Undelivered{Peer: p})
				return
			}
			n.backoff[p], n.retryAt[p] = 0, time.Time{}
			d.outbox[p] = slices.DeleteFunc(d.outbox[p], func(it outboxItem) bool { return it.seq <= last })
			n.step(Delivered{Peer: p, Seq: last})
		})
	}
}

// receiveReplica stores the items the sender may send and drops the rest
// (acknowledged all the same, as node does). A refusal is a bug when the
// receiver's view is the one the sender chose it by.
func (n *simNode) receiveReplica(from peer.ID, items []outboxItem) error {
	d := n.durable
	for _, it := range items {
		h := urlHost(it.url)
		if !n.m.Allowed(n.w.now, KindReplica, from, h) {
			if it.newOwner {
				n.w.newOwnerRefused++
			} else if it.view != nil && slices.Equal(it.view, n.m.Members()) {
				n.w.fail("%s refuses %s from %s although it judges by the view the item was sent by", n.name(), it.url, n.w.node(from).name())
			}
			continue
		}
		if it.newOwner {
			n.w.newOwnerTaken++
		}
		if it.page {
			d.index[it.url] = true
			delete(d.queuedAt, it.url)
		} else if !d.index[it.url] {
			d.queuedAt[it.url] = true
		}
		n.step(ReplicaStored{Host: h})
	}
	return nil
}

// handOff sends the host's pages and crawl state to its new owner, then
// drops the crawl state.
func (n *simNode) handOff(a HandOff) {
	w := n.w
	d := n.durable
	n.handing = a.Host
	w.handoffs++
	var pages []string
	for _, u := range slices.Sorted(maps.Keys(d.index)) {
		if urlHost(u) == a.Host {
			pages = append(pages, u)
		}
	}
	var exp *crawlState
	if cs := d.crawl[a.Host]; cs != nil {
		exp = &crawlState{queued: maps.Clone(cs.queued), done: maps.Clone(cs.done)}
	}
	w.logf("%s hands %s to %s (%d pages)", n.name(), a.Host, w.node(a.To).name(), len(pages))
	n.send(a.To, func(to *simNode) error {
		if !to.m.Allowed(w.now, KindHandoff, n.id, a.Host) {
			return errRefused
		}
		for _, u := range pages {
			to.durable.index[u] = true
			to.replicate(u, true)
		}
		if exp != nil {
			cs := to.crawlState(a.Host)
			for u := range exp.done {
				cs.done[u] = true
				delete(cs.queued, u)
			}
			for _, u := range slices.Sorted(maps.Keys(exp.queued)) {
				if !cs.done[u] {
					cs.queued[u] = true
					to.replicate(u, false)
				}
			}
		}
		to.step(HandedIn{Host: a.Host, From: n.id})
		return nil
	}, func(err error) {
		n.handing = ""
		if err == nil {
			delete(d.crawl, a.Host)
		}
		n.step(HandedOff{Host: a.Host, To: a.To, Err: err, Refused: errors.Is(err, errRefused)})
	})
}

// pull asks each member for what it holds of the host and this node does
// not; Pulled once all answered or timed out.
func (n *simNode) pull(a Pull) {
	w := n.w
	w.logf("%s pulls %s from %v", n.name(), a.Host, a.From)
	left := len(a.From)
	doneOne := func() {
		if left--; left == 0 {
			n.step(Pulled{Host: a.Host})
		}
	}
	if left == 0 {
		n.later(0, func() { n.step(Pulled{Host: a.Host}) })
		return
	}
	have := maps.Clone(n.durable.index) // the URLs it holds pages of: queued ones come every time
	for _, p := range a.From {
		answered := false
		n.later(pullTimeout, func() {
			if !answered {
				answered = true
				doneOne()
			}
		})
		n.send(p, func(from *simNode) error {
			if !from.m.Allowed(w.now, KindPull, n.id, a.Host) {
				return errors.New("pull refused")
			}
			var items []outboxItem
			for _, u := range slices.Sorted(maps.Keys(from.durable.index)) {
				if urlHost(u) == a.Host && !have[u] {
					items = append(items, outboxItem{url: u, page: true})
				}
			}
			queued := maps.Clone(from.durable.queuedAt)
			if cs := from.durable.crawl[a.Host]; cs != nil {
				maps.Copy(queued, cs.queued) // what it crawls itself
			}
			for _, u := range slices.Sorted(maps.Keys(queued)) {
				if urlHost(u) == a.Host && !have[u] {
					items = append(items, outboxItem{url: u})
				}
			}
			// The answer is stored at the puller before the pull is
			// acknowledged.
			if n.up {
				return n.receiveReplica(from.id, items)
			}
			return errors.New("puller gone")
		}, func(error) {
			if !answered {
				answered = true
				doneOne()
			}
		})
	}
}

// takeOver marks the host's stored pages fetched and queues their links.
func (n *simNode) takeOver(h string) {
	w := n.w
	d := n.durable
	w.takeovers++
	var pages []string
	for _, u := range slices.Sorted(maps.Keys(d.index)) {
		if urlHost(u) == h {
			pages = append(pages, u)
		}
	}
	w.logf("%s takes %s over (%d pages); view %v, gone %v, recent %v, unseen %v, reps %v", n.name(), h, len(pages), w.names(n.m.Members()), w.names(slices.Sorted(maps.Keys(n.m.gone))), n.m.ownsAmongRecent(w.now, h), w.names(slices.Sorted(maps.Keys(n.m.unseen))), w.names(w.space.Replicas(w.upIDs(), h, 6)))
	cs := n.crawlState(h)
	for _, u := range pages {
		cs.done[u] = true
		delete(cs.queued, u)
	}
	for _, u := range pages {
		for _, l := range links(u) {
			if n.owns(urlHost(l)) {
				n.add(l)
			} else {
				n.forward(fwdURL{url: l, source: h})
			}
		}
	}
	for _, u := range slices.Sorted(maps.Keys(d.queuedAt)) {
		if urlHost(u) == h {
			delete(d.queuedAt, u)
			n.add(u)
		}
	}
	n.step(TookOver{Host: h})
}

func (w *world) dumpHost(h string) {
	for _, n := range w.nodes {
		if !n.up {
			continue
		}
		cnt := 0
		for u := range n.durable.index {
			if urlHost(u) == h {
				cnt++
			}
		}
		cs := n.durable.crawl[h]
		w.logf("  %s: %d pages of %s, crawl state %v, replica %v, owner by view %s, may crawl %v, members %d", n.name(), cnt, h, cs != nil, n.m.hosts.role[h], w.node(n.m.owner(h)).name(), n.m.MayCrawl(w.now, h), len(n.m.Members()))
	}
}

func (w *world) names(ids []peer.ID) []string {
	var out []string
	for _, p := range ids {
		if n := w.node(p); n != nil {
			out = append(out, n.name())
		} else {
			out = append(out, string(p))
		}
	}
	return out
}
