package index

import (
	"context"
	"slices"
	"testing"
)

// TestRecordedAnchorsFollowTheStore: the table of recorded anchors lets
// AddAnchorsBatch skip what is recorded, so it must never hold a pair the
// store lost: a deleted page's anchors, given again, are recorded again.
func TestRecordedAnchorsFollowTheStore(t *testing.T) {
	const u = "http://a.test/1"
	// low are the maxAnchors texts a URL keeps of all, high the others.
	var all []string
	for i := range 2 * maxAnchors {
		all = append(all, "anch"+letters(i))
	}
	slices.SortFunc(all, anchorOrder)
	low, high := all[:maxAnchors], all[maxAnchors:]
	cases := []struct {
		name        string
		steps       func(ctx context.Context, ix *Index) error
		wantAnchors []string
		wantTerms   []string // terms that find the page
		lostTerms   []string // terms that must not
	}{
		{
			name: "given again and again",
			steps: func(ctx context.Context, ix *Index) error {
				for range 3 {
					if err := ix.AddAnchors(ctx, u, []string{"zebra", " zebra "}); err != nil {
						return err
					}
				}
				return nil
			},
			wantAnchors: []string{"zebra"}, wantTerms: []string{"zebra"},
		},
		{
			name: "a new text beside a recorded one",
			steps: func(ctx context.Context, ix *Index) error {
				if err := ix.AddAnchors(ctx, u, []string{"zebra"}); err != nil {
					return err
				}
				return ix.AddAnchors(ctx, u, []string{"zebra", "yak"})
			},
			wantAnchors: []string{"zebra", "yak"}, wantTerms: []string{"zebra", "yak"},
		},
		{
			name: "deleted with its page, then given again",
			steps: func(ctx context.Context, ix *Index) error {
				if err := ix.AddAnchors(ctx, u, []string{"zebra", "yak"}); err != nil {
					return err
				}
				if err := ix.Delete(ctx, u); err != nil {
					return err
				}
				if err := ix.Put(ctx, doc(u, "first page", "plain body")); err != nil {
					return err
				}
				return ix.AddAnchors(ctx, u, []string{"zebra"})
			},
			wantAnchors: []string{"zebra"}, wantTerms: []string{"zebra"}, lostTerms: []string{"yak"},
		},
		{
			name: "a full list takes no more",
			steps: func(ctx context.Context, ix *Index) error {
				if err := ix.AddAnchors(ctx, u, low); err != nil {
					return err
				}
				for range 2 {
					if err := ix.AddAnchors(ctx, u, high[:1]); err != nil {
						return err
					}
				}
				return nil
			},
			wantAnchors: low, lostTerms: high[:1],
		},
		{
			name: "pushed past the cap, deleted, then given again",
			steps: func(ctx context.Context, ix *Index) error {
				if err := ix.AddAnchors(ctx, u, high[:1]); err != nil {
					return err
				}
				if err := ix.AddAnchors(ctx, u, low); err != nil {
					return err
				}
				if err := ix.Delete(ctx, u); err != nil {
					return err
				}
				if err := ix.Put(ctx, doc(u, "first page", "plain body")); err != nil {
					return err
				}
				return ix.AddAnchors(ctx, u, high[:1])
			},
			wantAnchors: high[:1], wantTerms: high[:1],
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
			if err := tc.steps(ctx, ix); err != nil {
				t.Fatal(err)
			}
			if err := ix.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			rec, err := ix.Get(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(tc.wantAnchors, anchorOrder)
			if !slices.Equal(rec.Anchors, tc.wantAnchors) {
				t.Errorf("anchors %q, want %q", rec.Anchors, tc.wantAnchors)
			}
			for _, term := range tc.wantTerms {
				if n := len(searchDocs(t, ix, term)); n != 1 {
					t.Errorf("live docs with %q: %d, want 1", term, n)
				}
			}
			for _, term := range tc.lostTerms {
				if n := len(searchDocs(t, ix, term)); n != 0 {
					t.Errorf("live docs with %q: %d, want 0", term, n)
				}
			}
		})
	}
}

// TestRecordedAnchorsSlots: a slot keeps the last pair hashed to it, and
// forgetting a pair leaves another pair's slot alone.
func TestRecordedAnchorsSlots(t *testing.T) {
	r := newRecordedAnchors()
	a := r.hash("http://a.test/", "home")
	b := a + anchorSlots // the same slot
	c := r.hash("http://a.test/next", "next")
	if a == 0 || r.holds(a) {
		t.Fatalf("empty table holds %x", a)
	}
	r.add(a)
	r.add(c)
	if !r.holds(a) || !r.holds(c) {
		t.Fatal("added pairs not held")
	}
	r.add(b)
	if r.holds(a) || !r.holds(b) {
		t.Error("a slot keeps its first pair")
	}
	r.forget(a)
	if !r.holds(b) {
		t.Error("forgetting a pair dropped the one in its slot")
	}
	r.forget(c)
	if r.holds(c) {
		t.Error("forgotten pair still held")
	}
	if r.hash("http://a.test/", "home") != a || r.hash("http://a.test/h", "ome") == a {
		t.Error("hash is not of the pair")
	}
}
