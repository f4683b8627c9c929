package index

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	xhtml "golang.org/x/net/html"
)

// BenchmarkIndexing measures Put throughput (analysis, compression, page
// store, postings flushes) on synthetic Chinese+English pages with two
// writers, as on a 2-core node. Reports docs/s, process CPU per doc (user
// + system: steadier than wall time on a shared machine), the wall time of
// the last flush, the heap grown by the buffered postings (all of them when
// b.N < FlushDocs) and postings bytes/doc.
func BenchmarkIndexing(b *testing.B) {
	syn, err := NewSynthetic(1)
	if err != nil {
		b.Fatal(err)
	}
	const pool = 2000
	docs := make([]*Document, pool)
	for i := range docs {
		docs[i] = syn.Page()
	}
	db := openDB(b, b.TempDir())
	defer db.Close()
	ix := openIndex(b, db, 2000)
	ctx := context.Background()
	var raw int64
	for _, d := range docs {
		raw += int64(len(d.Body))
	}
	b.SetBytes(raw / pool)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapAlloc
	cpu0 := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= b.N {
					return
				}
				d := *docs[i%pool]
				if i >= pool { // a new URL each time: no replacement
					d.URL += "?" + string(rune('a'+i/pool%26)) + itoa(i)
				}
				if err := ix.Put(ctx, &d); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	putDone := time.Now()
	// Heap with the buffered postings of up to FlushDocs pages (the
	// background flush may have taken them already when b.N > FlushDocs).
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(heap0))/(1<<20), "heapGrowMB")
	if err := ix.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(time.Since(putDone).Milliseconds()), "lastflush-ms")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/doc")
	st := ix.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(st.PostingsBytes)/float64(max(st.Docs, 1)), "postB/doc")
	ix.Close()
}

// cpuTime is the process's user+system CPU time: on a shared machine it
// varies less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func itoa(i int) string {
	var buf [20]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return string(buf[n:])
}

// BenchmarkIndexingBatch is BenchmarkIndexing with one caller handing
// PutBatch 64 pages at a time (segmentation then runs on GOMAXPROCS
// goroutines, as for replication and handoff).
func BenchmarkIndexingBatch(b *testing.B) {
	syn, err := NewSynthetic(1)
	if err != nil {
		b.Fatal(err)
	}
	const pool = 2000
	docs := make([]*Document, pool)
	for i := range docs {
		docs[i] = syn.Page()
	}
	db := openDB(b, b.TempDir())
	defer db.Close()
	ix := openIndex(b, db, 2000)
	ctx := context.Background()
	cpu0 := cpuTime()
	b.ResetTimer()
	batch := make([]*Document, 0, 64)
	for i := 0; i < b.N; i++ {
		d := *docs[i%pool]
		if i >= pool {
			d.URL += "?" + string(rune('a'+i/pool%26)) + itoa(i)
		}
		batch = append(batch, &d)
		if len(batch) == cap(batch) || i == b.N-1 {
			if err := ix.PutBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := ix.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/doc")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "docs/s")
	ix.Close()
}

// corpusPages reads up to n pages matching pattern from the real corpus
// (/work/shared/corpus/install.sh): title and visible text. It skips the
// benchmark when the corpus is not installed.
func corpusPages(b testing.TB, pattern string, n int) []*Document {
	b.Helper()
	paths, _ := filepath.Glob(pattern)
	if _, err := os.Stat("/var/lib/sou-corpus/sites.tsv"); err != nil || len(paths) == 0 {
		b.Skip("real corpus not installed")
	}
	slices.Sort(paths)
	var docs []*Document
	for _, p := range paths[:min(n, len(paths))] {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		root, err := xhtml.Parse(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		d := &Document{URL: "http://help.libreoffice.test/" + p}
		var body strings.Builder
		var walk func(n *xhtml.Node)
		walk = func(n *xhtml.Node) {
			if n.Type == xhtml.ElementNode && (n.Data == "script" || n.Data == "style") {
				return
			}
			if n.Type == xhtml.ElementNode && n.Data == "title" && n.FirstChild != nil {
				d.Title = n.FirstChild.Data
				return
			}
			if n.Type == xhtml.TextNode {
				body.WriteString(n.Data)
				body.WriteByte(' ')
			}
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c)
			}
		}
		walk(root)
		d.Body = body.String()
		docs = append(docs, d)
	}
	return docs
}

// BenchmarkAnalyzeCorpusPage measures the analysis of a real page (title,
// body and URL, as Put analyzes them) from the corpus in both scripts:
// LibreOffice's help (short pages, some English) and the Chinese manual
// pages (longer, all Chinese). With script folding, without it (the
// analyzer before folding, the same dictionary), and the folding alone
// (normalized title and body through the conversion tables, no
// segmentation). Reports the process's CPU time per page (steadier than
// wall time on a shared machine).
func BenchmarkAnalyzeCorpusPage(b *testing.B) {
	shared := SharedAnalyzer()
	for _, set := range []struct{ name, pattern string }{
		{"help-zh-TW", "/usr/share/libreoffice/help/zh-TW/text/shared/01/*.html"},
		{"help-zh-CN", "/usr/share/libreoffice/help/zh-CN/text/shared/01/*.html"},
		{"man-zh-TW", "/var/lib/sou-corpus/manpages-zh/zh_TW/man1/*.html"},
		{"man-zh-CN", "/var/lib/sou-corpus/manpages-zh/zh_CN/man1/*.html"},
	} {
		lang := set.name
		docs := corpusPages(b, set.pattern, 200)
		var bytes int64
		for _, d := range docs {
			bytes += int64(len(d.Title) + len(d.Body))
		}
		perPage := func(b *testing.B, do func(d *Document)) {
			b.SetBytes(bytes / int64(len(docs)))
			cpu0 := cpuTime()
			for i := 0; b.Loop(); i++ {
				do(docs[i%len(docs)])
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/page")
		}
		for _, v := range []struct {
			name string
			an   *Analyzer
		}{{"folded", shared}, {"unfolded", shared.WithoutScriptFolding()}} {
			ix := &Index{an: v.an}
			b.Run(lang+"/"+v.name, func(b *testing.B) {
				perPage(b, func(d *Document) { ix.releaseDoc(ix.analyzeDoc(d, nil)) })
			})
		}
		type normalized struct {
			title, body string
			sc          script
		}
		norm := map[*Document]normalized{}
		for _, d := range docs {
			title, _, _ := normalize(d.Title, false)
			body, _, _ := normalize(d.Body, false)
			norm[d] = normalized{title, body, shared.pageScript(d.Title, d.Body)}
		}
		b.Run(lang+"/fold-only", func(b *testing.B) {
			perPage(b, func(d *Document) {
				n := norm[d]
				shared.fold.fold(n.title, nil, n.sc)
				shared.fold.fold(n.body, nil, n.sc)
			})
		})
	}
}

// BenchmarkAnchorUpdates measures indexing new anchor text for pages
// already flushed: 1,000 synthetic pages stored and flushed, then per op
// one new anchor for each of them and a Flush, which updates the anchor
// field of all 1,000 (anchorpost.go). Reports the process's CPU per
// updated page.
//
//	go test -run '^$' -bench BenchmarkAnchorUpdates -benchtime 3x -count 6 ./index/
func BenchmarkAnchorUpdates(b *testing.B) {
	syn, err := NewSynthetic(1)
	if err != nil {
		b.Fatal(err)
	}
	const pages = 1000
	docs := make([]*Document, pages)
	for i := range docs {
		docs[i] = syn.Page()
	}
	ctx := context.Background()
	db := openDB(b, b.TempDir())
	defer db.Close()
	ix := openIndex(b, db, 1<<30)
	defer ix.Close()
	if err := ix.PutBatch(ctx, docs); err != nil {
		b.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	op := 0
	for b.Loop() {
		anchors := make(map[string][]string, pages)
		for _, d := range docs {
			anchors[d.URL] = []string{"link " + itoa(op) + " 链接" + itoa(op)}
		}
		op++
		if err := ix.AddAnchorsBatch(ctx, anchors); err != nil {
			b.Fatal(err)
		}
		if err := ix.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*pages), "cpu-us/page")
	if got := ix.Stats().AnchorUpdates; got != uint64(b.N*pages) {
		b.Fatalf("%d anchor updates, want %d", got, b.N*pages)
	}
}

// BenchmarkFormOf measures what keeping a page's analysed form adds to a
// Put (synthetic pages, already analysed), beside BenchmarkAnalyzePage,
// the analysis itself.
//
//	go test -run '^$' -bench 'Benchmark(FormOf|AnalyzePage)$' -benchmem ./index/
func BenchmarkFormOf(b *testing.B) {
	ix := &Index{an: SharedAnalyzer()}
	syn, err := NewSynthetic(1)
	if err != nil {
		b.Fatal(err)
	}
	dps := make([]*docPostings, 100)
	for i := range dps {
		dps[i] = ix.analyzeDoc(syn.Page(), nil)
	}
	for i := 0; b.Loop(); i++ {
		formOf(dps[i%len(dps)])
	}
}

// BenchmarkAnalyzePage is analyzeDoc on synthetic pages.
func BenchmarkAnalyzePage(b *testing.B) {
	ix := &Index{an: SharedAnalyzer()}
	syn, err := NewSynthetic(1)
	if err != nil {
		b.Fatal(err)
	}
	docs := make([]*Document, 100)
	for i := range docs {
		docs[i] = syn.Page()
	}
	for i := 0; b.Loop(); i++ {
		ix.releaseDoc(ix.analyzeDoc(docs[i%len(docs)], nil))
	}
}

// BenchmarkHeld measures a replica's pages: holding them with their
// owner's forms, from the pages (HoldBatch: compressed here) or as their
// owner's index stores them (HoldStoredBatch: what every replicated page
// costs now), against indexing them from those forms (what
// PutAnalysedBatch cost every replicated page, and what IndexHeld costs
// each page of a host taken over), per page of 1,000 synthetic pages, CPU
// of all goroutines.
//
//	go test -run '^$' -bench BenchmarkHeld -benchtime 3x -count 6 ./index/
func BenchmarkHeld(b *testing.B) {
	syn, err := NewSynthetic(1)
	if err != nil {
		b.Fatal(err)
	}
	const pages = 1000
	docs := make([]*Document, pages)
	for i := range docs {
		docs[i] = syn.Page()
	}
	ctx := context.Background()
	owner := openHolding(b, 64<<20)
	if err := owner.PutBatch(ctx, docs); err != nil {
		b.Fatal(err)
	}
	forms := formsAt(b, owner, docs)
	stored := make([]StoredPage, pages)
	for i, d := range docs {
		if stored[i], err = owner.Stored(ctx, d.URL); err != nil {
			b.Fatal(err)
		}
	}
	hold := func(ix *Index) error { return ix.HoldBatch(ctx, docs, forms) }
	for _, c := range []struct {
		name       string
		setup, run func(ix *Index) error
	}{
		{"hold", nil, hold},
		{"hold-stored", nil, func(ix *Index) error {
			checked := make([]CheckedPage, len(stored))
			for i, p := range stored {
				var err error
				if checked[i], err = ix.CheckStored(p); err != nil {
					return err
				}
			}
			return ix.HoldStoredBatch(ctx, checked)
		}},
		{"put-from-forms", nil, func(ix *Index) error {
			if err := ix.PutAnalysedBatch(ctx, docs, forms); err != nil {
				return err
			}
			return ix.Flush(ctx)
		}},
		{"index-held", hold, func(ix *Index) error {
			for h := range ix.Held() {
				if _, err := ix.IndexHeld(ctx, h); err != nil {
					return err
				}
			}
			return ix.Flush(ctx)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ix := openHolding(b, 4<<20)
			var cpu time.Duration
			for b.Loop() {
				if c.setup != nil {
					b.StopTimer()
					if err := c.setup(ix); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				cpu0 := cpuTime()
				if err := c.run(ix); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - cpu0
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*pages), "cpu-us/page")
		})
	}
}

// BenchmarkAddAnchorsNavigation records the anchors of a documentation
// site's pages as a crawl gives them, one page's links at a time: each of
// 2,000 stored pages links to the same 30 pages with the same texts (its
// navigation) and to 10 others with texts of their own.
//
//	go test -run '^$' -bench BenchmarkAddAnchorsNavigation -count 6 ./index/
func BenchmarkAddAnchorsNavigation(b *testing.B) {
	const pages, nav, content = 2000, 30, 10
	ctx := context.Background()
	db := openDB(b, b.TempDir())
	defer db.Close()
	opts := DefaultOptions()
	opts.FlushDocs, opts.FlushInterval, opts.AnchorDelay = 1<<30, 0, time.Hour
	ix, err := Open(db, opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	urls := make([]string, pages)
	docs := make([]*Document, pages)
	for i := range urls {
		urls[i] = "http://docs.test/page/" + itoa(i) + ".html"
		docs[i] = doc(urls[i], "page "+itoa(i), "body of page "+itoa(i))
	}
	if err := ix.PutBatch(ctx, docs); err != nil {
		b.Fatal(err)
	}
	links := func(from int) map[string][]string {
		m := make(map[string][]string, nav+content)
		for i := range nav {
			m[urls[i]] = []string{"chapter " + itoa(i)}
		}
		for i := range content {
			to := (from*7 + i*131) % pages
			m[urls[to]] = append(m[urls[to]], "see page "+itoa(to)+" from "+itoa(from))
		}
		return m
	}
	from := 0
	cpu0 := cpuTime()
	for b.Loop() {
		if err := ix.AddAnchorsBatch(ctx, links(from%pages)); err != nil {
			b.Fatal(err)
		}
		from++
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/page")
}
