package crawl

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// fakeClock is a manual clock: After fires when Advance passes its deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, fakeWaiter{at: f.now.Add(d), ch: ch})
	return ch
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	rest := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			rest = append(rest, w)
		}
	}
	f.waiters = rest
}

func engOpenDB(t testing.TB, dir string) *badger.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatalf("open badger: %v", err)
	}
	return db
}

func engFrontier(t testing.TB, db *badger.DB, cfg PolitenessConfig, clock Clock) *frontier {
	t.Helper()
	f, err := newFrontier(db, cfg, 0, clock, 10_000)
	if err != nil {
		t.Fatalf("newFrontier: %v", err)
	}
	t.Cleanup(func() { _ = f.close() })
	return f
}

func fastPoliteness() PolitenessConfig { return FastConfig().Politeness }

// takeAll drains one host's queue in crawl order.
func takeAll(t testing.TB, f *frontier, host string) []string {
	t.Helper()
	var got []string
	for {
		q, err := f.head(t.Context(), host)
		if err != nil {
			t.Fatalf("head: %v", err)
		}
		if q == nil {
			return got
		}
		got = append(got, q.rec.URL)
		if err := f.finish(q, nil, nil); err != nil {
			t.Fatalf("finish: %v", err)
		}
	}
}

func TestFrontierOrderWithinHost(t *testing.T) {
	tests := []struct {
		name  string
		items []addItem
		want  []string
	}{
		{
			name: "more cash first",
			items: []addItem{
				{url: "http://a/1", cash: 0.1}, {url: "http://a/2", cash: 0.5}, {url: "http://a/3", cash: 0.3},
			},
			want: []string{"http://a/2", "http://a/3", "http://a/1"},
		},
		{
			name: "equal cash: shallower first",
			items: []addItem{
				{url: "http://a/deep", cash: 0.2, depth: 3}, {url: "http://a/top", cash: 0.2, depth: 0}, {url: "http://a/mid", cash: 0.2, depth: 1},
			},
			want: []string{"http://a/top", "http://a/mid", "http://a/deep"},
		},
		{
			name: "equal cash and depth: FIFO",
			items: []addItem{
				{url: "http://a/x", cash: 0, depth: 1}, {url: "http://a/y", cash: 0, depth: 1}, {url: "http://a/z", cash: 0, depth: 1},
			},
			want: []string{"http://a/x", "http://a/y", "http://a/z"},
		},
		{
			name: "cash arriving later moves a URL up, no duplicate",
			items: []addItem{
				{url: "http://a/1", cash: 0.3}, {url: "http://a/2", cash: 0.2}, {url: "http://a/2", cash: 0.2},
			},
			want: []string{"http://a/2", "http://a/1"},
		},
		{
			name:  "bad cash from a peer is zero",
			items: []addItem{{url: "http://a/nan", cash: -5}, {url: "http://a/ok", cash: 0.01}},
			want:  []string{"http://a/ok", "http://a/nan"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := engFrontier(t, engOpenDB(t, t.TempDir()), fastPoliteness(), newFakeClock())
			for _, it := range tc.items {
				it.host = "a"
				if _, err := f.add([]addItem{it}, nil); err != nil {
					t.Fatal(err)
				}
				if err := f.settleAll(true); err != nil {
					t.Fatal(err)
				}
			}
			if got := takeAll(t, f, "a"); !equalStrings(got, tc.want) {
				t.Fatalf("order = %v, want %v", got, tc.want)
			}
			if f.queued != 0 || f.hosts["a"].queued != 0 {
				t.Fatalf("counts after drain: total %d host %d", f.queued, f.hosts["a"].queued)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFrontierOrderAcrossHosts(t *testing.T) {
	clock := newFakeClock()
	f := engFrontier(t, engOpenDB(t, t.TempDir()), fastPoliteness(), clock)
	items := []addItem{
		{url: "http://low/", host: "low", cash: 0.1},
		{url: "http://high/", host: "high", cash: 0.9},
		{url: "http://deep/", host: "deep", cash: 0.5, depth: 4},
		{url: "http://shallow/", host: "shallow", cash: 0.5, depth: 1},
	}
	if _, err := f.add(items, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		h, _ := f.next(clock.Now())
		if h == nil {
			break
		}
		got = append(got, h.key)
	}
	want := []string{"high", "shallow", "deep", "low"}
	if !equalStrings(got, want) {
		t.Fatalf("host order = %v, want %v", got, want)
	}
	// Every host is in flight now: none may be handed out twice.
	if h, _ := f.next(clock.Now().Add(time.Hour)); h != nil {
		t.Fatalf("host %s handed out while in flight", h.key)
	}
}

func TestFrontierSeenSet(t *testing.T) {
	f := engFrontier(t, engOpenDB(t, t.TempDir()), fastPoliteness(), newFakeClock())
	res, err := f.add([]addItem{{url: "http://a/1", host: "a"}, {url: "http://a/1", host: "a"}, {url: "http://a/2", host: "a"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.New != 2 || res.Known != 1 {
		t.Fatalf("add = %+v, want 2 new 1 known", res)
	}
	takeAll(t, f, "a")
	res, err = f.add([]addItem{{url: "http://a/1", host: "a", cash: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.New != 0 || f.queued != 0 {
		t.Fatalf("fetched URL re-queued: %+v, queued %d", res, f.queued)
	}
}

func TestFrontierPersistence(t *testing.T) {
	dir := t.TempDir()
	db := engOpenDB(t, dir)
	f, err := newFrontier(db, fastPoliteness(), 0, newFakeClock(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var items []addItem
	for i, host := range []string{"a", "b", "c"} {
		for j := range 5 {
			items = append(items, addItem{url: "http://" + host + "/" + string(rune('0'+j)), host: host, cash: float64(j) / 10, depth: i})
		}
	}
	if _, err := f.add(items, nil); err != nil {
		t.Fatal(err)
	}
	q, err := f.head(t.Context(), "a")
	if err != nil || q == nil {
		t.Fatalf("head: %v %v", q, err)
	}
	if err := f.finish(q, nil, nil); err != nil {
		t.Fatal(err)
	}
	f.hosts["b"].rec.Fetched = 7
	if err := f.saveHost(f.hosts["b"]); err != nil {
		t.Fatal(err)
	}
	_ = f.close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = engOpenDB(t, dir)
	defer db.Close()
	for round, bloom := range []int{0, 1000} { // the seen set answers the same with and without the filter
		g, err := newFrontier(db, fastPoliteness(), 0, newFakeClock(), bloom)
		if err != nil {
			t.Fatal(err)
		}
		if g.queued != int64(14+round) || g.hosts["a"].queued != int64(4+round) || g.hosts["b"].queued != 5 {
			t.Fatalf("bloom %d: counts after reopen: total %d a %d b %d", bloom, g.queued, g.hosts["a"].queued, g.hosts["b"].queued)
		}
		if g.hosts["a"].headCash != 0.3 {
			t.Fatalf("head of a after reopen = %v, want 0.3", g.hosts["a"].headCash)
		}
		if g.hosts["b"].rec.Fetched != 7 {
			t.Fatalf("host record lost: %+v", g.hosts["b"].rec)
		}
		newURL := "http://a/new" + string(rune('0'+round))
		res, err := g.add([]addItem{{url: "http://a/4", host: "a"}, {url: "http://a/1", host: "a"}, {url: newURL, host: "a"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.New != 1 || res.Known != 2 {
			t.Fatalf("bloom %d: seen set after reopen: %+v", bloom, res)
		}
		q, _ := g.head(t.Context(), "a")
		if q == nil || q.rec.URL != "http://a/3" {
			t.Fatalf("head after reopen = %+v", q)
		}
		_ = g.close()
	}
}

// TestFrontierCountsUnderConcurrency: links arriving for a host while its
// slot finishes must neither be lost from the schedule nor miscounted (a
// release that read the queue before a concurrent add committed used to
// forget the new entries).
func TestFrontierCountsUnderConcurrency(t *testing.T) {
	clock := newFakeClock()
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	f := engFrontier(t, db, fastPoliteness(), clock)
	if _, err := f.add([]addItem{{url: "http://a/0", host: "a"}}, nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 200; i++ {
		h, _ := f.next(clock.Now())
		if h == nil {
			t.Fatalf("round %d: host a not scheduled although %d queued", i, f.hosts["a"].queued)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := f.add([]addItem{{url: fmt.Sprintf("http://a/%d", i), host: "a"}}, nil); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			q, err := f.head(t.Context(), "a")
			if err != nil {
				t.Error(err)
				return
			}
			if q != nil {
				if err := f.finish(q, nil, nil); err != nil {
					t.Error(err)
				}
			}
			f.release(h, clock.Now(), outcomeOK, 0, 0, 0)
		})
		wg.Wait()
		var keys int64
		_ = db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: queuePrefix("a")})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				keys++
			}
			return nil
		})
		f.mu.Lock()
		queued, total := f.hosts["a"].queued, f.queued
		f.mu.Unlock()
		if keys != queued || keys != total {
			t.Fatalf("round %d: %d queue keys, host count %d, total %d", i, keys, queued, total)
		}
		if keys == 0 { // keep the host busy for the next round
			if _, err := f.add([]addItem{{url: fmt.Sprintf("http://a/r%d", i), host: "a"}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFrontierHeadAfterMark checks that reading a host's head from its
// mark (the seek past fetched entries) returns what a rewind to the queue
// prefix would: entries added above and below the mark, cash moving an
// entry up, entries imported by a handoff, and a host that empties and
// fills again. The model is the queue order itself: more cash, then
// shallower, then first (re)queued.
func TestFrontierHeadAfterMark(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			f := engFrontier(t, engOpenDB(t, t.TempDir()), fastPoliteness(), newFakeClock())
			rng := rand.New(rand.NewPCG(seed, 0))
			type entry struct {
				cash  float64
				depth int
				seq   int
			}
			model := map[string]*entry{}
			seq := 0
			best := func() string {
				var bu string
				var be *entry
				for u, e := range model {
					if be == nil || e.cash > be.cash || e.cash == be.cash && (e.depth < be.depth || e.depth == be.depth && e.seq < be.seq) {
						bu, be = u, e
					}
				}
				return bu
			}
			next := 0
			for step := range 2000 {
				switch op := rng.IntN(10); {
				case op < 4: // a new URL, sometimes better than everything queued
					u := fmt.Sprintf("http://a/%d", next)
					next++
					it := addItem{url: u, host: "a", cash: float64(rng.IntN(20)) / 10, depth: rng.IntN(3)}
					if _, err := f.add([]addItem{it}, nil); err != nil {
						t.Fatal(err)
					}
					seq++
					model[u] = &entry{it.cash, it.depth, seq}
				case op < 5 && len(model) > 0: // cash for a queued URL moves it up (by the next settle at the latest)
					var u string
					for u = range model { // any queued URL
						break
					}
					e := model[u]
					if _, err := f.add([]addItem{{url: u, host: "a", cash: 0.5, depth: e.depth}}, nil); err != nil {
						t.Fatal(err)
					}
					if err := f.settleAll(true); err != nil {
						t.Fatal(err)
					}
					seq++
					e.cash += 0.5
					e.seq = seq
				case op < 6: // a handoff brings a queued URL
					u := fmt.Sprintf("http://a/imported-%d", next)
					next++
					rec := &seenRecord{URL: u, State: stateQueued, Cash: float64(rng.IntN(30)) / 10, Depth: rng.IntN(3)}
					if err := f.importRecords("a", []*seenRecord{rec}, nil); err != nil {
						t.Fatal(err)
					}
					seq++
					model[u] = &entry{rec.Cash, rec.Depth, seq}
				case op < 7 && len(model) > 0: // fetched elsewhere: often the head a release just read
					u := best()
					if rng.IntN(2) == 0 {
						for u = range model {
							break
						}
					}
					if err := f.markDone([]addItem{{url: u, host: "a"}}, time.Now()); err != nil {
						t.Fatal(err)
					}
					delete(model, u)
				default: // fetch the head
					q, err := f.head(t.Context(), "a")
					if err != nil {
						t.Fatal(err)
					}
					want := best()
					if q == nil {
						if want != "" {
							t.Fatalf("step %d: head empty, want %s", step, want)
						}
						continue
					}
					if q.rec.URL != want {
						t.Fatalf("step %d: head %s (cash %v), want %s (cash %v)", step, q.rec.URL, q.rec.Cash, want, model[want].cash)
					}
					if err := f.finish(q, nil, nil); err != nil {
						t.Fatal(err)
					}
					delete(model, want)
					cash, depth, ok := f.readHead("a")
					if w := best(); ok != (w != "") || ok && (cash != model[w].cash || depth != model[w].depth) {
						t.Fatalf("step %d: readHead = %v %d %v, want the entry of %q", step, cash, depth, ok, w)
					}
				}
			}
		})
	}
}

// BenchmarkFrontierFetchOrder is the frontier's share of one fetch slot on
// a host with a long crawl behind it: read the head, mark it fetched, read
// the next head (release). Fetched entries leave tombstones at the front of
// the host's queue until Badger compacts them, so reading the head by
// rewinding to the queue prefix cost more with every page fetched.
//
//	go test -run '^$' -bench BenchmarkFrontierFetchOrder -benchtime 20000x ./crawl/
func BenchmarkFrontierFetchOrder(b *testing.B) {
	f := engFrontier(b, engOpenDB(b, b.TempDir()), fastPoliteness(), newFakeClock())
	const chunk = 1000
	add := func(n int) {
		items := make([]addItem, 0, chunk)
		for i := range n {
			items = append(items, addItem{url: fmt.Sprintf("http://a/%d", i), host: "a", cash: 1})
			if len(items) == chunk || i == n-1 {
				if _, err := f.add(items, nil); err != nil {
					b.Fatal(err)
				}
				items = items[:0]
			}
		}
	}
	add(b.N + 1)
	b.ResetTimer()
	for range b.N {
		q, err := f.head(b.Context(), "a")
		if err != nil || q == nil {
			b.Fatalf("head: %v %v", q, err)
		}
		if err := f.finish(q, nil, nil); err != nil {
			b.Fatal(err)
		}
		if _, _, ok := f.readHead("a"); !ok {
			b.Fatal("queue empty too early")
		}
	}
}

// TestSaveHostChanged: a slot that leaves its host's record as it found it
// (nothing queued could be fetched) writes nothing; one that changed it
// writes the record as it is now.
func TestSaveHostChanged(t *testing.T) {
	tests := []struct {
		name   string
		change func(r *hostRecord)
		writes bool
	}{
		{"unchanged", func(*hostRecord) {}, false},
		{"changed", func(r *hostRecord) { r.NextAllowed += int64(time.Second) }, true},
		{"sitemap read", func(r *hostRecord) { r.SitemapsRead = append(r.SitemapsRead, "http://a/sitemap.xml") }, true},
		{"changed and back", func(r *hostRecord) { r.Fetched++; r.Fetched-- }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := engOpenDB(t, t.TempDir())
			t.Cleanup(func() { _ = db.Close() })
			f := engFrontier(t, db, fastPoliteness(), newFakeClock())
			if _, err := f.add([]addItem{{url: "http://a/", host: "a"}}, nil); err != nil {
				t.Fatal(err)
			}
			h := f.hosts["a"]
			h.rec.Fetched = 3
			if err := f.saveHost(h); err != nil {
				t.Fatal(err)
			}
			stored := func() (uint64, hostRecord) {
				t.Helper()
				var v uint64
				var rec hostRecord
				err := db.View(func(txn *badger.Txn) error {
					item, err := txn.Get(hostKey("a"))
					if err != nil {
						return err
					}
					v = item.Version()
					return item.Value(func(b []byte) error { rec, err = decodeHostRecord(b); return err })
				})
				if err != nil {
					t.Fatal(err)
				}
				return v, rec
			}
			v0, _ := stored()
			before := f.hostRecordOf(h)
			f.mu.Lock()
			tc.change(&h.rec)
			f.mu.Unlock()
			if err := f.saveHostChanged(h, before); err != nil {
				t.Fatal(err)
			}
			v1, rec := stored()
			if wrote := v1 != v0; wrote != tc.writes {
				t.Fatalf("record written = %v, want %v", wrote, tc.writes)
			}
			if !bytes.Equal(rec.encode(), f.hostRecordOf(h)) {
				t.Errorf("stored %+v, in memory %+v", rec, h.rec)
			}
		})
	}
}

// TestGatedSlotLeavesRecord: a slot the Sink's gate refused waits its
// pause in memory; the host's record, which a restart reads, is left as
// it was, so there is nothing to save. The next slot with a request
// drops the pause.
func TestGatedSlotLeavesRecord(t *testing.T) {
	db := engOpenDB(t, t.TempDir())
	t.Cleanup(func() { _ = db.Close() })
	clock := newFakeClock()
	f := engFrontier(t, db, fastPoliteness(), clock)
	if _, err := f.add([]addItem{{url: "http://a/", host: "a"}}, nil); err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	h, _ := f.next(now)
	if h == nil {
		t.Fatal("host a not due")
	}
	before := f.hostRecordOf(h)
	f.release(h, now, outcomeGated, 0, 0, 500*time.Millisecond)
	if got := f.hostRecordOf(h); !bytes.Equal(got, before) {
		t.Errorf("gated slot changed the record: %s, was %s", got, before)
	}
	if got, want := h.readyAt(), now.Add(500*time.Millisecond); !got.Equal(want) {
		t.Errorf("gated host ready at %v, want %v", got, want)
	}
	if h2, _ := f.next(now.Add(499 * time.Millisecond)); h2 != nil {
		t.Errorf("gated host %s due before its pause ended", h2.key)
	}
	later := now.Add(time.Second)
	if h, _ = f.next(later); h == nil {
		t.Fatal("gated host not due after its pause")
	}
	f.release(h, later, outcomeOK, time.Millisecond, 0, 0)
	if h.gatedUntil != 0 {
		t.Errorf("a slot with a request left the gate's pause: %d", h.gatedUntil)
	}
}

// TestFrontierSettleQueued: a host's queue given up in batches settles
// every queued URL (best first, as head would serve them), each as finish
// would, deletes orphan queue keys on the way, and leaves the counts and
// the head as if each URL had been read and finished.
func TestFrontierSettleQueued(t *testing.T) {
	for _, tt := range []struct {
		name    string
		urls    int
		orphans int
		limit   int
	}{
		{"one batch", 5, 0, 10},
		{"batches", 23, 0, 4},
		{"exactly a batch", 8, 0, 8},
		{"with orphan queue keys", 12, 3, 5},
		{"empty queue", 0, 0, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := engOpenDB(t, t.TempDir())
			f := engFrontier(t, db, fastPoliteness(), newFakeClock())
			var want []string
			for i := range tt.urls {
				it := addItem{url: fmt.Sprintf("http://a/%d", i), host: "a", cash: float64(i%5) / 10, depth: i % 3}
				if _, err := f.add([]addItem{it}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.settleAll(true); err != nil {
				t.Fatal(err)
			}
			if tt.urls > 0 {
				want = queueOrderOf(t, db)
			}
			// Orphans: queue keys whose seen record is gone.
			for i := range tt.orphans {
				u := want[len(want)-1-i]
				if err := db.Update(func(txn *badger.Txn) error { return txn.Delete(seenKey("a", hashURL(u))) }); err != nil {
					t.Fatal(err)
				}
			}
			live := want[:len(want)-tt.orphans]
			if tt.orphans > 0 {
				f.mu.Lock()
				f.hosts["a"].queued -= int64(tt.orphans) // as the store now says
				f.queued -= int64(tt.orphans)
				f.mu.Unlock()
			}

			var settled, rounds int
			for more := true; more; rounds++ {
				var n int
				var err error
				n, more, err = f.settleQueued("a", tt.limit, func(r *seenRecord) { r.Outcome = "dns_nxdomain" })
				if err != nil {
					t.Fatal(err)
				}
				if rounds == 0 && tt.orphans == 0 {
					// The first batch is the best URLs.
					for _, u := range live[:n] {
						if rec := seenOf(t, db, u); rec.State != stateDone {
							t.Errorf("%s, among the %d best, not settled first: %+v", u, n, rec)
						}
					}
				}
				settled += n
				if rounds > len(want) {
					t.Fatal("settleQueued never says the queue is empty")
				}
			}
			if settled != len(live) {
				t.Errorf("settled %d URLs, want %d", settled, len(live))
			}
			for _, u := range live {
				if rec := seenOf(t, db, u); rec.State != stateDone || rec.Outcome != "dns_nxdomain" || rec.QKey != nil {
					t.Errorf("%s after settling: %+v", u, rec)
				}
			}
			if q, err := f.head(t.Context(), "a"); err != nil || q != nil {
				t.Errorf("head after settling: %+v, %v", q, err)
			}
			if f.queued != 0 || tt.urls > 0 && f.hosts["a"].queued != 0 {
				t.Errorf("counts after settling: total %d", f.queued)
			}
			if n := countPrefix(t, db, queuePrefix("a")); n != 0 {
				t.Errorf("%d queue keys left", n)
			}
		})
	}
}

// queueOrderOf is host a's queue in db in key order, the order head
// serves it in.
func queueOrderOf(t *testing.T, db *badger.DB) []string {
	t.Helper()
	var urls []string
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: queuePrefix("a")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			urls = append(urls, string(v))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return urls
}

func seenOf(t *testing.T, db *badger.DB, u string) *seenRecord {
	t.Helper()
	var rec *seenRecord
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(seenKey("a", hashURL(u)))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err })
	})
	if err != nil {
		t.Fatalf("seen record of %s: %v", u, err)
	}
	return rec
}

func countPrefix(t *testing.T, db *badger.DB, prefix []byte) int {
	t.Helper()
	n := 0
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
