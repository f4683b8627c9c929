package search

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"

	"sou/index"
)

// plainSnippet reads a shard's snippet as text (readSnippet's text).
func plainSnippet(s string) string {
	text, _ := readSnippet(s)
	return text
}

// readSnippet reads a shard's snippet as text and returns the stretches
// the shard marked as matches. An honest shard sends index.Snippet's
// output, HTML-escaped text with <b> around matches: those two tags become
// code-point ranges of the text and the entities are decoded. Anything
// else a peer put there, markup included, is kept as the literal text it
// now is. Control and bidirectional-override characters are dropped,
// whitespace runs become one space, invalid UTF-8 becomes U+FFFD. Marks
// are data, never markup: a shard can only choose which of its own words
// are shown as matches, as it chooses the snippet's words.
func readSnippet(s string) (text string, marks [][2]int) {
	var b strings.Builder
	b.Grow(len(s))
	runes, space, bold, start := 0, false, false, -1
	for s != "" {
		seg, tag := nextTag(s)
		s = s[len(seg)+len(tag):]
		for _, r := range html.UnescapeString(strings.ToValidUTF8(seg, "\uFFFD")) {
			switch {
			case unicode.IsSpace(r):
				space = b.Len() > 0
			case unicode.IsControl(r) || isBidiControl(r):
			default:
				if space {
					b.WriteByte(' ')
					runes++
					space = false
				}
				if bold && start < 0 {
					start = runes
				}
				b.WriteRune(r)
				runes++
			}
		}
		switch {
		case tag == "<b>" && !bold:
			bold, start = true, -1
		case tag == "</b>" && bold:
			if start >= 0 {
				if n := len(marks); n > 0 && marks[n-1][1] == start {
					marks[n-1][1] = runes
				} else {
					marks = append(marks, [2]int{start, runes})
				}
			}
			bold = false
		}
	}
	return b.String(), marks
}

// nextTag splits s at its first <b> or </b>: the text before it and the
// tag ("" when there is none), in one pass over s.
func nextTag(s string) (before, tag string) {
	for i := 0; ; i++ {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return s, ""
		}
		i += j
		for _, t := range [...]string{"<b>", "</b>"} {
			if strings.HasPrefix(s[i:], t) {
				return s[:i], t
			}
		}
	}
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
