package crawl

import (
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

func TestRecrawlInterval(t *testing.T) {
	r := RecrawlConfig{Enabled: true, Initial: 8 * time.Hour, Min: 2 * time.Hour, Max: 32 * time.Hour, ScanInterval: time.Minute, MaxBatch: 10}
	tests := []struct {
		name    string
		prev    time.Duration
		changed bool
		first   bool
		want    time.Duration
	}{
		{"first visit", 0, true, true, 8 * time.Hour},
		{"changed halves", 8 * time.Hour, true, false, 4 * time.Hour},
		{"unchanged doubles", 8 * time.Hour, false, false, 16 * time.Hour},
		{"halving stops at Min", 3 * time.Hour, true, false, 2 * time.Hour},
		{"doubling stops at Max", 30 * time.Hour, false, false, 32 * time.Hour},
	}
	for _, tc := range tests {
		if got := r.nextInterval(tc.prev, tc.changed, tc.first); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRecrawlDue: a stored page comes back into the frontier when its
// interval has passed, with its validators for a conditional request, and
// the interval adapts to change.
func TestRecrawlDue(t *testing.T) {
	clock := newFakeClock()
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	c := engCrawler(t, db, func(cfg *Config) {
		cfg.Clock = clock
		cfg.Recrawl = RecrawlConfig{Enabled: true, Initial: 4 * time.Hour, Min: time.Hour, Max: 16 * time.Hour, ScanInterval: time.Minute, MaxBatch: 100}
	})
	if err := c.Add(t.Context(), []Discovered{{URL: "http://re.test/page"}}); err != nil {
		t.Fatal(err)
	}
	visit := func(changed bool) {
		t.Helper()
		q, err := c.front.head(t.Context(), "re.test")
		if err != nil || q == nil {
			t.Fatalf("head: %v %v", q, err)
		}
		err = c.front.finish(q, func(r *seenRecord) { r.ETag = `"v1"`; r.FetchedAt = clock.Now().UnixNano() },
			func(txn *badger.Txn, r *seenRecord) error {
				return c.scheduleRecrawl(txn, q.host, q.hash, r, changed, clock.Now())
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	visit(true)
	clock.Advance(4*time.Hour - time.Second)
	if n, err := c.recrawlDue(clock.Now()); err != nil || n != 0 {
		t.Fatalf("recrawled early: %d %v", n, err)
	}
	clock.Advance(time.Second)
	if n, err := c.recrawlDue(clock.Now()); err != nil || n != 1 {
		t.Fatalf("recrawl due = %d %v, want 1", n, err)
	}
	q, _ := c.front.head(t.Context(), "re.test")
	if q == nil || q.rec.ETag != `"v1"` || q.rec.FetchedAt == 0 {
		t.Fatalf("re-queued entry lost its validators: %+v", q)
	}
	visit(false) // 304 or same content: interval doubles to 8h
	clock.Advance(8*time.Hour - time.Second)
	if n, _ := c.recrawlDue(clock.Now()); n != 0 {
		t.Fatal("unchanged page recrawled before its doubled interval")
	}
	clock.Advance(time.Second)
	if n, _ := c.recrawlDue(clock.Now()); n != 1 {
		t.Fatal("unchanged page not recrawled after its doubled interval")
	}
	if st := c.Stats(); st.Frontier != 1 {
		t.Fatalf("frontier = %d, want 1 (no duplicate entries)", st.Frontier)
	}
}
