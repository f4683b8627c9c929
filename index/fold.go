package index

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"
)

// folder folds Traditional Chinese to Simplified for the analyzer with
// OpenCC's tables (see the package doc, "Script folding").
type folder struct {
	// variants turns Taiwan and Hong Kong character variants into
	// OpenCC's standard ones (hk2s's and tw2s's first step); for
	// Traditional text only: some of those variants are Simplified
	// characters (什么 is not 什幺).
	variants *foldPass
	// chars is OpenCC's t2s: Traditional→Simplified phrases, then
	// characters. Simplified text goes through it unchanged, bar the odd
	// Traditional character it quotes.
	chars *foldPass
	// vocabulary is Taiwan words whose mainland word differs (檔案 →
	// 文件: tw2sp's first step) with keys and values through variants
	// and chars, so that it applies to folded text.
	vocabulary *foldPass
	// class is, per BMP rune, +1 when only Traditional text uses it
	// (OpenCC's t2s has it as a character with no Simplified candidate
	// equal to itself: 們, 執), -1 when only Simplified text does (s2t
	// has no Traditional candidate equal to it: 们, 执), 0 otherwise (巨,
	// 乾, 后: used in both).
	class []int8
}

// Conversion tables, embedded from data/opencc, in OpenCC's priority
// order within each group; classTables tell the scripts apart.
var (
	variantTables    = []string{"TWVariantsRevPhrases.txt", "TWVariantsRev.txt", "HKVariantsRevPhrases.txt", "HKVariantsRev.txt"}
	charTables       = []string{"TSPhrases.txt", "TSCharacters.txt"}
	vocabularyTables = []string{"TWPhrasesRev.txt"}
	classTables      = []string{"TSCharacters.txt", "STCharacters.txt"}
)

// scriptSampleBytes is how much of a text decides its script: a page's
// script is decided on the same prefix at indexing and at snippet time.
const scriptSampleBytes = 64 << 10

// script is what a text is written in, as far as folding cares.
type script int8

const (
	scriptUnknown     script = iota // no telling character, or as many of each
	scriptSimplified                // more Simplified-only than Traditional-only characters
	scriptTraditional               // more Traditional-only characters
)

// Script is the Chinese script a text is written in, as Analyzer.Script
// and Reader.Script tell it: ScriptUnknown for text without a telling
// character (English, or a short Chinese word both scripts write alike).
type Script uint8

// The scripts, numbered as script is.
const (
	ScriptUnknown Script = iota
	ScriptSimplified
	ScriptTraditional
)

// Script tells the script of text (of a query: a page's is its body's,
// else its title's), decided as folding decides it.
func (a *Analyzer) Script(text string) Script {
	if a.fold == nil {
		return ScriptUnknown
	}
	return Script(a.fold.scriptOf(text))
}

func newFolder(tables fs.FS) (*folder, error) {
	f := &folder{variants: newFoldPass(), chars: newFoldPass(), vocabulary: newFoldPass(), class: make([]int8, foldRootRunes)}
	fold := func(s string) string {
		s, _ = f.variants.apply(s, nil)
		s, _ = f.chars.apply(s, nil)
		return s
	}
	passes := []struct {
		pass   *foldPass
		tables []string
		// prefold prepares keys and values for a pass that runs on
		// folded text.
		prefold func(string) string
	}{
		{f.variants, variantTables, nil},
		{f.chars, charTables, nil},
		{f.vocabulary, vocabularyTables, fold},
	}
	for _, p := range passes {
		for d, name := range p.tables {
			err := readTable(tables, name, func(k string, v []string) {
				k, _, _ = normalize(k, false)
				value, _, _ := normalize(v[0], false)
				if p.prefold != nil {
					k, value = p.prefold(k), p.prefold(value)
				}
				// Three entries mix in Latin letters (隨身碟 → U盤): a
				// query would cut them apart from the Chinese, a page not.
				if allHan(k) && allHan(value) {
					p.pass.add(k, value, int32(d))
				}
			})
			if err != nil {
				return nil, err
			}
		}
	}
	for i, name := range classTables {
		err := readTable(tables, name, func(k string, v []string) {
			r, _ := utf8.DecodeRuneInString(k)
			if r >= foldRootRunes || slices.Contains(v, k) {
				return
			}
			if c := int8(1 - 2*i); f.class[r] == 0 {
				f.class[r] = c
			} else if f.class[r] != c {
				f.class[r] = 0
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return f, nil
}

// fold folds normalized text s (and its offsets src, if not nil) written
// in sc: variants (Traditional only), then characters.
func (f *folder) fold(s string, src []int32, sc script) (string, []int32) {
	if sc == scriptTraditional {
		s, src = f.variants.apply(s, src)
	}
	return f.chars.apply(s, src)
}

// readTable calls add for each entry of an OpenCC text dictionary: a key,
// a tab and space-separated candidates (conversion uses the first).
func readTable(tables fs.FS, name string, add func(key string, values []string)) error {
	data, err := fs.ReadFile(tables, name)
	if err != nil {
		return fmt.Errorf("conversion table %s: %w", name, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		values := strings.Split(v, " ")
		if !ok || k == "" || slices.Contains(values, "") || !utf8.ValidString(sc.Text()) {
			return fmt.Errorf("conversion table %s line %d: want key, tab, values", name, line)
		}
		add(k, values)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("conversion table %s: %w", name, err)
	}
	return nil
}

// scriptOf decides the script of text by its first scriptSampleBytes.
func (f *folder) scriptOf(text string) script {
	text = text[:min(len(text), scriptSampleBytes)]
	n := 0
	for _, r := range text {
		if r >= 0x2E80 && r < foldRootRunes {
			n += int(f.class[r])
		}
	}
	switch {
	case n > 0:
		return scriptTraditional
	case n < 0:
		return scriptSimplified
	}
	return scriptUnknown
}

// foldPass is one step of OpenCC's conversion chain: a group of
// dictionaries tried at each position of the text, where the first
// dictionary (in group order) with a key starting there wins, with its
// longest such key (OpenCC's DictGroup under maximum forward matching).
// The dictionaries are merged into one trie whose nodes remember the
// earliest dictionary holding their key, so a position costs one walk
// however many dictionaries the group has.
type foldPass struct {
	// root is the child of the trie's root for each rune of the BMP
	// (0 = none): it is looked up for every CJK character of every text,
	// so it is an array; rootWide holds the rest (CJK extensions).
	root     []int32
	rootWide map[rune]int32
	edges    map[uint64]int32 // parent<<32 | rune -> child, below the root
	nodes    []foldNode       // nodes[0] is the root
	values   []string
}

type foldNode struct {
	value int32 // index in values, -1 if no key ends here
	dict  int32 // the earliest dictionary of the group with this key
	// inner: a longer key goes on (most keys are one character with no
	// longer key after it: the walk stops without a map lookup).
	inner bool
}

const foldRootRunes = 0x10000

func newFoldPass() *foldPass {
	return &foldPass{
		root:     make([]int32, foldRootRunes),
		rootWide: map[rune]int32{},
		edges:    map[uint64]int32{},
		nodes:    []foldNode{{value: -1}},
	}
}

func (p *foldPass) child(n int32, r rune) int32 {
	if n == 0 {
		if r < foldRootRunes {
			return p.root[r]
		}
		return p.rootWide[r]
	}
	return p.edges[uint64(n)<<32|uint64(uint32(r))]
}

func (p *foldPass) addChild(n int32, r rune) int32 {
	c := int32(len(p.nodes))
	p.nodes = append(p.nodes, foldNode{value: -1})
	p.nodes[n].inner = true
	switch {
	case n != 0:
		p.edges[uint64(n)<<32|uint64(uint32(r))] = c
	case r < foldRootRunes:
		p.root[r] = c
	default:
		p.rootWide[r] = c
	}
	return c
}

// add inserts key -> value for dictionary dict. Dictionaries are added in
// group order, so an earlier dictionary's entry is never replaced.
func (p *foldPass) add(key, value string, dict int32) {
	n := int32(0)
	for _, r := range key {
		c := p.child(n, r)
		if c == 0 {
			c = p.addChild(n, r)
		}
		n = c
	}
	if key == "" || p.nodes[n].value >= 0 {
		return
	}
	p.nodes[n].value, p.nodes[n].dict = int32(len(p.values)), dict
	p.values = append(p.values, value)
}

// match returns the length in bytes of the key that wins at the start of
// s and its replacement (0 if no key starts there).
func (p *foldPass) match(s string) (int, string) {
	n := int32(0)
	best, bestDict, bestValue := 0, int32(-1), int32(-1)
	for i := 0; i < len(s); {
		r, sz := utf8.DecodeRuneInString(s[i:])
		if n = p.child(n, r); n == 0 {
			break
		}
		i += sz
		nd := &p.nodes[n]
		if nd.value >= 0 && (bestDict < 0 || nd.dict <= bestDict) {
			best, bestDict, bestValue = i, nd.dict, nd.value
		}
		if !nd.inner {
			break
		}
	}
	if best == 0 {
		return 0, ""
	}
	return best, p.values[bestValue]
}

// next returns the next match at or after i: its start, length and
// replacement (start -1 if none). Matching is left to right, so a match
// never starts inside an earlier one.
func (p *foldPass) next(s string, i int) (int, int, string) {
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, sz := utf8.DecodeRuneInString(s[i:])
		if p.child(0, r) != 0 {
			if n, repl := p.match(s[i:]); n > 0 {
				return i, n, repl
			}
		}
		i += sz
	}
	return -1, 0, ""
}

// apply replaces every match in s. With src (an offset in the original
// text for each byte of s, plus one past its end) it also returns the map
// for the result: the k-th character of a replacement maps to the k-th
// character of what it replaced (the last one when the replacement is
// longer), so a word of the result maps back to the characters it came
// from. When nothing matches, s and src are returned as they are.
func (p *foldPass) apply(s string, src []int32) (string, []int32) {
	at, n, repl := p.next(s, 0)
	if at < 0 {
		return s, src
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	var out []int32
	if src != nil {
		out = make([]int32, 0, len(src)+len(src)/8)
	}
	done := 0
	for at >= 0 {
		b.WriteString(s[done:at])
		if src != nil {
			out = append(out, src[done:at]...)
			from := at // the k-th replaced character
			for _, r := range repl {
				for range utf8.RuneLen(r) {
					out = append(out, src[from])
				}
				if _, sz := utf8.DecodeRuneInString(s[from : at+n]); from+sz < at+n {
					from += sz
				}
			}
		}
		b.WriteString(repl)
		done = at + n
		at, n, repl = p.next(s, done)
	}
	b.WriteString(s[done:])
	if src != nil {
		out = append(out, src[done:]...)
	}
	return b.String(), out
}

func allHan(s string) bool {
	for _, r := range s {
		if !isHan(r) {
			return false
		}
	}
	return s != ""
}

// folds reports whether folding changes text (bar the variants of
// Traditional text).
func (a *Analyzer) folds(text string) bool {
	if a.fold == nil {
		return false
	}
	at, _, _ := a.fold.chars.next(text, 0)
	return at >= 0
}
