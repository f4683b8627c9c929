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

func TestReadSnippet(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		text  string
		marks [][2]int
	}{
		{"honest snippet", "…the <b>harbour</b> &amp; the <b>港口</b> of &lt;city&gt;…", "…the harbour & the 港口 of <city>…", [][2]int{{5, 12}, {19, 21}}},
		{"touching marks merged", "<b>港</b><b>口</b> x", "港口 x", [][2]int{{0, 2}}},
		{"space inside a mark collapsed", "a <b> big\t\tharbour </b> b", "a big harbour b", [][2]int{{2, 13}}},
		{"entity inside a mark", "x <b>&amp;</b> y", "x & y", [][2]int{{2, 3}}},
		{"empty mark", "a <b></b>b", "a b", nil},
		{"mark of control characters only", "a <b>\x1b\u202e</b>b", "a b", nil},
		{"unclosed mark dropped", "a <b>harbour", "a harbour", nil},
		{"stray close ignored", "a</b> <b>b</b>", "a b", [][2]int{{2, 3}}},
		{"nested open ignored", "<b>a<b>b</b>c", "abc", [][2]int{{0, 2}}},
		{"escaped tags are text", "&lt;b&gt;a&lt;/b&gt;", "<b>a</b>", nil},
		{"a tag split by a tag", "<<b>b>x</b>", "<b>x", [][2]int{{1, 4}}},
		{"markup stays text", `<form action=/x><b>hi</b></form>`, `<form action=/x>hi</form>`, [][2]int{{16, 18}}},
		{"many tags", strings.Repeat("<b>a</b> ", 3), "a a a", [][2]int{{0, 1}, {2, 3}, {4, 5}}},
		{"empty", "", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text, marks := readSnippet(tc.in)
			if text != tc.text || !slices.Equal(marks, tc.marks) {
				t.Errorf("readSnippet(%q) = %q %v, want %q %v", tc.in, text, marks, tc.text, tc.marks)
			}
		})
	}
}

// TestSnippetMarksAreHighlights: the marks of an honest shard's snippet
// are the highlights the coordinator would find in its text itself, so
// taking them spares the coordinator analysing every snippet again.
func TestSnippetMarksAreHighlights(t *testing.T) {
	tests := []struct {
		text  string
		terms []string
	}{
		{"The harbour master keeps the harbours of the city open; a harbour is a port.", []string{"harbour", "citi"}},
		{"Setting up the printer: open Tools, then Options, then set the printer's paper size.", []string{"printer", "paper"}},
		{"在文档中插入图表。图表可以显示数据的统计信息，也可以修改图表的类型。", []string{"图表", "数据"}},
		{"Use the 函数 wizard to insert a function into the spreadsheet cell.", []string{"函数", "function"}},
	}
	for _, tc := range tests {
		snip := index.Snippet(tc.text, tc.terms, 60)
		text, marks := readSnippet(snip)
		if len(marks) == 0 {
			t.Fatalf("%q: no marks in the snippet %q", tc.text, snip)
		}
		if want := highlightRunes(text, tc.terms); !slices.Equal(marks, want) {
			t.Errorf("%q: marks %v, the coordinator's own highlights %v (text %q)", snip, marks, want, text)
		}
	}
}
