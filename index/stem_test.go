package index

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// The stem cache gives what stemming the word gives, for words that fill
// and overwrite its slots, from several goroutines at once (run with
// -race), and keeps words it must not stem as they are.
func TestStemCacheIsStemWord(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("inserting insert envelopes envelope running runs ran generalization generalizations the a an " +
		"node.js a2b_hex ÉCOLE x abcdefghijklmnopqrstuvwxyzabcdefgh connection connections connected")
	for range 4 * stemCacheSlots {
		b := make([]byte, 3+rng.IntN(10))
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		words = append(words, string(b)+[]string{"", "ing", "s", "ed", "ation"}[rng.IntN(5)])
	}
	c := &stemCache{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for pass := range 2 {
				for i := range words {
					w := words[(i*(g+1)+pass)%len(words)]
					if got, want := c.stem(w), stemWord(w); got != want {
						t.Errorf("stem(%q) = %q through the cache, %q without", w, got, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, w := range []string{"node.js", "a2b_hex", "ab", "ÉCOLE"} {
		if got := c.stem(w); got != w {
			t.Errorf("stem(%q) = %q, want it unchanged", w, got)
		}
	}
}

func BenchmarkStem(b *testing.B) {
	words := strings.Fields(strings.Repeat("the inserting of envelopes into connected nodes generalizes running ", 20))
	b.Run("cache=off", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			stemWord(words[i%len(words)])
		}
	})
	b.Run("cache=on", func(b *testing.B) {
		c := &stemCache{}
		for i := 0; b.Loop(); i++ {
			c.stem(words[i%len(words)])
		}
	})
}
