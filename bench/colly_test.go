package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"

	"sou/testnet/simweb"
)

// simTransport sends every *.sim.test host to the simulated web's HTTP
// listener (what the web's DNS would answer) and refuses anything else.
func simTransport(web *simweb.Web, conns int) *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	addr := web.HTTPAddr()
	return &http.Transport{
		DialContext: func(ctx context.Context, network, hostport string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(hostport)
			if err != nil {
				host = hostport
			}
			if !strings.HasSuffix(strings.ToLower(host), ".sim.test") {
				return nil, fmt.Errorf("colly baseline: %s is outside the simulated web", host)
			}
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        4 * conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
	}
}

// CrawlColly is the baseline pipeline: colly (async, one LimitRule with
// Parallelism = workers over all hosts, robots.txt obeyed, its own visited
// set for URL dedup, fragments stripped before Visit) extracts title and
// body text with goquery and feeds Bleve in batches of bleveBatchSize from
// one indexing goroutine. Timed from the first seed until the last batch
// is searchable. With withIndex false the extracted documents are counted,
// not indexed: colly's own share of the time.
func CrawlColly(ctx context.Context, web *simweb.Web, dir string, workers int, withIndex bool) (CrawlResult, error) {
	b, err := newBleve(dir)
	if err != nil {
		return CrawlResult{}, err
	}
	c := colly.NewCollector(
		colly.Async(true),
		colly.UserAgent(simweb.UserAgent),
		colly.URLFilters(regexp.MustCompile(`^https?://[^/]+\.sim\.test(:\d+)?(/|$)`)),
		colly.StdlibContext(ctx),
	)
	c.IgnoreRobotsTxt = false
	c.WithTransport(simTransport(web, workers))
	c.SetRequestTimeout(30 * time.Second)
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: workers}); err != nil {
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
	reqBefore := len(web.Requests(0))
	start := time.Now()
	for _, s := range web.Seeds() {
		if err := c.Visit(s); err != nil {
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
	res := CrawlResult{Elapsed: elapsed, Fetched: fetched.Load(), Indexed: indexed.Load(), Requests: len(web.Requests(0)) - reqBefore}
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
