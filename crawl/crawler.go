package crawl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Discovered is a URL found somewhere (a link, a redirect, a sitemap, a seed,
// a peer) with the OPIC cash it carries and its link depth from a seed.
type Discovered struct {
	URL        string
	Anchor     string
	SourceHost string // "" for seeds
	Cash       float64
	Depth      int
	// Base is set when URL is an external script to fetch for its links
	// (see Link.Base), which resolve against Base. Such a URL is no page:
	// it is fetched once, neither stored nor counted against the host's
	// page budget.
	Base string
}

// Page is one fetched and parsed document handed to the node.
type Page struct {
	URL         string
	Host        string
	Status      int
	FetchedAt   time.Time
	ContentType string
	Charset     string
	Lang        string
	Header      http.Header
	Raw         []byte // body after content-encoding decoding (cached copy)
	// RawS2 is Raw as one S2 block (github.com/klauspost/compress/s2), as
	// the crawler kept it between fetch and processing: a store can keep
	// it as it is instead of compressing Raw again. Empty when the body was
	// not kept compressed.
	RawS2       []byte
	Title       string
	Headings    []string
	Text        string
	Links       []Link
	ContentHash [16]byte
	SimHash     uint64
	// DuplicateOf: an exact or near duplicate of an earlier stored URL; the
	// node must not index it.
	DuplicateOf string
	NoIndex     bool
	Cash        float64 // OPIC importance accumulated so far (static rank input)
	Depth       int
}

// Sink is how crawl hands its results to the node. Both calls must be
// durable when they return nil.
type Sink interface {
	Owns(hostKey string) bool                              // is this host ours right now
	Forward(ctx context.Context, links []Discovered) error // links on hosts we do not own
	Store(ctx context.Context, p *Page) error              // idempotent per URL
}

// FetchedSink is an optional Sink method: it hears of every request that
// settled a URL without a page to store (a redirect, an error status, a type
// we do not parse, an external script read for its links) and of every
// sitemap fetched, so that a node can tell its replicas what it already
// fetched. Best effort: it must not block.
type FetchedSink interface {
	Fetched(host, url string, sitemap bool)
}

// QueueSink is an optional Sink method: it hears, before they are queued,
// the links to owned hosts of a request that settled a URL without a page
// (a redirect's target, the links an external script names), so that a
// node can keep them where a takeover of their hosts finds them: unlike a
// page's links, nothing stored tells of them. Like Store it may block,
// and the links must be durable when it returns nil; on an error the
// response is processed again.
type QueueSink interface {
	Queue(ctx context.Context, host, url string, links []Discovered) error
}

// SitemapSink is an optional Sink method: it hears of every sitemap read,
// with the URLs of the host it listed and the host's child sitemaps it
// named (a sitemap index), so that a node can tell its replicas what the
// sitemap taught it; a replica taking the host over then needs neither the
// sitemap again nor the URLs only it listed. Best effort: it must not
// block.
type SitemapSink interface {
	SitemapRead(host, url string, listed, children []string)
}

// RobotsConfig controls robots.txt handling.
type RobotsConfig struct {
	// UserAgent is the product token matched against robots.txt groups.
	UserAgent string
	// Expiry: how long fetched rules are used before they are fetched again.
	Expiry time.Duration
	// After a 5xx or network failure the host waits RetryBase, doubling per
	// consecutive failure up to RetryMax. After MaxAttempts consecutive
	// failures the host is parked for GiveUpWait, then the cycle restarts: a
	// host is never crawled without its robots.txt.
	RetryBase, RetryMax time.Duration
	MaxAttempts         int
	GiveUpWait          time.Duration
	// MaxBytes of robots.txt kept (RFC 9309 requires at least 500 KiB).
	MaxBytes int
	// Sitemaps: fetch the host's sitemaps (robots.txt Sitemap: lines on the
	// same host, and /sitemap.xml) once, in the host's politeness slots.
	Sitemaps           bool
	MaxSitemapsPerHost int
}

func (r RobotsConfig) validate() error {
	switch {
	case r.UserAgent == "":
		return errors.New("robots: empty UserAgent")
	case r.Expiry <= 0:
		return fmt.Errorf("robots: Expiry %v <= 0", r.Expiry)
	case r.RetryBase < 0 || r.RetryMax < r.RetryBase:
		return fmt.Errorf("robots: need 0 <= RetryBase <= RetryMax, got %v, %v", r.RetryBase, r.RetryMax)
	case r.MaxAttempts < 1:
		return fmt.Errorf("robots: MaxAttempts %d < 1", r.MaxAttempts)
	case r.GiveUpWait < 0:
		return errors.New("robots: GiveUpWait < 0")
	case r.MaxBytes < 512<<10:
		return fmt.Errorf("robots: MaxBytes %d below the RFC 9309 minimum of 500 KiB", r.MaxBytes)
	case r.MaxSitemapsPerHost < 0:
		return errors.New("robots: MaxSitemapsPerHost < 0")
	}
	return nil
}

// Config of a Crawler. Start from DefaultConfig or FastConfig.
type Config struct {
	// Workers fetch concurrently, each serving one host slot at a time.
	Workers int
	// ProcessWorkers parse, dedup, route and store fetched pages (CPU bound).
	ProcessWorkers int
	Politeness     PolitenessConfig
	Robots         RobotsConfig
	Fetch          FetcherConfig
	Resolver       ResolverConfig
	Filter         FilterConfig
	Recrawl        RecrawlConfig
	// SeedCash is the OPIC cash of a seed (a Discovered without SourceHost
	// and without cash).
	SeedCash float64
	// BloomExpectedURLs sizes the Bloom filter in front of the URL-seen set
	// (1% false positives at that many URLs). 0 disables it.
	BloomExpectedURLs int
	// NearDupDistance: SimHash Hamming distance at or below which a page is
	// a near duplicate.
	NearDupDistance int
	// IdleHorizon: Idle ignores hosts whose timer expires further away than
	// this (parked hosts, long backoffs).
	IdleHorizon time.Duration
	// ShutdownGrace lets fetches in flight finish after Run's context ends,
	// so that a clean stop does not refetch them.
	ShutdownGrace time.Duration
	// Clock is the time source; nil means the real clock.
	Clock Clock
}

// DefaultConfig is polite enough for the real web.
func DefaultConfig() Config {
	return Config{
		Workers:        64,
		ProcessWorkers: 2,
		Politeness: PolitenessConfig{
			DelayFactor:       10,
			MinDelay:          2 * time.Second,
			MaxDelay:          60 * time.Second,
			MaxCrawlDelay:     30 * time.Second,
			CrawlDelayPolicy:  CrawlDelayCap,
			BackoffBase:       30 * time.Second,
			MaxBackoff:        time.Hour,
			ParkAfterTimeouts: 5,
			ParkDuration:      time.Hour,
			MaxParkDuration:   7 * 24 * time.Hour,
			MaxAttempts:       4,
			ErrorDelay:        10 * time.Second,
		},
		Robots: RobotsConfig{
			UserAgent:          "sou",
			Expiry:             24 * time.Hour,
			RetryBase:          time.Minute,
			RetryMax:           30 * time.Minute,
			MaxAttempts:        6,
			GiveUpWait:         6 * time.Hour,
			MaxBytes:           512 << 10,
			Sitemaps:           true,
			MaxSitemapsPerHost: 20,
		},
		Fetch:             DefaultFetcherConfig(),
		Resolver:          DefaultResolverConfig(),
		Filter:            defaultFilter(),
		Recrawl:           DefaultRecrawlConfig(),
		SeedCash:          1,
		BloomExpectedURLs: 10_000_000,
		NearDupDistance:   3,
		IdleHorizon:       5 * time.Minute,
		ShutdownGrace:     5 * time.Second,
	}
}

// defaultFilter bounds link depth so that traps that invent new paths
// forever (calendars) end; real sites rarely need more than 20 clicks.
func defaultFilter() FilterConfig {
	f := DefaultFilterConfig()
	if f.MaxDepth == 0 {
		f.MaxDepth = 20
	}
	return f
}

// FastConfig is for the simulated web of a testnet: no delays between
// requests (still exactly one request in flight per host), short waits after
// failures, loopback and private addresses allowed.
func FastConfig() Config {
	c := DefaultConfig()
	c.Workers = 32
	c.Politeness.DelayFactor = 0
	c.Politeness.MinDelay = 0
	c.Politeness.MaxDelay = 0
	// Crawl-delay is still honoured (a test web uses small ones), up to 1 s.
	c.Politeness.MaxCrawlDelay = time.Second
	c.Politeness.BackoffBase = 50 * time.Millisecond
	c.Politeness.MaxBackoff = 2 * time.Second
	// A host that never answers is parked for longer than IdleHorizon, so
	// it does not keep a test crawl from finishing; simulated servers answer
	// in milliseconds, so short timeouts make dead hosts cheap.
	c.Politeness.ParkAfterTimeouts = 2
	c.Politeness.ParkDuration = time.Minute
	c.Politeness.MaxParkDuration = 30 * time.Minute
	c.Politeness.MaxAttempts = 4
	c.Politeness.ErrorDelay = 50 * time.Millisecond
	c.Fetch.ConnectTimeout = 2 * time.Second
	c.Fetch.FirstByteTimeout = 3 * time.Second
	c.Fetch.TotalTimeout = 5 * time.Second
	c.Robots.RetryBase = 50 * time.Millisecond
	c.Robots.RetryMax = time.Second
	// Longer than IdleHorizon: a host whose robots.txt stays unavailable
	// does not keep the crawl from becoming idle.
	c.Robots.GiveUpWait = 2 * time.Minute
	c.Fetch.AllowLoopback = true
	c.Fetch.AllowPrivate = true
	c.BloomExpectedURLs = 1_000_000
	c.IdleHorizon = 30 * time.Second
	c.ShutdownGrace = time.Second
	return c
}

// Validate reports the first bad setting.
func (c Config) Validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("crawl config: Workers %d < 1", c.Workers)
	case c.ProcessWorkers < 1:
		return fmt.Errorf("crawl config: ProcessWorkers %d < 1", c.ProcessWorkers)
	case !(c.SeedCash > 0):
		return fmt.Errorf("crawl config: SeedCash %v must be > 0", c.SeedCash)
	case c.BloomExpectedURLs < 0:
		return fmt.Errorf("crawl config: BloomExpectedURLs %d < 0", c.BloomExpectedURLs)
	case c.NearDupDistance < 0 || c.NearDupDistance > 64:
		return fmt.Errorf("crawl config: NearDupDistance %d outside 0..64", c.NearDupDistance)
	case c.IdleHorizon < 0 || c.ShutdownGrace < 0:
		return errors.New("crawl config: negative IdleHorizon or ShutdownGrace")
	}
	if err := c.Politeness.validate(); err != nil {
		return fmt.Errorf("crawl config: %w", err)
	}
	if err := c.Robots.validate(); err != nil {
		return fmt.Errorf("crawl config: %w", err)
	}
	if err := c.Recrawl.validate(); err != nil {
		return fmt.Errorf("crawl config: %w", err)
	}
	if c.Fetch.TotalTimeout <= 0 {
		return fmt.Errorf("crawl config: Fetch.TotalTimeout %v <= 0", c.Fetch.TotalTimeout)
	}
	return nil
}

// Stats is a snapshot of the crawler's counters.
type Stats struct {
	Frontier       int64   // URLs queued
	Hosts          int64   // hosts with any state
	ActiveHosts    int64   // hosts with queued URLs
	Fetched        int64   // page requests completed (any status) since start
	ScriptsFetched int64   // external-script requests (link sources, not pages) completed since start
	Stored         int64   // pages handed to Sink.Store since start
	Duplicates     int64   // of which exact or near duplicates
	Forwarded      int64   // links handed to Sink.Forward
	FetchRate      float64 // page requests per second over the last 10 s
	InFlight       int64   // host slots in use
	Processing     int64   // fetched responses waiting for or in processing
	Parked         int64   // hosts parked after timeouts or robots failures
	SkippedHosts   int64   // hosts skipped for a Crawl-delay past the cap
	ExhaustedHosts int64   // hosts at their page budget with URLs left
	RobotsFetched  int64
	// RobotsDisallowed counts queued URLs dropped because robots.txt
	// disallows them (no request was made).
	RobotsDisallowed int64
	// Filtered counts discovered URLs dropped by the filters, by reason.
	Filtered map[string]int64
	// ErrorsByClass counts everything that went wrong, by stable class:
	// fetch errors by ErrorClass ("timeout", "dns", "reset", ...), HTTP
	// statuses that are not 2xx/3xx/304 as "http_<StatusClass>", "parse",
	// "robots_<class>", "sitemap_<class>", "bad_redirect", "store", "forward".
	ErrorsByClass map[string]int64
	// StatusByClass counts every HTTP response by StatusClass.
	StatusByClass map[string]int64
	// Unsettled counts the admission credits held: page, robots.txt and
	// sitemap requests in flight plus responses not yet processed (see
	// admission); UnsettledLimit is its bound now.
	Unsettled, UnsettledLimit int64
	// SoonDue counts the hosts with queued URLs due within IdleHorizon
	// (Idle is false while there is one); Busy names up to busyListed of
	// the hosts in flight or soon due, to tell why a crawl is not idle.
	SoonDue int64
	Busy    []BusyHost `json:",omitempty"`
}

// BusyHost is a host that keeps the crawler from being idle.
type BusyHost struct {
	Host     string
	Queued   int64
	InFlight bool
	// Gated: its last slot found the Sink's MayFetch false (the node
	// holds it back while its ownership moves), and it is asked again.
	Gated bool
	// ReadyAt is when its next slot is due (past: due now).
	ReadyAt time.Time
}

// busyListed bounds Stats.Busy.
const busyListed = 5

// counters are the crawler's event counts.
type counters struct {
	mu       sync.Mutex
	errors   map[string]int64
	statuses map[string]int64
	filtered map[string]int64

	fetched, scriptsFetched, stored, duplicates, forwarded, robotsFetched, robotsDisallowed atomic.Int64

	rate rateWindow
}

func newCounters() *counters {
	return &counters{errors: map[string]int64{}, statuses: map[string]int64{}, filtered: map[string]int64{}}
}

func (c *counters) inc(m map[string]int64, class string) {
	c.mu.Lock()
	m[class]++
	c.mu.Unlock()
}

func (c *counters) err(class string)    { c.inc(c.errors, class) }
func (c *counters) status(class string) { c.inc(c.statuses, class) }
func (c *counters) filter(why string)   { c.inc(c.filtered, why) }

func copyCounts(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// rateWindow counts events in one-second buckets over the last 10 seconds.
type rateWindow struct {
	mu      sync.Mutex
	buckets [10]int64
	secs    [10]int64
}

func (r *rateWindow) add(now time.Time) {
	s := now.Unix()
	r.mu.Lock()
	i := s % 10
	if r.secs[i] != s {
		r.secs[i], r.buckets[i] = s, 0
	}
	r.buckets[i]++
	r.mu.Unlock()
}

func (r *rateWindow) perSecond(now time.Time) float64 {
	s := now.Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for i := range r.buckets {
		if s-r.secs[i] < 10 {
			n += r.buckets[i]
		}
	}
	return float64(n) / 10
}

// Crawler crawls the hosts the node owns. Create it with New, feed it with
// Add, start it with Run.
type Crawler struct {
	db      *badger.DB
	cfg     Config
	sink    Sink
	log     *slog.Logger
	clock   Clock
	front   *frontier
	filter  *Filter
	res     *Resolver
	fetcher *Fetcher
	dups    *NearDupIndex
	count   *counters

	proc        chan procItem
	bodyScratch sync.Pool // compressBody's encoder buffers
	credits     *admission
	procPending atomic.Int64 // entries under c:p/ not yet deleted
	running     atomic.Bool
}

// New opens the crawler's state in db (rebuilding the schedule from the
// persisted frontier) and creates its resolver and fetcher.
func New(db *badger.DB, cfg Config, sink Sink, log *slog.Logger) (*Crawler, error) {
	if db == nil || sink == nil {
		return nil, errors.New("crawl: New needs a database and a sink")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := cfg.Clock
	if clock == nil {
		clock = realClock{}
	}
	filter, err := NewFilter(cfg.Filter)
	if err != nil {
		return nil, fmt.Errorf("crawl filter: %w", err)
	}
	dups, err := NewNearDupIndex(db, cfg.NearDupDistance)
	if err != nil {
		return nil, err
	}
	front, err := newFrontier(db, cfg.Politeness, cfg.Filter.MaxPagesPerHost, clock, cfg.BloomExpectedURLs)
	if err != nil {
		return nil, err
	}
	c := &Crawler{
		db: db, cfg: cfg, sink: sink, log: log.With("component", "crawl"), clock: clock,
		front: front, filter: filter, count: newCounters(),
		dups:    dups,
		proc:    make(chan procItem, 2*cfg.ProcessWorkers),
		credits: newAdmission(cfg.Workers, cfg.ProcessWorkers),
	}
	if err := c.loadRobots(); err != nil {
		_ = front.close()
		return nil, err
	}
	front.startupDelay(clock.Now())
	n, err := c.countProcessing()
	if err != nil {
		_ = front.close()
		return nil, err
	}
	c.procPending.Store(n)
	c.res = NewResolver(cfg.Resolver)
	c.fetcher = NewFetcher(cfg.Fetch, c.res)
	return c, nil
}

// Close releases the resolver, the fetcher and the frontier's sequence
// lease. Call it after Run has returned; the database stays open.
func (c *Crawler) Close() error {
	c.fetcher.Close()
	c.res.Close()
	return c.front.close()
}

// Run crawls until ctx is done and returns nil then. Fetches in flight get
// ShutdownGrace to finish; responses not yet processed stay in the
// processing queue in Badger and are processed by the next Run.
func (c *Crawler) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("crawl: Run called twice")
	}
	defer c.running.Store(false)
	leftover, err := c.leftoverProcessing()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for range c.cfg.ProcessWorkers {
		wg.Go(func() { c.processLoop(ctx) })
	}
	wg.Go(func() { c.replayProcessing(ctx, leftover) })
	wg.Go(func() { c.settleLoop(ctx) })
	if c.cfg.Recrawl.Enabled {
		wg.Go(func() { c.recrawlLoop(ctx) })
	}
	for range c.cfg.Workers {
		wg.Go(func() { c.fetchLoop(ctx) })
	}
	wg.Wait()
	return nil
}

// BeyondDepth reports whether a link at depth is past the depth bound
// (FilterConfig.MaxDepth), so that the crawler refuses it.
func (c *Crawler) BeyondDepth(depth int) bool {
	return c.cfg.Filter.MaxDepth > 0 && depth > c.cfg.Filter.MaxDepth
}

// Add puts owned URLs (seeds, links forwarded by peers) into the frontier.
// URLs already seen only contribute their cash. A Discovered without
// SourceHost and without cash is a seed and gets Config.SeedCash.
func (c *Crawler) Add(ctx context.Context, urls []Discovered) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	items := make([]addItem, 0, len(urls))
	for _, d := range urls {
		if d.SourceHost == "" && d.Cash == 0 {
			d.Cash = c.cfg.SeedCash
		}
		it, ok := c.admit(d)
		if ok {
			items = append(items, it)
		}
	}
	if len(items) == 0 {
		return nil
	}
	if _, err := c.addChunked(items, nil); err != nil {
		return err
	}
	return nil
}

// admit normalises and filters one discovered URL.
func (c *Crawler) admit(d Discovered) (addItem, bool) {
	u, err := NormalizeURL(d.URL, nil)
	if err != nil {
		c.count.filter("bad_url")
		return addItem{}, false
	}
	it, ok := c.admitURL(u, d)
	if ok {
		c.res.Prefetch(u.Hostname())
	}
	return it, ok
}

// admitURL filters a parsed URL and makes its frontier item; callers
// start the DNS prefetch of its host.
func (c *Crawler) admitURL(u *url.URL, d Discovered) (addItem, bool) {
	depth := max(d.Depth, 0)
	check := c.filter.Check
	if d.Base != "" {
		if !validBase(d.Base) {
			c.count.filter("bad_base")
			return addItem{}, false
		}
		check = c.filter.CheckScript
	}
	if reason, ok := check(u, depth); !ok {
		c.count.filter(reason)
		return addItem{}, false
	}
	cash := d.Cash
	if !(cash >= 0) || cash > 1e12 { // NaN, negative or absurd from a peer
		cash = 0
	}
	return addItem{url: u.String(), host: HostKey(u), cash: cash, depth: depth, base: d.Base}, true
}

// maxBaseBytes caps the base URL an external script's entry carries.
const maxBaseBytes = 2048

// validBase reports whether b can be an external script's base: an
// absolute http(s) URL of bounded length.
func validBase(b string) bool {
	if len(b) > maxBaseBytes {
		return false
	}
	u, err := url.Parse(b)
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https")
}

// addChunked adds items with extra in one transaction; when that is too big
// for Badger it adds them in chunks first (re-adding is idempotent, only a
// crash in between could count some cash twice) and runs extra alone.
func (c *Crawler) addChunked(items []addItem, extra func(txn *badger.Txn) error, extraHosts ...string) (addResult, error) {
	res, err := c.front.add(items, extra, extraHosts...)
	if err == nil || !errors.Is(err, badger.ErrTxnTooBig) {
		return res, err
	}
	var total addResult
	chunk := c.front.itemsPerTxn()
	for start := 0; start < len(items); start += chunk {
		r, err := c.front.add(items[start:min(start+chunk, len(items))], nil)
		if err != nil {
			return total, err
		}
		total.New += r.New
		total.Known += r.Known
	}
	if extra != nil {
		if _, err := c.front.add(nil, extra, extraHosts...); err != nil {
			return total, err
		}
	}
	return total, nil
}

// Stats returns a snapshot of the counters.
func (c *Crawler) Stats() Stats {
	now := c.clock.Now()
	fc := c.front.counts(now, c.cfg.IdleHorizon, busyListed)
	c.count.mu.Lock()
	s := Stats{
		ErrorsByClass: copyCounts(c.count.errors),
		StatusByClass: copyCounts(c.count.statuses),
		Filtered:      copyCounts(c.count.filtered),
	}
	c.count.mu.Unlock()
	s.Frontier, s.Hosts, s.ActiveHosts = fc.Queued, fc.Hosts, fc.Active
	s.InFlight, s.Parked, s.SkippedHosts, s.ExhaustedHosts = fc.InFlight, fc.Parked, fc.Skipped, fc.Exhausted
	s.SoonDue, s.Busy = fc.SoonDue, fc.Busy
	s.Fetched = c.count.fetched.Load()
	s.ScriptsFetched = c.count.scriptsFetched.Load()
	s.Stored = c.count.stored.Load()
	s.Duplicates = c.count.duplicates.Load()
	s.Forwarded = c.count.forwarded.Load()
	s.RobotsFetched = c.count.robotsFetched.Load()
	s.RobotsDisallowed = c.count.robotsDisallowed.Load()
	s.Processing = c.procPending.Load()
	held, limit := c.credits.credits()
	s.Unsettled, s.UnsettledLimit = int64(held), int64(limit)
	s.FetchRate = c.count.rate.perSecond(now)
	return s
}

// Idle reports that nothing is in flight or awaiting processing and no host
// with queued URLs becomes due within Config.IdleHorizon (parked hosts,
// hosts at their budget and skipped hosts do not count). Every change of
// that state bumps an epoch after it is complete; a snapshot taken while
// the epoch moved is not trusted, so a page between its fetch and its links
// never looks idle.
func (c *Crawler) Idle() bool {
	before := c.front.epoch.Load()
	if c.procPending.Load() > 0 {
		return false
	}
	fc := c.front.counts(c.clock.Now(), c.cfg.IdleHorizon, 0)
	if fc.InFlight != 0 || fc.SoonDue != 0 || c.procPending.Load() > 0 {
		return false
	}
	return c.front.epoch.Load() == before
}

// pendingAdd changes the processing count and bumps the idle epoch.
func (c *Crawler) pendingAdd(n int64) {
	c.procPending.Add(n)
	c.front.epoch.Add(1)
}
