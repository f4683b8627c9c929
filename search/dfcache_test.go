package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"sou/index"
)

// TestDFCacheMatchesCount runs random puts, replacements, deletions,
// anchor changes and flushes, and after each asks one long-lived engine
// (whose DF cache carries over) and a fresh one (which counts every list
// in full) for the statistics of every vocabulary word, over all hosts
// and over the hosts a changing filter keeps: they must agree.
// It also checks that the cache both answered and extended an entry to
// newly flushed documents, so that the comparison is not between two full
// counts.
func TestDFCacheMatchesCount(t *testing.T) {
	vocab := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa")
	q := &Query{}
	for _, w := range vocab {
		q.Groups = append(q.Groups, Group{Clauses: []Clause{{Terms: []string{w}}}})
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			ix := newTestIndex(t, nil, 1000)
			cached := NewLocal(ix, DefaultParams())
			rng := rand.New(rand.NewPCG(seed, 0))
			text := func() string {
				var b strings.Builder
				for range 1 + rng.IntN(6) {
					b.WriteString(vocab[rng.IntN(len(vocab))] + " ")
				}
				return b.String()
			}
			stored := map[string]bool{}
			url := func() string { return fmt.Sprintf("http://h%d.example/%d", rng.IntN(3), rng.IntN(40)) }
			hits, extended := 0, 0
			for step := range 300 {
				var op string
				switch k := rng.IntN(10); {
				case k < 5:
					u := url()
					op = "put " + u
					if stored[u] {
						op = "replace " + u
					}
					host := u[len("http://") : len("http://")+len("h0.example")]
					if err := ix.Put(ctx, &index.Document{URL: u, Host: host, Title: text(), Body: text(), FetchedAt: time.Now()}); err != nil {
						t.Fatal(err)
					}
					stored[u] = true
				case k < 6:
					u := url()
					op = "delete " + u
					if err := ix.Delete(ctx, u); err != nil && err != index.ErrNotFound {
						t.Fatal(err)
					}
					delete(stored, u)
				case k < 7:
					u := url()
					op = "anchors " + u
					if err := ix.AddAnchors(ctx, u, []string{text()}); err != nil {
						t.Fatal(err)
					}
				case k < 9:
					op = "flush"
					if err := ix.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				default:
					op = "query"
				}
				r := ix.NewReader()
				n, current := r.Deletions()
				for _, w := range vocab {
					if e, ok := cached.dfs.entries[w]; ok && current && e.deletions == n {
						switch {
						case e.flushed == r.Flushed():
							hits++
						case e.flushed < r.Flushed():
							extended++
						}
					}
				}
				r.Close()
				// Ownership moves: the shard answers for all hosts, for
				// one, or for all but one, changing from step to step.
				owned := fmt.Sprintf("h%d.example", step%3)
				filters := map[string]func(string) bool{
					"all hosts":     nil,
					"owns " + owned: func(h string) bool { return h == owned },
					"lost " + owned: func(h string) bool { return h != owned },
				}
				for name, filter := range filters {
					got, err := cached.LocalStats(ctx, q, filter)
					if err != nil {
						t.Fatal(err)
					}
					for _, w := range vocab {
						if want := countDF(t, ix, w, filter); got.DF[w] != want {
							t.Fatalf("step %d (%s), %s: DF[%s] cached %d, counted %d", step, op, name, w, got.DF[w], want)
						}
					}
				}
			}
			if hits == 0 || extended == 0 {
				t.Fatalf("the cache answered %d times and extended an entry %d times; the comparison checked too little", hits, extended)
			}
		})
	}
}

// countDF counts term's Live documents on hosts passing keep (nil = all)
// posting by posting, as the engine did before it had a cache.
func countDF(t *testing.T, ix *index.Index, term string, keep func(string) bool) int64 {
	t.Helper()
	r := ix.NewReader()
	defer r.Close()
	p, err := r.Postings(term, false)
	if err != nil {
		t.Fatal(err)
	}
	var df int64
	for d := p.Advance(0); d < r.Flushed(); d = p.Next() {
		if r.Live(d) && (keep == nil || keep(r.Host(d))) {
			df++
		}
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	return df
}
