package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/storage"

	"sou/testnet/simweb"
)

// webTransport sends every host ending in suffix (".sim.test" for the
// synthetic web, ".test" for the corpus) to the web's HTTP listener at
// addr (what the web's DNS would answer) and refuses anything else.
func webTransport(addr, suffix string, conns int) *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, hostport string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(hostport)
			if err != nil {
				host = hostport
			}
			if !strings.HasSuffix(strings.ToLower(host), suffix) {
				return nil, fmt.Errorf("colly baseline: %s is outside the simulated web", host)
			}
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        4 * conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
	}
}

// simTransport is webTransport for an in-process synthetic web.
func simTransport(web *simweb.Web, conns int) *http.Transport {
	return webTransport(web.HTTPAddr(), ".sim.test", conns)
}

// politeTransport holds every request until its host has no other request
// in flight and fewer than workers requests are in flight in all: sou's
// crawler politeness (one connection per host) and fetch worker count,
// imposed on colly. colly's per-host LimitRules (collyRun.onePerHost)
// queue its page requests; this catches what they do not: robots.txt
// requests, which colly sends around its limits, and the workers bound.
type politeTransport struct {
	next    http.RoundTripper
	workers chan struct{}
	mu      sync.Mutex
	hosts   map[string]chan struct{}
	count   atomic.Int64
	// first and last are when the first request went out and the last
	// response was read (UnixNano): the span the web's log would show.
	first, last atomic.Int64
}

// span is the time from the first request to the last response read.
func (t *politeTransport) span() time.Duration {
	return time.Duration(t.last.Load() - t.first.Load())
}

func newPoliteTransport(next http.RoundTripper, workers int) *politeTransport {
	return &politeTransport{next: next, workers: make(chan struct{}, workers), hosts: map[string]chan struct{}{}}
}

func (t *politeTransport) hostSlot(host string) chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.hosts[host]
	if !ok {
		s = make(chan struct{}, 1)
		t.hosts[host] = s
	}
	return s
}

func (t *politeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	host := t.hostSlot(strings.ToLower(r.URL.Host))
	select {
	case host <- struct{}{}:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	select {
	case t.workers <- struct{}{}:
	case <-r.Context().Done():
		<-host
		return nil, r.Context().Err()
	}
	t.count.Add(1)
	t.first.CompareAndSwap(0, time.Now().UnixNano())
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		<-t.workers
		<-host
		return nil, err
	}
	// The slot is held until the body is read and closed, as one
	// connection per host means.
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() {
		for now := time.Now().UnixNano(); ; {
			if l := t.last.Load(); l >= now || t.last.CompareAndSwap(l, now) {
				break
			}
		}
		<-t.workers
		<-host
	}}
	return resp, nil
}

type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// collyRun says what CrawlColly's pipeline crawls and how.
type collyRun struct {
	seeds     []string
	transport http.RoundTripper
	urlFilter *regexp.Regexp
	// workers bounds colly's requests in flight over all hosts (its one
	// LimitRule); 0 leaves the bound to the transport.
	workers int
	// onePerHost lists hosts (as in URLs: host[:port]) that get a
	// LimitRule of their own, one request in flight each. colly waits for
	// a rule's slot before its request timeout starts, so a long queue
	// on one host does not time out (a transport that waited would).
	onePerHost []string
	// requests counts what the web served, robots.txt included.
	requests func() int
}

// CrawlColly is the baseline pipeline on an in-process synthetic web:
// colly (async, one LimitRule with Parallelism = workers over all hosts,
// robots.txt obeyed, its own visited set for URL dedup, fragments stripped
// before Visit) extracts title and body text with goquery and feeds Bleve
// in batches of bleveBatchSize from one indexing goroutine. Timed from the
// first seed until the last batch is searchable. With withIndex false the
// extracted documents are counted, not indexed: colly's own share of the
// time.
func CrawlColly(ctx context.Context, web *simweb.Web, dir string, workers int, withIndex bool) (CrawlResult, error) {
	return crawlColly(ctx, collyRun{
		seeds:     web.Seeds(),
		transport: simTransport(web, workers),
		urlFilter: regexp.MustCompile(`^https?://[^/]+\.sim\.test(:\d+)?(/|$)`),
		workers:   workers,
		requests:  func() int { return len(web.Requests(0)) },
	}, dir, withIndex)
}

// visitedOnce is colly's in-memory storage with its visited check made
// atomic. colly asks IsVisited and then records Visited, two calls, so
// the goroutines of an async collector that parse pages sharing a
// navigation all find a link unvisited and all fetch it, up to once per
// worker, each copy parsed and indexed again. colly calls IsVisited only
// right before Visited, in requestCheck and its redirect check (and in
// HasVisited, which these benchmarks do not call), so answering it by
// test-and-set gives each URL one fetch, the baseline's best.
type visitedOnce struct {
	*storage.InMemoryStorage
	mu   sync.Mutex
	seen map[uint64]struct{}
}

func newVisitedOnce() *visitedOnce {
	return &visitedOnce{InMemoryStorage: &storage.InMemoryStorage{}, seen: map[uint64]struct{}{}}
}

// IsVisited reports whether id was seen before and marks it seen.
func (s *visitedOnce) IsVisited(id uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.seen[id]
	s.seen[id] = struct{}{}
	return ok, nil
}

// Visited does nothing: IsVisited has recorded id.
func (s *visitedOnce) Visited(uint64) error { return nil }

func crawlColly(ctx context.Context, run collyRun, dir string, withIndex bool) (CrawlResult, error) {
	b, err := newBleve(dir)
	if err != nil {
		return CrawlResult{}, err
	}
	c := colly.NewCollector(
		colly.Async(true),
		colly.UserAgent(simweb.UserAgent),
		colly.URLFilters(run.urlFilter),
		colly.StdlibContext(ctx),
	)
	c.IgnoreRobotsTxt = false
	if err := c.SetStorage(newVisitedOnce()); err != nil {
		_ = b.Close()
		return CrawlResult{}, fmt.Errorf("colly storage: %w", err)
	}
	c.WithTransport(run.transport)
	c.SetRequestTimeout(30 * time.Second)
	var rules []*colly.LimitRule
	for _, h := range run.onePerHost {
		rules = append(rules, &colly.LimitRule{DomainGlob: h, Parallelism: 1})
	}
	if run.workers > 0 {
		rules = append(rules, &colly.LimitRule{DomainGlob: "*", Parallelism: run.workers})
	}
	if err := c.Limits(rules); err != nil {
		_ = b.Close()
		return CrawlResult{}, fmt.Errorf("colly limit: %w", err)
	}
	var fetched, indexed atomic.Int64
	docs := make(chan bleveDoc, 2*bleveBatchSize)
	c.OnResponse(func(*colly.Response) { fetched.Add(1) })
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		u := e.Request.AbsoluteURL(e.Attr("href"))
		if i := strings.IndexByte(u, '#'); i >= 0 {
			u = u[:i]
		}
		if u != "" && e.Attr("rel") != "nofollow" {
			_ = e.Request.Visit(u) // already visited, filtered or disallowed: nothing to do
		}
	})
	c.OnHTML("html", func(e *colly.HTMLElement) {
		d := bleveDoc{
			URL:   e.Request.URL.String(),
			Host:  strings.ToLower(e.Request.URL.Host),
			Title: strings.Join(strings.Fields(e.ChildText("head > title")), " "),
			Body:  strings.Join(strings.Fields(e.DOM.Find("body").Text()), " "),
		}
		if !withIndex {
			indexed.Add(1)
			return
		}
		select {
		case docs <- d:
		case <-ctx.Done():
		}
	})
	indexErr := make(chan error, 1)
	go func() {
		batch := b.idx.NewBatch()
		var err error
		for d := range docs {
			if err != nil {
				continue // drain so colly's callbacks never block forever
			}
			if err = batch.Index(d.URL, d); err != nil {
				continue
			}
			indexed.Add(1)
			if batch.Size() >= bleveBatchSize {
				err = b.idx.Batch(batch)
				batch.Reset()
			}
		}
		if err == nil && batch.Size() > 0 {
			err = b.idx.Batch(batch)
		}
		indexErr <- err
	}()
	reqBefore := run.requests()
	start := time.Now()
	for _, s := range run.seeds {
		if err := c.Visit(s); err != nil && !seedSkipped(err) {
			close(docs)
			<-indexErr
			_ = b.Close()
			return CrawlResult{}, fmt.Errorf("colly visit seed %s: %w", s, err)
		}
	}
	c.Wait()
	close(docs)
	err = <-indexErr
	elapsed := time.Since(start)
	res := CrawlResult{Elapsed: elapsed, Fetched: fetched.Load(), Indexed: indexed.Load(), Requests: run.requests() - reqBefore}
	if cerr := b.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return res, fmt.Errorf("colly+bleve: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.Bytes, err = DiskUsage(dir)
	return res, err
}

// seedSkipped is a Visit error that only says the seed is not to be
// fetched: listed twice, or disallowed by its host's robots.txt.
func seedSkipped(err error) bool {
	var visited *colly.AlreadyVisitedError
	return errors.As(err, &visited) || errors.Is(err, colly.ErrRobotsTxtBlocked)
}

// TestVisitedOnce attacks the check that colly's own storage races:
// many goroutines asking about one URL at once, one of them first.
func TestVisitedOnce(t *testing.T) {
	s := newVisitedOnce()
	if err := s.Init(); err != nil {
		t.Fatal(err)
	}
	var unvisited atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for id := range uint64(200) {
				if v, err := s.IsVisited(id); err != nil {
					t.Error(err)
				} else if !v {
					unvisited.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := unvisited.Load(); got != 200 {
		t.Fatalf("%d first visits of 200 URLs asked by 64 goroutines, want 200", got)
	}
}
