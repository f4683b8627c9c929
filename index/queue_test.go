package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestQueuedPageTakesLateAnchors: anchors recorded between a Put and the
// flush are in the page's one analysis; only anchors after the flush
// need an anchor update.
func TestQueuedPageTakesLateAnchors(t *testing.T) {
	const u = "http://a.test/1"
	cases := []struct {
		name      string
		formCache bool
		steps     func(ctx context.Context, t *testing.T, ix *Index)
		// after a final Flush
		wantNextDoc  uint32
		wantAnalysed uint64
		wantDocs     int64
		wantTerms    map[string]int // term -> live docs it finds
	}{
		{
			name: "anchors before the flush",
			steps: func(ctx context.Context, t *testing.T, ix *Index) {
				put(ctx, t, ix, doc(u, "first page", "plain body"))
				addAnchors(ctx, t, ix, u, "zebra")
			},
			wantNextDoc: 1, wantAnalysed: 1, wantDocs: 1, wantTerms: map[string]int{"zebra": 1, "plain": 1},
		},
		{
			name: "anchors after the flush",
			steps: func(ctx context.Context, t *testing.T, ix *Index) {
				put(ctx, t, ix, doc(u, "first page", "plain body"))
				flush(ctx, t, ix)
				addAnchors(ctx, t, ix, u, "zebra")
			},
			// The anchors are indexed alone: the page keeps its docID.
			wantNextDoc: 1, wantAnalysed: 1, wantDocs: 1, wantTerms: map[string]int{"zebra": 1, "plain": 1},
		},
		{
			name:      "form taken for a replica, then anchors",
			formCache: true,
			steps: func(ctx context.Context, t *testing.T, ix *Index) {
				put(ctx, t, ix, doc(u, "first page", "plain body"))
				if f := ix.Form(u, 0); len(f) == 0 {
					t.Fatal("no form for the queued page")
				}
				addAnchors(ctx, t, ix, u, "zebra")
			},
			wantNextDoc: 1, wantAnalysed: 1, wantDocs: 1, wantTerms: map[string]int{"zebra": 1, "plain": 1},
		},
		{
			name: "deleted while queued",
			steps: func(ctx context.Context, t *testing.T, ix *Index) {
				put(ctx, t, ix, doc(u, "first page", "plain body"))
				if err := ix.Delete(ctx, u); err != nil {
					t.Fatal(err)
				}
			},
			wantNextDoc: 1, wantAnalysed: 0, wantDocs: 0, wantTerms: map[string]int{"plain": 0},
		},
		{
			name: "put again while queued",
			steps: func(ctx context.Context, t *testing.T, ix *Index) {
				put(ctx, t, ix, doc(u, "first page", "plain body"))
				addAnchors(ctx, t, ix, u, "zebra")
				put(ctx, t, ix, doc(u, "first page", "new body walrus"))
			},
			wantNextDoc: 2, wantAnalysed: 1, wantDocs: 1, wantTerms: map[string]int{"zebra": 1, "walrus": 1, "plain": 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			db := openDB(t, t.TempDir())
			defer db.Close()
			opts := DefaultOptions()
			opts.FlushDocs, opts.FlushInterval = 1000, 0
			if tc.formCache {
				opts.FormCacheBytes = 1 << 20
			}
			ix, err := Open(db, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			tc.steps(ctx, t, ix)
			flush(ctx, t, ix)
			st := ix.Stats()
			if st.NextDocID != tc.wantNextDoc || st.PutsAnalysed != tc.wantAnalysed || st.Docs != tc.wantDocs || st.Pending != 0 {
				t.Errorf("docIDs %d, analysed %d, docs %d, pending %d; want %d, %d, %d, 0",
					st.NextDocID, st.PutsAnalysed, st.Docs, st.Pending, tc.wantNextDoc, tc.wantAnalysed, tc.wantDocs)
			}
			for term, want := range tc.wantTerms {
				if n := len(searchDocs(t, ix, term)); n != want {
					t.Errorf("live docs with %q: %d, want %d", term, n, want)
				}
			}
			// No anchor update request is left for a restart to act on.
			if err := db.View(func(txn *badger.Txn) error {
				_, err := txn.Get([]byte(prefixAnchorsChanged + u))
				return err
			}); !errors.Is(err, badger.ErrKeyNotFound) {
				t.Errorf("anchor update request on disk: %v", err)
			}
		})
	}
}

// TestQueueWritesSameBytes: pages whose anchors arrive between their Put
// and the flush get the postings they would have had, had the anchors
// arrived before the Put, whether the flush analyses them or replays the
// forms their replicas took, and none is analysed twice.
func TestQueueWritesSameBytes(t *testing.T) {
	docs := testCorpus(200)
	anchors := map[string][]string{}
	for i, d := range docs {
		anchors[d.URL] = []string{fmt.Sprintf("link %d 链接", i%7), "next page 下一页"}
	}
	run := func(anchorsFirst, takeForms bool) ([][2][]byte, Stats) {
		ctx := context.Background()
		db := openDB(t, t.TempDir())
		defer db.Close()
		opts := DefaultOptions()
		opts.FlushDocs, opts.FlushInterval, opts.FormCacheBytes = 1<<30, 0, 32<<20
		ix, err := Open(db, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		if anchorsFirst {
			if err := ix.AddAnchorsBatch(ctx, anchors); err != nil {
				t.Fatal(err)
			}
		}
		for i, d := range docs {
			put(ctx, t, ix, d)
			if takeForms && len(ix.Form(d.URL, uint32(i))) == 0 {
				t.Fatalf("no form for queued page %d", i)
			}
		}
		if !anchorsFirst {
			if err := ix.AddAnchorsBatch(ctx, anchors); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.Close(); err != nil { // flushes
			t.Fatal(err)
		}
		return dumpPostings(t, db), ix.Stats()
	}
	want, wantSt := run(true, false)
	if len(want) == 0 || wantSt.Docs != int64(len(docs)) {
		t.Fatalf("%d postings blocks, %d docs", len(want), wantSt.Docs)
	}
	for _, takeForms := range []bool{false, true} {
		name := fmt.Sprintf("forms taken %v", takeForms)
		got, st := run(false, takeForms)
		samePostings(t, name, got, want)
		if st.NextDocID != uint32(len(docs)) || st.PutsAnalysed != uint64(len(docs)) || st.Pending != 0 {
			t.Errorf("%s: %d docIDs, %d analysed, %d pending; want %d, %d, 0", name, st.NextDocID, st.PutsAnalysed, st.Pending, len(docs), len(docs))
		}
	}
}

func put(ctx context.Context, t *testing.T, ix *Index, d *Document) {
	t.Helper()
	if err := ix.Put(ctx, d); err != nil {
		t.Fatal(err)
	}
}

func flush(ctx context.Context, t *testing.T, ix *Index) {
	t.Helper()
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func addAnchors(ctx context.Context, t *testing.T, ix *Index, u string, texts ...string) {
	t.Helper()
	if err := ix.AddAnchors(ctx, u, texts); err != nil {
		t.Fatal(err)
	}
}

// TestQueueConcurrentWriters runs Puts, anchors, replicas' Form calls and
// flushes at once (with -race): in the end every page is searchable by
// its own word and by every anchor text it was given, once.
func TestQueueConcurrentWriters(t *testing.T) {
	const pages = 120
	ctx := t.Context()
	db := openDB(t, t.TempDir())
	defer db.Close()
	opts := DefaultOptions()
	opts.FlushDocs, opts.FlushInterval, opts.FormCacheBytes = 16, time.Millisecond, 1<<20
	ix, err := Open(db, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	url := func(i int) string { return fmt.Sprintf("http://c%d.example/p%d", i%3, i) }
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Go(func() { // pages, each put twice
		for round := range 2 {
			for i := range pages {
				d := doc(url(i), fmt.Sprintf("title %d", i), fmt.Sprintf("own%d body round%d", i, round))
				if err := ix.Put(ctx, d); err != nil {
					errs <- err
					return
				}
			}
		}
	})
	wg.Go(func() { // anchors to pages put or not yet
		for i := range pages {
			if err := ix.AddAnchorsBatch(ctx, map[string][]string{url(i): {fmt.Sprintf("anchor%d", i)}}); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Go(func() { // a replica taking forms
		for i := range 2 * pages {
			if rec, err := ix.Get(ctx, url(i%pages)); err == nil {
				ix.Form(rec.URL, rec.DocID)
			}
		}
	})
	wg.Go(func() {
		for range 20 {
			if err := ix.flush(ctx, false); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	flush(ctx, t, ix)
	if st := ix.Stats(); st.Docs != pages || st.Pending != 0 {
		t.Fatalf("%d docs, %d pending; want %d, 0", st.Docs, st.Pending, pages)
	}
	for i := range pages {
		for _, word := range []string{fmt.Sprintf("own%d", i), fmt.Sprintf("anchor%d", i)} {
			if got := searchDocs(t, ix, word); len(got) != 1 || got[0] != url(i) {
				t.Errorf("%q finds %v, want [%s]", word, got, url(i))
			}
		}
	}
	if got := searchDocs(t, ix, "round0"); len(got) != 0 {
		t.Errorf("replaced pages still found: %v", got)
	}
}
