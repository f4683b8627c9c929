package index

import (
	"strings"
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
// its words (Zipf), so most words are found here. It is direct-mapped by
// an FNV-1a hash of the word; an entry is immutable and swapped in whole,
// so lookups take no lock, and a slot holding another word is a miss
// (stemmed and replaced). Entries hold copies of the words, never the
// text they were cut from.
type stemCache struct {
	slots [stemCacheSlots]atomic.Pointer[stemEntry]
}

// stemCacheSlots: 8,192 slots, about 0.5 MB when full.
const stemCacheSlots = 1 << 13

type stemEntry struct{ word, stem string }

// stem is stemWord through the cache (a nil cache stems every word).
func (c *stemCache) stem(w string) string {
	if c == nil {
		return stemWord(w)
	}
	if !stemmable(w) {
		return w
	}
	h := uint32(2166136261)
	for i := 0; i < len(w); i++ {
		h ^= uint32(w[i])
		h *= 16777619
	}
	slot := &c.slots[h&(stemCacheSlots-1)]
	if e := slot.Load(); e != nil && e.word == w {
		return e.stem
	}
	word := strings.Clone(w)
	e := &stemEntry{word: word, stem: stemWord(word)}
	slot.Store(e)
	return e.stem
}
