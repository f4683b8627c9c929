package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// letters spells n in base 26 with letters, so that each anchor text is
// one term.
func letters(n int) string {
	s := ""
	for {
		s = string(rune('a'+n%26)) + s
		n /= 26
		if n == 0 {
			return s
		}
	}
}

// TestAnchorsKeptWhateverTheOrder: an owner and its replica get a URL's
// anchors in different orders and batches; once the URL has more than
// maxAnchors, both must still keep the same texts, in the same order, and
// index the page alike.
func TestAnchorsKeptWhateverTheOrder(t *testing.T) {
	const u = "http://a.test/"
	var all []string
	for i := range 3 * maxAnchors {
		all = append(all, "anch"+letters(i))
	}
	want := slices.Clone(all)
	slices.SortFunc(want, anchorOrder)
	want = want[:maxAnchors]

	orders := []struct {
		name  string
		texts func() []string
		batch int
	}{
		{"as generated, 7 per call", func() []string { return all }, 7},
		{"reversed, 13 per call", func() []string { r := slices.Clone(all); slices.Reverse(r); return r }, 13},
		{"shuffled with repeats, 1 per call", func() []string {
			rng := rand.New(rand.NewPCG(3, 4))
			r := append(slices.Clone(all), all[:100]...)
			rng.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
			return r
		}, 1},
		{"all in one call", func() []string { return all }, len(all)},
	}
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			ctx := t.Context()
			db := openDB(t, t.TempDir())
			defer db.Close()
			ix := openIndex(t, db, 1000)
			defer ix.Close()
			texts := o.texts()
			half := len(texts) / 2
			add := func(texts []string) {
				for len(texts) > 0 {
					n := min(o.batch, len(texts))
					if err := ix.AddAnchors(ctx, u, texts[:n]); err != nil {
						t.Fatal(err)
					}
					texts = texts[n:]
				}
			}
			add(texts[:half]) // before the page and after it
			if err := ix.Put(ctx, doc(u, "home", "welcome")); err != nil {
				t.Fatal(err)
			}
			add(texts[half:])
			if err := ix.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			rec, err := ix.Get(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Anchors, want) {
				t.Fatalf("kept %d anchors %q..., want %d %q...", len(rec.Anchors), rec.Anchors[:3], len(want), want[:3])
			}
			for _, a := range []string{want[0], want[maxAnchors-1]} {
				if n := len(searchDocs(t, ix, a)); n != 1 {
					t.Errorf("kept anchor %q finds %d pages, want 1", a, n)
				}
			}
			dropped := all[slices.IndexFunc(all, func(a string) bool { return !slices.Contains(want, a) })]
			if n := len(searchDocs(t, ix, dropped)); n != 0 {
				t.Errorf("anchor %q past the cap finds %d pages, want 0", dropped, n)
			}
		})
	}
}

// TestAnchorsRecordedInArrivalOrder: a store whose anchors were recorded
// in the order they arrived is read, and merged into, in the canonical
// order.
func TestAnchorsRecordedInArrivalOrder(t *testing.T) {
	const u = "http://a.test/p"
	ctx := t.Context()
	db := openDB(t, t.TempDir())
	defer db.Close()
	var arrived []string
	for i := range 40 {
		arrived = append(arrived, fmt.Sprintf("text %s", letters(i)))
	}
	if slices.IsSortedFunc(arrived, anchorOrder) {
		t.Fatal("the arrival order is the canonical one: the test shows nothing")
	}
	if err := db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(prefixAnchors+u), encodeAnchors(arrived))
	}); err != nil {
		t.Fatal(err)
	}
	ix := openIndex(t, db, 1000)
	defer ix.Close()
	if err := ix.Put(ctx, doc(u, "page", "body")); err != nil {
		t.Fatal(err)
	}
	if err := ix.AddAnchors(ctx, u, []string{"later text"}); err != nil {
		t.Fatal(err)
	}
	rec, err := ix.Get(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(arrived), "later text")
	slices.SortFunc(want, anchorOrder)
	if !slices.Equal(rec.Anchors, want) {
		t.Errorf("anchors %q, want %q", rec.Anchors, want)
	}
}
