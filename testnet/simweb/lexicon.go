package simweb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/encoding"

	"sou/index"
)

//go:embed subtlex_top20k.txt.gz
var subtlexGz []byte

// wordList is an immutable frequency-weighted word list.
type wordList struct {
	words []string
	cum   []float64 // cumulative weights, same length as words
}

func (l *wordList) pick(r *rand.Rand) string {
	if len(l.words) == 0 {
		return "word"
	}
	x := r.Float64() * l.cum[len(l.cum)-1]
	i := sort.SearchFloat64s(l.cum, x)
	if i >= len(l.words) {
		i = len(l.words) - 1
	}
	return l.words[i]
}

func newWordList(words []string, weights []float64) *wordList {
	l := &wordList{words: words, cum: make([]float64, len(words))}
	var s float64
	for i, w := range weights {
		s += w
		l.cum[i] = s
	}
	return l
}

// lexicon holds the English and Chinese word lists. It is loaded once per
// process and never modified afterwards (the per-charset subsets are built
// lazily behind their own sync.Once).
type lexicon struct {
	english *wordList
	chinese *wordList

	mu      sync.Mutex
	subsets map[string]*wordList // charset name -> Chinese words encodable in it
}

var loadLexicon = sync.OnceValues(loadLexiconUncached)

func loadLexiconUncached() (*lexicon, error) {
	en, err := loadEnglish()
	if err != nil {
		return nil, err
	}
	zh, err := loadChinese(index.JiebaDictionary())
	if err != nil {
		return nil, err
	}
	return &lexicon{english: en, chinese: zh, subsets: map[string]*wordList{}}, nil
}

func loadEnglish() (*wordList, error) {
	zr, err := gzip.NewReader(bytes.NewReader(subtlexGz))
	if err != nil {
		return nil, fmt.Errorf("open embedded SUBTLEX list: %w", err)
	}
	defer zr.Close()
	var words []string
	var weights []float64
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		w, c, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(c, 64)
		if err != nil {
			continue
		}
		words = append(words, w)
		weights = append(weights, n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read embedded SUBTLEX list: %w", err)
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("embedded SUBTLEX list is empty")
	}
	return newWordList(words, weights), nil
}

// minChineseFreq drops the tail of jieba's dictionary (about 290,000 rare
// compounds of its 349,000 entries) that adds nothing to the text; about
// 60,000 words stay, in the dictionary's own order.
const minChineseFreq = 37

func loadChinese(dict string) (*wordList, error) {
	data := []byte(dict)
	var words []string
	var weights []float64
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		w, rest, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			continue
		}
		f, _, _ := bytes.Cut(rest, []byte{' '})
		fr, err := strconv.Atoi(string(f))
		if err != nil || fr < minChineseFreq {
			continue
		}
		allHan := len(w) > 0
		for _, r := range string(w) {
			if !unicode.Is(unicode.Han, r) {
				allHan = false
				break
			}
		}
		if allHan {
			words = append(words, string(w))
			weights = append(weights, float64(fr))
		}
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("the embedded jieba dictionary has no Chinese words")
	}
	return newWordList(words, weights), nil
}

// chineseFor returns the Chinese words that the given charset can encode, so
// that a page generated for a legacy charset is representable in it.
func (lx *lexicon) chineseFor(cs string) *wordList {
	enc := encoderFor(cs)
	if enc == nil || cs == "utf-8" || cs == "gb18030" {
		return lx.chinese
	}
	lx.mu.Lock()
	defer lx.mu.Unlock()
	if l, ok := lx.subsets[cs]; ok {
		return l
	}
	var words []string
	var weights []float64
	prev := 0.0
	e := enc.NewEncoder()
	for i, w := range lx.chinese.words {
		wt := lx.chinese.cum[i] - prev
		prev = lx.chinese.cum[i]
		if _, err := e.String(w); err == nil {
			words = append(words, w)
			weights = append(weights, wt)
		}
	}
	l := newWordList(words, weights)
	lx.subsets[cs] = l
	return l
}

func encoderFor(cs string) encoding.Encoding {
	e, ok := charsets[cs]
	if !ok {
		return nil
	}
	return e
}

// latin1Words are inserted into Latin-1 pages so that their titles carry
// characters outside ASCII and a wrong decoding is visible.
var latin1Words = []string{"café", "naïve", "façade", "Zürich", "señor", "déjà", "crème", "Ångström", "fiancée", "smörgåsbord"}

// textGen produces page text for one language from a deterministic source.
type textGen struct {
	r    *rand.Rand
	lang string // "en", "zh", "mixed"
	zh   *wordList
	en   *wordList
	cs   string
}

func (g *textGen) word() string {
	switch g.lang {
	case "zh":
		return g.zh.pick(g.r)
	case "mixed":
		if g.r.IntN(3) == 0 {
			return g.en.pick(g.r)
		}
		return g.zh.pick(g.r)
	default:
		return g.en.pick(g.r)
	}
}

// phrase returns n words joined the way the language writes them.
func (g *textGen) phrase(n int) string {
	var b strings.Builder
	prevEN := false
	for i := 0; i < n; i++ {
		w := g.word()
		isEN := w[0] < 0x80
		if i > 0 && (isEN || prevEN) {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		prevEN = isEN
	}
	return b.String()
}

func (g *textGen) title() string {
	n := 3 + g.r.IntN(5)
	if g.lang == "zh" {
		n = 2 + g.r.IntN(4)
	}
	t := g.phrase(n)
	if g.lang == "en" {
		t = capitalizeWords(t)
	}
	if g.cs == "iso-8859-1" {
		t = t + " " + latin1Words[g.r.IntN(len(latin1Words))]
	}
	return t
}

func (g *textGen) sentence() string {
	n := 6 + g.r.IntN(14)
	s := g.phrase(n)
	if g.lang == "zh" {
		return s + "。"
	}
	return upperFirst(s) + ". "
}

func (g *textGen) paragraph() string {
	var b strings.Builder
	n := 2 + g.r.IntN(5)
	for i := 0; i < n; i++ {
		b.WriteString(g.sentence())
	}
	if g.cs == "iso-8859-1" && g.r.IntN(2) == 0 {
		b.WriteString(latin1Words[g.r.IntN(len(latin1Words))])
	}
	return strings.TrimSpace(b.String())
}

func capitalizeWords(s string) string {
	parts := strings.Fields(s)
	for i, p := range parts {
		parts[i] = upperFirst(p)
	}
	return strings.Join(parts, " ")
}

// upperFirst capitalises the first character; text that starts with a
// Chinese word is left as it is (slicing its first byte would cut a rune).
func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || r >= utf8.RuneSelf {
		return s
	}
	return strings.ToUpper(s[:n]) + s[n:]
}
