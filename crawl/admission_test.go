package crawl

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestAdmissionLimit(t *testing.T) {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	for _, tc := range []struct {
		name             string
		workers, procs   int
		fetch, process   time.Duration // 0: no sample
		want             int
		wantAfterProcess int // after the process sample only, before a fetch sample
	}{
		{"no samples yet", 32, 2, 0, 0, 6, 6},
		{"loopback web, replica acks", 32, 2, ms(1), ms(30), 5, 6},
		{"loopback web, slow settling", 32, 2, ms(2), ms(500), 5, 6},
		{"fetch as slow as processing", 32, 2, ms(30), ms(30), 8, 6},
		{"real web, 100 ms", 64, 2, ms(100), ms(20), 24, 6},
		{"real web, 1 s", 64, 2, ms(1000), ms(20), 64, 6},
		{"real web, fast processing", 64, 2, ms(300), ms(2), 64, 6},
		{"one worker", 1, 2, ms(1), ms(30), 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdmission(tc.workers, tc.procs)
			if tc.process > 0 {
				a.observeProcess(tc.process)
			}
			if got := a.limit(); got != tc.wantAfterProcess {
				t.Errorf("limit with a process sample only = %d, want %d", got, tc.wantAfterProcess)
			}
			if tc.fetch > 0 {
				a.observeFetch(tc.fetch, true)
			}
			if got := a.limit(); got != tc.want {
				t.Errorf("limit = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestAdmissionSlotsWithoutResponse: the fetch-stage time of slots that
// hand nothing to processing counts towards the next response handed
// over, so a crawl whose requests mostly end without a page keeps enough
// requests in flight.
func TestAdmissionSlotsWithoutResponse(t *testing.T) {
	a := newAdmission(256, 2)
	a.observeProcess(20 * time.Millisecond)
	for range 4 {
		a.observeFetch(100*time.Millisecond, false) // 404s, robots.txt
	}
	a.observeFetch(100*time.Millisecond, true)
	if got, want := a.limit(), 2*2*500/20+4; got != want {
		t.Errorf("limit = %d, want %d (500 ms of fetching per response processed)", got, want)
	}
}

// TestAdmissionWaitsAndWakes: acquire blocks at the limit, a release lets
// one waiter through, and a cancelled context ends the wait.
func TestAdmissionWaitsAndWakes(t *testing.T) {
	a := newAdmission(2, 1)
	ctx := t.Context()
	for range 2 {
		if err := a.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan error, 1)
	go func() { got <- a.acquire(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("acquire past the limit returned %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	a.release()
	if err := <-got; err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { got <- a.acquire(cctx) }()
	cancel()
	if err := <-got; err == nil {
		t.Fatal("acquire with a cancelled context succeeded at the limit")
	}
	if held, _ := a.credits(); held != 2 {
		t.Errorf("credits held = %d, want 2", held)
	}
}

// slowSink settles a page only after settle, like a node whose Store waits
// for the replicas' acknowledgement, and records when each page settled.
type slowSink struct {
	*engSink
	settle time.Duration

	mu      sync.Mutex
	settled map[string]time.Time
	busy    time.Duration // in Store, summed over the calls
	first   time.Time     // the first Store began
}

func (s *slowSink) Store(ctx context.Context, p *Page) error {
	start := time.Now()
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = start
	}
	s.mu.Unlock()
	select {
	case <-time.After(s.settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := s.engSink.Store(ctx, p); err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	s.settled[p.URL] = now
	s.busy += now.Sub(start)
	s.mu.Unlock()
	return nil
}

// TestFetchedUnsettledBounded: on a web that answers in a millisecond and
// a sink that settles a page in 15 ms, the pages the web has answered and
// the sink has not settled (what a SIGKILL would cost) stay few, instead
// of one held by every fetch worker waiting for room in the processing
// queue, and the crawl still runs as fast as processing goes.
func TestFetchedUnsettledBounded(t *testing.T) {
	web := newEngWeb(t, 40, 12, -1)
	web.clean = true
	cfg := engConfig(engDNS(t))
	cfg.Workers = 32
	cfg.ProcessWorkers = 2
	const settle = 15 * time.Millisecond
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	sink := &slowSink{engSink: newEngSink(), settle: settle, settled: map[string]time.Time{}}
	c, err := New(db, cfg, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var seeds []Discovered
	for h := range web.hosts {
		seeds = append(seeds, Discovered{URL: web.url(h, "/")})
	}
	if err := c.Add(t.Context(), seeds); err != nil {
		t.Fatal(err)
	}
	engRun(t, c, 2*time.Minute)

	answered := map[string]time.Time{}
	for _, r := range web.requests() {
		answered["http://"+r.host+r.path] = r.end
	}
	sink.mu.Lock()
	type event struct {
		at    time.Time
		delta int
	}
	var events []event
	var last time.Time
	for u, at := range sink.settled {
		end, ok := answered[u]
		if !ok {
			t.Fatalf("%s settled but never answered", u)
		}
		events = append(events, event{end, 1}, event{at, -1})
		if at.After(last) {
			last = at
		}
	}
	stored := len(sink.settled)
	first, busy := sink.first, sink.busy
	sink.mu.Unlock()
	if want := web.hosts * (web.pages + 3); stored < want {
		t.Fatalf("%d pages settled, want at least %d", stored, want)
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // a settle before an answer at the same instant
	})
	// The first responses of each host come after its robots.txt and
	// sitemap, which make the first fetch stages long and the limit wide
	// until the means settle: the bound holds from the tenth of the pages
	// on.
	settles := make([]time.Time, 0, stored)
	for _, e := range events {
		if e.delta < 0 {
			settles = append(settles, e.at)
		}
	}
	warm := settles[stored/10]
	unsettled, most := 0, 0
	for _, e := range events {
		unsettled += e.delta
		if !e.at.Before(warm) {
			most = max(most, unsettled)
		}
	}
	// The limit with a fetch stage of a few ms against 15 ms of
	// processing is 5 to 7 credits (more for a moment when a fetch stage
	// stalls, as under the race detector or beside other test binaries:
	// 13 once in a CI rehearsal), some of them requests in flight; without
	// admission every fetch worker holds a response, so half of them
	// still tells the two apart.
	const bound = 16
	if most > bound {
		t.Errorf("up to %d pages answered and not settled at once, want at most %d of %d fetch workers", most, bound, cfg.Workers)
	}
	// The processing workers must spend their time settling pages, not
	// waiting for responses: they also parse and record each one, more
	// so under the race detector, so the bar is half of their time.
	took := last.Sub(first)
	busyShare := float64(busy) / float64(time.Duration(cfg.ProcessWorkers)*took)
	if busyShare < 0.5 {
		t.Errorf("processing workers settled pages %.0f%% of the %v the crawl took, want at least 50%%", 100*busyShare, took)
	}
	t.Logf("%d pages, most unsettled at once %d, settled in %v, processing workers in Store %.0f%% of it", stored, most, took, 100*busyShare)
}
