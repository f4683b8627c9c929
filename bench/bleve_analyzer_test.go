package bench

import (
	"slices"
	"testing"

	unicodetok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"github.com/blevesearch/bleve/v2/registry"
)

// TestBleveAnalyzer: Latin-script words stay words (gojieba alone would cut
// them into letters), Han runs are cut by gojieba's search mode, and the
// offsets point at the original text.
func TestBleveAnalyzer(t *testing.T) {
	an, err := registry.NewCache().AnalyzerNamed(jiebaAnalyzerName)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want []string
	}{
		{"raise multiprocessing.ProcessError here", []string{"raise", "multiprocessing.processerror", "here"}},
		{"resource RLIMIT_KQUEUES a2b_hex() 3.11", []string{"resource", "rlimit_kqueues", "a2b_hex", "3.11"}},
		{"在 LibreOffice Calc 中插入图表 charts", []string{"在", "libreoffice", "calc", "中", "插入", "图表", "charts"}},
		{"Ｃａｌｃ：搜索引擎", []string{"calc", "搜索", "索引", "引擎", "搜索引擎"}},
	}
	for _, tc := range tests {
		var got []string
		for _, tok := range an.Analyze([]byte(tc.in)) {
			got = append(got, string(tok.Term))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Analyze(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	in := []byte("版本 LibreOffice 7.4 图表")
	toks := (&jiebaTokenizer{j: sharedJieba(), words: unicodetok.NewUnicodeTokenizer()}).Tokenize(in)
	for i, tk := range toks {
		if string(in[tk.Start:tk.End]) != string(tk.Term) || tk.Position != i+1 {
			t.Errorf("token %d %q at [%d:%d] position %d: offsets or position wrong", i, tk.Term, tk.Start, tk.End, tk.Position)
		}
	}
}
