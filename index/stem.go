package index

import (
	"sync/atomic"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
)

// Stemming: English words are indexed and searched by their Snowball
// (Porter2) stems, so that a query's "inserting envelopes" finds a page's
// "Insert Envelope". The analyzer does not know a text's language (a
// query has none), so the rule is by form alone: a word of 3 to 32 ASCII
// letters is stemmed, anything else (words with digits, accented letters
// or joiners, such as a2b_hex or node.js) is kept as written. English
// suffixes rarely occur on words of other Latin-script languages in the
// ASCII-only form, and a wrongly stemmed word is stemmed alike in pages
// and queries, so it still matches itself.
const (
	minStemBytes = 3
	maxStemBytes = 32
)

// stemmable says whether w is a word to stem: 3 to 32 ASCII letters.
func stemmable(w string) bool {
	if len(w) < minStemBytes || len(w) > maxStemBytes {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// stemWord returns the stem of a lowercased word, or the word itself when
// it is not one to stem.
func stemWord(w string) string {
	if !stemmable(w) {
		return w
	}
	env := snowballstem.NewEnv(w)
	english.Stem(env)
	return env.Current()
}

// stemCache remembers the stems of recently seen words: a stem is a
// Snowball program run over the word, with allocations, and text repeats
// its words (Zipf), so most words are found here. It is two-way set
// associative by an FNV-1a hash of the word: a new word takes a set's
// first way and moves the word there to the second, so that two frequent
// words that share a set both stay. An entry is immutable and swapped in
// whole, so lookups take no lock, and a set holding other words is a miss
// (stemmed and put in). Entries hold copies of the words, never the text
// they were cut from.
type stemCache struct {
	sets [stemCacheSets][2]atomic.Pointer[stemEntry]
}

// stemCacheSets: 8,192 sets of two entries, about 1.3 MB when full.
const stemCacheSets = 1 << 13

// stemEntry holds its word inline: a lookup compares it without reading
// another allocation.
type stemEntry struct {
	stem string
	n    uint8
	word [maxStemBytes]byte
}

func (e *stemEntry) is(w string) bool {
	return e != nil && int(e.n) == len(w) && string(e.word[:e.n]) == w
}

// stem is stemWord through the cache (a nil cache stems every word).
func (c *stemCache) stem(w string) string {
	if c == nil {
		return stemWord(w)
	}
	if len(w) < minStemBytes || len(w) > maxStemBytes {
		return w
	}
	// The hash loop also checks that w is stemmable.
	h := uint32(2166136261)
	for i := 0; i < len(w); i++ {
		ch := w[i]
		if ch-'a' >= 26 {
			return w
		}
		h ^= uint32(ch)
		h *= 16777619
	}
	set := &c.sets[h&(stemCacheSets-1)]
	first := set[0].Load()
	if first.is(w) {
		return first.stem
	}
	if e := set[1].Load(); e.is(w) {
		return e.stem
	}
	e := &stemEntry{n: uint8(len(w))}
	copy(e.word[:], w)
	// Stemmed from a copy: a stem may be part of the word, and the entry
	// outlives the text.
	e.stem = stemWord(string(e.word[:e.n]))
	set[1].Store(first)
	set[0].Store(e)
	return e.stem
}
