package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func openDB(t testing.TB, dir string) *badger.DB {
	t.Helper()
	// As a node opens it: the index orders its writers itself.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithDetectConflicts(false))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// crash stops ix as a kill would: buffered postings are lost, nothing is
// flushed or re-indexed, and db is closed. Reopen the directory to recover.
func crash(t testing.TB, ix *Index, db *badger.DB) {
	t.Helper()
	ix.mu.Lock()
	ix.pending = nil
	ix.closed = true
	ix.mu.Unlock()
	close(ix.stop)
	<-ix.done
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func openIndex(t testing.TB, db *badger.DB, flushDocs int) *Index {
	t.Helper()
	opts := DefaultOptions()
	opts.FlushDocs = flushDocs
	opts.FlushInterval = 0
	ix, err := Open(db, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestBlockRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 7, BlockSize} {
		var p postingList
		doc := uint32(rng.IntN(100))
		for range n {
			doc += 1 + uint32(rng.IntN(1000))
			var tf [NumFields]uint32
			var pos []uint32
			cur := uint32(0)
			for f := range NumFields {
				if rng.IntN(2) == 0 || f == FieldBody {
					tf[f] = 1 + uint32(rng.IntN(5))
					for range tf[f] {
						cur += uint32(rng.IntN(50))
						pos = append(pos, cur)
					}
				}
			}
			p.add(doc, tf, pos)
		}
		h := BlockHeader{MaxTF: [NumFields]uint32{1, 0, 3, 4}, MinLen: [NumFields]uint32{5, 0, 7, 8}}
		b := encodeBlock(nil, &h, &p, 0, n)
		var d decodedBlock
		if err := decodeBlock(b, &d); err != nil {
			t.Fatal(err)
		}
		if d.hdr.N != n || d.hdr.MaxTF != h.MaxTF || d.hdr.MinLen != h.MinLen || d.hdr.LastDoc != p.docs[n-1] {
			t.Fatalf("header %+v, want %+v", d.hdr, h)
		}
		if !slices.Equal(d.docs, p.docs) || !slices.Equal(d.tfs, p.tfs) {
			t.Fatalf("docs/tfs differ")
		}
		for i := n - 1; i >= 0; i-- { // reverse: positions decode out of order
			got, err := d.positions(i, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, p.positions(i)) {
				t.Fatalf("doc %d positions %v want %v", i, got, p.positions(i))
			}
		}
		// Corrupt input never panics.
		for cut := range len(b) {
			var d2 decodedBlock
			if decodeBlock(b[:cut], &d2) == nil {
				for i := range d2.docs {
					d2.positions(i, nil)
				}
			}
		}
	}
}

func doc(url, title, body string) *Document {
	return &Document{URL: url, Title: title, Body: body, Status: 200, FetchedAt: time.Unix(1700000000, 0).UTC(),
		ContentType: "text/html", Raw: []byte("<html><body>" + body + "</body></html>")}
}

// searchDocs returns the URLs of live docs containing term.
// searchDocs lists the live pages with the term that a query of word
// searches for (word lowercased, stemmed, folded).
func searchDocs(t *testing.T, ix *Index, word string) []string {
	t.Helper()
	toks := ix.Analyzer().AnalyzeQuery(word)
	if len(toks) != 1 {
		t.Fatalf("%q is %d terms", word, len(toks))
	}
	return termDocs(t, ix, toks[0].Term)
}

// termDocs lists the live pages with term, as the postings have it.
func termDocs(t *testing.T, ix *Index, term string) []string {
	t.Helper()
	r := ix.NewReader()
	defer r.Close()
	p, err := r.Postings(term, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for d := p.Doc(); d != NoMoreDocs; d = p.Next() {
		if !r.Live(d) {
			continue
		}
		rec, err := r.Record(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.URL)
	}
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	slices.Sort(out)
	return out
}

func TestIndexPutGetDeleteUpdate(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 1000)
	d1 := doc("http://a.example/1", "搜索引擎 Title", "我们的搜索引擎很好用 apple")
	d1.Host = "a.example"
	d1.Header = map[string][]string{"Content-Type": {"text/html"}}
	d1.Headings = []string{"heading one"}
	d1.ContentHash = [16]byte{1, 2, 3}
	d1.SimHash = 42
	d1.StaticRank = 0.25
	docs := []*Document{d1,
		doc("http://a.example/2", "apple pie", "apple banana"),
		doc("http://b.example/1", "banana", "banana cherry"),
		doc("http://b.example/2", "cherry", "cherry apple 資訊檢索"),
	}
	for i, d := range docs {
		if err := ix.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // postings lists span two flushes
			if err := ix.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Before a flush the last two docs are stored but not searchable.
	if got := ix.Stats(); got.Docs != 2 || got.Pending != 2 {
		t.Fatalf("stats %+v", got)
	}
	if got := searchDocs(t, ix, "cherry"); len(got) != 0 {
		t.Fatalf("unflushed docs searchable: %v", got)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		term string
		want []string
	}{
		{"apple", []string{"http://a.example/1", "http://a.example/2", "http://b.example/2"}},
		{"搜索", []string{"http://a.example/1"}},
		{"检索", []string{"http://b.example/2"}}, // 檢索 folded
		{"信息", []string{"http://b.example/2"}}, // 資訊 in Taiwan's vocabulary
		{"banana", []string{"http://a.example/2", "http://b.example/1"}},
		{"nothing", nil},
	}
	for _, tc := range tests {
		if got := searchDocs(t, ix, tc.term); !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %v want %v", tc.term, got, tc.want)
		}
	}
	rec, err := ix.Get(ctx, d1.URL)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Title != d1.Title || rec.Body != d1.Body || string(rec.Raw) != string(d1.Raw) || rec.Host != "a.example" ||
		rec.SimHash != 42 || rec.ContentHash != d1.ContentHash || !rec.FetchedAt.Equal(d1.FetchedAt) ||
		rec.Header["Content-Type"][0] != "text/html" || rec.Headings[0] != "heading one" || rec.StaticRank != 0.25 {
		t.Fatalf("Get = %+v", rec)
	}
	if _, err := ix.Get(ctx, "http://nope/"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}

	// Update: Put of the same URL replaces it.
	if err := ix.Put(ctx, doc("http://a.example/2", "grape", "grape only")); err != nil {
		t.Fatal(err)
	}
	// Delete.
	if err := ix.Delete(ctx, "http://b.example/1"); err != nil {
		t.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := searchDocs(t, ix, "banana"); len(got) != 0 {
		t.Errorf("banana after update+delete: %v", got)
	}
	if got := searchDocs(t, ix, "grape"); !slices.Equal(got, []string{"http://a.example/2"}) {
		t.Errorf("grape: %v", got)
	}
	if _, err := ix.Get(ctx, "http://b.example/1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted page still stored: %v", err)
	}
	st := ix.Stats()
	if st.Docs != 3 {
		t.Errorf("docs after update+delete = %d, want 3", st.Docs)
	}
	if hd, hl, _ := ix.HostStats(func(string) bool { return true }); hd != st.Docs || hl != st.FieldLenSum {
		t.Errorf("HostStats %d %v, Stats %d %v", hd, hl, st.Docs, st.FieldLenSum)
	}

	// ForEachPage per host and overall.
	var hosts []string
	if err := ix.ForEachPage(ctx, "a.example", func(r *PageRecord) error { hosts = append(hosts, r.URL); return nil }); err != nil {
		t.Fatal(err)
	}
	if slices.Sort(hosts); !slices.Equal(hosts, []string{"http://a.example/1", "http://a.example/2"}) {
		t.Errorf("ForEachPage(a.example) = %v", hosts)
	}
	n := 0
	if err := ix.ForEachPage(ctx, "", func(*PageRecord) error { n++; return nil }); err != nil || n != 3 {
		t.Errorf("ForEachPage(all) = %d, %v", n, err)
	}
	stop := errors.New("stop")
	if err := ix.ForEachPage(ctx, "", func(*PageRecord) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("ForEachPage error propagation: %v", err)
	}

	// Anchors: before the page exists, and for an existing page.
	if err := ix.AddAnchors(ctx, "http://c.example/", []string{"kiwi fruit"}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Put(ctx, doc("http://c.example/", "c", "nothing here")); err != nil {
		t.Fatal(err)
	}
	if err := ix.AddAnchors(ctx, "http://b.example/2", []string{"mango link"}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := searchDocs(t, ix, "kiwi"); !slices.Equal(got, []string{"http://c.example/"}) {
		t.Errorf("kiwi via anchor: %v", got)
	}
	if got := searchDocs(t, ix, "mango"); !slices.Equal(got, []string{"http://b.example/2"}) {
		t.Errorf("mango via late anchor: %v", got)
	}
	if got := searchDocs(t, ix, "cherry"); !slices.Equal(got, []string{"http://b.example/2"}) {
		t.Errorf("cherry after anchor update: %v", got)
	}
	rec, err = ix.Get(ctx, "http://b.example/2")
	if err != nil || !slices.Equal(rec.Anchors, []string{"mango link"}) {
		t.Errorf("anchors of b/2 = %v, %v", rec, err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Put(ctx, d1); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
}

func TestIndexPersistenceAndRecovery(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openDB(t, dir)
	ix := openIndex(t, db, 1000)
	for i := range 20 {
		if err := ix.Put(ctx, doc(fmt.Sprintf("http://h%d.example/", i%3), "t", fmt.Sprintf("common word%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Three more puts never flushed: simulate a crash by not calling Close
	// (the goroutine is stopped, the buffered postings are dropped).
	for i := range 3 {
		if err := ix.Put(ctx, doc(fmt.Sprintf("http://new%d.example/", i), "t", "common fresh")); err != nil {
			t.Fatal(err)
		}
	}
	checkHostIDs(t, ix, 6)
	before := ix.Stats()
	crash(t, ix, db)

	db = openDB(t, dir)
	defer db.Close()
	ix = openIndex(t, db, 1000)
	after := ix.Stats()
	if after.Docs != 6 || after.Pending != 0 { // 3 hosts' URLs + 3 new ones
		t.Fatalf("after recovery: %+v (before %+v)", after, before)
	}
	if got := searchDocs(t, ix, "fresh"); len(got) != 3 {
		t.Errorf("recovered docs not searchable: %v", got)
	}
	if got := searchDocs(t, ix, "common"); len(got) != 6 {
		t.Errorf("common: %v", got)
	}
	// Stats equal a recount from scratch.
	var sum [NumFields]int64
	n := int64(0)
	r := ix.NewReader()
	for id := range r.NumDocIDs() {
		if r.Live(id) {
			n++
			for f, l := range r.FieldLens(id) {
				sum[f] += int64(l)
			}
		}
	}
	r.Close()
	if n != after.Docs || sum != after.FieldLenSum {
		t.Errorf("stats %d %v, recount %d %v", after.Docs, after.FieldLenSum, n, sum)
	}
	if hd, hl, all := ix.HostStats(func(string) bool { return true }); hd != n || hl != sum || !all {
		t.Errorf("HostStats %d %v %v, recount %d %v", hd, hl, all, n, sum)
	}
	if hd, _, all := ix.HostStats(func(h string) bool { return h == "h1.example" }); hd != 1 || all {
		t.Errorf("HostStats(h1) = %d, %v", hd, all)
	}
	checkHostIDs(t, ix, 6)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkHostIDs checks that every docID's host ID names its host, one ID
// per host, and that the view has hosts distinct hosts (the empty host
// of docs without metadata aside).
func checkHostIDs(t *testing.T, ix *Index, hosts int) {
	t.Helper()
	r := ix.NewReader()
	defer r.Close()
	ids := map[string]uint32{}
	for id := range r.NumDocIDs() {
		host, hid := r.Host(id), r.HostID(id)
		if int(hid) >= r.NumHosts() || r.HostName(hid) != host {
			t.Fatalf("doc %d: host %q, host ID %d of %d", id, host, hid, r.NumHosts())
		}
		if prev, ok := ids[host]; ok && prev != hid {
			t.Fatalf("host %q has IDs %d and %d", host, prev, hid)
		}
		ids[host] = hid
	}
	delete(ids, "")
	if len(ids) != hosts {
		t.Errorf("%d hosts by ID, want %d: %v", len(ids), hosts, ids)
	}
}

// A flush too big for one Badger transaction is split, each part atomic.
func TestFlushSplitsLargeBatches(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).WithMemTableSize(1 << 20).WithValueThreshold(1 << 10))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ix := openIndex(t, db, 60)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 60 {
		var b strings.Builder
		for range 100 {
			fmt.Fprintf(&b, "w%d ", rng.IntN(5000))
		}
		if err := ix.Put(ctx, doc(fmt.Sprintf("http://x.example/%d", i), "", b.String()+" shared")); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix.splits == 0 {
		t.Error("expected the 60-doc flush to be split")
	}
	ix = openIndex(t, db, 100000)
	defer ix.Close()
	if got := searchDocs(t, ix, "shared"); len(got) != 60 {
		t.Fatalf("shared in %d docs, want 60", len(got))
	}
	if st := ix.Stats(); st.Docs != 60 {
		t.Fatalf("docs %d", st.Docs)
	}
}

func TestPostingsCursorSkipsAcrossBlocks(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 97) // odd flush size: appended blocks get merged
	const n = 1000
	for i := range n {
		body := "filler"
		if i%3 == 0 {
			body = "every third"
		}
		if err := ix.Put(ctx, doc(fmt.Sprintf("http://s.example/%d", i), "", body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The postings byte counter matches what is stored.
	var stored int64
	if err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixPostings)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			stored += int64(len(it.Item().Key())) + it.Item().ValueSize()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st := ix.Stats(); st.PostingsBytes != stored {
		t.Errorf("PostingsBytes %d, stored %d", st.PostingsBytes, stored)
	}
	r := ix.NewReader()
	defer r.Close()
	p, err := r.Postings("third", false)
	if err != nil {
		t.Fatal(err)
	}
	if p.DF != (n+2)/3 {
		t.Fatalf("DF %d", p.DF)
	}
	full := 0
	for _, b := range p.blocks {
		if !b.appended {
			full++
		}
	}
	if len(p.blocks) < 2 || len(p.blocks)-full > mergeEvery {
		t.Errorf("%d blocks, %d full, for df %d: appended blocks were not merged", len(p.blocks), full, p.DF)
	}
	for _, target := range []uint32{0, 1, 300, 301, 302, 998, 999} {
		got := p.Advance(target)
		if got < target || got%3 != 0 || got > target+2 {
			t.Errorf("Advance(%d) = %d", target, got)
		}
	}
	if got := p.Advance(1000); got != NoMoreDocs {
		t.Errorf("Advance past end = %d", got)
	}
}

// TestAnchorUpdateWaitsForQuiet: a stored page whose anchors change gets
// no anchor update from a background flush while pages are still being
// stored (it would get one at every flush of a crawl), but by the first flush
// that finds none, or by Flush; until then Stats counts it as pending.
func TestAnchorUpdateWaitsForQuiet(t *testing.T) {
	ctx := t.Context()
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 1000)
	defer ix.Close()
	if err := ix.Put(ctx, doc("http://a.test/1", "first page", "plain body")); err != nil {
		t.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ix.AddAnchors(ctx, "http://a.test/1", []string{"zebra"}); err != nil {
		t.Fatal(err)
	}
	if got := ix.Stats().Pending; got != 1 {
		t.Fatalf("pending after an anchor change: %d, want 1", got)
	}
	steps := []struct {
		name      string
		put       bool
		force     bool
		wantDF    int
		wantQueue int
	}{
		{"busy background flush", true, false, 0, 1},
		{"quiet background flush", false, false, 1, 0},
	}
	for i, s := range steps {
		if s.put {
			if err := ix.Put(ctx, doc(fmt.Sprintf("http://a.test/x%d", i), "other", "text")); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.flush(ctx, s.force); err != nil {
			t.Fatal(err)
		}
		if got := len(searchDocs(t, ix, "zebra")); got != s.wantDF {
			t.Errorf("%s: live docs with the anchor term %d, want %d", s.name, got, s.wantDF)
		}
		if got := ix.Stats().Pending; got != s.wantQueue {
			t.Errorf("%s: pending %d, want %d", s.name, got, s.wantQueue)
		}
	}
	// Flush re-indexes at once, busy or not.
	if err := ix.AddAnchors(ctx, "http://a.test/1", []string{"yak"}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Put(ctx, doc("http://a.test/y", "more", "text")); err != nil {
		t.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ix.Stats().Pending; got != 0 {
		t.Fatalf("pending after Flush: %d", got)
	}
}
