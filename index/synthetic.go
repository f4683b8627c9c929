package index

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Synthetic generates deterministic Chinese+English pages for benchmarks:
// Chinese words drawn from gojieba's dictionary by their corpus frequency,
// English words from a Zipf distribution over common words plus generated
// ones. Not used by the product; shared by the index and search benchmarks
// and the side-by-side comparison.
type Synthetic struct {
	rng     *rand.Rand
	zh      []string
	zhCum   []float64
	en      []string
	enZipf  *rand.Zipf
	pageSeq int
}

var (
	dictOnce  sync.Once
	dictWords []string
	dictCum   []float64
	dictErr   error
)

func loadDict() {
	sc := bufio.NewScanner(strings.NewReader(embeddedJiebaDict))
	total := 0.0
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		freq, err := strconv.Atoi(fs[1])
		if err != nil || freq < 50 {
			continue
		}
		total += float64(freq)
		dictWords = append(dictWords, fs[0])
		dictCum = append(dictCum, total)
	}
	dictErr = sc.Err()
}

var commonEnglish = strings.Fields(`the of and to in is for on that by this with you it not or be are from at as your all
have new more an was we will home can us about if page my has search free but our one other do no information time they
site he up may what which their news out use any there see only so his when contact here business who web also now help
get pm view online first am been would how were me services some these click its like service than find price date back
top people had list name just over state year day into email two health world re next used go work last most products
music buy data make them should product system post her city add policy number such please available copyright support
message after best software then jan good video well where info rights public books high school through each links she
review years order very privacy book items company read group need many user said does set under general research
university january mail full map reviews program life know games way days management part could great united hotel real
item international center ebay must store travel comments made development report off member details line terms before
hotels did send right type because local those using results office education national car design take posted internet
address community within states area want phone dvd shipping reserved subject between forum family long based code show
engine index query crawler network peer distributed ranking document text search`)

// NewSynthetic returns a generator; the same seed gives the same pages.
func NewSynthetic(seed uint64) (*Synthetic, error) {
	dictOnce.Do(loadDict)
	if dictErr != nil {
		return nil, dictErr
	}
	if len(dictWords) == 0 {
		return nil, errors.New("jieba dictionary has no words")
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	en := append([]string(nil), commonEnglish...)
	syll := []string{"ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "zen", "dor", "pli", "qua", "ster", "ven", "mar", "tol"}
	for len(en) < 20000 {
		var b strings.Builder
		for range 2 + rng.IntN(3) {
			b.WriteString(syll[rng.IntN(len(syll))])
		}
		en = append(en, b.String())
	}
	return &Synthetic{rng: rng, zh: dictWords, zhCum: dictCum, en: en,
		enZipf: rand.NewZipf(rng, 1.1, 2, uint64(len(en)-1))}, nil
}

// ZhWord draws a Chinese word by corpus frequency.
func (s *Synthetic) ZhWord() string {
	x := s.rng.Float64() * s.zhCum[len(s.zhCum)-1]
	return s.zh[sort.SearchFloat64s(s.zhCum, x)]
}

// EnWord draws an English word (Zipf).
func (s *Synthetic) EnWord() string { return s.en[s.enZipf.Uint64()] }

// Text returns about n words; zhShare of them Chinese.
func (s *Synthetic) Text(n int, zhShare float64) string {
	var b strings.Builder
	for i := range n {
		if s.rng.Float64() < zhShare {
			b.WriteString(s.ZhWord())
			if s.rng.IntN(12) == 0 {
				b.WriteString("，")
			}
			if s.rng.IntN(30) == 0 {
				b.WriteString("。")
			}
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.EnWord())
		if s.rng.IntN(15) == 0 {
			b.WriteString(". ")
		}
	}
	return b.String()
}

// Page returns the next synthetic page: two thirds mostly Chinese, one
// third English, 150 to 1,200 words, over 200 hosts.
func (s *Synthetic) Page() *Document {
	s.pageSeq++
	zh := 0.85
	if s.rng.IntN(3) == 0 {
		zh = 0.03
	}
	host := fmt.Sprintf("site%d.example", s.rng.IntN(200))
	words := 150 + s.rng.IntN(1050)
	body := s.Text(words, zh)
	return &Document{
		URL: fmt.Sprintf("http://%s/page/%d.html", host, s.pageSeq), Host: host,
		Title: s.Text(3+s.rng.IntN(6), zh), Headings: []string{s.Text(4, zh)},
		Body: body, Status: 200, ContentType: "text/html; charset=utf-8",
		Raw:        []byte("<html><head><title>t</title></head><body><p>" + body + "</p></body></html>"),
		StaticRank: math.Abs(s.rng.NormFloat64()),
	}
}
