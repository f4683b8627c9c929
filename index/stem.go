package index

import (
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

// stemWord returns the stem of a lowercased word, or the word itself when
// it is not one to stem.
func stemWord(w string) string {
	if len(w) < minStemBytes || len(w) > maxStemBytes {
		return w
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return w
		}
	}
	env := snowballstem.NewEnv(w)
	english.Stem(env)
	return env.Current()
}
