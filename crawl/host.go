package crawl

import (
	"encoding/json"
	"fmt"
	"time"
)

// CrawlDelayPolicy says what happens when robots.txt asks for a Crawl-delay
// longer than PolitenessConfig.MaxCrawlDelay.
type CrawlDelayPolicy string

const (
	// CrawlDelayCap waits MaxCrawlDelay between requests (and logs once per
	// host). The site still gets far less than one request per MaxCrawlDelay
	// from us than it would from an impolite crawler, and its pages are not lost.
	CrawlDelayCap CrawlDelayPolicy = "cap"
	// CrawlDelaySkip leaves the host alone: its queued URLs stay in the frontier
	// (so a later config change can crawl them) but it is never scheduled.
	CrawlDelaySkip CrawlDelayPolicy = "skip"
)

// PolitenessConfig is the per-host request discipline. There is always at
// most one request in flight per host, whatever these values are.
type PolitenessConfig struct {
	// DelayFactor times the last response time is the delay before the next
	// request to the same host (a slow server gets more time to breathe),
	// clamped to [MinDelay, MaxDelay].
	DelayFactor        float64
	MinDelay, MaxDelay time.Duration
	// MaxCrawlDelay caps robots.txt Crawl-delay; CrawlDelayPolicy says what
	// happens past it.
	MaxCrawlDelay    time.Duration
	CrawlDelayPolicy CrawlDelayPolicy
	// BackoffBase is the first wait after a 429/503 without Retry-After; it
	// doubles with every consecutive backoff up to MaxBackoff. A Retry-After
	// value is honoured up to MaxBackoff.
	BackoffBase, MaxBackoff time.Duration
	// ParkAfterTimeouts consecutive timeouts park the host for ParkDuration
	// (the DSpider timeout threshold). 0 disables parking. Each further
	// park without a response in between doubles the time, up to
	// MaxParkDuration, so a dead host costs ever fewer attempts.
	ParkAfterTimeouts int
	ParkDuration      time.Duration
	MaxParkDuration   time.Duration
	// MaxAttempts bounds how often one URL is tried after transient failures
	// (timeouts, connection errors, 429, 503) before it is given up.
	MaxAttempts int
	// ErrorDelay is the wait after a failed request (connect error, DNS failure).
	ErrorDelay time.Duration
}

func (p PolitenessConfig) validate() error {
	switch {
	case p.DelayFactor < 0:
		return fmt.Errorf("politeness: DelayFactor %v < 0", p.DelayFactor)
	case p.MinDelay < 0 || p.MaxDelay < 0:
		return fmt.Errorf("politeness: negative MinDelay/MaxDelay")
	case p.MaxDelay < p.MinDelay:
		return fmt.Errorf("politeness: MaxDelay %v < MinDelay %v", p.MaxDelay, p.MinDelay)
	case p.MaxCrawlDelay < 0:
		return fmt.Errorf("politeness: MaxCrawlDelay %v < 0", p.MaxCrawlDelay)
	case p.CrawlDelayPolicy != CrawlDelayCap && p.CrawlDelayPolicy != CrawlDelaySkip:
		return fmt.Errorf("politeness: CrawlDelayPolicy %q is neither %q nor %q", p.CrawlDelayPolicy, CrawlDelayCap, CrawlDelaySkip)
	case p.BackoffBase < 0 || p.MaxBackoff < p.BackoffBase:
		return fmt.Errorf("politeness: need 0 <= BackoffBase <= MaxBackoff, got %v, %v", p.BackoffBase, p.MaxBackoff)
	case p.ParkAfterTimeouts < 0 || p.ParkDuration < 0 || p.MaxParkDuration < p.ParkDuration:
		return fmt.Errorf("politeness: need ParkAfterTimeouts >= 0 and 0 <= ParkDuration <= MaxParkDuration, got %d, %v, %v",
			p.ParkAfterTimeouts, p.ParkDuration, p.MaxParkDuration)
	case p.MaxAttempts < 1:
		return fmt.Errorf("politeness: MaxAttempts %d < 1", p.MaxAttempts)
	case p.ErrorDelay < 0:
		return fmt.Errorf("politeness: ErrorDelay < 0")
	}
	return nil
}

// hostRecord is the persistent part of a host's state ("c:h/<host>").
type hostRecord struct {
	NextAllowed      int64 `json:"n,omitempty"` // unix nanos: earliest next request
	ParkedUntil      int64 `json:"p,omitempty"`
	Timeouts         int   `json:"t,omitempty"` // consecutive
	Backoffs         int   `json:"b,omitempty"` // consecutive 429/503
	Parks            int   `json:"k,omitempty"` // consecutive parks without a response
	Fetched          int64 `json:"f,omitempty"` // pages fetched (the per-host budget)
	LastResponse     int64 `json:"l,omitempty"` // nanos
	RobotsFailures   int   `json:"rf,omitempty"`
	SitemapsDone     bool  `json:"sd,omitempty"`
	CrawlDelayLogged bool  `json:"cl,omitempty"`
	// SitemapsRead are the sitemaps of the host read so far, and
	// SitemapsPending the child sitemaps learned from sitemap indexes and
	// not read yet: a restart, or a new owner taking the host over, goes
	// on with the sitemaps instead of reading them again.
	SitemapsRead    []string `json:"sr,omitempty"`
	SitemapsPending []string `json:"sp,omitempty"`
}

func (r hostRecord) encode() []byte {
	b, _ := json.Marshal(r) // cannot fail: plain fields
	return b
}

func decodeHostRecord(b []byte) (hostRecord, error) {
	var r hostRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decode host record: %w", err)
	}
	return r, nil
}

// hostState is the in-memory state of one host: its persistent record, the
// size and head priority of its queue (never the queue itself), its robots
// rules and its place in the schedule. Guarded by frontier.mu.
type hostState struct {
	key string
	rec hostRecord

	queued    int64   // entries under c:q/<host>/
	headCash  float64 // priority of the first queue key (valid when queued > 0)
	headDepth int

	inFlight bool
	gen      uint64 // bumps invalidate heap items of this host
	dropped  bool

	robots        *Robots // nil: not fetched yet (or expired)
	robotsExpires time.Time
	sitemaps      []string // same-host sitemap URLs still to fetch in this host's slot
	sitemapBudget int      // sitemaps accepted so far (MaxSitemapsPerHost)
	skip          bool     // Crawl-delay past the cap with CrawlDelaySkip
	gated         bool     // the last slot found Sink's MayFetch false
	gatedUntil    int64    // unix nanos: when a gated host asks the gate again
}

func (h *hostState) readyAt() time.Time {
	n := max(h.rec.NextAllowed, h.rec.ParkedUntil, h.gatedUntil)
	return time.Unix(0, n)
}

func (h *hostState) parked(now time.Time) bool {
	return h.rec.ParkedUntil > now.UnixNano()
}

// robotsDelay is the Crawl-delay to keep, after the cap policy.
func (p PolitenessConfig) robotsDelay(h *hostState) time.Duration {
	if h.robots == nil {
		return 0
	}
	d := h.robots.CrawlDelay()
	if d > p.MaxCrawlDelay {
		d = p.MaxCrawlDelay
	}
	return d
}

// crawlDelayTooLong reports whether r asks for more than the cap allows.
func (p PolitenessConfig) crawlDelayTooLong(r *Robots) bool {
	return r != nil && r.CrawlDelay() > p.MaxCrawlDelay
}

// delayAfter is the pause after a completed request that took resp.
func (p PolitenessConfig) delayAfter(h *hostState, resp time.Duration) time.Duration {
	d := time.Duration(p.DelayFactor * float64(resp))
	if d < p.MinDelay {
		d = p.MinDelay
	}
	if d > p.MaxDelay {
		d = p.MaxDelay
	}
	if rd := p.robotsDelay(h); rd > d {
		d = rd
	}
	return d
}

// fetchOutcome is what the politeness state machine needs to know about a
// finished request.
type fetchOutcome int

const (
	outcomeOK      fetchOutcome = iota // any HTTP response that is not a backoff signal
	outcomeBackoff                     // 429 or 503
	outcomeTimeout                     // connect/first-byte/total timeout
	outcomeError                       // other transport failure
	outcomeNone                        // no request was made (slot released unused)
	outcomeGated                       // no request: Sink's MayFetch said no
)

// release computes the host's next allowed time after a request finished at
// now, and updates its failure counters. It is pure: tests drive it with a
// fake clock.
func (p PolitenessConfig) release(h *hostState, now time.Time, o fetchOutcome, resp, retryAfter time.Duration) {
	var wait time.Duration
	switch o {
	case outcomeOK:
		h.rec.Timeouts = 0
		h.rec.Backoffs = 0
		h.rec.Parks = 0
		h.rec.LastResponse = int64(resp)
		wait = p.delayAfter(h, resp)
	case outcomeBackoff:
		h.rec.Timeouts = 0
		h.rec.Backoffs++
		wait = retryAfter
		if wait <= 0 {
			wait = p.BackoffBase << min(h.rec.Backoffs-1, 20)
			if wait < 0 { // overflow
				wait = p.MaxBackoff
			}
		}
		if wait > p.MaxBackoff {
			wait = p.MaxBackoff
		}
		if d := p.delayAfter(h, resp); d > wait {
			wait = d
		}
	case outcomeTimeout:
		// resp is how long we waited: a server that did not answer in that
		// time gets at least as long again before the next request.
		h.rec.Timeouts++
		wait = max(p.delayAfter(h, resp), resp)
		if p.ParkAfterTimeouts > 0 && h.rec.Timeouts >= p.ParkAfterTimeouts {
			park := p.ParkDuration << min(h.rec.Parks, 20)
			if park > p.MaxParkDuration || park < 0 {
				park = p.MaxParkDuration
			}
			h.rec.ParkedUntil = now.Add(park).UnixNano()
			h.rec.Timeouts = 0
			h.rec.Parks++
		}
	case outcomeError:
		wait = max(p.ErrorDelay, p.delayAfter(h, 0))
	case outcomeNone, outcomeGated:
		// The slot was not used: the previous NextAllowed still holds.
		return
	}
	next := now.Add(wait).UnixNano()
	if next > h.rec.NextAllowed {
		h.rec.NextAllowed = next
	}
}
