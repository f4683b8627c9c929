package crawl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// fetchGate is an optional Sink method: MayFetch(host) false pauses the
// host (its entries stay queued) and is asked again about every 500 ms. The
// node uses it while a host's ownership moves.
type fetchGate interface {
	MayFetch(hostKey string) bool
}

// slotResult is what one host slot did, for the politeness state machine.
type slotResult struct {
	outcome    fetchOutcome
	resp       time.Duration
	retryAfter time.Duration
	// minWait extends the wait beyond politeness (robots retry backoff).
	minWait time.Duration
	// handed is set when the slot's response went to processing with the
	// slot's admission credit; ready is when it was ready to go, before
	// any wait for room in the processing queue.
	handed bool
	ready  time.Time
}

// fetchLoop takes due hosts from the schedule, one slot at a time, each
// under an admission credit.
func (c *Crawler) fetchLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := c.credits.acquire(ctx); err != nil {
			return
		}
		// Real time, not c.clock: the means are of real work.
		took := time.Now()
		h, wait := c.front.next(c.clock.Now())
		if h == nil {
			c.credits.release()
			var timer <-chan time.Time
			if wait >= 0 {
				timer = c.clock.After(wait)
			}
			select {
			case <-ctx.Done():
				return
			case <-c.front.wake:
			case <-timer:
			}
			continue
		}
		before := c.front.hostRecordOf(h)
		r := c.slot(ctx, h)
		if r.handed {
			c.credits.observeFetch(r.ready.Sub(took), true)
		} else {
			c.credits.observeFetch(time.Since(took), false)
			c.credits.release()
		}
		now := c.clock.Now()
		c.front.release(h, now, r.outcome, r.resp, r.retryAfter, r.minWait)
		if err := c.front.saveHostChanged(h, before); err != nil {
			c.log.Error("save host state", "host", h.key, "err", err)
		}
	}
}

// fetchContext survives the cancellation of ctx for ShutdownGrace, so that a
// clean stop lets requests in flight complete (and be recorded) instead of
// refetching them on the next start.
func (c *Crawler) fetchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Fetch.TotalTimeout+5*time.Second)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(c.cfg.ShutdownGrace, cancel) })
	return fctx, func() { stop(); cancel() }
}

// slot does the work of one politeness slot of h: robots.txt first, then
// sitemaps, then the best queued URL. URLs disallowed by robots.txt are
// dropped without a request and do not use the slot.
func (c *Crawler) slot(ctx context.Context, h *hostState) slotResult {
	if mf, ok := c.sink.(fetchGate); ok && !mf.MayFetch(h.key) {
		// Ownership is moving (or gone): keep the entries for the handoff.
		return slotResult{outcome: outcomeGated, minWait: 500 * time.Millisecond}
	}
	q, err := c.front.head(ctx, h.key)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("frontier head", "host", h.key, "err", err)
			c.count.err("frontier")
		}
		return slotResult{outcome: outcomeNone, minWait: time.Second}
	}
	if q == nil {
		return slotResult{outcome: outcomeNone}
	}
	now := c.clock.Now()
	rob, robExp, sm := c.front.robotsOf(h)
	if rob == nil || !now.Before(robExp) {
		return c.fetchRobots(ctx, h, q)
	}
	if len(sm) > 0 {
		return c.fetchSitemap(ctx, h, sm[0])
	}
	for range 1000 {
		u, err := url.Parse(q.rec.URL)
		if err != nil {
			c.count.filter("bad_url")
			if err := c.front.finish(q, func(r *seenRecord) { r.Outcome = "bad_url" }, nil); err != nil {
				return c.slotFailed(h, err)
			}
		} else if !rob.Allowed(u) {
			c.count.robotsDisallowed.Add(1)
			if err := c.front.finish(q, func(r *seenRecord) { r.Outcome = "robots" }, nil); err != nil {
				return c.slotFailed(h, err)
			}
		} else {
			return c.fetchPage(ctx, h, q, u)
		}
		q, err = c.front.head(ctx, h.key)
		if err != nil || q == nil {
			return slotResult{outcome: outcomeNone}
		}
	}
	return slotResult{outcome: outcomeNone}
}

func (c *Crawler) slotFailed(h *hostState, err error) slotResult {
	c.log.Error("frontier update", "host", h.key, "err", err)
	c.count.err("frontier")
	return slotResult{outcome: outcomeNone, minWait: time.Second}
}

// fetchPage fetches one queued URL and records the result durably.
func (c *Crawler) fetchPage(ctx context.Context, h *hostState, q *queued, u *url.URL) slotResult {
	script := q.rec.Base != ""
	req := FetchRequest{URL: u, Script: script}
	if q.rec.FetchedAt != 0 { // recrawl: conditional request
		req.ETag, req.LastModified = q.rec.ETag, q.rec.LastModified
	}
	fctx, cancel := c.fetchContext(ctx)
	started := c.clock.Now()
	resp, err := c.fetcher.Fetch(fctx, req)
	cancel()
	now := c.clock.Now()
	if err != nil {
		class := ErrorClass(err)
		if class == "canceled" || (ctx.Err() != nil && class == "timeout") {
			return slotResult{outcome: outcomeNone} // shutting down: stays queued
		}
		c.count.err(class)
		outcome := outcomeError
		if class == "timeout" {
			outcome = outcomeTimeout
		}
		transient := class == "timeout" || class == "connect" || class == "reset" || class == "dns" || class == "other"
		if transient && q.rec.Attempts+1 < c.cfg.Politeness.MaxAttempts {
			if err := c.front.retry(q, class); err != nil {
				return c.slotFailed(h, err)
			}
		} else if err := c.front.finish(q, func(r *seenRecord) { r.Outcome = class; r.FetchedAt = now.UnixNano() }, nil); err != nil {
			return c.slotFailed(h, err)
		}
		return slotResult{outcome: outcome, resp: now.Sub(started)}
	}
	sclass := StatusClass(resp.Status)
	c.count.status(sclass)
	if script {
		// A link source, not a page: outside the page counts and budget.
		c.count.scriptsFetched.Add(1)
	} else {
		c.count.fetched.Add(1)
		c.count.rate.add(now)
		c.front.countFetch(h)
	}
	status := resp.Status
	var handed bool
	var handedReady time.Time
	switch {
	case status == 429 || status == 503:
		c.count.err("http_" + sclass)
		if q.rec.Attempts+1 < c.cfg.Politeness.MaxAttempts {
			if err := c.front.retry(q, sclass); err != nil {
				return c.slotFailed(h, err)
			}
		} else if err := c.front.finish(q, func(r *seenRecord) { r.Outcome = sclass; r.FetchedAt = now.UnixNano() }, nil); err != nil {
			return c.slotFailed(h, err)
		}
		return slotResult{outcome: outcomeBackoff, resp: resp.Duration, retryAfter: resp.RetryAfter}
	case status == 304:
		err = c.front.finish(q, func(r *seenRecord) {
			r.Outcome = sclass
			r.FetchedAt = now.UnixNano()
		}, func(txn *badger.Txn, r *seenRecord) error {
			return c.scheduleRecrawl(txn, q.host, q.hash, r, false, now)
		})
	case resp.Skipped:
		c.count.filter("content_type")
		err = c.front.finish(q, func(r *seenRecord) { r.Outcome = "content_type"; r.FetchedAt = now.UnixNano() }, nil)
	case status >= 200 && status < 400:
		switch {
		case resp.TimedOut:
			c.count.err("truncated_timeout") // parsed anyway: what arrived in TotalTimeout
		case resp.Truncated:
			c.count.err("truncated") // parsed anyway: the first MaxBodyBytes
		}
		entry := &procEntry{
			URL: q.rec.URL, Host: q.host, Status: status, Header: resp.Header, ContentType: resp.ContentType,
			Body: resp.Body, Truncated: resp.Truncated, Location: resp.Location, FetchedAt: now.UnixNano(),
			Base: q.rec.Base, BodyS2: compressBody(&c.bodyScratch, resp.Body),
		}
		var seq uint64
		seq, err = c.front.seq.Next()
		if err != nil {
			return c.slotFailed(h, fmt.Errorf("processing sequence: %w", err))
		}
		key := procKey(seq)
		err = c.front.finish(q, func(r *seenRecord) {
			r.Outcome = sclass
			r.FetchedAt = now.UnixNano()
			r.Attempts = 0
			if status < 300 {
				r.ETag, r.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
			}
		}, func(txn *badger.Txn, r *seenRecord) error {
			entry.Cash, entry.History, entry.Depth = r.Cash, r.History, r.Depth
			entry.PrevHash, entry.PrevSim = r.ContentHash, r.SimHash
			r.Cash = 0 // distributed over the links by the processing stage
			return txn.Set(key, entry.encode())
		})
		if err == nil {
			c.pendingAdd(1)
			ready := time.Now()
			select {
			case c.proc <- procItem{key: key, entry: entry, credit: true}:
				handed, handedReady = true, ready
			case <-ctx.Done(): // stays in c:p/, processed by the next Run
			}
		}
	default: // 4xx, 5xx other than 503: final, nothing to parse
		c.count.err("http_" + sclass)
		err = c.front.finish(q, func(r *seenRecord) { r.Outcome = sclass; r.FetchedAt = now.UnixNano() }, nil)
	}
	if err != nil {
		return c.slotFailed(h, err)
	}
	if status == 304 || resp.Skipped || status >= 400 {
		c.noteFetched(q.host, q.rec.URL)
	}
	return slotResult{outcome: outcomeOK, resp: resp.Duration, handed: handed, ready: handedReady}
}

// robotsRecord persists a robots.txt response ("c:r/<host>") so that a
// restart re-parses it instead of fetching it again.
type robotsRecord struct {
	URL       string `json:"u,omitempty"` // where it was fetched (scheme for the sitemaps)
	FetchedAt int64  `json:"f"`
	Status    int    `json:"s"`
	Body      []byte `json:"b,omitempty"`
}

// loadRobots parses every persisted robots.txt into its host state.
func (c *Crawler) loadRobots() error {
	return c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxRobots), PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			host := string(it.Item().Key()[len(pfxRobots):])
			var rec robotsRecord
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &rec) }); err != nil {
				c.log.Warn("corrupt robots record, refetching", "host", host, "err", err)
				continue
			}
			c.applyRobotsRecord(host, rec)
		}
		return nil
	})
}

func (c *Crawler) applyRobotsRecord(host string, rec robotsRecord) {
	rob, err := ParseRobots(rec.Status, rec.Body, c.cfg.Robots.UserAgent)
	if err != nil {
		return
	}
	exp := time.Unix(0, rec.FetchedAt).Add(c.cfg.Robots.Expiry)
	skip := c.cfg.Politeness.CrawlDelayPolicy == CrawlDelaySkip && c.cfg.Politeness.crawlDelayTooLong(rob)
	var sitemaps []string
	if c.cfg.Robots.Sitemaps && !c.front.sitemapsDoneOf(host) {
		// Stopped between robots.txt and the end of the sitemaps: start them again.
		base, err := url.Parse(rec.URL)
		if err != nil || base.Host == "" {
			base = &url.URL{Scheme: "http", Host: host}
		}
		sitemaps = c.sitemapCandidates(host, base, rob)
	}
	c.front.setRobots(host, rob, exp, skip, sitemaps)
}

// fetchRobots fetches robots.txt in h's slot. Same-host redirects are
// followed (up to 5, RFC 9309); a redirect to another host counts as "no
// robots.txt" (allow all) because requesting it would spend another host's
// politeness slot.
func (c *Crawler) fetchRobots(ctx context.Context, h *hostState, q *queued) slotResult {
	pageURL, err := url.Parse(q.rec.URL)
	if err != nil {
		pageURL = &url.URL{Scheme: "http", Host: h.key}
	}
	target := &url.URL{Scheme: pageURL.Scheme, Host: pageURL.Host, Path: "/robots.txt"}
	var resp *FetchResponse
	var total time.Duration
	for hop := 0; ; hop++ {
		fctx, cancel := c.fetchContext(ctx)
		resp, err = c.fetcher.Fetch(fctx, FetchRequest{URL: target})
		cancel()
		if err != nil {
			break
		}
		total += resp.Duration
		if resp.Status < 300 || resp.Status >= 400 || hop >= 5 {
			break
		}
		next, perr := url.Parse(resp.Location)
		if resp.Location == "" || perr != nil || HostKey(next) != h.key {
			resp = &FetchResponse{Status: 404, Duration: total} // unfollowable: allow all
			break
		}
		target = next
	}
	now := c.clock.Now()
	var rob *Robots
	var retryAfter time.Duration
	if err == nil {
		c.count.robotsFetched.Add(1)
		c.count.status(StatusClass(resp.Status))
		retryAfter = resp.RetryAfter
		rob, err = ParseRobots(resp.Status, resp.Body, c.cfg.Robots.UserAgent)
	}
	if err != nil {
		class := ErrorClass(err)
		if class == "canceled" || ctx.Err() != nil {
			return slotResult{outcome: outcomeNone}
		}
		c.count.err("robots_" + strings.TrimPrefix(class, "robots_"))
		if class == "dns_nxdomain" || class == "blocked_ip" {
			return c.giveUpHost(ctx, h, class)
		}
		return c.robotsFailed(h, class, err, retryAfter)
	}
	body := resp.Body
	if len(body) > c.cfg.Robots.MaxBytes {
		body = body[:c.cfg.Robots.MaxBytes]
	}
	rec := robotsRecord{URL: target.String(), FetchedAt: now.UnixNano(), Status: resp.Status, Body: body}
	enc, _ := json.Marshal(rec) // cannot fail: plain fields
	if err := c.db.Update(func(txn *badger.Txn) error { return txn.Set(robotsKey(h.key), enc) }); err != nil {
		c.log.Error("persist robots.txt", "host", h.key, "err", err)
	}
	skip := false
	if c.cfg.Politeness.crawlDelayTooLong(rob) {
		skip = c.cfg.Politeness.CrawlDelayPolicy == CrawlDelaySkip
		if !c.front.crawlDelayLogged(h) {
			c.log.Info("robots.txt Crawl-delay above the cap", "host", h.key,
				"crawl_delay", rob.CrawlDelay(), "cap", c.cfg.Politeness.MaxCrawlDelay, "policy", c.cfg.Politeness.CrawlDelayPolicy)
		}
	}
	var sitemaps []string
	if c.cfg.Robots.Sitemaps && !c.front.sitemapsDone(h) {
		sitemaps = c.sitemapCandidates(h.key, pageURL, rob)
	}
	c.front.robotsFetched(h, rob, now.Add(c.cfg.Robots.Expiry), skip, sitemaps)
	return slotResult{outcome: outcomeOK, resp: total}
}

// giveUpHost ends the queued URLs of a host that cannot exist for us (its
// name does not resolve, or only to addresses we may not dial): waiting
// would not help. At most 1000 per slot; the rest in the next slots.
func (c *Crawler) giveUpHost(ctx context.Context, h *hostState, class string) slotResult {
	c.log.Info("host unreachable, giving up its queued URLs", "host", h.key, "class", class)
	for range maxGivenUpPerSlot / giveUpBatch {
		if ctx.Err() != nil {
			break
		}
		n, more, err := c.front.settleQueued(h.key, giveUpBatch, func(r *seenRecord) { r.Outcome = class })
		if err != nil {
			return c.slotFailed(h, err)
		}
		for range n {
			c.count.filter("host_" + class)
		}
		if !more {
			break
		}
	}
	return slotResult{outcome: outcomeError}
}

const (
	// maxGivenUpPerSlot bounds the URLs one slot gives up; the rest go in
	// the host's next slots.
	maxGivenUpPerSlot = 1000
	// giveUpBatch is how many URLs are settled in one transaction, well
	// within Badger's transaction size at a node's memtable size.
	giveUpBatch = 200
)

// robotsFailed makes the host wait with bounded exponential backoff; after
// MaxAttempts consecutive failures it is parked for GiveUpWait.
func (c *Crawler) robotsFailed(h *hostState, class string, err error, retryAfter time.Duration) slotResult {
	if c.front.extendRobots(h, c.clock.Now().Add(c.cfg.Robots.RetryMax)) {
		// Expired rules are still rules (RFC 9309 allows a cached copy while
		// the file is unreachable): keep crawling with them, ask again later.
		c.log.Info("robots.txt refresh failed, using the cached copy", "host", h.key, "class", class, "err", err)
		return slotResult{outcome: outcomeError}
	}
	n := c.front.robotsFailure(h, c.cfg.Robots.MaxAttempts, c.clock.Now().Add(c.cfg.Robots.GiveUpWait))
	wait := c.cfg.Robots.RetryBase << min(n, 20)
	if wait > c.cfg.Robots.RetryMax || wait < 0 {
		wait = c.cfg.Robots.RetryMax
	}
	// A Retry-After on the robots.txt answer is honoured like on any page.
	wait = max(wait, min(retryAfter, c.cfg.Politeness.MaxBackoff))
	c.log.Info("robots.txt unavailable, host waits", "host", h.key, "class", class, "failures", n, "wait", wait, "err", err)
	o := outcomeError
	if class == "timeout" {
		o = outcomeTimeout
	}
	return slotResult{outcome: o, minWait: wait}
}

// sitemapCandidates: the sitemaps robots.txt lists on this host, then
// /sitemap.xml. Sitemaps on other hosts are ignored (they would need that
// host's politeness slot and are usually the same list).
func (c *Crawler) sitemapCandidates(host string, pageURL *url.URL, rob *Robots) []string {
	seen := map[string]bool{}
	var out []string
	addOne := func(raw string) {
		u, err := NormalizeURL(raw, pageURL)
		if err != nil || HostKey(u) != host {
			return
		}
		s := u.String()
		if !seen[s] && len(out) < c.cfg.Robots.MaxSitemapsPerHost {
			seen[s] = true
			out = append(out, s)
		}
	}
	read, pending := c.front.sitemapProgress(host)
	for _, s := range read {
		seen[s] = true
	}
	for _, s := range rob.Sitemaps() {
		addOne(s)
	}
	addOne("/sitemap.xml")
	for _, s := range pending {
		addOne(s)
	}
	return out
}

// sitemapProgress returns the host's sitemaps already read and those
// learned and still to read.
func (f *frontier) sitemapProgress(host string) (read, pending []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[host]
	if h == nil {
		return nil, nil
	}
	return slices.Clone(h.rec.SitemapsRead), slices.Clone(h.rec.SitemapsPending)
}

// fetchSitemap fetches one sitemap in h's slot and routes its URLs as
// discovered links of depth 1; a sitemap index adds its same-host children
// to the host's list (bounded by MaxSitemapsPerHost in total).
func (c *Crawler) fetchSitemap(ctx context.Context, h *hostState, raw string) slotResult {
	u, err := url.Parse(raw)
	if err != nil {
		c.front.sitemapDone(h, raw, nil, c.cfg.Robots.MaxSitemapsPerHost)
		return slotResult{outcome: outcomeNone}
	}
	fctx, cancel := c.fetchContext(ctx)
	resp, err := c.fetcher.Fetch(fctx, FetchRequest{URL: u})
	cancel()
	if err != nil {
		class := ErrorClass(err)
		if class == "canceled" || ctx.Err() != nil {
			return slotResult{outcome: outcomeNone}
		}
		c.count.err("sitemap_" + class)
		c.front.sitemapDone(h, raw, nil, c.cfg.Robots.MaxSitemapsPerHost)
		if class == "timeout" {
			return slotResult{outcome: outcomeTimeout}
		}
		return slotResult{outcome: outcomeError}
	}
	c.count.status(StatusClass(resp.Status))
	if fs, ok := c.sink.(FetchedSink); ok {
		fs.Fetched(h.key, raw, true)
	}
	var children, listed []string
	switch {
	case resp.Status >= 200 && resp.Status < 300:
		urls, subs, perr := ParseSitemap(resp.Body, u)
		if perr != nil {
			c.count.err("sitemap_" + ErrorClass(perr))
		}
		for _, s := range subs {
			if su, err := url.Parse(s); err == nil && HostKey(su) == h.key {
				children = append(children, su.String())
			}
		}
		if len(urls) > 0 {
			links := make([]Discovered, 0, len(urls))
			for _, s := range urls {
				links = append(links, Discovered{URL: s, SourceHost: h.key, Depth: 1})
				if su, err := url.Parse(s); err == nil && HostKey(su) == h.key {
					listed = append(listed, s)
				}
			}
			if err := c.route(ctx, links, nil); err != nil && ctx.Err() == nil {
				c.log.Warn("route sitemap urls", "host", h.key, "err", err)
			}
		}
	case resp.Status >= 300 && resp.Status < 400:
		if su, err := url.Parse(resp.Location); err == nil && resp.Location != "" && HostKey(su) == h.key {
			children = append(children, su.String())
		}
	}
	c.front.sitemapDone(h, raw, children, c.cfg.Robots.MaxSitemapsPerHost)
	if ss, ok := c.sink.(SitemapSink); ok {
		ss.SitemapRead(h.key, raw, listed, children)
	}
	return slotResult{outcome: outcomeOK, resp: resp.Duration}
}

// Host-state accessors: these fields are read by the slot owner and written
// by it, by handoff and by Stats, so they go through frontier.mu.

func (f *frontier) robotsOf(h *hostState) (*Robots, time.Time, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return h.robots, h.robotsExpires, h.sitemaps
}

func (f *frontier) setRobots(host string, rob *Robots, exp time.Time, skip bool, sitemaps []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.host(host)
	h.robots, h.robotsExpires, h.skip = rob, exp, skip
	h.sitemaps, h.sitemapBudget = sitemaps, len(sitemaps)
	if !h.inFlight {
		f.scheduleLocked(h)
	}
}

func (f *frontier) sitemapsDoneOf(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hosts[host]
	return h != nil && h.rec.SitemapsDone
}

func (f *frontier) robotsFetched(h *hostState, rob *Robots, exp time.Time, skip bool, sitemaps []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h.robots, h.robotsExpires, h.skip = rob, exp, skip
	h.rec.RobotsFailures = 0
	if skip || rob.CrawlDelay() > f.cfg.MaxCrawlDelay {
		h.rec.CrawlDelayLogged = true
	}
	h.sitemaps = sitemaps
	h.sitemapBudget = len(sitemaps)
	if len(sitemaps) == 0 {
		h.rec.SitemapsDone = true
	}
}

// extendRobots keeps expired rules until t; false if h has no rules.
func (f *frontier) extendRobots(h *hostState, t time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.robots == nil {
		return false
	}
	h.robotsExpires = t
	return true
}

func (f *frontier) crawlDelayLogged(h *hostState) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return h.rec.CrawlDelayLogged
}

func (f *frontier) sitemapsDone(h *hostState) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return h.rec.SitemapsDone
}

// sitemapDone removes raw from h's list and appends children within budget.
func (f *frontier) sitemapDone(h *hostState, raw string, children []string, budget int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rest := h.sitemaps[:0:0]
	for _, s := range h.sitemaps {
		if s != raw {
			rest = append(rest, s)
		}
	}
	for _, s := range children {
		if h.sitemapBudget >= budget {
			break
		}
		h.sitemapBudget++
		rest = append(rest, s)
	}
	h.sitemaps = rest
	if len(h.rec.SitemapsRead) < budget && !slices.Contains(h.rec.SitemapsRead, raw) {
		h.rec.SitemapsRead = append(h.rec.SitemapsRead, raw)
	}
	h.rec.SitemapsPending = append(h.rec.SitemapsPending[:0:0], rest...)
	if len(rest) == 0 {
		h.rec.SitemapsDone = true
		h.rec.SitemapsRead, h.rec.SitemapsPending = nil, nil
	}
}

// robotsFailure counts a failed robots.txt fetch; at maxAttempts it parks
// the host until parkUntil and starts counting again.
func (f *frontier) robotsFailure(h *hostState, maxAttempts int, parkUntil time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	h.rec.RobotsFailures++
	n := h.rec.RobotsFailures
	if n >= maxAttempts {
		h.rec.RobotsFailures = 0
		h.rec.ParkedUntil = parkUntil.UnixNano()
	}
	return n - 1
}

// countFetch charges one page request to h's budget.
func (f *frontier) countFetch(h *hostState) {
	f.mu.Lock()
	h.rec.Fetched++
	f.mu.Unlock()
}

// noteFetched tells a FetchedSink about a URL settled without processing.
func (c *Crawler) noteFetched(host, url string) {
	if fs, ok := c.sink.(FetchedSink); ok {
		fs.Fetched(host, url, false)
	}
}
