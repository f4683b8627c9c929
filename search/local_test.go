package search

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"sou/index"
)

func TestScoreHandComputed(t *testing.T) {
	p := Params{K1: 1.2, B: [index.NumFields]float64{0.5, 0.5, 0.75, 0.5}, Weight: [index.NumFields]float64{3, 2, 1, 1.5}, StaticWeight: 0.5}
	global := &CollectionStats{Docs: 10, DF: map[string]int64{"a": 2}, FieldLenSum: [index.NumFields]int64{30, 0, 1000, 50}}
	qa := &Query{Groups: []Group{{Clauses: []Clause{{Terms: []string{"a"}}}}}}
	qab := &Query{Groups: []Group{{Clauses: []Clause{{Terms: []string{"a"}}}}, {Clauses: []Clause{{Terms: []string{"b"}}}}}}
	cand := func(tf map[string][index.NumFields]uint32, rank float64) *Candidate {
		return &Candidate{TF: tf, FieldLen: [index.NumFields]uint32{3, 0, 50, 5}, StaticRank: rank}
	}
	tests := []struct {
		name string
		q    *Query
		c    *Candidate
		want float64
	}{
		// idf = ln(1+(10-2+0.5)/(2+0.5)) = ln 4.4 = 1.4816045409242156
		// title: 3*1/(1-0.5+0.5*3/3) = 3; body: 1*3/(0.25+0.75*50/100) = 4.8
		// w = idf * 7.8 * 2.2 / 9 = 2.8249259913621714; static 0.5*1/(1+1) = 0.25
		{"title+body+static", qa, cand(map[string][index.NumFields]uint32{"a": {1, 0, 3, 0}}, 1), 3.0749259913621714},
		{"no static", qa, cand(map[string][index.NumFields]uint32{"a": {1, 0, 3, 0}}, 0), 2.8249259913621714},
		{"absent term", qa, cand(nil, 0), 0},
		{"negative rank ignored", qa, cand(nil, -5), 0},
		// b: df unknown -> idf = ln(1+10.5/0.5) = ln 22; anchor avg 0 -> norm 1: tf' = 2*2 = 4
		// w_b = 3.091042453358316 * 4 * 2.2 / 5.2 = 5.23099492106792
		{"two terms", qab, cand(map[string][index.NumFields]uint32{"a": {1, 0, 3, 0}, "b": {0, 2, 0, 0}}, 1), 8.305920912430091},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Score(p, global, tc.q, tc.c); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Score = %.17g, want %.17g", got, tc.want)
			}
		})
	}
	// Statistics add up.
	var sum CollectionStats
	sum.Add(global)
	sum.Add(&CollectionStats{Docs: 5, DF: map[string]int64{"a": 1, "c": 3}, FieldLenSum: [index.NumFields]int64{1, 2, 3, 4}})
	if sum.Docs != 15 || sum.DF["a"] != 3 || sum.DF["c"] != 3 || sum.FieldLenSum != [index.NumFields]int64{31, 2, 1003, 54} {
		t.Errorf("Add: %+v", sum)
	}
}

func TestScoreProximityAndPenalty(t *testing.T) {
	p := DefaultParams()
	p.Weight = [index.NumFields]float64{0, 0, 1, 0, 0}
	p.B = [index.NumFields]float64{}
	p.StaticWeight, p.Prox, p.ProxK, p.Miss = 0, 2, 1, 0.5
	global := &CollectionStats{Docs: 10, DF: map[string]int64{"a": 2, "b": 4, "c": 9}, FieldLenSum: [index.NumFields]int64{0, 0, 100, 0, 0}}
	q, err := ParseQuery("a b c", index.SharedAnalyzer())
	if err != nil {
		t.Fatal(err)
	}
	// idf a = ln 4.4, b = ln(1+6.5/4.5), c = ln(1+1.5/9.5); tf' = 1 for a
	// present term (body only, B = 0), so a term adds idf·2.2/2.2 = idf.
	ia, ib, ic := math.Log(4.4), math.Log(1+6.5/4.5), math.Log(1+1.5/9.5)
	one := [index.NumFields]uint32{0, 0, 1, 0, 0}
	tests := []struct {
		name    string
		relax   bool
		tf      map[string][index.NumFields]uint32
		prox    []uint32
		want    float64
		comment string
	}{
		{name: "all terms, none close", tf: map[string][index.NumFields]uint32{"a": one, "b": one, "c": one}, want: ia + ib + ic},
		// a and b close once: 2·min(ia, ib)·1/(1+1); b and c twice: 2·ic·2/3.
		{name: "close pairs", tf: map[string][index.NumFields]uint32{"a": one, "b": one, "c": one}, prox: []uint32{1, 2},
			want: ia + ib + ic + 2*ib*0.5 + 2*ic*2.0/3},
		{name: "proximity of the wrong length counts nothing", tf: map[string][index.NumFields]uint32{"a": one, "b": one, "c": one}, prox: []uint32{1},
			want: ia + ib + ic},
		{name: "strict query: a missing term costs nothing more", tf: map[string][index.NumFields]uint32{"a": one, "c": one}, want: ia + ic},
		{name: "relaxed query: a missing term costs Miss·idf", relax: true, tf: map[string][index.NumFields]uint32{"a": one, "c": one}, want: ia + ic - 0.5*ib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := p
			p.Relax = tc.relax
			got := Score(p, global, q, &Candidate{TF: tc.tf, Prox: tc.prox, FieldLen: [index.NumFields]uint32{0, 0, 1, 0, 0}})
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Score = %.17g, want %.17g", got, tc.want)
			}
		})
	}
}

// A query in one script finds the pages of both and, with SameScript,
// ranks those written in its own first.
func TestSameScriptFirst(t *testing.T) {
	docs := []testDoc{
		{"http://tw.test/1", "tw.test", "開啟檔案", "開啟檔案。開啟檔案。", 0},
		{"http://cn.test/1", "cn.test", "说明", "请打开文件并修改设置。" + strings.Repeat("这是无关的内容。", 20), 0},
	}
	ix := newTestIndex(t, docs, 10)
	for _, tc := range []struct {
		q          string
		sameScript float64
		first      string
	}{
		{"打开文件", 0, "http://tw.test/1"}, // in the title, more often
		{"打开文件", 5, "http://cn.test/1"},
		{"開啟檔案", 5, "http://tw.test/1"},
		{"file 文件", 5, "http://tw.test/1"}, // 文件 does not tell the script
	} {
		p := DefaultParams()
		p.SameScript, p.Relax = tc.sameScript, true
		q, err := ParseQuery(tc.q, ix.Analyzer())
		if err != nil {
			t.Fatal(err)
		}
		res, err := NewLocal(ix, p).Search(context.Background(), q, 10, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Candidates) != 2 || res.Candidates[0].URL != tc.first {
			t.Errorf("%q SameScript %v: %v, want %s first", tc.q, tc.sameScript, urls(res), tc.first)
		}
		for _, c := range res.Candidates {
			if got := Score(p, &res.Stats, q, &c); got != c.Score {
				t.Errorf("%q %s: Score %.17g, engine %.17g", tc.q, c.URL, got, c.Score)
			}
		}
	}
}

func TestProxCount(t *testing.T) {
	tests := []struct {
		name   string
		a, b   []uint32
		window int
		want   uint32
	}{
		{"adjacent", []uint32{3}, []uint32{4}, 1, 1},
		{"same position (a sub-word)", []uint32{3}, []uint32{3}, 1, 1},
		{"too far", []uint32{3}, []uint32{10}, 5, 0},
		{"either order", []uint32{10}, []uint32{7}, 3, 1},
		{"one b near many a counts once", []uint32{1, 2, 3, 4}, []uint32{5}, 8, 1},
		{"pairs", []uint32{1, 20, 40}, []uint32{2, 22, 60}, 2, 2},
		{"empty", nil, []uint32{1}, 8, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := proxCount(tc.a, tc.b, tc.window); got != tc.want {
				t.Errorf("proxCount = %d, want %d", got, tc.want)
			}
			if got := proxCount(tc.b, tc.a, tc.window); got != tc.want {
				t.Errorf("proxCount reversed = %d, want %d", got, tc.want)
			}
		})
	}
}

type testDoc struct {
	url, host, title, body string
	rank                   float64
}

func newTestIndex(t testing.TB, docs []testDoc, flushDocs int) *index.Index {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	opts := index.DefaultOptions()
	opts.FlushDocs = flushDocs
	opts.FlushInterval = 0
	ix, err := index.Open(db, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	ctx := context.Background()
	for _, d := range docs {
		err := ix.Put(ctx, &index.Document{URL: d.url, Host: d.host, Title: d.title, Body: d.body, StaticRank: d.rank, FetchedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return ix
}

func urls(r *ShardResult) []string {
	var out []string
	for _, c := range r.Candidates {
		out = append(out, c.URL)
	}
	return out
}

func TestLocalSemantics(t *testing.T) {
	docs := []testDoc{
		{"http://a.com/1", "a.com", "apple pie", "the best apple pie recipe", 0},
		{"http://a.com/2", "a.com", "pie apple", "apple and pie but not together pie", 0},
		{"http://b.com/1", "b.com", "banana", "banana split with apple", 0},
		{"http://www.b.com/2", "www.b.com", "cherry", "cherry pie", 0},
		{"http://c.com/1", "c.com", "搜索引擎", "我们的搜索引擎很好用，資訊檢索系統", 0},
		{"http://c.com/2", "c.com", "other", "搜索技术和引擎", 0},
	}
	ix := newTestIndex(t, docs, 4)
	// The matching semantics of the query language; relaxed matching has
	// its own tests.
	p := DefaultParams()
	p.Relax = false
	l := NewLocal(ix, p)
	a := ix.Analyzer()
	tests := []struct {
		q      string
		filter func(string) bool
		want   []string // as a set
	}{
		{q: "apple", want: []string{"http://a.com/1", "http://a.com/2", "http://b.com/1"}},
		{q: "apple pie", want: []string{"http://a.com/1", "http://a.com/2"}},
		{q: `"apple pie"`, want: []string{"http://a.com/1"}},
		{q: `"pie apple"`, want: []string{"http://a.com/2"}},
		{q: "apple -banana", want: []string{"http://a.com/1", "http://a.com/2"}},
		{q: `pie -"apple pie"`, want: []string{"http://a.com/2", "http://www.b.com/2"}},
		{q: "banana OR cherry", want: []string{"http://b.com/1", "http://www.b.com/2"}},
		{q: "pie site:b.com", want: []string{"http://www.b.com/2"}},
		{q: "apple -site:a.com", want: []string{"http://b.com/1"}},
		{q: "apple", filter: func(h string) bool { return h == "b.com" }, want: []string{"http://b.com/1"}},
		{q: "搜索", want: []string{"http://c.com/1", "http://c.com/2"}},
		{q: "搜索引擎", want: []string{"http://c.com/1"}},
		// Script-blind: the page's 資訊檢索 is folded to Simplified and
		// also reads in mainland words (信息检索).
		{q: "资讯", want: []string{"http://c.com/1"}},
		{q: "資訊檢索", want: []string{"http://c.com/1"}},
		{q: "信息检索", want: []string{"http://c.com/1"}},
		{q: "資訊 OR 信息", want: []string{"http://c.com/1"}},
		{q: "nomatch", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.q, func(t *testing.T) {
			q, err := ParseQuery(tc.q, a)
			if err != nil {
				t.Fatal(err)
			}
			res, err := l.Search(context.Background(), q, 10, nil, tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			got := urls(res)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if res.TotalExact && res.Total != int64(len(tc.want)) {
				t.Errorf("Total %d", res.Total)
			}
			for _, c := range res.Candidates {
				if c.Score != Score(p, &res.Stats, q, &c) || c.Score <= 0 {
					t.Errorf("%s: score %v not reproducible", c.URL, c.Score)
				}
				if c.Snippet == "" || !strings.Contains(c.Snippet, "<b>") {
					t.Errorf("%s: snippet %q", c.URL, c.Snippet)
				}
			}
		})
	}
	// Title matches rank first thanks to the title weight.
	q, _ := ParseQuery("banana", a)
	res, err := l.Search(context.Background(), q, 10, nil, nil)
	if err != nil || len(res.Candidates) != 1 || res.Candidates[0].TF["banana"][index.FieldTitle] != 1 || res.Candidates[0].TF["banana"][index.FieldBody] != 1 {
		t.Fatalf("banana TFs: %+v %v", res, err)
	}
}

// Pruning must not change results: top-k with block-max pruning equals the
// first k of an exhaustive run, on a random corpus spanning many blocks.
func TestTopKEqualsExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	vocab := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi"}
	word := func() string {
		// Zipf-like: low indexes are common.
		i := int(math.Floor(math.Pow(rng.Float64(), 2.5) * float64(len(vocab))))
		return vocab[i]
	}
	const n = 1500
	docs := make([]testDoc, n)
	for i := range docs {
		var title, body []string
		for range 1 + rng.IntN(3) {
			title = append(title, word())
		}
		for range 5 + rng.IntN(60) {
			body = append(body, word())
		}
		// A host's pages mostly have neighbouring docIDs, as on a node
		// (its owner crawls it), with strays in between.
		host := fmt.Sprintf("h%d.example", (i/37)%20)
		if rng.IntN(8) == 0 {
			host = fmt.Sprintf("h%d.example", rng.IntN(20))
		}
		rank := 0.0
		if rng.IntN(3) == 0 {
			rank = rng.Float64() * 5
		}
		docs[i] = testDoc{url: fmt.Sprintf("http://%s/%d", host, i), host: host, title: strings.Join(title, " "), body: strings.Join(body, " "), rank: rank}
	}
	ix := newTestIndex(t, docs, 211)
	a := ix.Analyzer()
	queries := []string{"pi", "alpha", "xi omicron", "alpha beta", "kappa OR pi", "alpha -beta", `"alpha beta"`,
		"nu OR xi OR omicron", "gamma delta epsilon", "beta site:h3.example", "lambda OR alpha mu",
		"pi omicron xi nu", "alpha beta gamma delta -zeta"}
	global := &CollectionStats{Docs: 100000, DF: map[string]int64{"alpha": 90000, "pi": 10}, FieldLenSum: [index.NumFields]int64{200000, 0, 3000000, 500000}}
	base := DefaultParams()
	base.StaticWeight = 2 // large enough to interact with pruning
	variants := []struct {
		name   string
		change func(*Params)
	}{
		{"strict", func(p *Params) { p.Relax, p.Prox = false, 0 }},
		{"proximity", func(p *Params) { p.Relax, p.Prox = false, 1.5 }},
		{"relaxed", func(p *Params) { p.Relax, p.Miss, p.Prox = true, 0.7, 0 }},
		{"relaxed without penalty", func(p *Params) { p.Relax, p.Miss, p.Prox = true, 0, 0 }},
		{"relaxed tiered", func(p *Params) { p.Relax, p.Miss, p.Prox = true, 100, 1 }},
		{"relaxed with proximity", func(p *Params) { p.Relax, p.Miss, p.Prox = true, 0.3, 2 }},
		// Title-heavy weights make the lists' bounds far apart, so that a
		// non-essential list is often already past the document being
		// bounded (a case runRelaxed once paid for twice).
		{"relaxed title-heavy", func(p *Params) {
			p.Relax, p.Miss, p.Prox = true, 0, 0
			p.Weight = [index.NumFields]float64{12, 8, 1, 1.5, 1}
		}},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			p := base
			v.change(&p)
			topKEqualsExhaustive(t, NewLocal(ix, p), p, queries, global, n)
		})
	}
	// Independent check of the matching semantics by brute force.
	base.Relax = false
	l := NewLocal(ix, base)
	contains := func(d testDoc, w string) bool {
		return slices.Contains(strings.Fields(d.title), w) || slices.Contains(strings.Fields(d.body), w) || strings.Contains(d.url, w)
	}
	checks := map[string]func(testDoc) bool{
		"xi omicron":  func(d testDoc) bool { return contains(d, "xi") && contains(d, "omicron") },
		"kappa OR pi": func(d testDoc) bool { return contains(d, "kappa") || contains(d, "pi") },
		"alpha -beta": func(d testDoc) bool { return contains(d, "alpha") && !contains(d, "beta") },
	}
	for qs, match := range checks {
		q, _ := ParseQuery(qs, a)
		res, err := l.Search(context.Background(), q, n, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, d := range docs {
			if match(d) {
				want++
			}
		}
		if len(res.Candidates) != want {
			t.Errorf("%q: %d hits, brute force %d", qs, len(res.Candidates), want)
		}
	}
}

func TestLocalStatsWithFilter(t *testing.T) {
	docs := []testDoc{
		{"http://a.com/1", "a.com", "x", "apple", 0},
		{"http://a.com/2", "a.com", "x", "apple apple", 0},
		{"http://b.com/1", "b.com", "x", "apple banana", 0},
	}
	ix := newTestIndex(t, docs, 10)
	l := NewLocal(ix, DefaultParams())
	q, _ := ParseQuery("apple banana", ix.Analyzer())
	all, err := l.LocalStats(context.Background(), q, nil)
	if err != nil {
		t.Fatal(err)
	}
	// "apple" is searched as its stem, appl.
	if all.Docs != 3 || all.DF["appl"] != 3 || all.DF["banana"] != 1 {
		t.Errorf("unfiltered %+v", all)
	}
	onlyA, err := l.LocalStats(context.Background(), q, func(h string) bool { return h == "a.com" })
	if err != nil {
		t.Fatal(err)
	}
	if onlyA.Docs != 2 || onlyA.DF["appl"] != 2 || onlyA.DF["banana"] != 0 || onlyA.FieldLenSum[index.FieldBody] != 3 {
		t.Errorf("filtered %+v", onlyA)
	}
}

// topKEqualsExhaustive checks that l's top k, for several k, is the first
// k of its exhaustive ranking (k = n), with the shard's statistics and
// with global ones, for all hosts and for a shard that answers for a third
// of them (runs of refused hosts are skipped), and that the engine's
// scores are Score's.
func topKEqualsExhaustive(t *testing.T, l *Local, p Params, queries []string, global *CollectionStats, n int) {
	t.Helper()
	a := l.ix.Analyzer()
	pruned := 0
	third := func(host string) bool {
		var i int
		_, err := fmt.Sscanf(host, "h%d.example", &i)
		return err == nil && i%3 == 0
	}
	for _, qs := range queries {
		q, err := ParseQuery(qs, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			g      *CollectionStats
			filter func(string) bool
		}{{nil, nil}, {global, nil}, {global, third}} {
			g := c.g
			full, err := l.Search(context.Background(), q, n, g, c.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !full.TotalExact {
				t.Fatalf("%q: exhaustive run pruned", qs)
			}
			for _, cand := range full.Candidates {
				if c.filter != nil && !c.filter(cand.Host) {
					t.Fatalf("%q: %s from a host the filter refuses", qs, cand.URL)
				}
			}
			stats := g
			if stats == nil {
				stats = &full.Stats
			}
			for i := range full.Candidates {
				if got := Score(p, stats, q, &full.Candidates[i]); got != full.Candidates[i].Score {
					t.Fatalf("%q #%d: Score %.17g, engine %.17g", qs, i, got, full.Candidates[i].Score)
				}
			}
			for _, k := range []int{1, 3, 10, 50} {
				top, err := l.Search(context.Background(), q, k, g, c.filter)
				if err != nil {
					t.Fatal(err)
				}
				if !top.TotalExact {
					pruned++
				}
				want := full.Candidates[:min(k, len(full.Candidates))]
				if len(top.Candidates) != len(want) {
					t.Fatalf("%q k=%d: %d hits, want %d", qs, k, len(top.Candidates), len(want))
				}
				for i := range want {
					if top.Candidates[i].URL != want[i].URL || top.Candidates[i].Score != want[i].Score {
						t.Fatalf("%q k=%d #%d: %s %.17g, want %s %.17g", qs, k, i, top.Candidates[i].URL, top.Candidates[i].Score, want[i].URL, want[i].Score)
					}
				}
			}
		}
	}
	if pruned == 0 {
		t.Error("no query was pruned: the test does not exercise dynamic pruning")
	}
	t.Logf("%d of %d top-k runs pruned", pruned, len(queries)*3*4)
}
