package bench

import (
	"context"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/unicodenorm"
	unicodetok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/yanyiwu/gojieba"
)

// The Bleve baseline's analyzer: gojieba search-mode cuts (CutForSearch
// with byte offsets, the same dictionary and HMM setting as sou's analyzer)
// for runs of Han characters, Bleve's own Unicode word tokenizer (UAX #29,
// what its standard analyzer uses) for all other text, then NFKC width
// folding and lowercasing. That is how sou's analyzer splits the work.
// gojieba alone, as its own Bleve integration calls it (HMM off), cuts
// every Latin-script word outside its dictionary into single letters.
const (
	jiebaTokenizerName = "sou_bench_gojieba"
	jiebaAnalyzerName  = "sou_bench_gojieba"
	bleveBatchSize     = 1000
)

var (
	jiebaOnce sync.Once
	jieba     *gojieba.Jieba // one per test binary: the dictionary is ~30 MB
)

func sharedJieba() *gojieba.Jieba {
	jiebaOnce.Do(func() { jieba = gojieba.NewJieba() })
	return jieba
}

// jiebaTokenizer is a Bleve tokenizer: gojieba's search mode on Han runs,
// Bleve's Unicode tokenizer elsewhere. Whitespace and punctuation tokens
// (gojieba returns them) are dropped, which is what every gojieba/Bleve
// integration does and keeps the Bleve index free of junk terms.
type jiebaTokenizer struct {
	j     *gojieba.Jieba
	words *unicodetok.UnicodeTokenizer
}

func (t *jiebaTokenizer) Tokenize(input []byte) analysis.TokenStream {
	out := make(analysis.TokenStream, 0, len(input)/4)
	pos := 1
	for start := 0; start < len(input); {
		han := isHan(input[start:])
		end := start
		for end < len(input) && isHan(input[end:]) == han {
			_, n := utf8.DecodeRune(input[end:])
			end += n
		}
		if han {
			for _, w := range t.j.Tokenize(string(input[start:end]), gojieba.SearchMode, false) {
				if !hasWordRune(w.Str) {
					continue
				}
				out = append(out, &analysis.Token{Term: []byte(w.Str), Start: start + w.Start, End: start + w.End, Position: pos, Type: analysis.Ideographic})
				pos++
			}
		} else {
			for _, tok := range t.words.Tokenize(input[start:end]) {
				tok.Start, tok.End, tok.Position = tok.Start+start, tok.End+start, pos
				out = append(out, tok)
				pos++
			}
		}
		start = end
	}
	return out
}

func isHan(b []byte) bool {
	r, _ := utf8.DecodeRune(b)
	return unicode.Is(unicode.Han, r)
}

func hasWordRune(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return true
		}
	}
	return false
}

func init() {
	err := registry.RegisterTokenizer(jiebaTokenizerName, func(map[string]any, *registry.Cache) (analysis.Tokenizer, error) {
		return &jiebaTokenizer{j: sharedJieba(), words: unicodetok.NewUnicodeTokenizer()}, nil
	})
	if err != nil {
		panic(err)
	}
	err = registry.RegisterAnalyzer(jiebaAnalyzerName, func(_ map[string]any, cache *registry.Cache) (analysis.Analyzer, error) {
		tok, err := cache.TokenizerNamed(jiebaTokenizerName)
		if err != nil {
			return nil, err
		}
		lower, err := cache.TokenFilterNamed(lowercase.Name)
		if err != nil {
			return nil, err
		}
		return &analysis.DefaultAnalyzer{
			Tokenizer:    tok,
			TokenFilters: []analysis.TokenFilter{unicodenorm.MustNewUnicodeNormalizeFilter(unicodenorm.NFKC), lower},
		}, nil
	})
	if err != nil {
		panic(err)
	}
}

// bleveDoc is what Bleve indexes: the same fields sou's index gets
// (URL, host, title, body; headings are part of the parsed body text).
type bleveDoc struct {
	URL   string `json:"url"`
	Host  string `json:"host"`
	Title string `json:"title"`
	Body  string `json:"body"`
}

// bleveMapping: title and body analysed with gojieba, stored (for result
// titles and highlighted snippets, as sou stores its page records) with
// term vectors (positions, as sou's postings have); no _all field and no
// doc values (nothing sorts on a field), which keeps Bleve lean; URL and
// host stored as keywords.
func bleveMapping() mapping.IndexMapping {
	text := func() *mapping.FieldMapping {
		f := bleve.NewTextFieldMapping()
		f.Analyzer = jiebaAnalyzerName
		f.Store = true
		f.IncludeTermVectors = true
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	kw := func() *mapping.FieldMapping {
		f := bleve.NewKeywordFieldMapping()
		f.Store = true
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt("title", text())
	dm.AddFieldMappingsAt("body", text())
	dm.AddFieldMappingsAt("url", kw())
	dm.AddFieldMappingsAt("host", kw())
	im := bleve.NewIndexMapping()
	im.DefaultMapping = dm
	im.DefaultAnalyzer = jiebaAnalyzerName
	im.ScoringModel = "bm25"
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	return im
}

// BleveEngine is the baseline index.
type BleveEngine struct {
	dir string
	idx bleve.Index
}

func newBleve(dir string) (*BleveEngine, error) {
	idx, err := bleve.New(dir, bleveMapping())
	if err != nil {
		return nil, fmt.Errorf("bleve new %s: %w", dir, err)
	}
	return &BleveEngine{dir: dir, idx: idx}, nil
}

// AddAll indexes docs in batches of bleveBatchSize (Bleve analyses a
// batch's documents in parallel; batching is the documented way to index
// fast).
func (b *BleveEngine) AddAll(ctx context.Context, docs []Doc) error {
	batch := b.idx.NewBatch()
	for i := range docs {
		if err := ctx.Err(); err != nil {
			return err
		}
		d := &docs[i]
		if err := batch.Index(d.URL, bleveDoc{URL: d.URL, Host: d.Host, Title: d.Title, Body: d.Body}); err != nil {
			return fmt.Errorf("bleve batch index %s: %w", d.URL, err)
		}
		if batch.Size() >= bleveBatchSize {
			if err := b.idx.Batch(batch); err != nil {
				return fmt.Errorf("bleve batch: %w", err)
			}
			batch.Reset()
		}
	}
	if batch.Size() > 0 {
		if err := b.idx.Batch(batch); err != nil {
			return fmt.Errorf("bleve batch: %w", err)
		}
	}
	return nil
}

// Search runs a match query (OR of the analysed terms, BM25) over title
// (boost 2) and body. With results set it also loads the stored title and
// a highlighted body fragment, the same output sou's search produces.
func (b *BleveEngine) Search(ctx context.Context, q string, k int, results bool) ([]string, error) {
	title := query.NewMatchQuery(q)
	title.SetField("title")
	title.SetBoost(2)
	body := query.NewMatchQuery(q)
	body.SetField("body")
	req := bleve.NewSearchRequestOptions(query.NewDisjunctionQuery([]query.Query{title, body}), k, 0, false)
	if results {
		req.Fields = []string{"title"}
		req.Highlight = bleve.NewHighlightWithStyle("html")
		req.Highlight.AddField("body")
	}
	res, err := b.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("bleve search %q: %w", q, err)
	}
	out := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = h.ID
	}
	return out, nil
}

func (b *BleveEngine) Close() error {
	if err := b.idx.Close(); err != nil {
		return fmt.Errorf("bleve close: %w", err)
	}
	return nil
}
