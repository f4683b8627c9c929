package crawl

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// BenchmarkSeenSet measures the URL-seen check of the frontier (a batch of
// 50 links, as from one page) with and without the Bloom filter, for links
// never seen (the common case early in a crawl) and links already queued.
func BenchmarkSeenSet(b *testing.B) {
	for _, bloom := range []int{0, 1_000_000} {
		for _, known := range []bool{false, true} {
			b.Run(fmt.Sprintf("bloom=%v/known=%v", bloom > 0, known), func(b *testing.B) {
				db := engOpenDB(b, b.TempDir())
				defer db.Close()
				f := engFrontier(b, db, fastPoliteness(), newFakeClock())
				f.bloom = nil
				if bloom > 0 {
					f.bloom = newBloomFilter(bloom)
				}
				// A populated set: 100k URLs over 100 hosts.
				for i := range 2000 {
					batch := make([]addItem, 50)
					for j := range batch {
						batch[j] = addItem{url: fmt.Sprintf("http://h%d.test/pre/%d", j, i), host: fmt.Sprintf("h%d.test", j)}
					}
					if _, err := f.add(batch, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					batch := make([]addItem, 50)
					for j := range batch {
						u := fmt.Sprintf("http://h%d.test/new/%d", j, i)
						if known {
							u = fmt.Sprintf("http://h%d.test/pre/%d", j, i%2000)
						}
						batch[j] = addItem{url: u, host: fmt.Sprintf("h%d.test", j)}
					}
					if _, err := f.add(batch, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*50), "ns/link")
			})
		}
	}
}

// BenchmarkCrawlPipeline crawls a local web of 20 hosts x 50 pages (no
// artificial latency) from scratch per iteration: DNS, fetch, robots,
// sitemaps, parse, near-dup claim, routing, frontier and store.
func BenchmarkCrawlPipeline(b *testing.B) {
	web := newEngWeb(b, 20, 50, -1)
	web.clean = true
	dnsAddr := engDNS(b)
	pages := len(web.truth())
	var elapsed time.Duration
	var allocs uint64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		db := engOpenDB(b, b.TempDir())
		cfg := engConfig(dnsAddr)
		cfg.Workers = 16
		sink := newEngSink()
		c, err := New(db, cfg, sink, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			b.Fatal(err)
		}
		web.mu.Lock()
		clear(web.served503)
		clear(web.robotsErr)
		web.mu.Unlock()
		if err := c.Add(context.Background(), []Discovered{{URL: web.url(0, "/")}}); err != nil {
			b.Fatal(err)
		}
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		b.StartTimer()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		for !(c.Idle() && c.Stats().Stored >= int64(pages-web.hosts)) {
			if time.Since(start) > time.Minute {
				b.Fatalf("crawl did not finish: %+v", c.Stats())
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		elapsed += time.Since(start)
		cancel()
		<-done
		runtime.ReadMemStats(&ms1)
		allocs += ms1.Mallocs - ms0.Mallocs
		sink.mu.Lock()
		stored := len(sink.stored)
		sink.mu.Unlock()
		if stored < pages-web.hosts { // every page but the redirects
			b.Fatalf("stored %d of %d pages: %+v", stored, pages, c.Stats())
		}
		_ = c.Close()
		_ = db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(pages*b.N)/elapsed.Seconds(), "pages/s")
	b.ReportMetric(float64(allocs)/float64(pages*b.N), "allocs/page")
}

// BenchmarkSeenLookup isolates the check for a never-seen URL: a Badger
// read (a miss) against the Bloom filter's answer, on a set of 100k URLs.
func BenchmarkSeenLookup(b *testing.B) {
	db := engOpenDB(b, b.TempDir())
	defer db.Close()
	f := engFrontier(b, db, fastPoliteness(), newFakeClock())
	f.bloom = newBloomFilter(1_000_000)
	for i := range 2000 {
		batch := make([]addItem, 50)
		for j := range batch {
			batch[j] = addItem{url: fmt.Sprintf("http://h%d.test/pre/%d", j, i), host: fmt.Sprintf("h%d.test", j)}
		}
		if _, err := f.add(batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("badger-miss", func(b *testing.B) {
		b.ReportAllocs()
		txn := db.NewTransaction(false)
		defer txn.Discard()
		for i := 0; b.Loop(); i++ {
			h := hashURL(fmt.Sprintf("http://h%d.test/new/%d", i%50, i))
			if _, err := txn.Get(seenKey(fmt.Sprintf("h%d.test", i%50), h)); err == nil {
				b.Fatal("found a new URL")
			}
		}
	})
	b.Run("bloom-miss", func(b *testing.B) {
		b.ReportAllocs()
		fp := 0
		for i := 0; b.Loop(); i++ {
			h := hashURL(fmt.Sprintf("http://h%d.test/new/%d", i%50, i))
			_ = seenKey(fmt.Sprintf("h%d.test", i%50), h) // same key building cost as above
			if f.bloom.mayContain(h) {
				fp++
			}
		}
		b.ReportMetric(float64(fp)/float64(b.N), "false-positive-rate")
	})
}

// BenchmarkLinksToFetched measures a page's links in a crawl where most of
// them point at pages fetched already: one op is one page of 40 links with
// cash on a host of 20,000 fetched URLs, 30 of them the same navigation
// links on every page and 10 spread over the host, with a settle of the
// credited cash every 500 pages (Run settles every few seconds). Badger
// has a node's small memtables, so that seen records are read from
// tables, as in a long crawl.
func BenchmarkLinksToFetched(b *testing.B) { benchmarkLinks(b, true) }

// BenchmarkLinksToQueued is BenchmarkLinksToFetched early in a site's
// crawl: the host's 20,000 URLs are queued, not fetched, so that every
// link adds cash to a queued URL and may move it up its queue. Queued
// URLs are settled every 500 pages (Run settles them every two seconds).
func BenchmarkLinksToQueued(b *testing.B) { benchmarkLinks(b, false) }

func benchmarkLinks(b *testing.B, fetched bool) {
	db, err := badger.Open(badger.DefaultOptions(b.TempDir()).WithLogger(nil).WithMemTableSize(4 << 20).WithValueThreshold(1 << 10))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	f := engFrontier(b, db, fastPoliteness(), newFakeClock())
	const urls = 20_000
	for start := 0; start < urls; start += 500 {
		var items []addItem
		for i := start; i < start+500; i++ {
			it := addItem{url: fmt.Sprintf("http://docs.test/page/%d.html", i), host: "docs.test"}
			if !fetched {
				it.cash, it.depth = 0.01, 3
			}
			items = append(items, it)
		}
		if _, err := f.add(items, nil); err != nil {
			b.Fatal(err)
		}
	}
	if fetched {
		if got := len(takeAll(b, f, "docs.test")); got != urls {
			b.Fatalf("fetched %d URLs, want %d", got, urls)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		links := make([]addItem, 40)
		for j := range links {
			n := j
			if j >= 30 {
				n = (i*10 + j*7919) % urls
			}
			links[j] = addItem{url: fmt.Sprintf("http://docs.test/page/%d.html", n), host: "docs.test", cash: 0.025, depth: 2}
		}
		if _, err := f.add(links, nil); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 {
			if err := f.settleAll(!fetched); err != nil {
				b.Fatal(err)
			}
		}
	}
}
