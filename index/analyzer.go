package index

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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

// Analyzer turns text into terms: gojieba for Han runs, Unicode words for
// other scripts, NFKC width folding and lowercasing. It holds no mutable
// state and is safe for concurrent use.
type Analyzer struct {
	jieba *gojieba.Jieba
}

var (
	sharedOnce     sync.Once
	sharedAnalyzer *Analyzer
)

// SharedAnalyzer returns the process's one gojieba-backed analyzer. The
// dictionary (about 116 MB of C memory, half a second to load: cppjieba's
// trie of 349,000 words is most of a node's memory floor) is loaded on the
// first call from gojieba's default paths (gojieba.DICT_PATH etc., inside the
// module cache). cppjieba's Cut and CutForSearch are const methods over a
// read-only trie, so one instance serves all goroutines without a lock; we
// never call AddWord/RemoveWord, which would not be safe.
//
// The dictionary directory can be overridden with SOU_JIEBA_DICT_DIR (for a
// binary deployed without the Go module cache). If the files are missing,
// the analyzer logs an error and degrades to character bigrams for all Han
// text instead of panicking as gojieba.NewJieba would.
func SharedAnalyzer() *Analyzer {
	sharedOnce.Do(func() {
		paths := []string{gojieba.DICT_PATH, gojieba.HMM_PATH, gojieba.USER_DICT_PATH, gojieba.IDF_PATH, gojieba.STOP_WORDS_PATH}
		if dir := os.Getenv("SOU_JIEBA_DICT_DIR"); dir != "" {
			for i, p := range paths {
				paths[i] = filepath.Join(dir, filepath.Base(p))
			}
		}
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				slog.Error("index: gojieba dictionary missing; Chinese falls back to character bigrams", "path", p, "err", err)
				sharedAnalyzer = &Analyzer{}
				return
			}
		}
		// The IDF table (6 MB of text, 16 MB in memory) serves only
		// gojieba's keyword extraction, which sou never calls: load a
		// one-word table in its place.
		if idf, err := oneWordIDF(); err == nil {
			paths[3] = idf
			defer os.Remove(idf)
		}
		sharedAnalyzer = &Analyzer{jieba: gojieba.NewJieba(paths...)}
	})
	return sharedAnalyzer
}

// oneWordIDF writes the smallest IDF table cppjieba accepts (it asserts a
// positive average) to a temporary file, read once by NewJieba.
func oneWordIDF() (string, error) {
	f, err := os.CreateTemp("", "sou-idf-*.utf8")
	if err != nil {
		return "", fmt.Errorf("temporary IDF table: %w", err)
	}
	_, err = f.WriteString("sou 1.0\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("temporary IDF table: %w", err)
	}
	return f.Name(), nil
}

// singleRunes stands in for gojieba when the dictionary is missing: every
// Han character is a word, so the bigram fallback covers all Chinese.
func singleRunes(han string) []gojieba.Word {
	words := make([]gojieba.Word, 0, len(han)/3)
	for i, r := range han {
		if r == '\n' {
			continue
		}
		n := utf8.RuneLen(r)
		words = append(words, gojieba.Word{Str: han[i : i+n], Start: i, End: i + n})
	}
	return words
}

// Analyze returns the index-mode tokens of text: search-mode cuts, so
// 搜索引擎 yields 搜索引擎, 搜索, 索引 and 引擎 at one position.
func (a *Analyzer) Analyze(text string) []Token {
	var out []Token
	a.run(text, false, false, func(t span) { out = append(out, Token{Term: t.term, Pos: t.pos}) })
	return out
}

// AnalyzeQuery returns the query-mode tokens of text: the plain (longest)
// cut, and for runs of single Han characters their bigrams only.
func (a *Analyzer) AnalyzeQuery(text string) []Token {
	var out []Token
	a.run(text, true, false, func(t span) { out = append(out, Token{Term: t.term, Pos: t.pos}) })
	return out
}

// span is a token with its byte range in the original (unnormalized) text.
type span struct {
	term       string
	pos        int
	start, end int
}

// analyzeSpans is Analyze with byte offsets into text (used by snippets and
// cached pages to highlight the original characters).
func (a *Analyzer) analyzeSpans(text string, query bool) []span {
	var out []span
	a.run(text, query, true, func(t span) { out = append(out, t) })
	return out
}

// segment is one stretch of the normalized text: a word token or a Han run.
type segment struct {
	start, end int // in the normalized text
	han        bool
	compound   bool // word with joiners (e-mail, at&t): parts are emitted too
	numeric    bool
	bufStart   int // han: offset of the run in the buffer handed to jieba
}

// normalize applies NFKC and lowercasing. When offsets is true, src maps
// each byte of the result (plus one past the end) to the offset in text of
// the character it came from.
func normalize(text string, offsets bool) (string, []int32) {
	ascii := true
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	var src []int32
	if ascii {
		b := make([]byte, len(text))
		for i := 0; i < len(text); i++ {
			c := text[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b[i] = c
		}
		if offsets {
			src = make([]int32, len(text)+1)
			for i := range src {
				src[i] = int32(i)
			}
		}
		return string(b), src
	}
	b := make([]byte, 0, len(text)+len(text)/8)
	if offsets {
		src = make([]int32, 0, len(text)+1)
	}
	var it norm.Iter
	it.InitString(norm.NFKC, text)
	for !it.Done() {
		at := it.Pos()
		seg := it.Next()
		n0 := len(b)
		for len(seg) > 0 {
			r, sz := utf8.DecodeRune(seg)
			seg = seg[sz:]
			if r < utf8.RuneSelf {
				if 'A' <= r && r <= 'Z' {
					r += 'a' - 'A'
				}
				b = append(b, byte(r))
				continue
			}
			b = utf8.AppendRune(b, unicode.ToLower(r))
		}
		if offsets {
			for range len(b) - n0 {
				src = append(src, int32(at))
			}
		}
	}
	if offsets {
		src = append(src, int32(len(text)))
	}
	return string(b), src
}

func isHan(r rune) bool {
	return r >= 0x2E80 && unicode.Is(unicode.Han, r)
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || 'A' <= r && r <= 'Z'
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

// run is the analyzer: normalize, split into word tokens and Han runs,
// segment all Han runs of the text with one cgo call, then emit tokens in
// position order.
func (a *Analyzer) run(text string, query, offsets bool, emit func(span)) {
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
	s, src := normalize(text, offsets)
	segs := make([]segment, 0, len(s)/6+1)
	var han []byte
	for i := 0; i < len(s); {
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
	var words []gojieba.Word
	if len(han) > 0 {
		mode := gojieba.SearchMode
		if query {
			mode = gojieba.DefaultMode
		}
		// HMM is off: it merges unknown characters context-dependently, so
		// the same Traditional text could segment differently in a page and
		// in a query. Without it unknown text falls to single characters,
		// which the bigram fallback below makes searchable.
		if a.jieba != nil {
			words = a.jieba.Tokenize(string(han), mode, false)
		} else {
			words = singleRunes(string(han))
		}
	}
	mk := func(term string, pos, start, end int) span {
		t := span{term: term, pos: pos}
		if offsets {
			t.start, t.end = int(src[start]), int(src[end])
		}
		return t
	}
	pos := 0
	wi := 0
	var runWords []gojieba.Word
	for _, sg := range segs {
		if !sg.han {
			if sg.end-sg.start > maxTokenBytes {
				continue
			}
			emit(mk(s[sg.start:sg.end], pos, sg.start, sg.end))
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
					emit(mk(s[k:e], pos, k, e))
					k = e
				}
			}
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
			pos++
		}
	}
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
