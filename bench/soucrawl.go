package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sou/crawl"
	"sou/index"
	"sou/node"
	"sou/testnet/simweb"
)

// CrawlResult is one pipeline's crawl of the simulated web.
type CrawlResult struct {
	Elapsed  time.Duration // from the first seed to the last page searchable
	Fetched  int64         // page requests that got a response
	Indexed  int64         // pages handed to the index
	Requests int           // requests the simulated web logged (robots.txt and sitemaps included)
	Bytes    int64         // on disk after close
	// AnchorUpdates counts the pages whose anchor field was indexed
	// again for new anchor text (sou only).
	AnchorUpdates uint64
	// LastTenthRate is the rate at which the last tenth of the pages
	// were handed to the index over that of the first tenth (sou only:
	// colly + Bleve indexes in batches, whose commits make no rate; 0
	// below 1,000 pages): whether the pipeline slows as its index grows.
	LastTenthRate float64
}

// PagesPerSecond is indexed pages over wall time.
func (r CrawlResult) PagesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Indexed) / r.Elapsed.Seconds()
}

// singleNodeSink is node/sink.go without the network: this node owns every
// host, so nothing is forwarded and no fingerprint is claimed remotely.
type singleNodeSink struct {
	ix      *index.Index // nil: count pages only (crawl-only diagnostic)
	indexed atomic.Int64
	marks   rateMarks
}

// handed counts a page handed to the index.
func (s *singleNodeSink) handed() { s.marks.tick(s.indexed.Add(1)) }

// rateMarks records when every markEvery-th page was handed to an index,
// for CrawlResult.LastTenthRate. Its zero value is ready once start is set.
type rateMarks struct {
	start time.Time
	mu    sync.Mutex
	marks []time.Duration // since start
}

const markEvery = 100

// tick notes that n pages have been handed over.
func (m *rateMarks) tick(n int64) {
	if n%markEvery == 0 {
		m.mu.Lock()
		m.marks = append(m.marks, time.Since(m.start))
		m.mu.Unlock()
	}
}

// lastTenthRate is CrawlResult.LastTenthRate.
func (m *rateMarks) lastTenthRate() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	slices.Sort(m.marks) // ticks of concurrent pages may land out of order
	n := len(m.marks)
	tenth := n / 10
	if tenth == 0 {
		return 0
	}
	first := m.marks[tenth-1]
	last := m.marks[n-1] - m.marks[n-1-tenth]
	if last <= 0 {
		return 0
	}
	return first.Seconds() / last.Seconds()
}

func (s *singleNodeSink) Owns(string) bool { return true }

func (s *singleNodeSink) Forward(context.Context, []crawl.Discovered) error { return nil }

func (s *singleNodeSink) Store(ctx context.Context, p *crawl.Page) error {
	if p.Status != http.StatusOK || p.NoIndex || p.DuplicateOf != "" {
		return nil
	}
	if s.ix == nil {
		s.handed()
		return nil
	}
	if err := s.ix.Put(ctx, node.DocumentFromPage(p)); err != nil {
		return fmt.Errorf("index %s: %w", p.URL, err)
	}
	s.handed()
	anchors := map[string][]string{}
	for _, l := range p.Links {
		if l.Anchor == "" || l.NoFollow || l.URL == p.URL {
			continue
		}
		anchors[l.URL] = append(anchors[l.URL], l.Anchor)
	}
	if err := s.ix.AddAnchorsBatch(ctx, anchors); err != nil {
		return fmt.Errorf("anchors of %s: %w", p.URL, err)
	}
	return nil
}

// CrawlSou crawls the simulated web with sou's crawler (FastConfig with
// the given number of fetch workers, DNS through the web's server) and
// indexes every stored page into a fresh sou index in dir, as a node does.
// It returns when the crawler is idle and the index flushed. With
// withIndex false the pages are counted, not indexed: the crawler's own
// share of the time.
func CrawlSou(ctx context.Context, web *simweb.Web, dir string, workers int, withIndex bool, log *slog.Logger) (CrawlResult, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := OpenBadger(dir)
	if err != nil {
		return CrawlResult{}, err
	}
	opts := node.IndexOptions()
	if v := os.Getenv("SOU_BENCH_FORM_CACHE_MB"); v != "" {
		mb, err := strconv.Atoi(v)
		if err != nil {
			_ = db.Close()
			return CrawlResult{}, fmt.Errorf("SOU_BENCH_FORM_CACHE_MB=%q: want MiB (0: off)", v)
		}
		opts.FormCacheBytes = mb << 20
	}
	ix, err := index.Open(db, opts, log)
	if err != nil {
		_ = db.Close()
		return CrawlResult{}, fmt.Errorf("open sou index: %w", err)
	}
	cfg := crawl.FastConfig()
	if workers > 0 {
		cfg.Workers = workers
	}
	cfg.Resolver.Server = web.DNSAddr()
	cfg.Fetch.AllowLoopback = true
	sink := &singleNodeSink{}
	if withIndex {
		sink.ix = ix
	}
	c, err := crawl.New(db, cfg, sink, log)
	if err != nil {
		_ = ix.Close()
		_ = db.Close()
		return CrawlResult{}, fmt.Errorf("new crawler: %w", err)
	}
	reqBefore := len(web.Requests(0))
	start := time.Now()
	sink.marks.start = start
	seeds := make([]crawl.Discovered, 0, len(web.Seeds()))
	for _, s := range web.Seeds() {
		seeds = append(seeds, crawl.Discovered{URL: s})
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	err = c.Add(ctx, seeds)
	if err == nil {
		err = waitIdle(ctx, c)
	}
	if err == nil {
		err = ix.Flush(ctx)
	}
	elapsed := time.Since(start)
	stop()
	<-done
	st := c.Stats()
	res := CrawlResult{Elapsed: elapsed, Fetched: st.Fetched, Indexed: sink.indexed.Load(), Requests: len(web.Requests(0)) - reqBefore}
	ist := ix.Stats()
	res.AnchorUpdates = ist.AnchorUpdates
	res.LastTenthRate = sink.marks.lastTenthRate()
	if cerr := c.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close crawler: %w", cerr)
	}
	if cerr := ix.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close index: %w", cerr)
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close badger: %w", cerr)
	}
	if err != nil {
		return res, err
	}
	if len(st.ErrorsByClass) > 0 {
		var parts []string
		for k, v := range st.ErrorsByClass {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
		log.Info("sou crawl errors", "errors", strings.Join(parts, " "))
	}
	res.Bytes, err = DiskUsage(dir)
	return res, err
}

// waitIdle polls until the crawler has fetched something and then stays
// idle (nothing in flight, nothing due, nothing awaiting processing) for
// three consecutive polls.
func waitIdle(ctx context.Context, c *crawl.Crawler) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	quiet := 0
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("sou crawl did not finish: %w", ctx.Err())
		case <-t.C:
		}
		if c.Stats().Fetched == 0 || !c.Idle() {
			quiet = 0
			continue
		}
		quiet++
		if quiet >= 3 {
			return nil
		}
	}
}
