package index

import (
	"slices"
	"unicode/utf8"
)

// Highlights returns the byte ranges [start, end) of text that are analyzer
// tokens equal to one of terms, in order, with touching or overlapping
// ranges merged: the same matches Snippet wraps in <b>, for a caller that
// renders text itself. Text that is not valid UTF-8 has no highlights.
func Highlights(text string, terms []string) [][2]int {
	if len(terms) == 0 || !utf8.ValidString(text) {
		return nil
	}
	set := make(map[string]bool, len(terms))
	for _, t := range terms {
		set[t] = true
	}
	var out [][2]int
	for _, sp := range SharedAnalyzer().analyzeSpans(text, false, scriptUnknown) {
		if set[sp.term] {
			out = append(out, [2]int{sp.start, sp.end})
		}
	}
	slices.SortFunc(out, func(a, b [2]int) int { return a[0] - b[0] })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && r[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	return merged
}
