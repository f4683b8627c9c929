package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// viewEntry is what a cursor yields for one live doc.
type viewEntry struct {
	doc uint32
	tf  [NumFields]uint32
	pos []uint32
}

// indexView is everything a query reads of an index: per term the live
// docs' TFs and positions, per live doc its field lengths, and the
// collection statistics.
type indexView struct {
	terms  map[string][]viewEntry
	lens   map[uint32][NumFields]uint32
	docs   int64
	lenSum [NumFields]int64
}

// termsOnDisk lists the terms of every postings and anchor postings key.
func termsOnDisk(t *testing.T, db *badger.DB) []string {
	t.Helper()
	seen := map[string]bool{}
	err := db.View(func(txn *badger.Txn) error {
		for _, prefix := range []string{prefixPostings, prefixAnchorPostings} {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefix)})
			for it.Rewind(); it.Valid(); it.Next() {
				rest := it.Item().Key()[len(prefix):]
				if sep := bytes.IndexByte(rest, 0); sep >= 0 {
					seen[string(rest[:sep])] = true
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	terms := make([]string, 0, len(seen))
	for term := range seen {
		terms = append(terms, term)
	}
	slices.Sort(terms)
	return terms
}

// viewOf reads ix through a Reader as a query would, checking on the way
// that every doc's TFs are within the bounds ShallowAdvance and the
// cursor give for it.
func viewOf(t *testing.T, ix *Index, terms []string) indexView {
	t.Helper()
	r := ix.NewReader()
	defer r.Close()
	v := indexView{terms: map[string][]viewEntry{}, lens: map[uint32][NumFields]uint32{}, docs: r.Docs(), lenSum: r.FieldLenSum()}
	for _, term := range terms {
		p, err := r.Postings(term, false)
		if err != nil {
			t.Fatal(err)
		}
		shallow, err := r.Postings(term, false)
		if err != nil {
			t.Fatal(err)
		}
		for d := p.Doc(); d != NoMoreDocs; d = p.Next() {
			last, h := shallow.ShallowAdvance(d)
			if shallow.Advance(d) != d {
				t.Fatalf("term %q: a second cursor does not find doc %d", term, d)
			}
			if h == nil || last < d {
				t.Fatalf("term %q doc %d: ShallowAdvance gives block ending %d", term, d, last)
			}
			if !r.Live(d) {
				continue
			}
			tf, lens := p.TF(), r.FieldLens(d)
			for f := range NumFields {
				if tf[f] > h.MaxTF[f] || tf[f] > p.MaxTF[f] {
					t.Fatalf("term %q doc %d field %d: TF %d over bounds %d, %d", term, d, f, tf[f], h.MaxTF[f], p.MaxTF[f])
				}
				if tf[f] > 0 && (lens[f] < h.MinLen[f] || lens[f] < p.MinLen[f]) {
					t.Fatalf("term %q doc %d field %d: length %d under bounds %d, %d", term, d, f, lens[f], h.MinLen[f], p.MinLen[f])
				}
			}
			pos, err := p.Positions(nil)
			if err != nil {
				t.Fatal(err)
			}
			v.terms[term] = append(v.terms[term], viewEntry{d, tf, pos})
			v.lens[d] = lens
		}
		if err := p.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func sameViews(t *testing.T, name string, got, want indexView) {
	t.Helper()
	if got.docs != want.docs || got.lenSum != want.lenSum {
		t.Errorf("%s: %d docs, length sums %v; want %d, %v", name, got.docs, got.lenSum, want.docs, want.lenSum)
	}
	for d, l := range want.lens {
		if got.lens[d] != l {
			t.Errorf("%s: doc %d lengths %v, want %v", name, d, got.lens[d], l)
		}
	}
	n := 0
	for term, w := range want.terms {
		g := got.terms[term]
		if !slices.EqualFunc(g, w, func(a, b viewEntry) bool {
			return a.doc == b.doc && a.tf == b.tf && slices.Equal(a.pos, b.pos)
		}) {
			if n++; n <= 5 {
				t.Errorf("%s: term %q\n got %v\nwant %v", name, term, g, w)
			}
		}
	}
	for term, g := range got.terms {
		if _, ok := want.terms[term]; !ok && len(g) > 0 {
			t.Errorf("%s: term %q found in %d docs, in none wanted", name, term, len(g))
		}
	}
}

// anchorRounds is a crawl's anchor traffic over testCorpus: in round k,
// every page links to a few others with texts that change from round to
// round, so that pages flushed earlier get new anchors again and again,
// some lose a word, and one link points at a page not stored.
func anchorRounds(docs []*Document, rounds int) []map[string][]string {
	out := make([]map[string][]string, rounds)
	for k := range out {
		m := map[string][]string{}
		for i := range docs {
			if (i+k)%3 != 0 {
				continue
			}
			m[docs[(i*7+k)%len(docs)].URL] = append(m[docs[(i*7+k)%len(docs)].URL], fmt.Sprintf("link %d 链接 round%d", i%11, k%4))
		}
		m[docs[k%len(docs)].URL+"#missing"] = []string{"nowhere"}
		m[docs[(k*13)%len(docs)].URL] = append(m[docs[(k*13)%len(docs)].URL], "next page 下一页 heavy")
		out[k] = m
	}
	return out
}

// TestAnchorUpdatesReadAsFullIndexing: pages whose anchors change after
// their flush get their anchor field through anchor postings, and a
// query reads exactly what indexing every page with its final anchors
// would give: the same docs, TFs, positions, field lengths and
// statistics; after a restart too, and across merges of anchor blocks,
// deletes and a failed anchor write.
func TestAnchorUpdatesReadAsFullIndexing(t *testing.T) {
	docs := testCorpus(240)
	rounds := anchorRounds(docs, 20)
	deleted := map[int]bool{17: true, 101: true, 230: true}
	ctx := context.Background()

	// putAll puts docs, deletes those marked deleted, and flushes.
	putAll := func(ix *Index) {
		t.Helper()
		for i, d := range docs {
			if err := ix.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
			if deleted[i] {
				if err := ix.Delete(ctx, d.URL); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := ix.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The reference: every anchor recorded before its page is put.
	refDB := openDB(t, t.TempDir())
	defer refDB.Close()
	ref := openIndex(t, refDB, 1<<30)
	for _, m := range rounds {
		if err := ref.AddAnchorsBatch(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	putAll(ref)

	dir := t.TempDir()
	db := openDB(t, dir)
	ix := openIndex(t, db, 1<<30)
	putAll(ix)
	for k, m := range rounds {
		if err := ix.AddAnchorsBatch(ctx, m); err != nil {
			t.Fatal(err)
		}
		if k == 7 { // an anchor write that fails leaves its pages waiting
			ix.commitHook = func(int) error { return errors.New("disk full") }
			if err := ix.Flush(ctx); err == nil {
				t.Fatal("flush with a failing commit: no error")
			}
			ix.commitHook = nil
			if ix.Stats().Pending == 0 {
				t.Fatal("a failed anchor write left no page waiting")
			}
		}
		if err := ix.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st := ix.Stats()
	if st.NextDocID != uint32(len(docs)) {
		t.Errorf("%d docIDs for %d pages: a page was put again", st.NextDocID, len(docs))
	}
	if st.AnchorUpdates == 0 {
		t.Fatal("no anchor update")
	}
	terms := termsOnDisk(t, refDB)
	want := viewOf(t, ref, terms)
	sameViews(t, "after the updates", viewOf(t, ix, terms), want)

	// Merges drop stale entries: of the entries written for a term of
	// most pages' anchors (about one per update), most are gone.
	r := ix.NewReader()
	p, err := r.Postings("round1", false)
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for _, e := range p.anc {
		if r.anchors.get(e.doc).seq != e.seq {
			stale++
		}
	}
	r.Close()
	if current := len(p.anc) - stale; current == 0 || len(p.anc) > int(st.AnchorUpdates)/2 {
		t.Errorf("anchor postings of round1: %d entries, %d current, after %d updates", len(p.anc), current, st.AnchorUpdates)
	}

	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir)
	defer db.Close()
	ix = openIndex(t, db, 1<<30)
	defer ix.Close()
	sameViews(t, "after a restart", viewOf(t, ix, terms), want)
}

// TestAnchorUpdateChangedWhileAnalysed: an anchor update analyses a
// page's anchors without the writer lock; whatever changes the page in
// that window (new anchors, a new Put, a Delete) must win over the
// analysis made before it.
func TestAnchorUpdateChangedWhileAnalysed(t *testing.T) {
	const u = "http://a.test/1"
	cases := []struct {
		name   string
		change func(ctx context.Context, ix *Index) error
		// after the update
		wantDocs     int64    // live docs
		wantTerms    []string // terms that must find the page
		wantGone     []string // terms that must not
		wantAnchors  []string // recorded anchors
		wantNextDoc  uint32   // docIDs allocated in all
		wantNotFound bool
	}{
		{
			name:     "nothing changed",
			change:   func(context.Context, *Index) error { return nil },
			wantDocs: 1, wantTerms: []string{"zebra", "plain"}, wantAnchors: []string{"zebra"}, wantNextDoc: 1,
		},
		{
			name: "more anchors",
			change: func(ctx context.Context, ix *Index) error {
				return ix.AddAnchors(ctx, u, []string{"yak"})
			},
			wantDocs: 1, wantTerms: []string{"zebra", "yak"}, wantAnchors: []string{"zebra", "yak"}, wantNextDoc: 1,
		},
		{
			name: "put again",
			change: func(ctx context.Context, ix *Index) error {
				return ix.Put(ctx, doc(u, "first page", "new body walrus"))
			},
			wantDocs: 1, wantTerms: []string{"zebra", "walrus"}, wantGone: []string{"plain"}, wantAnchors: []string{"zebra"}, wantNextDoc: 2,
		},
		{
			name:         "deleted",
			change:       func(ctx context.Context, ix *Index) error { return ix.Delete(ctx, u) },
			wantDocs:     0,
			wantNextDoc:  1,
			wantGone:     []string{"zebra", "plain"},
			wantNotFound: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			db := openDB(t, t.TempDir())
			defer db.Close()
			ix := openIndex(t, db, 1000)
			defer ix.Close()
			if err := ix.Put(ctx, doc(u, "first page", "plain body")); err != nil {
				t.Fatal(err)
			}
			if err := ix.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := ix.AddAnchors(ctx, u, []string{"zebra"}); err != nil {
				t.Fatal(err)
			}
			up, err := ix.analyseAnchorsOf(u)
			if err != nil || up.dp == nil {
				t.Fatalf("analyse: %v, %v", up.dp, err)
			}
			if err := tc.change(ctx, ix); err != nil {
				t.Fatal(err)
			}
			ix.flushMu.Lock()
			ix.mu.Lock()
			taken, ok, err := ix.takeAnchorUpdateLocked(&up)
			ix.mu.Unlock()
			if err == nil && ok {
				err = ix.writeAnchorUpdates(ctx, []anchorUpdate{taken})
				ix.releaseDoc(taken.dp)
			}
			ix.flushMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if err := ix.flush(ctx, false); err != nil {
				t.Fatal(err)
			}
			st := ix.Stats()
			if st.Docs != tc.wantDocs || st.NextDocID != tc.wantNextDoc {
				t.Errorf("docs %d, docIDs %d; want %d, %d", st.Docs, st.NextDocID, tc.wantDocs, tc.wantNextDoc)
			}
			ix.mu.Lock()
			_, waiting := ix.anchorsDue[u]
			ix.mu.Unlock()
			if waiting && tc.name != "more anchors" {
				t.Error("anchor update still waiting")
			}
			if tc.name == "more anchors" {
				if err := ix.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, term := range tc.wantTerms {
				if n := len(searchDocs(t, ix, term)); n != 1 {
					t.Errorf("live docs with %q: %d, want 1", term, n)
				}
			}
			for _, term := range tc.wantGone {
				if n := len(searchDocs(t, ix, term)); n != 0 {
					t.Errorf("live docs with %q: %d, want 0", term, n)
				}
			}
			rec, err := ix.Get(ctx, u)
			if tc.wantNotFound {
				if err == nil {
					t.Errorf("deleted page still stored: %+v", rec.Document)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(tc.wantAnchors, anchorOrder)
			if !slices.Equal(rec.Anchors, tc.wantAnchors) {
				t.Errorf("anchors %q, want %q", rec.Anchors, tc.wantAnchors)
			}
		})
	}
}

// A page's anchor field replaced by an update: a word only its old
// anchors had no longer finds it, a word of the new ones does, and its
// other fields are untouched.
func TestAnchorUpdateReplacesAnchorField(t *testing.T) {
	ctx := t.Context()
	const u = "http://a.test/1"
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 1000)
	defer ix.Close()
	if err := ix.AddAnchors(ctx, u, []string{"zebra crossing"}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Put(ctx, doc(u, "first page", "plain body zebra")); err != nil {
		t.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Past maxAnchors texts the first by hash stay: flood the page with
	// texts that push "zebra crossing" out.
	var flood []string
	for i := range 3 * maxAnchors {
		flood = append(flood, fmt.Sprintf("walrus %d", i))
	}
	if err := ix.AddAnchors(ctx, u, flood); err != nil {
		t.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := ix.Get(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	kept := slices.Contains(rec.Anchors, "zebra crossing")
	r := ix.NewReader()
	defer r.Close()
	check := func(word string, want [NumFields]uint32) {
		t.Helper()
		toks := ix.Analyzer().AnalyzeQuery(word)
		if len(toks) != 1 {
			t.Fatalf("%q is %d terms", word, len(toks))
		}
		term := toks[0].Term
		p, err := r.Postings(term, true)
		if err != nil {
			t.Fatal(err)
		}
		var got [NumFields]uint32
		if p.Doc() == 0 {
			got = p.TF()
		}
		if got != want {
			t.Errorf("%q: TFs %v, want %v", term, got, want)
		}
	}
	crossing := [NumFields]uint32{}
	zebra := [NumFields]uint32{FieldBody: 1}
	if kept {
		crossing[FieldAnchor], zebra[FieldAnchor] = 1, 1
	}
	check("crossing", crossing)
	check("zebra", zebra)
	check("walrus", [NumFields]uint32{FieldAnchor: uint32(len(rec.Anchors)) - crossing[FieldAnchor]})
	check("plain", [NumFields]uint32{FieldBody: 1})
	if got := r.FieldLens(0)[FieldAnchor]; got != uint32(2*len(rec.Anchors)) {
		t.Errorf("anchor length %d, want %d", got, 2*len(rec.Anchors))
	}
}

// Anchor blocks are bytes from disk: a damaged one is an error, never a
// panic or a doc out of order.
func TestDecodeAnchorBlockRejectsDamage(t *testing.T) {
	pos := []uint32{anchorBase, anchorBase + 3, anchorBase + 1}
	good := encodeAnchorBlock(nil, []anchorEntry{
		{doc: 3, seq: 1, length: 4, tf: 2, from: 0},
		{doc: 9, seq: 2, length: 2, tf: 1, from: 2},
	}, pos)
	entries, got, err := decodeAnchorBlock(good, nil, nil)
	if err != nil || len(entries) != 2 || !slices.Equal(got, pos) || entries[1].doc != 9 {
		t.Fatalf("round trip: %v %v %v", entries, got, err)
	}
	for cut := range len(good) {
		if _, _, err := decodeAnchorBlock(good[:cut], nil, nil); err == nil {
			t.Errorf("cut at %d: no error", cut)
		}
	}
	for i := range good {
		for _, b := range []byte{0, 0x7f, 0xff} {
			bad := slices.Clone(good)
			bad[i] = b
			decodeAnchorBlock(bad, nil, nil) // must not panic
		}
	}
	if _, _, err := decodeAnchorBlock(append(slices.Clone(good), 0), nil, nil); err == nil {
		t.Error("trailing byte: no error")
	}
}

func FuzzDecodeAnchorBlock(f *testing.F) {
	f.Add(encodeAnchorBlock(nil, []anchorEntry{{doc: 3, seq: 1, length: 4, tf: 1}}, []uint32{anchorBase}))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, pos, err := decodeAnchorBlock(b, nil, nil)
		if err != nil {
			return
		}
		for i, e := range entries {
			if e.tf == 0 || int(e.from+e.tf) > len(pos) || i > 0 && e.doc < entries[i-1].doc {
				t.Fatalf("entry %d: %+v", i, e)
			}
		}
	})
}

// TestAnchorsRacingAPut: AddAnchorsBatch merges anchors without the
// writer lock, so a page may be analysed before new anchors commit and
// stored after. Either order must end with the anchors indexed: by a
// anchor update when the page came analysed, by its one analysis at the flush
// when it was queued.
func TestAnchorsRacingAPut(t *testing.T) {
	const u = "http://a.test/1"
	cases := []struct {
		name string
		race func(ctx context.Context, t *testing.T, ix *Index)
		// pages waiting after a flush that updates no anchors
		wantWaiting int
	}{
		{"analysed before the anchors, stored after", func(ctx context.Context, t *testing.T, ix *Index) {
			p, err := ix.prepare(doc(u, "first page", "plain body"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.releaseDoc(p.dp)
			if err := ix.AddAnchors(ctx, u, []string{"zebra"}); err != nil {
				t.Fatal(err)
			}
			if err := ix.store(ctx, p); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"put between the anchors' read and their update request", func(ctx context.Context, t *testing.T, ix *Index) {
			// AddAnchorsBatch found no page, then a Put stored it
			// without the anchors before the request was made.
			if err := ix.Put(ctx, doc(u, "first page", "plain body")); err != nil {
				t.Fatal(err)
			}
			if err := ix.db.Update(func(txn *badger.Txn) error {
				return txn.Set([]byte(prefixAnchors+u), encodeAnchors([]string{"zebra"}))
			}); err != nil {
				t.Fatal(err)
			}
			if err := ix.requestAnchorUpdates(nil, []string{u}); err != nil {
				t.Fatal(err)
			}
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			db := openDB(t, dir)
			ix := openIndex(t, db, 1000)
			tc.race(ctx, t, ix)
			if err := ix.flush(ctx, false); err != nil { // busy: no anchor update yet
				t.Fatal(err)
			}
			if got := ix.Stats().Pending; got != tc.wantWaiting {
				t.Errorf("pending after a flush: %d, want %d", got, tc.wantWaiting)
			}
			// A request survives a restart.
			crash(t, ix, db)
			db = openDB(t, dir)
			defer db.Close()
			ix = openIndex(t, db, 1000)
			defer ix.Close()
			if err := ix.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if n := len(searchDocs(t, ix, "zebra")); n != 1 {
				t.Errorf("live docs with the anchor: %d, want 1", n)
			}
		})
	}
}
