package index

import (
	"html"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// snippetScanBytes caps how much of a page Snippet looks at.
const snippetScanBytes = 512 << 10

// maxOccurrences caps the occurrences of one term considered for windows.
const maxOccurrences = 256

type occurrence struct {
	start, end int // bytes
	term       int
	runeStart  int
	runeEnd    int
}

// Snippet returns a query-dependent snippet of text: the window of at most
// maxRunes characters holding the most distinct query terms (then the most
// occurrences), HTML-escaped, with <b>..</b> around analyzer tokens equal to
// a query term. Window edges fall on token boundaries, so neither a UTF-8
// character nor a Chinese word is split.
//
// Finding candidate windows is a byte search for the terms: in the text
// itself when every term is ASCII (matched ignoring ASCII case) or has no
// case variants (Chinese words, numbers), otherwise in a lowercased copy,
// and for Chinese terms in a Traditional page in the page folded to
// Simplified (locate); only the chosen window is run through the analyzer,
// which keeps snippets cheap on long pages.
func Snippet(text string, terms []string, maxRunes int) string {
	return snippet(text, terms, maxRunes, true, scriptUnset)
}

// PageSnippet is Snippet of a stored page's text in the script it was
// indexed in (Reader.Script), which spares telling the script from the
// text again.
func PageSnippet(text string, terms []string, maxRunes int, sc Script) string {
	return snippet(text, terms, maxRunes, true, script(sc))
}

// scriptUnset asks snippet to tell the page's script from its text.
const scriptUnset script = -1

// snippet is Snippet; inPlace false always searches a lowercased copy (the
// tests compare both ways).
func snippet(text string, terms []string, maxRunes int, inPlace bool, page script) string {
	if maxRunes <= 0 {
		maxRunes = 160
	}
	text = truncUTF8(text, snippetScanBytes)
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	an := SharedAnalyzer()
	if page == scriptUnset {
		page = an.pageScript("", text)
	}
	hanTerms := false
	set := make(map[string]int, len(terms))
	for i, t := range terms {
		// A term that is not valid UTF-8 could match inside a character
		// and cut it in half (a fuzz finding); real query terms come from
		// the analyzer and are always valid.
		if t != "" && utf8.ValidString(t) {
			if _, ok := set[t]; !ok {
				set[t] = i
				inPlace = inPlace && (isLowerASCII(t) || isCaseless(t))
				hanTerms = hanTerms || strings.IndexFunc(t, isHan) >= 0
			}
		}
	}
	var occ []occurrence
	addAll := func(hay, term string, ti int, index func(s, t string) int) {
		term = stemPrefix(term)
		for off, n := 0, 0; n < maxOccurrences; n++ {
			i := index(hay[off:], term)
			if i < 0 {
				break
			}
			occ = append(occ, occurrence{start: off + i, end: off + i + len(term), term: ti})
			off += i + len(term)
		}
	}
	if hanTerms && page == scriptTraditional {
		// The terms are Simplified, the text is not: locate them with the
		// analyzer, which folds the text as it did for indexing.
		occ = an.locate(truncUTF8(text, 64<<10), set, page, occ)
	} else if inPlace {
		// Lowercasing a long page byte by byte was most of a snippet's
		// cost (BENCHMARKS.md, the local p99).
		for term, ti := range set {
			if isCaseless(term) {
				addAll(text, term, ti, strings.Index)
			} else {
				addAll(text, term, ti, indexFoldASCII)
			}
		}
	} else {
		lower, _ := toLowerFast(text)
		if len(lower) == len(text) {
			for term, ti := range set {
				addAll(lower, term, ti, strings.Index)
			}
		} else {
			// Lowercasing changed byte lengths: locate terms with the analyzer.
			occ = an.locate(truncUTF8(text, 64<<10), set, page, occ)
		}
	}
	if hanTerms && page != scriptTraditional && !allFound(occ, set) && an.folds(text) {
		// Traditional characters quoted in a Simplified page: a byte
		// search cannot find them for a Simplified term.
		occ = an.locate(truncUTF8(text, 64<<10), set, page, occ[:0])
	}
	lo, hi := 0, 0
	if len(occ) == 0 {
		hi = advanceRunes(text, 0, maxRunes)
	} else {
		slices.SortFunc(occ, func(a, b occurrence) int { return a.start - b.start })
		// Rune offsets by one forward walk.
		pos, runes := 0, 0
		for i := range occ {
			runes += utf8.RuneCountInString(text[pos:occ[i].start])
			pos = occ[i].start
			occ[i].runeStart = runes
			occ[i].runeEnd = runes + utf8.RuneCountInString(text[occ[i].start:occ[i].end])
		}
		bestI, bestJ, bestDistinct, bestCount := 0, 0, -1, -1
		counts := make(map[int]int, len(set))
		j := 0
		for i := range occ {
			if j < i {
				j = i
			}
			for j < len(occ) && occ[j].runeEnd-occ[i].runeStart <= maxRunes {
				counts[occ[j].term]++
				j++
			}
			if j > i {
				if d, c := len(counts), j-i; d > bestDistinct || d == bestDistinct && c > bestCount {
					bestI, bestJ, bestDistinct, bestCount = i, j-1, d, c
				}
				if counts[occ[i].term]--; counts[occ[i].term] == 0 {
					delete(counts, occ[i].term)
				}
			}
		}
		lo, hi = occ[bestI].start, occ[bestJ].end
		if bestDistinct < 0 { // a single occurrence longer than the window
			lo, hi = occ[0].start, occ[0].end
		}
		slack := maxRunes - utf8.RuneCountInString(text[lo:hi])
		if slack > 0 {
			lo = retreatRunes(text, lo, slack/3)
			hi = advanceRunes(text, hi, maxRunes-utf8.RuneCountInString(text[lo:hi]))
		}
	}
	return renderSnippet(text, lo, hi, set, page)
}

// stemPrefix is what a byte search looks for to find the words a term
// stands for: the term, but for a stem that ends in an i that its words
// may spell y (galleri: gallery, galleries), that i dropped.
func stemPrefix(term string) string {
	if n := len(term); n > minStemBytes && term[n-1] == 'i' && isLowerASCII(term) {
		return term[:n-1]
	}
	return term
}

// allFound reports whether occ holds every term of set.
func allFound(occ []occurrence, set map[string]int) bool {
	seen := make(map[int]bool, len(set))
	for _, o := range occ {
		seen[o.term] = true
	}
	return len(seen) == len(set)
}

// locate appends to occ where the terms of set occur in text once it is
// normalised and folded to Simplified as run folds it for indexing (a
// Traditional text also read in mainland vocabulary, as its alternatives
// are indexed): a byte search of the folded text for each term, mapped
// back to text's offsets, without segmenting the text.
func (a *Analyzer) locate(text string, set map[string]int, page script, occ []occurrence) []occurrence {
	s, src, hasHan := normalize(text, true)
	readings := [][]int32{src}
	folded := []string{s}
	if hasHan && a.fold != nil {
		sc := a.fold.scriptOf(text)
		if sc == scriptUnknown {
			sc = page
		}
		folded[0], readings[0] = a.fold.fold(s, src, sc)
		if sc == scriptTraditional {
			v, vsrc := a.fold.vocabulary.apply(folded[0], readings[0])
			if v != folded[0] {
				folded, readings = append(folded, v), append(readings, vsrc)
			}
		}
	}
	seen := map[[2]int]bool{}
	for k, f := range folded {
		at := readings[k]
		for term, ti := range set {
			term = stemPrefix(term)
			for off, n := 0, 0; n < maxOccurrences; n++ {
				i := strings.Index(f[off:], term)
				if i < 0 {
					break
				}
				i += off
				off = i + len(term)
				start, end := int(at[i]), int(at[off])
				if end <= start { // inside one folded character
					_, sz := utf8.DecodeRuneInString(text[start:])
					end = start + sz
				}
				if !seen[[2]int{start, ti}] {
					seen[[2]int{start, ti}] = true
					occ = append(occ, occurrence{start: start, end: end, term: ti})
				}
			}
		}
	}
	return occ
}

// isCaseless reports whether no rune of t has another case: then t occurs
// in a text exactly where it occurs in the text's lowercased copy.
func isCaseless(t string) bool {
	for _, r := range t {
		if unicode.SimpleFold(r) != r {
			return false
		}
	}
	return true
}

// isLowerASCII reports whether t is ASCII without capital letters.
func isLowerASCII(t string) bool {
	for i := 0; i < len(t); i++ {
		if c := t[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// indexFoldASCII is strings.Index(toLower(s), t) for a lowercase ASCII t,
// without the copy: it jumps between the next occurrences of t's first
// byte in either case (IndexByte, vectorised) and compares the rest folded.
// The bytes of an ASCII t never match inside a multi-byte character.
func indexFoldASCII(s, t string) int {
	if len(t) == 0 {
		return 0
	}
	lo, up := t[0], t[0]
	if 'a' <= lo && lo <= 'z' {
		up = lo - 'a' + 'A'
	}
	last := len(s) - len(t)  // the last start that fits
	nextLo, nextUp := -1, -1 // the next candidate of each case at or after i; -2: none left
	for i := 0; i <= last; {
		if nextLo != -2 && nextLo < i {
			nextLo = indexByteFrom(s[:last+1], lo, i)
		}
		if up != lo && nextUp != -2 && nextUp < i {
			nextUp = indexByteFrom(s[:last+1], up, i)
		}
		c := nextLo
		if up != lo && (c == -2 || nextUp != -2 && nextUp < c) {
			c = nextUp
		}
		if c < 0 {
			return -1
		}
		if equalFoldASCII(s[c+1:c+len(t)], t[1:]) {
			return c
		}
		i = c + 1
	}
	return -1
}

// indexByteFrom is the index of the first b in s at or after from, or -2.
func indexByteFrom(s string, b byte, from int) int {
	if j := strings.IndexByte(s[from:], b); j >= 0 {
		return from + j
	}
	return -2
}

// equalFoldASCII compares s with the lowercase ASCII t, folding only s's
// ASCII capitals.
func equalFoldASCII(s, t string) bool {
	for i := 0; i < len(t); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != t[i] {
			return false
		}
	}
	return true
}

func advanceRunes(s string, at, n int) int {
	for ; n > 0 && at < len(s); n-- {
		_, sz := utf8.DecodeRuneInString(s[at:])
		at += sz
	}
	return at
}

func retreatRunes(s string, at, n int) int {
	for ; n > 0 && at > 0; n-- {
		_, sz := utf8.DecodeLastRuneInString(s[:at])
		at -= sz
	}
	return at
}

// renderSnippet analyzes text[lo:hi] with some context, moves the edges to
// token boundaries and writes the escaped, highlighted window.
func renderSnippet(text string, lo, hi int, set map[string]int, page script) string {
	cLo := retreatRunes(text, lo, 16)
	cHi := advanceRunes(text, hi, 16)
	spans := SharedAnalyzer().analyzeSpans(text[cLo:cHi], false, page)
	for i := range spans {
		spans[i].start += cLo
		spans[i].end += cLo
	}
	// Never cut inside a token: move an edge that falls inside one outward
	// at the start (to keep a matched word whole) and inward at the end.
	for _, sp := range spans {
		if sp.start < lo && sp.end > lo && lo > 0 {
			if sp.end-lo < lo-sp.start {
				lo = sp.end
			} else {
				lo = sp.start
			}
		}
	}
	for _, sp := range spans {
		if sp.start < hi && sp.end > hi && hi < len(text) {
			hi = sp.start
			break
		}
	}
	if hi < lo {
		hi = lo
	}
	type rng struct{ s, e int }
	var marks []rng
	for _, sp := range spans {
		if _, ok := set[sp.term]; !ok || sp.start < lo || sp.end > hi {
			continue
		}
		if n := len(marks); n > 0 && sp.start <= marks[n-1].e {
			marks[n-1].e = max(marks[n-1].e, sp.end)
			continue
		}
		marks = append(marks, rng{sp.start, sp.end})
	}
	var b strings.Builder
	b.Grow((hi-lo)*5/4 + 16)
	if lo > 0 {
		b.WriteString("…")
	}
	at := lo
	for _, m := range marks {
		writeCollapsed(&b, text[at:m.s])
		b.WriteString("<b>")
		writeCollapsed(&b, text[m.s:m.e])
		b.WriteString("</b>")
		at = m.e
	}
	writeCollapsed(&b, text[at:hi])
	if hi < len(text) {
		b.WriteString("…")
	}
	return strings.TrimSpace(b.String())
}

// writeCollapsed HTML-escapes s with whitespace runs folded to one space and
// control characters dropped.
func writeCollapsed(b *strings.Builder, s string) {
	start := 0
	space := false
	flush := func(end int) {
		if start < end {
			b.WriteString(html.EscapeString(s[start:end]))
		}
	}
	for i, r := range s {
		switch {
		case unicode.IsSpace(r):
			flush(i)
			if !space {
				b.WriteByte(' ')
			}
			space = true
			start = i + utf8.RuneLen(r)
		case unicode.IsControl(r):
			flush(i)
			start = i + utf8.RuneLen(r)
		default:
			space = false
		}
	}
	flush(len(s))
}

// toLowerFast returns strings.ToLower(s), and whether s is valid UTF-8
// (the result is right only then), in one pass: the case table is not
// consulted for CJK characters (U+2E80 to U+9FFF have no case mappings; a
// test checks it against the unicode tables), which are most of a Chinese
// page, and nothing is allocated unless a character changes.
func toLowerFast(s string) (string, bool) {
	var b strings.Builder
	changed, valid := false, true
	begin := func(i int) {
		changed = true
		b.Grow(len(s) + 16)
		b.WriteString(s[:i])
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				if !changed {
					begin(i)
				}
				b.WriteByte(c + 'a' - 'A')
			} else if changed {
				b.WriteByte(c)
			}
			i++
			continue
		}
		// Lead bytes E3..E9 start U+3000..U+9FFF, which need no lookup;
		// only the continuation bytes need checking for validity.
		if 0xE3 <= c && c <= 0xE9 && i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 {
			if changed {
				b.WriteString(s[i : i+3])
			}
			i += 3
			continue
		}
		r, sz := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && sz == 1 {
			valid = false
		}
		if r >= 0x2E80 && r < 0xA000 {
			if changed {
				b.WriteString(s[i : i+sz])
			}
			i += sz
			continue
		}
		l := unicode.ToLower(r)
		if l != r || r == utf8.RuneError && sz == 1 {
			if !changed {
				begin(i)
			}
			b.WriteRune(l)
		} else if changed {
			b.WriteString(s[i : i+sz])
		}
		i += sz
	}
	if !changed {
		return s, valid
	}
	return b.String(), valid
}
