package search

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"sou/index"
)

func TestParseQuery(t *testing.T) {
	a := index.SharedAnalyzer()
	tests := []struct {
		q       string
		want    string // canonical String()
		wantErr error
	}{
		{q: "apple banana", want: "appl banana"}, // English words are stemmed
		{q: "Inserting Envelopes", want: "insert envelop"},
		{q: "Apple  BANANA ", want: "appl banana"},
		{q: `"apple pie" recipe`, want: `"appl 1:pie" recip`},
		{q: "apple -banana", want: "appl -banana"},
		{q: `apple -"banana split"`, want: `appl -"banana 1:split"`},
		{q: "apple OR pear banana", want: "appl OR pear banana"},
		{q: "apple | pear", want: "appl OR pear"},
		{q: "apple or pear", want: "appl or pear"}, // lowercase or is a word
		{q: "OR apple OR", want: "appl"},
		{q: "site:Example.COM apple", want: "appl site:example.com"},
		{q: "apple site:https://www.example.com/path -site:bad.example", want: "appl site:www.example.com -site:bad.example"},
		{q: "搜索引擎", want: "搜索引擎"},
		{q: "我们的搜索引擎", want: "我们+的+搜索引擎"},
		{q: "資訊檢索", want: "信息检索"}, // Traditional, read in mainland words
		{q: `"開啟檔案"`, want: `"打开 1:文件"`},
		{q: "檔案 設定", want: "文件 设置"},
		{q: "文件 设置", want: "文件 设置"},
		{q: `"unbalanced phrase`, want: `"unbalanc 1:phrase"`},
		{q: `"single"`, want: "singl"},
		{q: "ｆｕｌｌ　ｗｉｄｔｈ", want: "full width"},
		{q: "C++ AT&T", want: "c++ at&t"},
		{q: "a\x00b\x01c", want: "a b c"},
		{q: "ok\xff\xfeword", want: "ok word"},
		{q: "", wantErr: ErrEmptyQuery},
		{q: "   \t ", wantErr: ErrEmptyQuery},
		{q: "-apple", wantErr: ErrEmptyQuery},
		{q: "OR OR |", wantErr: ErrEmptyQuery},
		{q: "site:example.com", wantErr: ErrEmptyQuery},
		{q: `""`, wantErr: ErrEmptyQuery},
		{q: "，。！", wantErr: ErrEmptyQuery},
		{q: strings.Repeat("a", 10000), wantErr: ErrQueryTooLong},
		{q: strings.Repeat("word ", 40), want: "word"}, // "a a" means "a"
		{q: strings.Repeat("w1 w2 w3 w4 w5 w6 w7 w8 ", 5), want: "w1 w2 w3 w4 w5 w6 w7 w8"},
		{q: strings.Repeat("x OR ", 40) + "y", wantErr: ErrTooManyTerms},
	}
	for _, tc := range tests {
		t.Run(tc.q[:min(len(tc.q), 30)], func(t *testing.T) {
			q, err := ParseQuery(tc.q, a)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			got := q.String()
			if got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			// Re-parsing the raw form gives the same query.
			q2, err := ParseQuery(q.Raw(), a)
			if err != nil || q2.String() != got {
				t.Fatalf("reparse of %q: %v %v", q.Raw(), q2, err)
			}
		})
	}
}

func TestRelaxable(t *testing.T) {
	for q, want := range map[string]bool{
		"inserting envelopes":   true,
		"我们的搜索引擎":               true, // one word the analyzer splits
		"envelopes":             false,
		`"inserting envelopes"`: false,
		"envelopes OR letters":  false,
		"insert -envelopes":     false,
		"insert envelopes -x":   true,
	} {
		pq, err := ParseQuery(q, index.SharedAnalyzer())
		if err != nil {
			t.Fatal(err)
		}
		if got := pq.Relaxable(); got != want {
			t.Errorf("%q: Relaxable() = %v, want %v", q, got, want)
		}
	}
}

func TestQueryTermsAndHosts(t *testing.T) {
	a := index.SharedAnalyzer()
	q, err := ParseQuery(`apple "apple pie" OR banana -cherry site:example.com -site:bad.example.com`, a)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Terms(); !slices.Equal(got, []string{"appl", "pie", "banana"}) {
		t.Errorf("Terms() = %v", got)
	}
	for host, want := range map[string]bool{
		"example.com": true, "www.example.com": true, "example.com:8080": true,
		"bad.example.com": false, "x.bad.example.com": false, "notexample.com": false, "other.org": false,
	} {
		if got := q.MatchHost(host); got != want {
			t.Errorf("MatchHost(%q) = %v", host, got)
		}
	}
}

// FuzzParseQuery: any input gives a query or an error, never a panic, and
// a parsed query is well formed and stable under re-parsing.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"apple banana", `"a b" -c OR d site:x.com`, "搜索引擎 資訊", `"`, "-", "OR", "\xff\x00", "-\"x", "site:", "ｆｕｌｌ", "C++ -site:a.b OR \"e-mail\""} {
		f.Add(s)
	}
	a := index.SharedAnalyzer()
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s, a)
		if err != nil {
			if q != nil {
				t.Fatal("query and error")
			}
			return
		}
		if len(q.Groups) == 0 {
			t.Fatal("query without groups")
		}
		n := 0
		for _, g := range q.Groups {
			if len(g.Clauses) == 0 {
				t.Fatal("empty group")
			}
			for _, c := range g.Clauses {
				if len(c.Terms) == 0 || c.Phrase && len(c.Pos) != len(c.Terms) {
					t.Fatalf("bad clause %+v", c)
				}
				for _, term := range c.Terms {
					if term == "" || !utf8.ValidString(term) {
						t.Fatalf("bad term %q", term)
					}
				}
				n += len(c.Terms)
			}
		}
		if n > MaxQueryTerms {
			t.Fatalf("%d terms", n)
		}
		q2, err := ParseQuery(q.Raw(), a)
		if err != nil || q2.String() != q.String() {
			t.Fatalf("unstable: %q -> %q, %v", q.String(), q2, err)
		}
	})
}
