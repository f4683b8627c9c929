package index

import (
	"math/rand/v2"
	"slices"
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
	for range 8 * stemCacheSets {
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

// Analyses that reuse the analyzer's scratch from several goroutines at
// once give what an analyzer without it gives, texts large and small,
// Chinese (both scripts) and English, interleaved (run with -race).
func TestAnalyzeScratchReuse(t *testing.T) {
	shared := SharedAnalyzer()
	fresh := *shared
	fresh.scratch = nil
	texts := []string{
		"我們的資訊檢索系統：設定檔案與巨集，列印設定。",
		strings.Repeat("搜索引擎的索引 search engines index pages ", 400),
		"e-mail user@example.com at&t node.js .NET 3.14",
		strings.Repeat("插入信封 inserting envelopes ", 3000),
		"",
	}
	want := make([][]Token, len(texts))
	for i, s := range texts {
		want[i] = fresh.Analyze(s)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for k := range 40 {
				i := (k*7 + g) % len(texts)
				if got := shared.Analyze(texts[i]); !slices.Equal(got, want[i]) {
					t.Errorf("text %d: %d tokens with reused scratch, %d without", i, len(got), len(want[i]))
					return
				}
			}
		})
	}
	wg.Wait()
}
