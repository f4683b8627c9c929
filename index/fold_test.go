package index

import (
	"slices"
	"strings"
	"testing"
)

// A pass is OpenCC's dictionary group under maximum forward matching:
// the first dictionary with a key at a position wins, with its longest
// key there; offsets map each character of a replacement to the
// character it replaced.
func TestFoldPass(t *testing.T) {
	p := newFoldPass()
	for d, dict := range [][][2]string{
		{{"甲乙", "AB"}, {"甲", "a"}},
		{{"甲乙丙", "XYZ"}, {"乙", "b"}, {"丙丁", "c"}, {"戊", "eee"}},
	} {
		for _, kv := range dict {
			p.add(kv[0], kv[1], int32(d))
		}
	}
	tests := []struct {
		in, want string
		src      []int32 // of the result, for src = byte offsets of in
	}{
		{in: "", want: ""},
		{in: "xyz", want: "xyz"},
		// 甲乙 (first dictionary) wins over the longer 甲乙丙.
		{in: "甲乙丙", want: "AB丙"},
		// Longest match of the first dictionary with a key here: 甲乙, not 甲.
		{in: "甲乙", want: "AB", src: []int32{0, 3, 6}},
		// No key of the first dictionary at 乙: the second's.
		{in: "乙丙丁", want: "b" + "c", src: []int32{0, 3, 9}},
		// One character becomes three: all map to it.
		{in: "x戊y", want: "xeeey", src: []int32{0, 1, 1, 1, 4, 5}},
		{in: "甲甲", want: "aa"},
	}
	for _, tc := range tests {
		got, _ := p.apply(tc.in, nil)
		if got != tc.want {
			t.Errorf("apply(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.src == nil {
			continue
		}
		src := make([]int32, len(tc.in)+1)
		for i := range src {
			src[i] = int32(i)
		}
		_, gotSrc := p.apply(tc.in, src)
		if !slices.Equal(gotSrc, tc.src) {
			t.Errorf("apply(%q) offsets = %v, want %v", tc.in, gotSrc, tc.src)
		}
	}
}

func TestScriptOf(t *testing.T) {
	f := SharedAnalyzer().fold
	tests := []struct {
		text string
		want script
	}{
		{"", scriptUnknown},
		{"hello world", scriptUnknown},
		{"巨集 文件 面板", scriptUnknown}, // used in both scripts
		{"開啟檔案", scriptTraditional},
		{"打开文件", scriptSimplified},
		{"这是們", scriptUnknown}, // one of each
		{"我们的搜索引擎，資訊檢索系統", scriptTraditional},
		{strings.Repeat("x", scriptSampleBytes) + "開啟檔案", scriptUnknown}, // beyond the sample
	}
	for _, tc := range tests {
		if got := f.scriptOf(tc.text); got != tc.want {
			t.Errorf("scriptOf(%.40q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}
