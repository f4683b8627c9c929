package index

import (
	"context"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// TestReindexChangedWhileAnalysed: a re-index reads and analyses a page
// without the writer lock; whatever changes the page in that window (new
// anchors, a new Put, a Delete) must win over the analysis that was made
// before it.
func TestReindexChangedWhileAnalysed(t *testing.T) {
	const u = "http://a.test/1"
	cases := []struct {
		name   string
		change func(ctx context.Context, ix *Index) error
		// after the re-index
		wantDocs     int64    // live docs
		wantTerms    []string // terms that must find the page
		wantAnchors  []string // recorded anchors
		wantNextDoc  uint32   // docIDs allocated in all
		wantNotFound bool
	}{
		{
			name:     "nothing changed",
			change:   func(context.Context, *Index) error { return nil },
			wantDocs: 1, wantTerms: []string{"zebra"}, wantAnchors: []string{"zebra"}, wantNextDoc: 2,
		},
		{
			name: "more anchors",
			change: func(ctx context.Context, ix *Index) error {
				return ix.AddAnchors(ctx, u, []string{"yak"})
			},
			wantDocs: 1, wantTerms: []string{"zebra", "yak"}, wantAnchors: []string{"zebra", "yak"}, wantNextDoc: 2,
		},
		{
			name: "put again",
			change: func(ctx context.Context, ix *Index) error {
				return ix.Put(ctx, doc(u, "first page", "new body walrus"))
			},
			wantDocs: 1, wantTerms: []string{"zebra", "walrus"}, wantAnchors: []string{"zebra"}, wantNextDoc: 2,
		},
		{
			name:         "deleted",
			change:       func(ctx context.Context, ix *Index) error { return ix.Delete(ctx, u) },
			wantDocs:     0,
			wantNextDoc:  1,
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
			r := ix.loadForReindex(u)
			if r.err != nil || !r.found {
				t.Fatalf("load: found %v, err %v", r.found, r.err)
			}
			if err := tc.change(ctx, ix); err != nil {
				t.Fatal(err)
			}
			ix.mu.Lock()
			err := ix.applyReindexLocked(&r)
			r.release(ix)
			ix.mu.Unlock()
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
			_, waiting := ix.reindex[u]
			ix.mu.Unlock()
			if waiting {
				t.Error("re-index request still waiting")
			}
			for _, term := range tc.wantTerms {
				if n := len(searchDocs(t, ix, term)); n != 1 {
					t.Errorf("live docs with %q: %d, want 1", term, n)
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

// TestAnchorsRacingAPut: AddAnchorsBatch merges anchors without the
// writer lock, so a page may be analysed before new anchors commit and
// stored after. Either order must end with the anchors indexed: by a
// re-index when the page came analysed, by its one analysis at the flush
// when it was queued.
func TestAnchorsRacingAPut(t *testing.T) {
	const u = "http://a.test/1"
	cases := []struct {
		name string
		race func(ctx context.Context, t *testing.T, ix *Index)
		// pages waiting after a flush that re-indexes nothing
		wantReindex int
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
		{"put between the anchors' read and their re-index request", func(ctx context.Context, t *testing.T, ix *Index) {
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
			if err := ix.requestReindex(nil, []string{u}); err != nil {
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
			if err := ix.flush(ctx, false); err != nil { // busy: no re-index yet
				t.Fatal(err)
			}
			if got := ix.Stats().Pending; got != tc.wantReindex {
				t.Errorf("pending after a flush: %d, want %d", got, tc.wantReindex)
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
