package index

import (
	"io"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/yanyiwu/gojieba"
	"golang.org/x/text/unicode/norm"
)

// MaxAnalyzeBytes caps the text one Analyze call looks at; the rest of a
// field is ignored (a web page's first 1 MiB of text is what gets indexed).
const MaxAnalyzeBytes = 1 << 20

// maxTokenBytes drops tokens longer than this (hashes, base64 blobs): they
// bloat the dictionary and are never typed into a search box.
const maxTokenBytes = 64

// Token is one analyzed term and its position in the field. Sub-words of a
// Chinese word (and the character bigrams of a run of single characters)
// share the position of the word they come from, so phrases still match.
type Token struct {
	Term string
	Pos  int
}

// Analyzer turns text into terms: Traditional Chinese folded to
// Simplified, gojieba for Han runs, Unicode words for other scripts, NFKC
// width folding and lowercasing. It holds no mutable state and is safe for
// concurrent use.
type Analyzer struct {
	jieba *gojieba.Jieba
	fold  *folder // nil: Traditional Chinese is kept as written
	// stem reduces English words to their Snowball stems (stemWord),
	// through stems, which all the analyzer's variants share.
	stem  bool
	stems *stemCache
	// scratch holds *analyzeScratch for run (shared by the variants; nil:
	// run allocates its own).
	scratch *sync.Pool
	// version and unfoldedVersion are Version with and without fold.
	version, unfoldedVersion string
}

// Version identifies everything that decides the terms of a text: the
// analyzer's code (a number bumped by hand) and a hash of its
// dictionaries and conversion tables. Nodes whose versions differ must not
// combine statistics or scores.
func (a *Analyzer) Version() string { return a.version }

// WithoutScriptFolding returns an analyzer over the same dictionary that
// keeps Traditional Chinese as written, with a Version of its own: what
// the analyzer did before folding, for measuring what folding does and for
// testing nodes whose analyzers differ.
func (a *Analyzer) WithoutScriptFolding() *Analyzer {
	return &Analyzer{jieba: a.jieba, stem: a.stem, stems: a.stems, scratch: a.scratch, version: a.unfoldedVersion, unfoldedVersion: a.unfoldedVersion}
}

// WithoutStemming returns an analyzer that keeps English words as written
// (lowercased), with a Version of its own: for measuring what stemming
// does.
func (a *Analyzer) WithoutStemming() *Analyzer {
	c := *a
	c.stem = false
	c.version += "-unstemmed"
	c.unfoldedVersion += "-unstemmed"
	return &c
}

// Analyze returns the index-mode tokens of text: search-mode cuts, so
// 搜索引擎 yields 搜索引擎, 搜索, 索引 and 引擎 at one position, and for
// Traditional Chinese also the mainland words of Taiwan and Hong Kong
// vocabulary (檔案 also yields 文件).
func (a *Analyzer) Analyze(text string) []Token {
	var out []Token
	a.run(text, false, false, scriptUnknown, func(t span) { out = append(out, Token{Term: t.term, Pos: t.pos}) })
	return out
}

// AnalyzeQuery returns the query-mode tokens of text: the plain (longest)
// cut, Taiwan and Hong Kong vocabulary replaced by the mainland words when
// the query is in Traditional characters, and for runs of single Han
// characters their bigrams only.
func (a *Analyzer) AnalyzeQuery(text string) []Token {
	var out []Token
	a.run(text, true, false, scriptUnknown, func(t span) { out = append(out, Token{Term: t.term, Pos: t.pos}) })
	return out
}

// pageScript is the script a page's fields are folded in when they do not
// tell by themselves: the body's, else the title's. Snippets decide on
// the body alone (they have nothing else), which differs only when the
// body has no telling character at all.
func (a *Analyzer) pageScript(title, body string) script {
	if a.fold == nil {
		return scriptUnknown
	}
	if sc := a.fold.scriptOf(body); sc != scriptUnknown {
		return sc
	}
	return a.fold.scriptOf(title)
}

// span is a token with its byte range in the original (unnormalized) text.
type span struct {
	term       string
	pos        int
	start, end int
}

// analyzeSpans is Analyze with byte offsets into text (used by snippets and
// cached pages to highlight the original characters), ordered by start
// (an alternative reading may start inside the word before it); page is
// the script of the page text comes from (see pageScript).
func (a *Analyzer) analyzeSpans(text string, query bool, page script) []span {
	var out []span
	a.run(text, query, true, page, func(t span) { out = append(out, t) })
	slices.SortStableFunc(out, func(x, y span) int { return x.start - y.start })
	return out
}

// segment is one stretch of the normalized text: a word token or a Han run.
// analyzeScratch is run's segment list and jieba buffer, reused from call
// to call: sized for the text, they would otherwise be allocated anew for
// every field of every page (BENCHMARKS.md, "Analyse once").
type analyzeScratch struct {
	segs []segment
	han  []byte
	norm []byte // normalize's result, before it becomes a string
}

// scratchKeepBytes: scratch that grew past this (a huge page) is dropped
// rather than kept for the next text.
const scratchKeepBytes = 1 << 20

func (a *Analyzer) getScratch() *analyzeScratch {
	if a.scratch == nil {
		return &analyzeScratch{}
	}
	return a.scratch.Get().(*analyzeScratch)
}

func (a *Analyzer) putScratch(sc *analyzeScratch) {
	if a.scratch == nil || 32*cap(sc.segs)+cap(sc.han)+cap(sc.norm) > scratchKeepBytes {
		return
	}
	a.scratch.Put(sc)
}

type segment struct {
	start, end int // in the normalized text
	han        bool
	compound   bool // word with joiners (e-mail, at&t): parts are emitted too
	numeric    bool
	bufStart   int // han: offset of the run in the buffer handed to jieba
}

// normalize applies NFKC and lowercasing. When offsets is true, src maps
// each byte of the result (plus one past the end) to the offset in text of
// the character it came from. han reports a Han character in the result.
func normalize(text string, offsets bool) (s string, src []int32, han bool) {
	var sc analyzeScratch
	return sc.normalize(text, offsets)
}

// normalize is normalize with sc.norm as the buffer the result is built
// in. The result is text itself when normalizing leaves it as it is.
//
// Runs of plain characters (see plainSize) skip the NFKC iterator and
// its per-character work: a plain character
// followed by another (or by the end) is a normalization segment of its
// own that NFKC keeps as it is, exactly what the iterator would return
// there. Everything else goes through the iterator, one segment at a
// time, and src maps all bytes of a segment to where it starts.
func (sc *analyzeScratch) normalize(text string, offsets bool) (s string, src []int32, han bool) {
	if offsets {
		src = make([]int32, 0, len(text)+1)
	}
	// Until the result differs from text, copied is false and b empty.
	var b []byte
	copied := false
	diverge := func(p int) {
		b = append(sc.norm[:0], text[:p]...)
		copied = true
	}
	var it norm.Iter
	iterating := false
	var low []byte // a segment from the iterator, lowercased
	for p := 0; p < len(text); {
		if q := plainRunEnd(text, p); q > p {
			if text[p] >= utf8.RuneSelf {
				han = true
				if copied {
					b = append(b, text[p:q]...)
				}
			} else {
				from := p
				if !copied {
					if k := indexUpper(text[p:q]); k >= 0 {
						from = p + k
						diverge(from)
					}
				}
				if copied {
					b = appendLower(b, text[from:q])
				}
			}
			if offsets {
				for k := p; k < q; {
					n := plainSize(text, k)
					for range n {
						src = append(src, int32(k))
					}
					k += n
				}
			}
			p = q
			continue
		}
		if !iterating {
			it.InitString(norm.NFKC, text)
			iterating = true
		}
		// The iterator is behind p when plain characters came in between
		// (p is a segment boundary, where it may resume); a character
		// that decomposes into several segments keeps it at p.
		if it.Pos() != p {
			it.Seek(int64(p), io.SeekStart)
		}
		seg := it.Next()
		end := it.Pos()
		var segHan bool
		low, segHan = appendLowerSegment(low[:0], seg)
		han = han || segHan
		if !copied && string(low) != text[p:end] {
			diverge(p)
		}
		if copied {
			b = append(b, low...)
		}
		if offsets {
			for range low {
				src = append(src, int32(p))
			}
		}
		p = end
	}
	if offsets {
		src = append(src, int32(len(text)))
	}
	if !copied {
		return text, src, han
	}
	sc.norm = b
	return string(b), src, han
}

// appendLowerSegment appends seg, a segment from the NFKC iterator,
// lowercased to dst; han reports a Han character in it.
func appendLowerSegment(dst, seg []byte) (_ []byte, han bool) {
	for len(seg) > 0 {
		r, sz := utf8.DecodeRune(seg)
		seg = seg[sz:]
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			dst = append(dst, byte(r))
			continue
		}
		han = han || isHan(r)
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
	}
	return dst, han
}

// plainRunEnd returns the end of the run of plain characters of one kind
// (ASCII, or CJK Unified Ideographs) at text[p] that normalize copies as
// they are: without the last one when a character that is not plain
// follows (it may combine with it). It returns p when there is none.
func plainRunEnd(text string, p int) int {
	n := plainSize(text, p)
	if n == 0 {
		return p
	}
	q := p
	for q < len(text) && plainSize(text, q) == n {
		q += n
	}
	if q < len(text) && plainSize(text, q) == 0 {
		q -= n
	}
	return q
}

// indexUpper returns the index of the first ASCII capital in s, or -1.
func indexUpper(s string) int {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return i
		}
	}
	return -1
}

// appendLower appends ASCII s to b, lowercased.
func appendLower(b []byte, s string) []byte {
	n := len(b)
	b = append(b, s...)
	for i := n; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// plainSize returns the size of the character at text[p] when it is
// plain, else 0. A plain character is ASCII or a CJK Unified Ideograph
// (U+4E00 to U+9FFF): NFKC keeps it as it is, it starts a normalization
// segment and nothing before it combines with it
// (TestNormalizePlainCharacters).
func plainSize(text string, p int) int {
	c := text[p]
	if c < utf8.RuneSelf {
		return 1
	}
	// U+4E00 to U+9FFF are E4 B8 80 to E9 BF BF in UTF-8.
	if c >= 0xE4 && c <= 0xE9 && p+2 < len(text) {
		if c == 0xE4 && text[p+1] < 0xB8 {
			return 0
		}
		if c1, c2 := text[p+1], text[p+2]; c1&0xC0 == 0x80 && c2&0xC0 == 0x80 {
			return 3
		}
	}
	return 0
}

// isHan reports a Han character. The CJK Unified Ideographs block, all
// Han, is most of Chinese text and is told without a table search.
func isHan(r rune) bool {
	if 0x4E00 <= r && r <= 0x9FFF {
		return true
	}
	return r >= 0x2E80 && unicode.Is(unicode.Han, r)
}

// isWordRune reports a character of a word token: a letter, digit or mark
// of a script other than Han.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		// r|0x20 lowercases ASCII letters and maps nothing else onto one.
		return uint32(r|0x20-'a') < 26 || uint32(r-'0') < 10
	}
	if r == utf8.RuneError || isHan(r) {
		return false
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func isJoiner(r rune) bool {
	switch r {
	case '.', '&', '@', '-', '_', '\'', '’':
		return true
	}
	return false
}

func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// scanWord reads a word token starting at i (a word rune): alphanumeric
// runs joined by . & @ - _ ' when a word rune follows the joiner, plus a
// '+'/'#' suffix (c++, c#, notepad++).
func scanWord(s string, i int) (end int, compound, numeric bool) {
	numeric = true
	j := i
	for {
		// ASCII letters and digits, most of a word, need no decoding.
		for ; j < len(s); j++ {
			if c := s[j]; c|0x20-'a' < 26 {
				numeric = false
			} else if c-'0' >= 10 {
				break
			}
		}
		r, sz := runeAt(s, j)
		if sz == 0 {
			break
		}
		if isWordRune(r) {
			if !('0' <= r && r <= '9') {
				numeric = false
			}
			j += sz
			continue
		}
		if isJoiner(r) {
			if r2, sz2 := runeAt(s, j+sz); sz2 > 0 && isWordRune(r2) {
				if r != '.' && r != ',' {
					numeric = false
				}
				compound = true
				j += sz
				continue
			}
		}
		break
	}
	// Suffixes: ++, +, # (only on short words: c#, f#; not "issue#").
	if j < len(s) && s[j] == '+' {
		k := j + 1
		if k < len(s) && s[k] == '+' {
			k++
		}
		if r, sz := runeAt(s, k); sz == 0 || !isWordRune(r) {
			j = k
			numeric = false
		}
	} else if j < len(s) && s[j] == '#' && j-i <= 2 {
		if r, sz := runeAt(s, j+1); sz == 0 || !isWordRune(r) {
			j++
			numeric = false
		}
	}
	return j, compound, numeric
}

// alternative is a Taiwan word in folded Traditional text and its
// mainland word (檔案, folded to 档案, reads 文件).
type alternative struct {
	start, end int // the key in the normalized, folded text
	value      string
}

// reading is a Han run of Traditional text with its alternatives put in
// (资讯检索 reads 信息检索), segmented with the text: its words that
// cover an alternative are indexed too, so that a page matches a query
// in either vocabulary, and a query's compound of the mainland reading
// (信息检索) is found.
type reading struct {
	bufStart int     // in the buffer handed to jieba
	src      []int32 // per byte of the reading (plus one past its end): the offset in the folded text
	alts     []alternative
}

// extra is a word of a reading, at the folded text's offsets it came from.
type extra struct {
	start, end int
	term       string
}

// run is the analyzer: normalize, fold Traditional Chinese, split into
// word tokens and Han runs, segment all Han runs of the text (and the
// alternatives) with one cgo call, then emit tokens in position order.
// page is the script of the page the text belongs to, for text that does
// not tell by itself.
func (a *Analyzer) run(text string, query, offsets bool, page script, emit func(span)) {
	if len(text) > MaxAnalyzeBytes {
		text = text[:MaxAnalyzeBytes]
		for len(text) > 0 && !utf8.RuneStart(text[len(text)-1]) {
			text = text[:len(text)-1]
		}
		if len(text) > 0 {
			if r, _ := utf8.DecodeLastRuneInString(text); r == utf8.RuneError {
				text = text[:len(text)-1]
			}
		}
	}
	sc := a.getScratch()
	defer a.putScratch(sc)
	s, src, hasHan := sc.normalize(text, offsets)
	var alts []alternative
	if hasHan && a.fold != nil {
		textScript := a.fold.scriptOf(text)
		if textScript == scriptUnknown {
			textScript = page
		}
		s, src = a.fold.fold(s, src, textScript)
		if textScript == scriptTraditional {
			// A query is one reading: the mainland one, which finds the
			// pages of both scripts. A page gets both (a Taiwan page's 面板
			// also matches a mainland 面板, though OpenCC reads it 皮肤).
			if query {
				s, src = a.fold.vocabulary.apply(s, src)
			} else {
				alts = vocabularyAlternatives(a.fold.vocabulary, s)
			}
		}
	}
	segs, han := sc.segs[:0], sc.han[:0]
	defer func() { sc.segs, sc.han = segs, han }()
	for i := 0; i < len(s); {
		// Spaces and ASCII punctuation but '.', between most words.
		if c := s[i]; c < utf8.RuneSelf && c != '.' && c|0x20-'a' >= 26 && c-'0' >= 10 {
			i++
			continue
		}
		r, sz := runeAt(s, i)
		switch {
		case isHan(r):
			j := i + sz
			for j < len(s) {
				r2, sz2 := runeAt(s, j)
				if !isHan(r2) {
					break
				}
				j += sz2
			}
			segs = append(segs, segment{start: i, end: j, han: true, bufStart: len(han)})
			han = append(han, s[i:j]...)
			han = append(han, '\n')
			i = j
		case isWordRune(r):
			j, comp, num := scanWord(s, i)
			segs = append(segs, segment{start: i, end: j, compound: comp, numeric: num})
			i = j
		case r == '.' && (i == 0 || s[i-1] != '.' && !isWordRune(lastRune(s[:i]))):
			// .NET, .js: a leading dot glued to a short all-letter word.
			if r2, sz2 := runeAt(s, i+1); sz2 > 0 && isWordRune(r2) && !('0' <= r2 && r2 <= '9') {
				j, comp, _ := scanWord(s, i+1)
				if !comp && j-i <= 8 {
					segs = append(segs, segment{start: i, end: j})
					i = j
					continue
				}
			}
			i += sz
		default:
			i += sz
		}
	}
	textBytes := len(han)
	var readings []reading
	if len(alts) > 0 {
		han, readings = appendReadings(han, s, segs, alts)
	}
	var words, readingWords []gojieba.Word
	if len(han) > 0 {
		mode := gojieba.SearchMode
		if query {
			mode = gojieba.DefaultMode
		}
		// HMM is off: it merges unknown characters context-dependently, so
		// the same text could segment differently in a page and in a
		// query. Without it unknown text falls to single characters,
		// which the bigrams below make searchable.
		words = a.jieba.Tokenize(string(han), mode, false)
		// jieba cuts the buffer in order: the readings' words come last.
		k := len(words)
		for k > 0 && words[k-1].Start >= textBytes {
			k--
		}
		words, readingWords = words[:k], words[k:]
	}
	extras := readingExtras(s, readings, readingWords)
	mk := func(term string, pos, start, end int) span {
		t := span{term: term, pos: pos}
		if offsets {
			t.start, t.end = int(src[start]), int(src[end])
			if t.end <= t.start {
				// Inside one original character that became several.
				_, sz := utf8.DecodeRuneInString(text[t.start:])
				t.end = t.start + sz
			}
		}
		return t
	}
	xi := 0
	// emitExtras emits, at pos, the extra words that start in [lo, hi) of
	// s (the token there), and drops those that start before lo.
	emitExtras := func(lo, hi, pos int) {
		for ; xi < len(extras) && extras[xi].start < hi; xi++ {
			if x := extras[xi]; x.start >= lo && len(x.term) <= maxTokenBytes {
				emit(mk(x.term, pos, x.start, x.end))
			}
		}
	}
	pos := 0
	wi := 0
	var runWords []gojieba.Word
	for _, sg := range segs {
		if !sg.han {
			if sg.end-sg.start > maxTokenBytes {
				continue
			}
			w := s[sg.start:sg.end]
			if a.stem && !sg.compound {
				w = a.stems.stem(w)
			}
			emit(mk(w, pos, sg.start, sg.end))
			if sg.compound && !sg.numeric && !query {
				// Parts of e-mail, at&t, example.com at the same position.
				for k := sg.start; k < sg.end; {
					r, sz := runeAt(s, k)
					if !isWordRune(r) {
						k += sz
						continue
					}
					e := k
					for e < sg.end {
						r2, sz2 := runeAt(s, e)
						if !isWordRune(r2) {
							break
						}
						e += sz2
					}
					part := s[k:e]
					if a.stem {
						part = a.stems.stem(part)
					}
					emit(mk(part, pos, k, e))
					k = e
				}
			}
			emitExtras(sg.start, sg.end, pos)
			pos++
			continue
		}
		runEnd := sg.bufStart + (sg.end - sg.start)
		runWords = runWords[:0]
		for wi < len(words) && words[wi].Start < runEnd {
			if words[wi].Start >= sg.bufStart && words[wi].End <= runEnd {
				runWords = append(runWords, words[wi])
			}
			wi++
		}
		if len(runWords) == 0 {
			continue
		}
		slices.SortStableFunc(runWords, func(x, y gojieba.Word) int {
			if x.Start != y.Start {
				return x.Start - y.Start
			}
			return y.End - x.End
		})
		base := sg.start - sg.bufStart // buffer offset -> normalized offset
		parentEnd := -1
		// Parents are the non-overlapping cut; children lie inside one.
		for k := 0; k < len(runWords); k++ {
			w := runWords[k]
			ns, ne := w.Start+base, w.End+base
			if w.Start < parentEnd {
				emit(mk(w.Str, pos-1, ns, ne))
				continue
			}
			parentEnd = w.End
			single := utf8.RuneCountInString(w.Str) == 1
			// Find the next parent (skipping this word's children).
			var next *gojieba.Word
			for m := k + 1; m < len(runWords); m++ {
				if runWords[m].Start >= w.End {
					next = &runWords[m]
					break
				}
			}
			nextSingle := single && next != nil && next.Start == w.End && utf8.RuneCountInString(next.Str) == 1
			prevSingle := single && k > 0 && runWords[k-1].End == w.Start && utf8.RuneCountInString(runWords[k-1].Str) == 1 && !isChildOf(runWords, k-1)
			if !query || !single || (!nextSingle && !prevSingle) {
				emit(mk(w.Str, pos, ns, ne))
			}
			if nextSingle {
				emit(mk(strings.Clone(w.Str+next.Str), pos, ns, next.End+base))
			}
			emitExtras(ns, ne, pos)
			pos++
		}
	}
}

// vocabularyAlternatives lists the Taiwan words in folded text s whose
// mainland word differs.
func vocabularyAlternatives(p *foldPass, s string) []alternative {
	var alts []alternative
	for at, n, repl := p.next(s, 0); at >= 0; at, n, repl = p.next(s, at+n) {
		if repl != s[at:at+n] {
			alts = append(alts, alternative{start: at, end: at + n, value: repl})
		}
	}
	return alts
}

// readingContext is how many characters of a run around its alternatives
// a reading holds: enough for jieba to find the words that join an
// alternative to its neighbours (资讯检索 reads 信息检索).
const readingContext = 4

// appendReadings appends to han, each followed by a newline, the readings
// of the Han runs of s that hold alternatives (those inside one run): the
// stretch of the run from readingContext characters before an alternative
// to as many after it, the alternatives put in.
func appendReadings(han []byte, s string, segs []segment, alts []alternative) ([]byte, []reading) {
	var readings []reading
	ai := 0
	for _, sg := range segs {
		if !sg.han {
			continue
		}
		for ai < len(alts) && alts[ai].start < sg.start {
			ai++
		}
		for ai < len(alts) && alts[ai].end <= sg.end {
			first := ai
			lo := retreatRunes(s, alts[ai].start, readingContext)
			lo = max(lo, sg.start)
			hi := min(advanceRunes(s, alts[ai].end, readingContext), sg.end)
			for ai++; ai < len(alts) && alts[ai].end <= sg.end && alts[ai].start <= hi; ai++ {
				hi = min(advanceRunes(s, alts[ai].end, readingContext), sg.end)
			}
			var rd reading
			han, rd = appendReading(han, s, lo, hi, alts[first:ai])
			readings = append(readings, rd)
		}
	}
	return han, readings
}

// appendReading appends to han the reading of s[lo:hi] with alts put in.
func appendReading(han []byte, s string, lo, hi int, alts []alternative) ([]byte, reading) {
	rd := reading{bufStart: len(han), alts: alts}
	at := lo
	for _, alt := range alts {
		han = append(han, s[at:alt.start]...)
		for k := at; k < alt.start; k++ {
			rd.src = append(rd.src, int32(k))
		}
		han = append(han, alt.value...)
		from := alt.start // the k-th character of the key
		for _, r := range alt.value {
			for range utf8.RuneLen(r) {
				rd.src = append(rd.src, int32(from))
			}
			if _, sz := utf8.DecodeRuneInString(s[from:alt.end]); from+sz < alt.end {
				from += sz
			}
		}
		at = alt.end
	}
	han = append(han, s[at:hi]...)
	for k := at; k <= hi; k++ {
		rd.src = append(rd.src, int32(k))
	}
	return append(han, '\n'), rd
}

// readingExtras returns the words of the readings that cover an
// alternative, at the offsets of s they come from, ordered by start.
func readingExtras(s string, readings []reading, words []gojieba.Word) []extra {
	var extras []extra
	wi := 0
	for _, rd := range readings {
		end := rd.bufStart + len(rd.src) - 1
		for ; wi < len(words) && words[wi].Start < end; wi++ {
			w := words[wi]
			if w.Start < rd.bufStart || w.End > end {
				continue
			}
			ws, we := int(rd.src[w.Start-rd.bufStart]), int(rd.src[w.End-rd.bufStart])
			if we <= ws {
				_, sz := utf8.DecodeRuneInString(s[ws:])
				we = ws + sz
			}
			for _, alt := range rd.alts {
				if alt.start < we && alt.end > ws {
					extras = append(extras, extra{start: ws, end: we, term: w.Str})
					break
				}
			}
		}
	}
	slices.SortStableFunc(extras, func(x, y extra) int { return x.start - y.start })
	return extras
}

// isChildOf reports whether runWords[k] lies inside an earlier longer word.
func isChildOf(runWords []gojieba.Word, k int) bool {
	for m := k - 1; m >= 0; m-- {
		if runWords[m].Start <= runWords[k].Start && runWords[m].End >= runWords[k].End {
			return true
		}
		if runWords[m].End <= runWords[k].Start {
			return false
		}
	}
	return false
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}
