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
		{name: "traditional is folded and segmented", text: "資訊檢索系統",
			want:    []string{"资讯", "检索", "系统", "信息", "信息检索"},
			notWant: []string{"資訊", "檢索", "資", "资"},
			samePos: [][2]string{{"资讯", "信息"}, {"资讯", "信息检索"}}},
		{name: "traditional query reads mainland words", text: "資訊檢索", query: true,
			want: []string{"信息检索"}, notWant: []string{"资讯", "資訊", "资", "讯检"}},
		{name: "taiwan vocabulary also indexes the mainland word", text: "開啟檔案，變更設定，執行巨集",
			want:    []string{"档案", "文件", "设定", "设置", "巨集", "宏"},
			samePos: [][2]string{{"档案", "文件"}, {"设定", "设置"}, {"巨集", "宏"}}},
		{name: "taiwan vocabulary in a query", text: "開啟檔案 設定", query: true,
			want: []string{"文件", "设置"}, notWant: []string{"档案", "设定"}},
		{name: "hong kong variants", text: "這條電綫的衞生", want: []string{"电线", "卫生"}, notWant: []string{"衞", "綫"}},
		{name: "simplified keeps its own words", text: "打开文件，修改面板设置，程序",
			want: []string{"文件", "面板", "设置", "程序"}, notWant: []string{"文档", "皮肤", "进程"}},
		{name: "simplified query keeps its own words", text: "文件 面板 巨集", query: true,
			want: []string{"文件", "面板", "巨集"}, notWant: []string{"文档", "皮肤", "宏"}},
		{name: "simplified 么 and 才 stay", text: "为什么才来", want: []string{"什么", "才"}, notWant: []string{"什幺", "纔"}},
		{name: "mixed chinese english", text: "中文English混合Go语言",
			want: []string{"中文", "english", "混合", "go", "语言"}},
		{name: "full-width ascii folds", text: "ＡＢＣ　ｄｅｆ１２３ Ｃ＋＋",
			want: []string{"abc", "def123", "c++"}, notWant: []string{"ＡＢＣ"}},
		{name: "programming tokens", text: "C++ and C# on .NET, AT&T's 3.14 IPv6 e-mail user@example.com",
			want:    []string{"c++", "c#", ".net", "at&t's", "at", "3.14", "ipv6", "e-mail", "mail", "user@example.com", "exampl"},
			notWant: []string{"3", "14"},
			samePos: [][2]string{{"e-mail", "mail"}}},
		{name: "english words are stemmed", text: "Inserting Envelopes, galleries",
			want: []string{"insert", "envelop", "galleri"}, notWant: []string{"inserting", "envelopes", "galleries"}},
		{name: "stemmed in queries too", text: "inserting envelopes", query: true,
			want: []string{"insert", "envelop"}},
		{name: "only words of ascii letters are stemmed", text: "a2b_hex cafés runs2 node.js",
			want: []string{"a2b_hex", "cafés", "runs2", "node.js", "hex", "node"}, notWant: []string{"café"}},
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
	for _, text := range []string{
		"Ｃ＋＋ 搜索引擎 Café résumé",
		// Folded, with Taiwan words that read differently (記憶體 → 内存,
		// 資訊檢索 → 信息检索) and a character NFKC makes three (㍿).
		"請開啟檔案，記憶體不足，資訊檢索系統 ㍿ 巨集",
	} {
		page := a.pageScript("", text)
		for _, sp := range a.analyzeSpans(text, false, page) {
			if sp.start < 0 || sp.end > len(text) || sp.start >= sp.end {
				t.Fatalf("bad span %+v", sp)
			}
			orig := text[sp.start:sp.end]
			var got []string
			a.run(orig, false, false, page, func(t span) { got = append(got, t.term) })
			if !slices.Contains(got, sp.term) {
				t.Errorf("span %q -> original %q analyzes to %v", sp.term, orig, got)
			}
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
	benchmarkAnalyze(b, a, text)
}

// BenchmarkAnalyzeTraditional is BenchmarkAnalyzeChinese's text as
// Taiwan writes it (script folding and Taiwan vocabulary at work).
func BenchmarkAnalyzeTraditional(b *testing.B) {
	a := SharedAnalyzer()
	text := strings.Repeat("搜尋引擎是指根據一定的策略、運用特定的電腦程式從網際網路上蒐集資訊，在對資訊進行組織和處理後，為使用者提供檢索服務，將檢索的相關資訊展示給使用者的系統。", 40)
	benchmarkAnalyze(b, a, text)
}

func BenchmarkAnalyzeEnglish(b *testing.B) {
	a := SharedAnalyzer()
	text := strings.Repeat("A web search engine is a software system that searches the World Wide Web for information specified in a query; results are presented as a list of pages, e.g. C++ docs and AT&T's site. ", 40)
	benchmarkAnalyze(b, a, text)
}

// benchmarkAnalyze reports, besides wall time, the process's CPU time per
// call: steadier on a shared machine.
func benchmarkAnalyze(b *testing.B, a *Analyzer, text string) {
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		a.Analyze(text)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}
