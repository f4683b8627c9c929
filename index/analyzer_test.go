package index

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

func terms(toks []Token) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.Term
	}
	return out
}

func posOf(toks []Token, term string) int {
	for _, t := range toks {
		if t.Term == term {
			return t.Pos
		}
	}
	return -1
}

func TestAnalyzer(t *testing.T) {
	a := SharedAnalyzer()
	tests := []struct {
		name    string
		text    string
		query   bool
		want    []string // must all be present
		notWant []string
		samePos [][2]string // pairs that must share a position
	}{
		{name: "simplified search-mode", text: "我们的搜索引擎很好用",
			want:    []string{"搜索引擎", "搜索", "引擎", "我们"},
			samePos: [][2]string{{"搜索引擎", "搜索"}, {"搜索引擎", "引擎"}}},
		{name: "simplified query-mode keeps the long word", text: "搜索引擎", query: true,
			want: []string{"搜索引擎"}, notWant: []string{"搜索", "引擎"}},
		{name: "traditional falls back to bigrams", text: "資訊檢索系統",
			want: []string{"資訊", "檢索", "資", "訊"}, samePos: [][2]string{{"資", "資訊"}}},
		{name: "traditional query uses bigrams only", text: "資訊檢索", query: true,
			want: []string{"資訊", "訊檢", "檢索"}, notWant: []string{"資", "索"}},
		{name: "mixed chinese english", text: "中文English混合Go语言",
			want: []string{"中文", "english", "混合", "go", "语言"}},
		{name: "full-width ascii folds", text: "ＡＢＣ　ｄｅｆ１２３ Ｃ＋＋",
			want: []string{"abc", "def123", "c++"}, notWant: []string{"ＡＢＣ"}},
		{name: "programming tokens", text: "C++ and C# on .NET, AT&T's 3.14 IPv6 e-mail user@example.com",
			want:    []string{"c++", "c#", ".net", "at&t's", "at", "3.14", "ipv6", "e-mail", "mail", "user@example.com", "example"},
			notWant: []string{"3", "14"},
			samePos: [][2]string{{"e-mail", "mail"}}},
		{name: "sentence dot is not a joiner", text: "The end. Next one",
			want: []string{"end", "next"}, notWant: []string{"end.", "end.next"}},
		{name: "lowercase and accents", text: "Ünïcödé CAFÉ Straße",
			want: []string{"ünïcödé", "café", "straße"}},
		{name: "query drops compound parts", text: "e-mail", query: true,
			want: []string{"e-mail"}, notWant: []string{"mail"}},
		{name: "invalid utf8 and controls", text: "ok\xff\xfe\x00\x01bad\tword",
			want: []string{"ok", "bad", "word"}},
		{name: "empty", text: ""},
		{name: "only punctuation", text: "，。！？,.!?"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var toks []Token
			if tc.query {
				toks = a.AnalyzeQuery(tc.text)
			} else {
				toks = a.Analyze(tc.text)
			}
			got := terms(toks)
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing %q in %v", w, toks)
				}
			}
			for _, w := range tc.notWant {
				if slices.Contains(got, w) {
					t.Errorf("unexpected %q in %v", w, toks)
				}
			}
			for _, p := range tc.samePos {
				if pa, pb := posOf(toks, p[0]), posOf(toks, p[1]); pa != pb || pa < 0 {
					t.Errorf("%q at %d and %q at %d should share a position", p[0], pa, p[1], pb)
				}
			}
			for i := 1; i < len(toks); i++ {
				if toks[i].Pos < toks[i-1].Pos {
					t.Errorf("positions not ascending: %v", toks)
				}
			}
			if len(tc.want) == 0 && len(toks) != 0 {
				t.Errorf("want no tokens, got %v", toks)
			}
		})
	}
}

func TestAnalyzerSpansMapToOriginal(t *testing.T) {
	a := SharedAnalyzer()
	text := "Ｃ＋＋ 搜索引擎 Café résumé"
	for _, sp := range a.analyzeSpans(text, false) {
		if sp.start < 0 || sp.end > len(text) || sp.start >= sp.end {
			t.Fatalf("bad span %+v", sp)
		}
		orig := text[sp.start:sp.end]
		if got := terms(a.Analyze(orig)); !slices.Contains(got, sp.term) {
			t.Errorf("span %q -> original %q analyzes to %v", sp.term, orig, got)
		}
	}
}

// gojieba is cgo over a const C++ trie; many goroutines on one instance
// must give the same results as one.
func TestAnalyzerConcurrent(t *testing.T) {
	a := SharedAnalyzer()
	texts := []string{"我们的搜索引擎很好用", "資訊檢索系統", "The quick brown fox 跳过了懒狗", strings.Repeat("中华人民共和国成立了", 50)}
	want := make([][]Token, len(texts))
	for i, s := range texts {
		want[i] = a.Analyze(s)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				k := (g + i) % len(texts)
				if got := a.Analyze(texts[k]); !slices.Equal(got, want[k]) {
					errs <- texts[k]
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent analysis of %q differed", s)
	}
}

func BenchmarkAnalyzeChinese(b *testing.B) {
	a := SharedAnalyzer()
	text := strings.Repeat("搜索引擎是指根据一定的策略、运用特定的计算机程序从互联网上采集信息，在对信息进行组织和处理后，为用户提供检索服务，将检索的相关信息展示给用户的系统。", 40)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		a.Analyze(text)
	}
}

func BenchmarkAnalyzeEnglish(b *testing.B) {
	a := SharedAnalyzer()
	text := strings.Repeat("A web search engine is a software system that searches the World Wide Web for information specified in a query; results are presented as a list of pages, e.g. C++ docs and AT&T's site. ", 40)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		a.Analyze(text)
	}
}

// Without a dictionary the analyzer still finds Chinese through bigrams.
func TestAnalyzerWithoutDictionary(t *testing.T) {
	a := &Analyzer{}
	got := terms(a.Analyze("搜索引擎 test"))
	for _, w := range []string{"搜索", "索引", "引擎", "搜", "test"} {
		if !slices.Contains(got, w) {
			t.Errorf("missing %q in %v", w, got)
		}
	}
	if q := terms(a.AnalyzeQuery("搜索引擎")); !slices.Equal(q, []string{"搜索", "索引", "引擎"}) {
		t.Errorf("query = %v", q)
	}
}
