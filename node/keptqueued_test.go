package node

import (
	"slices"
	"testing"
)

// TestKeptQueued: fresh leaves out what mark recorded, and a reset between
// fresh and mark (a forget deleting queued keys) keeps the URLs of that
// call from being taken for kept.
func TestKeptQueued(t *testing.T) {
	urls := []string{"http://a.example/1", "http://a.example/2", "http://b.example/"}
	tests := []struct {
		name       string
		resetFirst bool // reset between fresh and mark
		want       []string
	}{
		{"marked", false, nil},
		{"reset before the mark", true, urls},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var k keptQueued
			got, hashes, gen := k.fresh(urls)
			if !slices.Equal(got, urls) {
				t.Fatalf("fresh of an empty table = %v, want %v", got, urls)
			}
			if tc.resetFirst {
				k.reset()
			}
			k.mark(hashes, gen)
			if got, _, _ := k.fresh(urls); !slices.Equal(got, tc.want) {
				t.Errorf("fresh after the mark = %v, want %v", got, tc.want)
			}
			k.reset()
			if got, _, _ := k.fresh(urls[:1]); !slices.Equal(got, urls[:1]) {
				t.Errorf("fresh after a reset = %v, want %v", got, urls[:1])
			}
		})
	}
}
