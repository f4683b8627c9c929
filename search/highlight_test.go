package search

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"sou/index"
)

func TestPlainSnippet(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"honest snippet", "…the <b>harbour</b> &amp; the <b>港口</b> of &lt;city&gt;…", "…the harbour & the 港口 of <city>…"},
		{"markup stays text", `<form action=/dashboard/seed method=post><input name=urls value=http://evil></form>`,
			`<form action=/dashboard/seed method=post><input name=urls value=http://evil></form>`},
		{"escaped markup decoded to text", "&lt;script&gt;alert(1)&lt;/script&gt;", "<script>alert(1)</script>"},
		{"control characters dropped", "a\x00b\x1b[31mc\x7fd", "ab[31mcd"},
		{"bidi overrides dropped", "file\u202egnp.exe", "filegnp.exe"},
		{"whitespace collapsed and trimmed", "  a \t\r\n b  ", "a b"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"empty", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := plainSnippet(tc.in); got != tc.want {
				t.Errorf("plainSnippet(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSnippetParts(t *testing.T) {
	tests := []struct {
		name       string
		text       string
		highlights [][2]int
		want       []SnippetPart
	}{
		{"none", "plain text", nil, []SnippetPart{{Text: "plain text"}}},
		{"two matches", "a harbour and 港口 here", [][2]int{{2, 9}, {14, 16}},
			[]SnippetPart{{Text: "a "}, {Text: "harbour", Match: true}, {Text: " and "}, {Text: "港口", Match: true}, {Text: " here"}}},
		{"whole text", "港口", [][2]int{{0, 2}}, []SnippetPart{{Text: "港口", Match: true}}},
		{"out of range ignored", "abc", [][2]int{{1, 9}, {-1, 2}}, []SnippetPart{{Text: "abc"}}},
		{"overlap and disorder ignored", "abcdef", [][2]int{{2, 4}, {3, 5}, {0, 1}},
			[]SnippetPart{{Text: "ab"}, {Text: "cd", Match: true}, {Text: "ef"}}},
		{"empty range ignored", "abc", [][2]int{{1, 1}}, []SnippetPart{{Text: "abc"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SnippetParts(tc.text, tc.highlights); !slices.Equal(got, tc.want) {
				t.Errorf("SnippetParts(%q, %v) = %+v, want %+v", tc.text, tc.highlights, got, tc.want)
			}
		})
	}
}

// TestHostileSnippetIsText is issue 20's finding 4: a peer shard sends
// markup as its snippet (a form posting to the dashboard, a meta refresh,
// a script) and a hostile title. The coordinator takes it as text: the
// markup survives only as literal characters, which every renderer
// escapes, and the highlights are its own.
func TestHostileSnippetIsText(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	var docs []*index.Document
	for i := 0; i < 120; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, trs, _ := network(t, 3, docs, func(i int) int { return (i % 17) % 3 })
	const hostile = `<form action=/dashboard/seed method=post><input name=urls value=http://evil></form>` +
		`<meta http-equiv=refresh content="0;url=http://evil"><script>alert(1)</script> search ` + "\x1b[2J\u202e"
	trs[0].forge["m2"] = func(r *ShardResult) {
		for i := range r.Candidates {
			r.Candidates[i].Title = `<img src=x onerror=alert(1)>`
		}
	}
	trs[0].forgeSnippets["m2"] = func(sn map[string]string) {
		for u := range sn {
			sn[u] = hostile
		}
	}
	resp, err := coords[0].Search(context.Background(), Request{Query: "search", N: 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	forged := 0
	for _, r := range resp.Results {
		if r.Shard != "m2" {
			continue
		}
		forged++
		if want := plainSnippet(hostile); r.Snippet != want {
			t.Errorf("%s: snippet %q, want the markup as text %q", r.URL, r.Snippet, want)
		}
		if strings.ContainsAny(r.Snippet, "\x1b\u202e") {
			t.Errorf("%s: control characters kept in %q", r.URL, r.Snippet)
		}
		rendered := snippetHTML(r)
		for _, bad := range []string{"<form", "<meta", "<script", "<input"} {
			if strings.Contains(rendered, bad) {
				t.Errorf("%s: rendered snippet holds %s: %q", r.URL, bad, rendered)
			}
		}
		if !strings.Contains(rendered, "&lt;form action=/dashboard/seed") || !strings.Contains(rendered, "<b>search</b>") {
			t.Errorf("%s: rendered snippet %q lacks the escaped form or the highlight of the query", r.URL, rendered)
		}
		for _, h := range r.Highlights {
			if h[0] < 0 || h[1] > len([]rune(r.Snippet)) || h[0] >= h[1] {
				t.Errorf("%s: highlight %v outside %q", r.URL, h, r.Snippet)
			}
		}
	}
	if forged == 0 {
		t.Fatal("no result from the forging shard; the test needs one")
	}
}

func TestHighlightRunes(t *testing.T) {
	terms := []string{"harbour", "港口"}
	text := "Der Hafen, the HARBOUR: 港口 and harbours, harbourmaster"
	got := highlightRunes(text, terms)
	want := [][2]int{{15, 22}, {24, 26}, {31, 39}} // harbours stems to harbour
	if !slices.Equal(got, want) {
		t.Fatalf("highlightRunes(%q) = %v, want %v", text, got, want)
	}
	parts := SnippetParts(text, got)
	if parts[1].Text != "HARBOUR" || !parts[1].Match || parts[3].Text != "港口" || !parts[3].Match {
		t.Errorf("parts %+v", parts)
	}
}
