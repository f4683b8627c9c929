package index

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// queryTerms is what a query of words searches for: each word's terms
// (lowercased, stemmed, segmented).
func queryTerms(t *testing.T, words ...string) []string {
	t.Helper()
	var out []string
	for _, w := range words {
		for _, tok := range SharedAnalyzer().AnalyzeQuery(w) {
			out = append(out, tok.Term)
		}
	}
	return out
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("无关的内容填充文字。", 40)
	tests := []struct {
		name     string
		text     string
		terms    []string
		maxRunes int
		want     []string // substrings that must appear
		notWant  []string
	}{
		{name: "english highlight", text: "The quick brown fox jumps over the lazy dog.", terms: []string{"fox", "dog"}, maxRunes: 100,
			want: []string{"<b>fox</b>", "<b>dog</b>"}},
		{name: "case-insensitive, original case kept", text: "Apple pie is an APPLE dessert", terms: []string{"apple"}, maxRunes: 100,
			want: []string{"<b>Apple</b>", "<b>APPLE</b>"}},
		{name: "no partial word match", text: "category of cats and a cat", terms: []string{"cat"}, maxRunes: 100,
			want: []string{"<b>cat</b>"}, notWant: []string{"<b>cat</b>egory", "<b>cat</b>s"}},
		{name: "html escaped", text: "a <script>alert(1)</script> & b term", terms: []string{"term"}, maxRunes: 100,
			want: []string{"&lt;script&gt;", "&amp;", "<b>term</b>"}, notWant: []string{"<script>"}},
		{name: "chinese sub-word in long word", text: long + "我们的搜索引擎很好用" + long, terms: []string{"搜索"}, maxRunes: 30,
			want: []string{"<b>搜索</b>", "…"}},
		{name: "best window has most distinct terms", text: "alpha " + strings.Repeat("x ", 100) + "alpha beta gamma " + strings.Repeat("y ", 100), terms: []string{"alpha", "beta", "gamma"}, maxRunes: 40,
			want: []string{"<b>alpha</b> <b>beta</b> <b>gamma</b>"}},
		{name: "traditional quoted in simplified", text: long + "資訊檢索系統" + long, terms: []string{"资讯", "检索"}, maxRunes: 20,
			want: []string{"<b>資訊檢索</b>"}},
		{name: "traditional page, simplified terms", text: strings.Repeat("這是無關的內容。", 20) + "請開啟檔案並變更設定。" + strings.Repeat("這是無關的內容。", 20),
			terms: []string{"文件", "设置"}, maxRunes: 30,
			want: []string{"<b>檔案</b>", "<b>設定</b>"}},
		{name: "a stem that is not a prefix of its word", text: long + "Open the Gallery." + long, terms: []string{"galleries"}, maxRunes: 30,
			want: []string{"<b>Gallery</b>"}},
		{name: "no match gives the start", text: "hello world " + long, terms: []string{"zzz"}, maxRunes: 20,
			want: []string{"hello world"}},
		{name: "whitespace collapsed", text: "a\n\n\t  b term", terms: []string{"term"}, maxRunes: 50,
			want: []string{"a b <b>term</b>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Snippet(tc.text, queryTerms(t, tc.terms...), tc.maxRunes)
			if !utf8.ValidString(got) {
				t.Fatalf("invalid UTF-8: %q", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in %q", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("unexpected %q in %q", w, got)
				}
			}
			plain := strings.NewReplacer("<b>", "", "</b>", "", "…", "", "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(got)
			if n := utf8.RuneCountInString(plain); n > tc.maxRunes+2 {
				t.Errorf("snippet has %d characters, max %d: %q", n, tc.maxRunes, got)
			}
		})
	}
}

// Window edges never split a Chinese word: every CJK run in the snippet
// must be made of whole words of the text's own segmentation.
func TestSnippetChineseBoundaries(t *testing.T) {
	text := strings.Repeat("中华人民共和国是一个伟大的国家，我们热爱和平与发展。", 30) + "搜索引擎" + strings.Repeat("计算机科学技术研究所正在进行自然语言处理。", 30)
	a := SharedAnalyzer()
	words := map[string]bool{}
	for _, sp := range a.analyzeSpans(text, true, scriptUnknown) {
		words[text[sp.start:sp.end]] = true
	}
	for maxRunes := 5; maxRunes < 60; maxRunes += 3 {
		got := Snippet(text, []string{"搜索引擎"}, maxRunes)
		plain := strings.NewReplacer("<b>", "", "</b>", "").Replace(got)
		plain = strings.Trim(plain, "…")
		first := a.analyzeSpans(plain, true, scriptUnknown)
		if len(first) == 0 {
			t.Fatalf("empty snippet %q", got)
		}
		head := plain[first[0].start:first[0].end]
		tail := plain[first[len(first)-1].start:first[len(first)-1].end]
		if !words[head] || !words[tail] {
			t.Errorf("maxRunes %d: edge words %q/%q not words of the text: %q", maxRunes, head, tail, got)
		}
		if !strings.Contains(got, "<b>搜索引擎</b>") {
			t.Errorf("maxRunes %d: %q", maxRunes, got)
		}
	}
}

func TestCachedHTML(t *testing.T) {
	gbk := []byte{0xc4, 0xe3, 0xba, 0xc3, 0xca, 0xc0, 0xbd, 0xe7} // 你好世界 in GBK
	tests := []struct {
		name    string
		rec     *PageRecord
		terms   []string
		want    []string
		notWant []string
	}{
		{name: "html page", rec: &PageRecord{Document: Document{URL: "http://a.example/p", Title: "T", ContentType: "text/html; charset=utf-8",
			FetchedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			Raw:       []byte(`<html><head><meta http-equiv="refresh" content="0;url=http://evil"><script>alert(1)</script></head><body onload="x()"><p>apple and banana apple</p><a href="javascript:alert(1)">x</a></body></html>`)}},
			terms: []string{"apple", "banana"},
			want: []string{`<mark style="background:#ffff66;color:black">apple</mark>`, `<mark style="background:#a0ffff;color:black">banana</mark>`,
				"http://a.example/p", "2026-01-02 03:04:05 UTC", `<base href="http://a.example/p"/>`, `<meta charset="utf-8"/>`},
			notWant: []string{"<script", "alert(1)", "onload", "refresh"}},
		{name: "gbk decoded", rec: &PageRecord{Document: Document{URL: "http://b.example/", ContentType: "text/html", Charset: "gbk",
			Raw: append(append([]byte("<html><body>"), gbk...), "</body></html>"...)}},
			terms: []string{"你好"}, want: []string{">你好</mark>世界"}},
		{name: "plain text", rec: &PageRecord{Document: Document{URL: "http://c.example/t.txt", ContentType: "text/plain", Raw: []byte("x < y and term")}},
			terms: []string{"term"}, want: []string{"x &lt; y", ">term</mark>", "<pre"}},
		{name: "no raw uses body", rec: &PageRecord{Document: Document{URL: "http://d.example/", Title: "Title", Body: "some body"}},
			terms: []string{"body"}, want: []string{">body</mark>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := CachedHTML(tc.rec, queryTerms(t, tc.terms...))
			if err != nil {
				t.Fatal(err)
			}
			s := string(out)
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("missing %q in %s", w, s)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(s, w) {
					t.Errorf("unexpected %q in %s", w, s)
				}
			}
		})
	}
	if _, err := CachedHTML(nil, nil); err == nil {
		t.Error("nil record: want error")
	}
}

func TestIndexFoldASCII(t *testing.T) {
	tests := []struct {
		s, t string
		want int
	}{
		{"", "a", -1},
		{"abc", "", 0},
		{"The Quick Brown Fox", "quick", 4},
		{"THE QUICK", "quick", 4},
		{"quic", "quick", -1},
		{"QuIcK", "quick", 0},
		{"qqqQuick", "quick", 3},
		{"Qx qX qUICK", "quick", 6},
		{"中文Quick中文", "quick", 6},
		{"naïve Café", "caf", 7},
		{"1+1=2, 2+2", "2+2", 7},
		{"ab", "ab", 0},
		{"xAB", "ab", 1},
		{"aAaA", "aa", 0},
	}
	for _, tc := range tests {
		if got := indexFoldASCII(tc.s, tc.t); got != tc.want {
			t.Errorf("indexFoldASCII(%q, %q) = %d, want %d", tc.s, tc.t, got, tc.want)
		}
		if tc.t != "" {
			if want := strings.Index(strings.ToLower(tc.s), tc.t); want != tc.want {
				t.Errorf("table wrong for %q, %q: strings.Index of the lowercased text is %d", tc.s, tc.t, want)
			}
		}
	}
}

// TestSnippetInPlaceMatchesLowercasedCopy: searching the text itself (ASCII
// folded) picks the same snippet as searching a lowercased copy.
func TestSnippetInPlaceMatchesLowercasedCopy(t *testing.T) {
	syn, err := NewSynthetic(11)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		var sb strings.Builder
		for range 1 + i%20 {
			sb.WriteString(syn.Text(30, 0.5))
			sb.WriteString(" The Quick BROWN fox, 2026. ")
		}
		text := sb.String()
		terms := []string{syn.EnWord(), syn.ZhWord(), "quick", "brown", "2026"}[:1+i%5]
		if got, want := snippet(text, terms, 80+i%100, true, scriptUnset), snippet(text, terms, 80+i%100, false, scriptUnset); got != want {
			t.Fatalf("terms %q: in place %q, lowercased copy %q", terms, got, want)
		}
	}
}

// FuzzSnippet: arbitrary text and terms never panic and give valid UTF-8.
func FuzzSnippet(f *testing.F) {
	f.Add("我们的搜索引擎很好用 apple pie", "搜索", 20)
	f.Add("Ａｐｐｌｅ İstanbul ǅ straße", "apple", 5)
	f.Add("\xff\xfe<b>x</b>", "x", 1)
	f.Fuzz(func(t *testing.T, text, term string, maxRunes int) {
		got := Snippet(text, []string{term, strings.ToLower(term)}, maxRunes%500)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 %q", got)
		}
		// Where lowercasing keeps every byte offset and makes no ASCII
		// letter out of another character (K, the Kelvin sign), the text
		// searched in place gives the copy's snippet.
		low := strings.ToLower(term)
		if l, ok := toLowerFast(text); ok && len(l) == len(text) && isLowerASCII(low) && !strings.ContainsAny(text, "\u212a\u017f\u0130") {
			if a, b := snippet(text, []string{low}, maxRunes%500, true, scriptUnset), snippet(text, []string{low}, maxRunes%500, false, scriptUnset); a != b {
				t.Fatalf("in place %q, lowercased copy %q", a, b)
			}
		}
	})
}

// BenchmarkSnippet measures a snippet of a long mixed-script page (the
// large pages dominate a query's p99: every candidate gets one).
func BenchmarkSnippet(b *testing.B) {
	syn, err := NewSynthetic(3)
	if err != nil {
		b.Fatal(err)
	}
	SharedAnalyzer() // load the dictionary outside the timings
	for _, size := range []int{4 << 10, 64 << 10, 400 << 10} {
		var sb strings.Builder
		for sb.Len() < size {
			sb.WriteString(syn.Text(40, 0.5))
			sb.WriteString(" The Quick Brown Fox. ")
		}
		text := sb.String()
		terms := []string{"quick", syn.ZhWord(), syn.EnWord()}
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				Snippet(text, terms, 160)
			}
		})
	}
}

func TestToLowerFastMatchesStrings(t *testing.T) {
	for r := rune(0x2E80); r < 0xA000; r++ {
		if unicode.ToLower(r) != r {
			t.Fatalf("U+%04X has a lowercase mapping: the CJK shortcut of toLowerFast is wrong", r)
		}
	}
	tests := []string{
		"", "abc", "ABC Déjà VU", "搜索引擎 Search ENGINE", "ΣΊΣΥΦΟΣ", "İstanbul", "Ⅻ Ⓐ ＡＢＣ",
		"mixed 中文 TEXT 繁體 ÀÉÎ", strings.Repeat("中", 100) + "X", "\uFFFD valid replacement char",
		"\u3000\u9fff\ua000\u2e80 edges", "中\xe4\xb8", "\xe4\xb8中", "bad \xff BYTE", "\xed\xa0\x80 surrogate",
	}
	syn, err := NewSynthetic(5)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		tests = append(tests, syn.Text(60, 0.5)+" The END Ωmega")
	}
	for _, s := range tests {
		got, valid := toLowerFast(s)
		if valid != utf8.ValidString(s) {
			t.Errorf("toLowerFast(%q): valid = %v", s, valid)
		}
		if want := strings.ToLower(s); valid && got != want {
			t.Errorf("toLowerFast(%q) = %q, want %q", s, got, want)
		}
	}
}
