package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// visible is what a query can see of an index: per term, per live page
// (by URL), its field TFs, positions, field lengths and static rank.
func visible(t *testing.T, ix *Index) map[string]string {
	t.Helper()
	r := ix.NewReader()
	defer r.Close()
	terms := map[string]bool{}
	for _, kv := range dumpPostings(t, ix.db) {
		k := kv[0][len(prefixPostings):]
		terms[string(k[:bytes.IndexByte(k, 0)])] = true
	}
	out := map[string]string{}
	for term := range terms {
		p, err := r.Postings(term, true)
		if err != nil {
			t.Fatal(err)
		}
		for d := p.Doc(); d != NoMoreDocs; d = p.Next() {
			if !r.Live(d) {
				continue
			}
			rec, err := r.Record(d)
			if err != nil {
				t.Fatal(err)
			}
			pos, err := p.Positions(nil)
			if err != nil {
				t.Fatal(err)
			}
			out[term+" "+rec.URL] = fmt.Sprint(p.TF(), pos, r.FieldLens(d), r.StaticRank(d), r.Script(d))
		}
		if p.Err() != nil {
			t.Fatal(p.Err())
		}
	}
	return out
}

// openHolding opens an index on a store of its own that flushes only when
// asked and keeps analysed forms, closed when the test ends.
func openHolding(tb testing.TB, formBytes int) *Index {
	tb.Helper()
	db := openDB(tb, tb.TempDir())
	tb.Cleanup(func() { db.Close() })
	opts := DefaultOptions()
	opts.FlushDocs, opts.FlushInterval, opts.FormCacheBytes = 1<<30, 0, formBytes
	ix, err := Open(db, opts, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ix.Close() })
	return ix
}

// formsAt returns docs' encoded analysed forms as ix has them (Form).
func formsAt(tb testing.TB, ix *Index, docs []*Document) [][]byte {
	tb.Helper()
	forms := make([][]byte, len(docs))
	for i, d := range docs {
		r, err := ix.Get(context.Background(), d.URL)
		if err != nil {
			tb.Fatal(err)
		}
		forms[i] = ix.Form(d.URL, r.DocID)
	}
	return forms
}

// A replica that holds pages writes no postings for them, updates none
// of them for new anchors, and once it indexes them (from their owner's
// forms, or by analysis where a form is missing or bad) shows a query
// exactly what an index that analysed them with the same anchors shows.
func TestHeldPagesIndexLikeAnalysedOnes(t *testing.T) {
	ctx := context.Background()
	docs := append(formTestDocs(t), testCorpus(120)...)
	owner := openHolding(t, 32<<20)
	if err := owner.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	forms := formsAt(t, owner, docs)
	forms[2] = nil                           // none sent: analysed
	forms[7] = []byte{formWireVersion, 0xff} // malformed: analysed
	anchorsBefore := map[string][]string{docs[0].URL: {"首页"}, docs[3].URL: {"資訊檢索 guide"}, docs[10].URL: {"ten"}}
	anchorsAfter := map[string][]string{docs[1].URL: {"next 下一页"}, docs[10].URL: {"again"}, docs[7].URL: {"seven"}}

	want := openHolding(t, 32<<20)
	for _, step := range []func() error{
		func() error { return want.AddAnchorsBatch(ctx, anchorsBefore) },
		func() error { return want.PutBatch(ctx, docs) },
		func() error { return want.AddAnchorsBatch(ctx, anchorsAfter) },
		func() error { return want.Flush(ctx) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	replica := openHolding(t, 32<<20)
	if err := replica.AddAnchorsBatch(ctx, anchorsBefore); err != nil {
		t.Fatal(err)
	}
	if err := replica.HoldBatch(ctx, docs, forms); err != nil {
		t.Fatal(err)
	}
	if err := replica.AddAnchorsBatch(ctx, anchorsAfter); err != nil {
		t.Fatal(err)
	}
	if err := replica.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := replica.Stats()
	if st.Held != len(docs) || st.Docs != 0 || st.Pending != 0 || st.PostingsBytes != 0 {
		t.Fatalf("holding: %d held, %d docs, %d pending, %d postings bytes; want %d, 0, 0, 0", st.Held, st.Docs, st.Pending, st.PostingsBytes, len(docs))
	}
	got, err := replica.Get(ctx, docs[10].URL)
	if err != nil || got.Body != docs[10].Body || !bytes.Equal(got.Raw, docs[10].Raw) || !slices.Equal(got.Anchors, []string{"ten", "again"}) {
		t.Fatalf("held page read back: %v, %+v", err, got)
	}
	held := replica.Held()
	hosts := 0
	for h, n := range held {
		hosts++
		if _, err := replica.IndexHeld(ctx, h); err != nil {
			t.Fatal(err)
		}
		if left := replica.Held()[h]; left != 0 {
			t.Fatalf("%s: %d of %d pages still held", h, left, n)
		}
	}
	if hosts < 5 {
		t.Fatalf("held pages of %d hosts; the test wants several", hosts)
	}
	if err := replica.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st = replica.Stats()
	if st.Held != 0 || st.Docs != want.Stats().Docs || st.FieldLenSum != want.Stats().FieldLenSum {
		t.Fatalf("indexed: %d held, %d docs, lengths %v; want 0, %d, %v", st.Held, st.Docs, st.FieldLenSum, want.Stats().Docs, want.Stats().FieldLenSum)
	}
	if st.FormsRefused != 1 || st.FormsReplayed != uint64(len(docs)-2) {
		t.Errorf("%d forms replayed, %d refused; want %d, 1", st.FormsReplayed, st.FormsRefused, len(docs)-2)
	}
	w, g := visible(t, want), visible(t, replica)
	if len(w) == 0 {
		t.Fatal("nothing visible in the analysed index")
	}
	for k, v := range w {
		if g[k] != v {
			t.Fatalf("%s: indexed from held %q, analysed %q", k, g[k], v)
		}
	}
	if len(g) != len(w) {
		t.Fatalf("%d visible postings, want %d", len(g), len(w))
	}
}

// Held pages survive a crash without being indexed by the recovery,
// and are deleted and replaced as stored pages are.
func TestHeldPagesLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openDB(t, dir)
	ix := openIndex(t, db, 1<<20)
	a := doc("http://a.example/1", "alpha", "apple banana")
	b := doc("http://a.example/2", "beta", "banana cherry")
	c := doc("http://b.example/3", "gamma", "cherry durian")
	if err := ix.PutBatch(ctx, []*Document{c}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// c was indexed; held now, it leaves the postings and the statistics.
	if err := ix.HoldBatch(ctx, []*Document{a, b, c}, nil); err != nil {
		t.Fatal(err)
	}
	if got := searchDocs(t, ix, "durian"); len(got) != 0 {
		t.Fatalf("replaced by a held page, still found: %v", got)
	}
	crash(t, ix, db) // unflushed: recovery would analyse pages above the watermark
	db = openDB(t, dir)
	ix = openIndex(t, db, 1<<20)
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := ix.Stats()
	if st.Held != 3 || st.Docs != 0 || !maps.Equal(ix.Held(), map[string]int{"a.example": 2, "b.example": 1}) {
		t.Fatalf("after a crash: %d held %v, %d docs; want 3, 0", st.Held, ix.Held(), st.Docs)
	}
	if got := searchDocs(t, ix, "banana"); len(got) != 0 {
		t.Fatalf("recovery indexed held pages: %v", got)
	}
	if err := ix.Delete(ctx, a.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Get(ctx, a.URL); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted held page: %v", err)
	}
	// b put by its owner: indexed, no longer held.
	if err := ix.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	n, err := ix.IndexHeld(ctx, "a.example")
	if err != nil || n != 0 {
		t.Fatalf("a.example: indexed %d (%v), want none held", n, err)
	}
	if n, err := ix.IndexHeld(ctx, "b.example"); err != nil || n != 1 {
		t.Fatalf("b.example: indexed %d (%v), want 1", n, err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := searchDocs(t, ix, "cherry"); !slices.Equal(got, []string{b.URL, c.URL}) {
		t.Fatalf("cherry: %v", got)
	}
	if st := ix.Stats(); st.Held != 0 || st.Docs != 2 {
		t.Fatalf("%d held, %d docs; want 0, 2", st.Held, st.Docs)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	ix = openIndex(t, db, 1<<20)
	defer ix.Close()
	if st := ix.Stats(); st.Held != 0 || st.Docs != 2 {
		t.Fatalf("reopened: %d held, %d docs; want 0, 2", st.Held, st.Docs)
	}
}

// A replica holds pages as their owner's index stores them (compressed,
// with forms): it reads them back as the owner does and, once it indexes
// them, shows a query what the owner's index shows.
func TestStoredPagesHeldAsTheyAre(t *testing.T) {
	ctx := context.Background()
	docs := append(formTestDocs(t), testCorpus(40)...)
	owner, replica, third := openHolding(t, 32<<20), openHolding(t, 32<<20), openHolding(t, 32<<20)
	if err := owner.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pages := make([]CheckedPage, len(docs))
	for i, d := range docs {
		p, err := owner.Stored(ctx, d.URL)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Form) == 0 {
			t.Fatalf("%s: stored page without its form", d.URL)
		}
		c, err := replica.CheckStored(p)
		if err != nil || c.Summary().URL != d.URL {
			t.Fatalf("%s: checked as %q: %v", d.URL, c.Summary().URL, err)
		}
		pages[i] = c
	}
	if err := replica.HoldStoredBatch(ctx, pages); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		want, err := owner.Get(ctx, d.URL)
		if err != nil {
			t.Fatal(err)
		}
		got, err := replica.Get(ctx, d.URL)
		if err != nil {
			t.Fatal(err)
		}
		got.DocID = want.DocID
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s held as stored reads back\n%+v\nwant\n%+v", d.URL, got, want)
		}
		// A held page is sent on with the form it was held with.
		p, err := replica.Stored(ctx, d.URL)
		if err != nil || len(p.Form) == 0 {
			t.Fatalf("%s: held page sent on without its form (%v)", d.URL, err)
		}
		c, err := third.CheckStored(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := third.HoldStoredBatch(ctx, []CheckedPage{c}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ix := range []*Index{replica, third} {
		for h := range ix.Held() {
			if _, err := ix.IndexHeld(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st := ix.Stats(); st.FormsReplayed != uint64(len(docs)) || st.PutsAnalysed != 0 {
			t.Fatalf("%d forms replayed, %d pages analysed; want %d, 0", st.FormsReplayed, st.PutsAnalysed, len(docs))
		}
		w, g := visible(t, owner), visible(t, ix)
		if len(w) == 0 || len(g) != len(w) {
			t.Fatalf("%d visible postings, want %d", len(g), len(w))
		}
		for k, v := range w {
			if g[k] != v {
				t.Fatalf("%s: indexed from stored %q, owner %q", k, g[k], v)
			}
		}
	}
}

// Stored pages from a peer that CheckStored must refuse before anything
// trusts them.
func TestCheckStoredRefuses(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 100)
	defer ix.Close()
	d := doc("http://a.example/1", "alpha", "apple banana")
	if err := ix.Put(ctx, d); err != nil {
		t.Fatal(err)
	}
	good, err := ix.Stored(ctx, d.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.CheckStored(good); err != nil {
		t.Fatalf("the index's own page refused: %v", err)
	}
	withSummary := func(url, host string) []byte {
		return appendStored(nil, &Document{URL: url, Host: host}, ix.compressPage)
	}
	summary, _, _ := splitStored(good.Record)
	restOf := func(frame []byte) []byte {
		b := append([]byte{storedWithSummary}, binary.AppendUvarint(nil, uint64(len(summary)))...)
		return append(append(b, summary...), frame...)
	}
	// A zstd frame header declaring 1 GiB of content, single segment.
	huge := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0}, binary.LittleEndian.AppendUint32(nil, 1<<30)...)
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}
	// An S2 block declaring 1 GiB; peers of older builds send zstd, so
	// both codecs are attacked.
	hugeS2 := binary.AppendUvarint([]byte{pageS2}, 1<<30)
	zenc := zstdFastest(t)
	for name, p := range map[string]StoredPage{
		"empty record":             {},
		"record over its cap":      {Record: make([]byte, maxStoredRecordBytes+1)},
		"form over its cap":        {Record: good.Record, Form: make([]byte, maxHeldFormBytes+1)},
		"legacy record":            {Record: zenc([]byte("whole record"), nil)},
		"truncated summary":        {Record: good.Record[:5]},
		"host not the URL's":       {Record: withSummary("http://a.example/1", "b.example")},
		"no host":                  {Record: withSummary("http://a.example/1", "")},
		"no URL":                   {Record: withSummary("", "")},
		"NUL in URL":               {Record: withSummary("http://a.example/\x00", "a.example")},
		"rest not compressed":      {Record: restOf([]byte("plain text"))},
		"rest declaring 1 GiB":     {Record: restOf(huge)},
		"rest skippable":           {Record: restOf(skippable)},
		"raw not compressed":       {Record: good.Record, Raw: []byte("<html>")},
		"rest not a record":        {Record: restOf(ix.compressPage([]byte("not a record"), nil))},
		"zstd rest not a record":   {Record: restOf(zenc([]byte("not a record"), nil))},
		"rest a 100 MiB bomb":      {Record: restOf(ix.compressPage(make([]byte, 100<<20), nil))},
		"zstd rest a 100 MiB bomb": {Record: restOf(zenc(make([]byte, 100<<20), nil))},
		"raw over its cap":         {Record: good.Record, Raw: ix.compressPage(make([]byte, ix.opt.MaxRawBytes+1), nil)},
		"zstd raw over its cap":    {Record: good.Record, Raw: zenc(make([]byte, ix.opt.MaxRawBytes+1), nil)},
		"raw declaring 1 GiB":      {Record: good.Record, Raw: huge},
		"S2 rest declaring 1 GiB":  {Record: restOf(hugeS2)},
		"S2 raw declaring 1 GiB":   {Record: good.Record, Raw: hugeS2},
		"S2 rest cut short":        {Record: good.Record[:len(good.Record)-3]},
	} {
		if _, err := ix.CheckStored(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if st := ix.Stats(); st.Held != 0 {
		t.Fatalf("%d pages held", st.Held)
	}
}

// A held page whose record does not decode (corrupted on disk) is
// dropped when its host is indexed; the host's other pages are indexed.
func TestIndexHeldDropsCorruptPages(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 100)
	defer ix.Close()
	docs := []*Document{doc("http://a.example/1", "one", "apple"), doc("http://a.example/2", "two", "apple"), doc("http://a.example/3", "three", "apple")}
	if err := ix.HoldBatch(ctx, docs, nil); err != nil {
		t.Fatal(err)
	}
	p, err := ix.Stored(ctx, docs[1].URL)
	if err != nil {
		t.Fatal(err)
	}
	summary, _, _ := splitStored(p.Record)
	corrupt := append(append([]byte{storedWithSummary}, binary.AppendUvarint(nil, uint64(len(summary)))...), summary...)
	corrupt = append(corrupt, []byte("not zstd")...)
	if err := db.Update(func(txn *badger.Txn) error {
		id, _, _, err := getDoc(txn, docs[1].URL)
		if err != nil {
			return err
		}
		return txn.Set(docKey(prefixDoc, id), corrupt)
	}); err != nil {
		t.Fatal(err)
	}
	n, err := ix.IndexHeld(ctx, "a.example")
	if err != nil || n != 2 {
		t.Fatalf("indexed %d (%v), want 2", n, err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := searchDocs(t, ix, "apple"); !slices.Equal(got, []string{docs[0].URL, docs[2].URL}) {
		t.Fatalf("apple: %v", got)
	}
	if _, err := ix.Get(ctx, docs[1].URL); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the corrupt page: %v, want not found", err)
	}
	if st := ix.Stats(); st.Held != 0 || st.Docs != 2 {
		t.Fatalf("%d held, %d docs; want 0, 2", st.Held, st.Docs)
	}
}
