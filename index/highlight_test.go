package index

import (
	"slices"
	"testing"
)

func TestHighlights(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		terms []string
		want  [][2]int
	}{
		{"ascii ignoring case", "The Harbour and the harbour.", []string{"harbour"}, [][2]int{{4, 11}, {20, 27}}},
		{"not inside a longer word", "harbourmaster harbour", []string{"harbour"}, [][2]int{{14, 21}}},
		{"inflections of a stem", "Harbours harbour", []string{"harbour"}, [][2]int{{0, 8}, {9, 16}}},
		{"touching matches merge", "搜索引擎", []string{"搜索", "引擎"}, [][2]int{{0, 12}}},
		{"full-width folded", "ＨＡＲＢＯＵＲ", []string{"harbour"}, [][2]int{{0, 21}}},
		{"no terms", "harbour", nil, nil},
		{"invalid UTF-8", "harbour \xff", []string{"harbour"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Highlights(tc.text, tc.terms); !slices.Equal(got, tc.want) {
				t.Errorf("Highlights(%q, %q) = %v, want %v", tc.text, tc.terms, got, tc.want)
			}
		})
	}
}
