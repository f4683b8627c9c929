package crawl

import (
	"strings"
	"testing"
	"time"
)

func testPoliteness() PolitenessConfig {
	return PolitenessConfig{
		DelayFactor: 10, MinDelay: time.Second, MaxDelay: 30 * time.Second,
		MaxCrawlDelay: 20 * time.Second, CrawlDelayPolicy: CrawlDelayCap,
		BackoffBase: 5 * time.Second, MaxBackoff: time.Minute,
		ParkAfterTimeouts: 3, ParkDuration: time.Hour, MaxParkDuration: 3 * time.Hour, MaxAttempts: 3, ErrorDelay: 2 * time.Second,
	}
}

func mustRobots(t *testing.T, body string) *Robots {
	t.Helper()
	r, err := ParseRobots(200, []byte(body), "sou")
	if err != nil {
		t.Fatalf("ParseRobots: %v", err)
	}
	return r
}

func TestPolitenessDelay(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := []struct {
		name       string
		robots     string
		outcome    fetchOutcome
		resp       time.Duration
		retryAfter time.Duration
		backoffs   int // consecutive backoffs before this one
		want       time.Duration
	}{
		{name: "fast server gets MinDelay", outcome: outcomeOK, resp: 10 * time.Millisecond, want: time.Second},
		{name: "factor x response time", outcome: outcomeOK, resp: 300 * time.Millisecond, want: 3 * time.Second},
		{name: "slow server capped at MaxDelay", outcome: outcomeOK, resp: 10 * time.Second, want: 30 * time.Second},
		{name: "Crawl-delay honoured", robots: "User-agent: *\nCrawl-delay: 7\n", outcome: outcomeOK, resp: 10 * time.Millisecond, want: 7 * time.Second},
		{name: "Crawl-delay above cap uses the cap", robots: "User-agent: *\nCrawl-delay: 3600\n", outcome: outcomeOK, resp: 10 * time.Millisecond, want: 20 * time.Second},
		{name: "Retry-After honoured", outcome: outcomeBackoff, retryAfter: 42 * time.Second, want: 42 * time.Second},
		{name: "Retry-After capped at MaxBackoff", outcome: outcomeBackoff, retryAfter: 24 * time.Hour, want: time.Minute},
		{name: "no Retry-After: BackoffBase", outcome: outcomeBackoff, want: 5 * time.Second},
		{name: "no Retry-After: doubles", outcome: outcomeBackoff, backoffs: 2, want: 20 * time.Second},
		{name: "no Retry-After: doubling capped", outcome: outcomeBackoff, backoffs: 40, want: time.Minute},
		{name: "transport error waits ErrorDelay", outcome: outcomeError, want: 2 * time.Second},
		{name: "unused slot keeps the old time", outcome: outcomeNone, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testPoliteness()
			h := &hostState{key: "h"}
			h.rec.Backoffs = tc.backoffs
			if tc.robots != "" {
				h.robots = mustRobots(t, tc.robots)
			}
			p.release(h, now, tc.outcome, tc.resp, tc.retryAfter)
			got := time.Duration(0)
			if h.rec.NextAllowed != 0 {
				got = time.Unix(0, h.rec.NextAllowed).Sub(now)
			}
			if got != tc.want {
				t.Fatalf("delay = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPolitenessParkAfterTimeouts(t *testing.T) {
	p := testPoliteness()
	h := &hostState{key: "h"}
	now := time.Unix(1000, 0)
	for i := 1; i < p.ParkAfterTimeouts; i++ {
		p.release(h, now, outcomeTimeout, 0, 0)
		if h.parked(now) {
			t.Fatalf("parked after %d timeouts, threshold %d", i, p.ParkAfterTimeouts)
		}
	}
	// A success in between resets the count.
	p.release(h, now, outcomeOK, 0, 0)
	for range p.ParkAfterTimeouts - 1 {
		p.release(h, now, outcomeTimeout, 0, 0)
	}
	if h.parked(now) {
		t.Fatal("parked although a success reset the timeout count")
	}
	p.release(h, now, outcomeTimeout, 0, 0)
	if !h.parked(now) || !h.readyAt().Equal(now.Add(p.ParkDuration)) {
		t.Fatalf("not parked for ParkDuration after %d timeouts: ready %v", p.ParkAfterTimeouts, h.readyAt())
	}

	// Parked again without an answer in between: twice as long, then capped.
	for _, want := range []time.Duration{2 * time.Hour, 3 * time.Hour} {
		for range p.ParkAfterTimeouts {
			p.release(h, now, outcomeTimeout, 0, 0)
		}
		if got := h.readyAt().Sub(now); got != want {
			t.Fatalf("repeated park = %v, want %v", got, want)
		}
	}
	p.release(h, now, outcomeOK, 0, 0)
	if h.rec.Parks != 0 {
		t.Fatal("a response did not reset the park count")
	}

	// Without any configured delay, a timeout still buys the server as much
	// rest as it made us wait.
	fast := FastConfig().Politeness
	g := &hostState{key: "g"}
	fast.release(g, now, outcomeTimeout, 3*time.Second, 0)
	if got := g.readyAt().Sub(now); got != 3*time.Second {
		t.Fatalf("wait after a 3s timeout with zero delays = %v, want 3s", got)
	}
}

// TestScheduleTiming drives the frontier's schedule with a fake clock: a host
// is handed out once, comes back only when its delay has passed, and a 429
// with Retry-After keeps the URL queued (same entry, one more attempt).
func TestScheduleTiming(t *testing.T) {
	clock := newFakeClock()
	f := engFrontier(t, engOpenDB(t, t.TempDir()), testPoliteness(), clock)
	if _, err := f.add([]addItem{{url: "http://a/1", host: "a", cash: 1}, {url: "http://a/2", host: "a"}}, nil); err != nil {
		t.Fatal(err)
	}
	h, _ := f.next(clock.Now())
	if h == nil || h.key != "a" {
		t.Fatalf("next = %v, want host a", h)
	}
	if again, _ := f.next(clock.Now()); again != nil {
		t.Fatal("host handed out twice while in flight")
	}
	q, _ := f.head(t.Context(), "a")
	if err := f.retry(q, "429"); err != nil { // 429 with Retry-After 10s
		t.Fatal(err)
	}
	f.release(h, clock.Now(), outcomeBackoff, 100*time.Millisecond, 10*time.Second, 0)

	h2, wait := f.next(clock.Now())
	if h2 != nil || wait != 10*time.Second {
		t.Fatalf("right after a 429: host %v wait %v, want nil and 10s", h2, wait)
	}
	clock.Advance(9 * time.Second)
	if h2, _ = f.next(clock.Now()); h2 != nil {
		t.Fatal("host due before Retry-After elapsed")
	}
	clock.Advance(time.Second)
	if h2, _ = f.next(clock.Now()); h2 == nil {
		t.Fatal("host not due after Retry-After")
	}
	q, _ = f.head(t.Context(), "a")
	if q.rec.URL != "http://a/1" || q.rec.Attempts != 1 || f.hosts["a"].queued != 2 {
		t.Fatalf("after backoff: head %s attempts %d queued %d; want the same URL re-queued once", q.rec.URL, q.rec.Attempts, f.hosts["a"].queued)
	}
	if err := f.finish(q, nil, nil); err != nil {
		t.Fatal(err)
	}
	f.release(h2, clock.Now(), outcomeOK, 200*time.Millisecond, 0, 0) // factor 10 -> 2s
	if _, wait = f.next(clock.Now()); wait != 2*time.Second {
		t.Fatalf("wait after a 200ms response = %v, want 2s", wait)
	}
	clock.Advance(2 * time.Second)
	if h3, _ := f.next(clock.Now()); h3 == nil {
		t.Fatal("host not due after its delay")
	}
}

func TestCrawlDelayPolicy(t *testing.T) {
	for _, policy := range []CrawlDelayPolicy{CrawlDelayCap, CrawlDelaySkip} {
		t.Run(string(policy), func(t *testing.T) {
			clock := newFakeClock()
			p := testPoliteness()
			p.CrawlDelayPolicy = policy
			f := engFrontier(t, engOpenDB(t, t.TempDir()), p, clock)
			if _, err := f.add([]addItem{{url: "http://a/1", host: "a"}, {url: "http://a/2", host: "a"}}, nil); err != nil {
				t.Fatal(err)
			}
			h, _ := f.next(clock.Now())
			rob := mustRobots(t, "User-agent: *\nCrawl-delay: 3600\n")
			skip := policy == CrawlDelaySkip && p.crawlDelayTooLong(rob)
			f.robotsFetched(h, rob, clock.Now().Add(time.Hour), skip, nil)
			f.release(h, clock.Now(), outcomeOK, 0, 0, 0)
			clock.Advance(p.MaxCrawlDelay)
			got, _ := f.next(clock.Now())
			c := f.counts(clock.Now(), time.Minute, 0)
			switch policy {
			case CrawlDelayCap:
				if got == nil || c.Skipped != 0 {
					t.Fatalf("cap: host not due after MaxCrawlDelay (skipped %d)", c.Skipped)
				}
			case CrawlDelaySkip:
				if got != nil || c.Skipped != 1 || c.SoonDue != 0 {
					t.Fatalf("skip: host scheduled (%v) or not counted as skipped (%d)", got, c.Skipped)
				}
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; "" = valid
	}{
		{name: "default", mutate: func(*Config) {}},
		{name: "no workers", mutate: func(c *Config) { c.Workers = 0 }, want: "Workers"},
		{name: "min above max", mutate: func(c *Config) { c.Politeness.MinDelay = time.Hour }, want: "MaxDelay"},
		{name: "bad policy", mutate: func(c *Config) { c.Politeness.CrawlDelayPolicy = "ignore" }, want: "CrawlDelayPolicy"},
		{name: "no attempts", mutate: func(c *Config) { c.Politeness.MaxAttempts = 0 }, want: "MaxAttempts"},
		{name: "recrawl bounds", mutate: func(c *Config) { c.Recrawl.Min = 2 * c.Recrawl.Max }, want: "recrawl"},
		{name: "robots too small", mutate: func(c *Config) { c.Robots.MaxBytes = 10 }, want: "500 KiB"},
		{name: "no agent", mutate: func(c *Config) { c.Robots.UserAgent = "" }, want: "UserAgent"},
		{name: "seed cash", mutate: func(c *Config) { c.SeedCash = 0 }, want: "SeedCash"},
	}
	for _, tc := range tests {
		for _, preset := range []func() Config{DefaultConfig, FastConfig} {
			cfg := preset()
			tc.mutate(&cfg)
			err := cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: unexpected error %v", tc.name, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
			}
		}
	}
}
