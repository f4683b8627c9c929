package search

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"

	"sou/index"
)

// plainSnippet reads a shard's snippet as text. An honest shard sends
// index.Snippet's output, HTML-escaped text with <b> around matches: those
// two tags are dropped and the entities decoded. Anything else a peer put
// there, markup included, is kept as the literal text it now is. Control
// and bidirectional-override characters are dropped, whitespace runs become
// one space, invalid UTF-8 becomes U+FFFD.
func plainSnippet(s string) string {
	s = strings.NewReplacer("<b>", "", "</b>", "").Replace(s)
	s = html.UnescapeString(strings.ToValidUTF8(s, "\uFFFD"))
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
		case unicode.IsControl(r) || isBidiControl(r):
		default:
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isBidiControl reports the embedding, override and isolate controls, which
// reorder the text around them on screen.
func isBidiControl(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// highlightRunes returns the query-term matches of text (index.Highlights)
// as code-point offsets, the unit a browser's Array.from counts in.
func highlightRunes(text string, terms []string) [][2]int {
	ranges := index.Highlights(text, terms)
	if len(ranges) == 0 {
		return nil
	}
	out := make([][2]int, len(ranges))
	at, runes := 0, 0
	for i, r := range ranges {
		runes += utf8.RuneCountInString(text[at:r[0]])
		start := runes
		runes += utf8.RuneCountInString(text[r[0]:r[1]])
		out[i] = [2]int{start, runes}
		at = r[1]
	}
	return out
}

// SnippetPart is a stretch of a snippet, a query-term match or not.
type SnippetPart struct {
	Text  string `json:"text"`
	Match bool   `json:"match,omitempty"`
}

// SnippetParts cuts a result's plain-text snippet at its highlights
// (code-point offsets). Highlights out of order, overlapping or out of
// range are ignored: a Response may come from another node.
func SnippetParts(snippet string, highlights [][2]int) []SnippetPart {
	runes := []rune(snippet)
	var out []SnippetPart
	at := 0
	for _, h := range highlights {
		if h[0] < at || h[1] <= h[0] || h[1] > len(runes) {
			continue
		}
		if h[0] > at {
			out = append(out, SnippetPart{Text: string(runes[at:h[0]])})
		}
		out = append(out, SnippetPart{Text: string(runes[h[0]:h[1]]), Match: true})
		at = h[1]
	}
	if at < len(runes) {
		out = append(out, SnippetPart{Text: string(runes[at:])})
	}
	return out
}
