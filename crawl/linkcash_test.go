package crawl

import (
	"errors"
	"fmt"
	"math"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

// storedSeen reads raw's seen record from Badger as it is now (nil if
// there is none).
func storedSeen(t *testing.T, db *badger.DB, host, raw string) *seenRecord {
	t.Helper()
	var rec *seenRecord
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(seenKey(host, hashURL(raw)))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err })
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// fetchedFrontier returns a frontier whose host "a" has its n URLs
// http://a/0 … fetched, each with no cash.
func fetchedFrontier(t *testing.T, n int) (*frontier, *badger.DB) {
	t.Helper()
	db := engOpenDB(t, t.TempDir())
	t.Cleanup(func() { _ = db.Close() })
	f := engFrontier(t, db, fastPoliteness(), newFakeClock())
	var items []addItem
	for i := range n {
		items = append(items, addItem{url: fmt.Sprintf("http://a/%d", i), host: "a"})
	}
	for start := 0; start < len(items); start += 200 {
		if _, err := f.add(items[start:min(start+200, len(items))], nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(takeAll(t, f, "a")); got != n {
		t.Fatalf("fetched %d URLs, want %d", got, n)
	}
	return f, db
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestDoneCash: cash given to fetched URLs is credited in memory, never
// lost, and reaches the seen record whenever something reads it there.
func TestDoneCash(t *testing.T) {
	t.Run("credits add up without rewriting the record", func(t *testing.T) {
		f, db := fetchedFrontier(t, 3)
		for range 40 {
			res, err := f.add([]addItem{{url: "http://a/1", host: "a", cash: 0.25}, {url: "http://a/2", host: "a"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.New != 0 || res.Known != 2 {
				t.Fatalf("add = %+v, want 2 known", res)
			}
			// The first link reads the record and writes its cash; the
			// others are credited in memory.
			if r := storedSeen(t, db, "a", "http://a/1"); r.Cash != 0.25 || r.History != 0.25 {
				t.Fatalf("record rewritten before a settle: cash %v history %v", r.Cash, r.History)
			}
		}
		if err := f.settleAll(false); err != nil {
			t.Fatal(err)
		}
		if r := storedSeen(t, db, "a", "http://a/1"); !near(r.Cash, 10) || !near(r.History, 10) || r.State != stateDone {
			t.Fatalf("after settle: %+v, want cash and history 10, fetched", r)
		}
		if err := f.settleAll(false); err != nil { // nothing pending: nothing added twice
			t.Fatal(err)
		}
		if r := storedSeen(t, db, "a", "http://a/1"); !near(r.Cash, 10) {
			t.Fatalf("second settle added again: cash %v", r.Cash)
		}
		if f.queued != 0 {
			t.Fatalf("fetched URLs queued again: %d", f.queued)
		}
	})

	t.Run("a full stripe settles, keeps its navigation and stays bounded", func(t *testing.T) {
		n := cashPerStripe + 300
		f, db := fetchedFrontier(t, n)
		const nav, rounds, chunk = 10, 3, 100 // URLs 0-9 are linked with every chunk
		want := map[string]float64{}
		for range rounds {
			for start := nav; start < n; start += chunk {
				var items []addItem
				for i := range nav {
					items = append(items, addItem{url: fmt.Sprintf("http://a/%d", i), host: "a", cash: 1})
				}
				for i := start; i < min(start+chunk, n); i++ {
					items = append(items, addItem{url: fmt.Sprintf("http://a/%d", i), host: "a", cash: 1})
				}
				for _, it := range items {
					want[it.url]++
				}
				if _, err := f.add(items, nil); err != nil {
					t.Fatal(err)
				}
				if m := len(f.cash[stripeOf("a")]); m > cashPerStripe {
					t.Fatalf("stripe remembers %d URLs, bound %d", m, cashPerStripe)
				}
			}
		}
		m := f.cash[stripeOf("a")]
		for u, w := range want {
			got := storedSeen(t, db, "a", u).Cash
			if e := m[hashURL(u)]; e != nil {
				got += e.pending
			}
			if !near(got, w) {
				t.Fatalf("%s: stored plus pending cash %v, want %v", u, got, w)
			}
		}
	})

	t.Run("a full stripe keeps the URLs credited since it last filled", func(t *testing.T) {
		const nav = 10
		n := nav + cashPerStripe + 50
		f, _ := fetchedFrontier(t, n)
		var navLinks, others []addItem
		for i := range n {
			it := addItem{url: fmt.Sprintf("http://a/%d", i), host: "a"}
			if i < nav {
				it.cash = 1
				navLinks = append(navLinks, it)
			} else {
				others = append(others, it)
			}
		}
		for _, batch := range [][]addItem{navLinks, navLinks, others} { // learned, credited, then a fill
			if _, err := f.add(batch, nil); err != nil {
				t.Fatal(err)
			}
		}
		if m := len(f.cash[stripeOf("a")]); m > cashPerStripe {
			t.Fatalf("stripe remembers %d URLs, bound %d", m, cashPerStripe)
		}
		for _, it := range navLinks {
			if f.remembered("a", hashURL(it.url)) == nil {
				t.Fatalf("%s forgotten when the stripe filled", it.url)
			}
		}
	})

	t.Run("a recrawl takes the credited cash into the queue", func(t *testing.T) {
		f, db := fetchedFrontier(t, 3)
		for _, c := range []float64{0.5, 0.25, 2} {
			if _, err := f.add([]addItem{{url: "http://a/0", host: "a", cash: c}, {url: "http://a/2", host: "a", cash: 0.125}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.add([]addItem{{url: "http://a/0", host: "a", recrawl: true}}, nil); err != nil {
			t.Fatal(err)
		}
		if e := f.remembered("a", hashURL("http://a/0")); e != nil {
			t.Fatalf("a URL queued again is still remembered, as %+v: its credited cash would count twice", e)
		}
		q, err := f.head(t.Context(), "a")
		if err != nil || q == nil || q.rec.URL != "http://a/0" {
			t.Fatalf("head = %+v, %v", q, err)
		}
		if !near(q.rec.Cash, 2.75) || !near(q.rec.History, 2.75) {
			t.Fatalf("re-queued with cash %v history %v, want 2.75", q.rec.Cash, q.rec.History)
		}
		if _, cash, _, err := decodeQueueKey(q.key); err != nil || !near(cash, 2.75) {
			t.Fatalf("queue key cash %v (%v), want 2.75", cash, err)
		}
		// Cash arriving while queued reaches the record at a settle.
		if _, err := f.add([]addItem{{url: "http://a/0", host: "a", cash: 1}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.settleAll(true); err != nil {
			t.Fatal(err)
		}
		if r := storedSeen(t, db, "a", "http://a/0"); !near(r.Cash, 3.75) || r.State != stateQueued {
			t.Fatalf("queued record %+v, want cash 3.75", r)
		}
		if r := storedSeen(t, db, "a", "http://a/2"); !near(r.Cash, 0.125) { // its first link's
			t.Fatalf("a settle of queued URLs wrote a fetched one: cash %v", r.Cash)
		}
		if err := f.settleAll(false); err != nil {
			t.Fatal(err)
		}
		if r := storedSeen(t, db, "a", "http://a/2"); !near(r.Cash, 0.375) {
			t.Fatalf("other URL's cash %v, want 0.375", r.Cash)
		}
	})

	t.Run("a dropped host leaves nothing to settle", func(t *testing.T) {
		f, db := fetchedFrontier(t, 2)
		if _, err := f.add([]addItem{{url: "http://a/1", host: "a", cash: 4}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.dropKeys(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		back := &seenRecord{URL: "http://a/1", State: stateDone}
		if err := f.importRecords("a", []*seenRecord{back}, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.settleAll(false); err != nil {
			t.Fatal(err)
		}
		if r := storedSeen(t, db, "a", "http://a/1"); r == nil || r.Cash != 0 {
			t.Fatalf("record imported after the drop: %+v, want no cash", r)
		}
	})

	t.Run("close settles", func(t *testing.T) {
		dir := t.TempDir()
		db := engOpenDB(t, dir)
		f, err := newFrontier(db, fastPoliteness(), 0, newFakeClock(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.add([]addItem{{url: "http://a/0", host: "a"}}, nil); err != nil {
			t.Fatal(err)
		}
		takeAll(t, f, "a")
		if _, err := f.add([]addItem{{url: "http://a/0", host: "a", cash: 3}}, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.close(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = engOpenDB(t, dir)
		defer db.Close()
		if r := storedSeen(t, db, "a", "http://a/0"); r == nil || !near(r.Cash, 3) {
			t.Fatalf("after close and reopen: %+v, want cash 3", r)
		}
	})
}

// TestExportCarriesCreditedCash: a host handed off takes the cash its
// fetched URLs were credited in memory.
func TestExportCarriesCreditedCash(t *testing.T) {
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	c := engCrawler(t, db, nil)
	if err := c.Add(t.Context(), []Discovered{{URL: "http://move.test/"}}); err != nil {
		t.Fatal(err)
	}
	q, err := c.front.head(t.Context(), "move.test")
	if err != nil || q == nil {
		t.Fatal(q, err)
	}
	if err := c.front.finish(q, func(r *seenRecord) { r.Cash = 0 }, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Add(t.Context(), []Discovered{{URL: "http://move.test/", SourceHost: "x", Cash: 1.5}}); err != nil {
			t.Fatal(err)
		}
	}
	exp, err := c.ExportHost(t.Context(), "move.test")
	if err != nil {
		t.Fatal(err)
	}
	if len(exp.URLs) != 1 {
		t.Fatalf("exported %d records, want 1", len(exp.URLs))
	}
	r, err := decodeSeenRecord(exp.URLs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.Cash, 4.5) {
		t.Fatalf("exported cash %v, want 4.5", r.Cash)
	}
}

// TestQueuedCash: the link that reads a queued URL's record moves it; the
// next are credited in memory, and a settle moves the URL once for all of
// them; a fetch takes the credit into the cash the page passes on.
func TestQueuedCash(t *testing.T) {
	db := engOpenDB(t, t.TempDir())
	defer db.Close()
	f := engFrontier(t, db, fastPoliteness(), newFakeClock())
	queueKeys := func() int { return countPrefix(t, db, queuePrefix("a")) }
	var seed []addItem
	for _, u := range []string{"http://a/0", "http://a/1", "http://a/2"} {
		seed = append(seed, addItem{url: u, host: "a", cash: 0.1, depth: 3})
	}
	seed = append(seed, addItem{url: "http://a/p", host: "a", cash: 1, depth: 3})
	if _, err := f.add(seed, nil); err != nil {
		t.Fatal(err)
	}

	for i := range 10 {
		res, err := f.add([]addItem{{url: "http://a/2", host: "a", cash: 0.2, depth: 3 - min(i, 2)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.New != 0 || res.Known != 1 {
			t.Fatalf("link %d: add = %+v, want 1 known", i, res)
		}
	}
	// The first link read the record and wrote its cash; the others wait.
	if r := storedSeen(t, db, "a", "http://a/2"); !near(r.Cash, 0.3) || r.Depth != 3 {
		t.Fatalf("record before a settle: cash %v depth %d, want the first link's 0.3 and 3", r.Cash, r.Depth)
	}
	if q, err := f.head(t.Context(), "a"); err != nil || q == nil || q.rec.URL != "http://a/p" {
		t.Fatalf("head before a settle = %+v, %v; want http://a/p", q, err)
	}
	if err := f.settleAll(true); err != nil {
		t.Fatal(err)
	}
	if r := storedSeen(t, db, "a", "http://a/2"); !near(r.Cash, 2.1) || !near(r.History, 2.1) || r.Depth != 1 || r.State != stateQueued {
		t.Fatalf("after a settle: %+v, want cash and history 2.1, depth 1, queued", r)
	}
	q, err := f.head(t.Context(), "a")
	if err != nil || q == nil || q.rec.URL != "http://a/2" {
		t.Fatalf("head after a settle = %+v, %v; want http://a/2", q, err)
	}
	if _, cash, depth, err := decodeQueueKey(q.key); err != nil || !near(cash, 2.1) || depth != 1 {
		t.Fatalf("queue key cash %v depth %d (%v), want 2.1 and 1", cash, depth, err)
	}
	if n := queueKeys(); n != 4 {
		t.Fatalf("%d queue keys after a settle, want 4", n)
	}
	if err := f.settleAll(true); err != nil { // nothing credited since: nothing moves
		t.Fatal(err)
	}
	if q2, err := f.head(t.Context(), "a"); err != nil || q2 == nil || string(q2.key) != string(q.key) {
		t.Fatalf("a second settle moved the head: %+v, %v", q2, err)
	}

	// A fetch takes what links credited since the last settle.
	for range 2 {
		if _, err := f.add([]addItem{{url: "http://a/1", host: "a", cash: 0.5, depth: 3}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	var q1 *queued
	for q1 == nil {
		q, err := f.head(t.Context(), "a")
		if err != nil || q == nil {
			t.Fatalf("head = %+v, %v before http://a/1", q, err)
		}
		if q.rec.URL == "http://a/1" {
			q1 = q
			break
		}
		if err := f.finish(q, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	var passedOn float64
	if err := f.finish(q1, nil, func(_ *badger.Txn, r *seenRecord) error { passedOn = r.Cash; return nil }); err != nil {
		t.Fatal(err)
	}
	if !near(passedOn, 1.1) {
		t.Fatalf("a fetch passed on cash %v, want 1.1", passedOn)
	}
	if err := f.settleAll(false); err != nil {
		t.Fatal(err)
	}
	if r := storedSeen(t, db, "a", "http://a/1"); !near(r.Cash, 1.1) || r.State != stateDone {
		t.Fatalf("fetched record %+v, want cash 1.1 (credited once)", r)
	}
	if n := queueKeys(); n != 1 { // a/0 is left
		t.Fatalf("%d queue keys, want 1", n)
	}
}
