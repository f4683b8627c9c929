package crawl

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// TestFrontierMemory is issue 9's "memory stays bounded under a frontier
// of millions of URLs": the frontier keeps per host a few counters and the
// head of its queue in memory, and the URLs themselves in Badger, so the Go
// heap grows with hosts, not with URLs. CI adds 200,000 URLs;
// SOU_FRONTIER_URLS=1000000,5000000 measures larger frontiers (the figures
// in BENCHMARKS.md).
func TestFrontierMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("adds 200,000 URLs")
	}
	sizes := []int{200_000}
	if env := os.Getenv("SOU_FRONTIER_URLS"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				t.Fatalf("SOU_FRONTIER_URLS: %q is not a positive count", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, size := range sizes {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			hosts := max(size/1000, 100)
			// Small memtables and no caches, so that the heap measured is
			// the crawler's and not Badger's (whose memory is bounded by its
			// options: the node's take at most ~150 MB).
			base := heapInuse()
			db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).
				WithMemTableSize(8 << 20).WithNumMemtables(2).WithCompression(options.None).
				WithBlockCacheSize(0).WithIndexCacheSize(0).WithValueLogFileSize(64 << 20).WithDetectConflicts(false))
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(db, DefaultConfig(), newEngSink(), nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			batch := make([]Discovered, 0, 1000)
			for i := 0; i < size; i++ {
				batch = append(batch, Discovered{
					URL:        fmt.Sprintf("http://site-%d.example/section-%d/page-%d.html", i%hosts, i%37, i),
					SourceHost: fmt.Sprintf("site-%d.example", (i+1)%hosts), Cash: 0.01, Depth: 2,
				})
				if len(batch) == cap(batch) {
					if err := c.Add(t.Context(), batch); err != nil {
						t.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if err := c.Add(t.Context(), batch); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			st := c.Stats()
			if st.Frontier != int64(size) || st.Hosts != int64(hosts) {
				t.Fatalf("frontier %d URLs on %d hosts, want %d on %d", st.Frontier, st.Hosts, size, hosts)
			}
			// Close the store: what Badger holds (memtables, compaction
			// buffers) is its own and bounded by its options; what stays
			// is the crawler's in-memory frontier.
			rss := rssMB()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			heap := max(heapInuse(), base) - base
			runtime.KeepAlive(c)
			if p := os.Getenv("SOU_FRONTIER_HEAPPROFILE"); p != "" {
				f, err := os.Create(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := pprof.WriteHeapProfile(f); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			t.Logf("%d URLs on %d hosts: crawler heap %.1f MB (%.1f bytes/URL, %.0f bytes/host), process RSS with the store open %d MB, %.0f URLs/s added",
				size, hosts, float64(heap)/(1<<20), float64(heap)/float64(size), float64(heap)/float64(hosts), rss, float64(size)/took.Seconds())
			// The Bloom filter (12 MB, sized for 10M URLs) and the hosts'
			// state; anything kept per URL would show as tens of bytes per
			// URL on top.
			if limit := uint64(16<<20) + uint64(hosts)*4096; heap > limit {
				t.Fatalf("crawler heap grew %d MB for %d URLs, more than %d MB: memory is growing per URL", heap>>20, size, limit>>20)
			}
		})
	}
}

// heapInuse is the live heap after a full collection.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rssMB reads VmRSS from /proc (0 where there is none).
func rssMB() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb >> 10
		}
	}
	return 0
}
