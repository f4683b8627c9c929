package index

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// formTestDocs are pages whose analysis exercises every part of a form:
// an empty title, headings, a Traditional page (its anchors take the
// page's script) with Taiwan vocabulary, compounds indexed with their
// parts, a URL with words, a page with nothing but its URL.
func formTestDocs(t testing.TB) []*Document {
	syn, err := NewSynthetic(3)
	if err != nil {
		t.Fatal(err)
	}
	trad := doc("http://tw.example/檔案/設定.html", "巨集", "我們的資訊檢索系統：設定檔案與巨集，列印設定。")
	trad.Headings = []string{"資訊檢索", "說明"}
	mixed := doc("http://mixed.example/docs/node.js-guide", "", "e-mail user@example.com at&t 3.14 c++ .net 搜索引擎 索引 搜索引擎")
	mixed.Headings = []string{"", "Guide 指南"}
	bare := doc("http://bare.example/only-url/page", "", "")
	return []*Document{syn.Page(), syn.Page(), trad, mixed, bare}
}

// Replaying a page's form with other anchors gives exactly what analysing
// the page with those anchors gives, and its form again: a replica that
// indexes a page from its form indexes what a Put would.
func TestReplayFormMatchesAnalysis(t *testing.T) {
	ix := &Index{an: SharedAnalyzer()}
	anchorSets := [][]string{
		nil,
		{"首页"},
		{"Home page", "說明文件 檔案", "搜索引擎 guide"},
		{"", "e-mail", "資訊檢索 列印"},
	}
	for di, d := range formTestDocs(t) {
		for ai, before := range anchorSets {
			form := formOf(ix.analyzeDoc(d, before))
			for bi, after := range anchorSets {
				name := fmt.Sprintf("doc %d, anchors %d then %d", di, ai, bi)
				want := ix.analyzeDoc(d, after)
				got, err := ix.replayForm(d, form, after)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if !slices.Equal(got.terms, want.terms) || string(got.enc) != string(want.enc) ||
					!slices.Equal(got.off, want.off) || got.meta != want.meta || got.parts != want.parts {
					t.Fatalf("%s: replayed postings differ from the analysis:\n got terms %q meta %+v\nwant terms %q meta %+v",
						name, got.terms, got.meta, want.terms, want.meta)
				}
				if again, wantForm := formOf(got), formOf(want); !reflect.DeepEqual(again, wantForm) {
					t.Fatalf("%s: the form of a replay differs from the form of the analysis", name)
				}
				if !reflect.DeepEqual(formOf(want), form) {
					t.Fatalf("%s: the form depends on the anchors", name)
				}
				ix.releaseDoc(got)
				ix.releaseDoc(want)
			}
		}
	}
}

func TestReplayFormRejectsCorruptForm(t *testing.T) {
	ix := &Index{an: SharedAnalyzer()}
	d := formTestDocs(t)[0]
	form := formOf(ix.analyzeDoc(d, nil))
	for name, f := range map[string]func(*analysedForm){
		"truncated":    func(f *analysedForm) { f.toks = f.toks[:len(f.toks)-1] },
		"extra bytes":  func(f *analysedForm) { f.toks = append(f.toks, 1, 2) },
		"unknown term": func(f *analysedForm) { f.termEnd = f.termEnd[:1] },
	} {
		bad := *form
		bad.toks, bad.termEnd = slices.Clone(form.toks), slices.Clone(form.termEnd)
		f(&bad)
		if _, err := ix.replayForm(d, &bad, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A form is found only for the docID it was stored with, and the least
// recently used go first past the byte bound.
func TestFormCache(t *testing.T) {
	form := func(n int) *analysedForm { return &analysedForm{toks: make([]byte, n)} }
	c := newFormCache(16 * (1000 + formOverhead + 10))
	c.put("u1", 1, form(1000))
	c.put("u2", 2, form(1000))
	for _, tc := range []struct {
		url  string
		id   uint32
		want bool
	}{
		{"u1", 1, true},
		{"u1", 2, false}, // the page was put again since: another docID
		{"u2", 2, true},
		{"u3", 3, false},
	} {
		if got := c.lookup(tc.url, tc.id) != nil; got != tc.want {
			t.Errorf("lookup(%s, %d) found %v, want %v", tc.url, tc.id, got, tc.want)
		}
	}
	c.put("big", 9, form(2000)) // over a sixteenth of the bound: not kept
	if c.lookup("big", 9) != nil {
		t.Error("a form over a sixteenth of the cache was kept")
	}
	for i := range 20 {
		c.put(fmt.Sprint("p", i), uint32(10+i), form(1000))
	}
	if c.bytes > c.maxBytes {
		t.Errorf("cache holds %d bytes, bound %d", c.bytes, c.maxBytes)
	}
	if c.lookup("u1", 1) != nil || c.lookup("p19", 29) == nil {
		t.Error("eviction is not least recently used first")
	}
	c.drop("p19")
	if c.lookup("p19", 29) != nil {
		t.Error("dropped form still found")
	}
}
