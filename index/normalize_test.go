package index

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizeReference is normalize without its fast path: every character
// through the NFKC iterator.
func normalizeReference(text string, offsets bool) (s string, src []int32, han bool) {
	b := make([]byte, 0, len(text))
	var it norm.Iter
	it.InitString(norm.NFKC, text)
	for !it.Done() {
		at := it.Pos()
		seg := it.Next()
		n0 := len(b)
		var segHan bool
		b, segHan = appendLowerSegment(b, seg)
		han = han || segHan
		if offsets {
			for range len(b) - n0 {
				src = append(src, int32(at))
			}
		}
	}
	if offsets {
		src = append(src, int32(len(text)))
	}
	return string(b), src, han
}

func checkNormalize(t *testing.T, text string) {
	t.Helper()
	want, wantSrc, wantHan := normalizeReference(text, true)
	got, gotSrc, gotHan := normalize(text, true)
	if got != want || !slices.Equal(gotSrc, wantSrc) || gotHan != wantHan {
		t.Fatalf("normalize(%+q) = %+q %v %v, want %+q %v %v", text, got, gotSrc, gotHan, want, wantSrc, wantHan)
	}
}

// TestNormalizePlainCharacters checks normalize's fast path against the
// iterator for every character beside plain ones (ASCII and Han, which
// the fast path takes) on either side, and beside itself, in texts of 256
// characters each: every character of the planes that have any other
// than private use (0 to 3 and 14).
func TestNormalizePlainCharacters(t *testing.T) {
	var text strings.Builder
	for r := rune(0); r <= 0xEFFFF; r++ {
		if r == 0x40000 {
			r = 0xE0000
		}
		if utf8.ValidRune(r) {
			c := string(r)
			text.WriteString(c + "a" + c + "B中" + c + "文" + c + c + "x")
		}
		if r%256 == 255 {
			checkNormalize(t, text.String())
			text.Reset()
		}
	}
}

func TestIsHan(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := isHan(r), r >= 0x2E80 && unicode.Is(unicode.Han, r); got != want {
			t.Fatalf("isHan(%U) = %v, want %v", r, got, want)
		}
	}
}
