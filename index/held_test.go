package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
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

// A replica that holds pages writes no postings for them, re-indexes none
// of them for new anchors, and once it indexes them (from their owner's
// forms, or by analysis where a form is missing or bad) shows a query
// exactly what an index that analysed them with the same anchors shows.
func TestHeldPagesIndexLikeAnalysedOnes(t *testing.T) {
	ctx := context.Background()
	docs := append(formTestDocs(t), testCorpus(120)...)
	open := func() *Index {
		db := openDB(t, t.TempDir())
		t.Cleanup(func() { db.Close() })
		opts := DefaultOptions()
		opts.FlushDocs, opts.FlushInterval, opts.FormCacheBytes = 1<<30, 0, 32<<20
		ix, err := Open(db, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		return ix
	}
	owner := open()
	if err := owner.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	forms := make([][]byte, len(docs))
	for i, d := range docs {
		r, err := owner.Get(ctx, d.URL)
		if err != nil {
			t.Fatal(err)
		}
		forms[i] = owner.Form(d.URL, r.DocID)
	}
	forms[2] = nil                           // none sent: analysed
	forms[7] = []byte{formWireVersion, 0xff} // malformed: analysed
	anchorsBefore := map[string][]string{docs[0].URL: {"首页"}, docs[3].URL: {"資訊檢索 guide"}, docs[10].URL: {"ten"}}
	anchorsAfter := map[string][]string{docs[1].URL: {"next 下一页"}, docs[10].URL: {"again"}, docs[7].URL: {"seven"}}

	want := open()
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

	replica := open()
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
