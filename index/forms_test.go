package index

import (
	"context"
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
// the page with those anchors gives, and its form again: a re-index from
// the form cache indexes what a Put would.
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

// Re-indexing for new anchors writes the same postings whether the page's
// form comes from the cache, is evicted, or there is no cache; with the
// cache, re-indexes use it.
func TestReindexFromFormsWritesSameBytes(t *testing.T) {
	docs := testCorpus(300)
	run := func(formBytes int) ([][2][]byte, Stats, uint64) {
		ctx := context.Background()
		db := openDB(t, t.TempDir())
		defer db.Close()
		opts := DefaultOptions()
		opts.FlushDocs, opts.FlushInterval, opts.FormCacheBytes = 1<<30, 0, formBytes
		ix, err := Open(db, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			if err := ix.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
			// Anchors for pages stored earlier (re-indexed at the next
			// flush) and for one not stored yet.
			links := map[string][]string{
				docs[i/2].URL:              {fmt.Sprintf("link %d 链接", i%7)},
				docs[(i+1)%len(docs)].URL:  {"next page 下一页"},
				docs[i/3].URL + "#unknown": {"x"},
			}
			if err := ix.AddAnchorsBatch(ctx, links); err != nil {
				t.Fatal(err)
			}
			if i%50 == 49 {
				if err := ix.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if i%61 == 60 {
				if err := ix.Delete(ctx, docs[i/4].URL); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		hits, _ := ix.forms.counts()
		return dumpPostings(t, db), ix.Stats(), hits
	}
	want, wantSt, _ := run(0)
	for _, formBytes := range []int{32 << 20, 48 << 10} { // all kept; constant eviction
		got, st, hits := run(formBytes)
		name := fmt.Sprintf("FormCacheBytes %d", formBytes)
		samePostings(t, name, got, want)
		if st.PostingsBytes != wantSt.PostingsBytes || st.Docs != wantSt.Docs {
			t.Errorf("%s: stats %+v, want %+v", name, st, wantSt)
		}
		if hits == 0 {
			t.Errorf("%s: no re-index used a cached form", name)
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
		if got := c.get(tc.url, tc.id) != nil; got != tc.want {
			t.Errorf("get(%s, %d) found %v, want %v", tc.url, tc.id, got, tc.want)
		}
	}
	c.put("big", 9, form(2000)) // over a sixteenth of the bound: not kept
	if c.get("big", 9) != nil {
		t.Error("a form over a sixteenth of the cache was kept")
	}
	for i := range 20 {
		c.put(fmt.Sprint("p", i), uint32(10+i), form(1000))
	}
	if c.bytes > c.maxBytes {
		t.Errorf("cache holds %d bytes, bound %d", c.bytes, c.maxBytes)
	}
	if c.get("u1", 1) != nil || c.get("p19", 29) == nil {
		t.Error("eviction is not least recently used first")
	}
	c.drop("p19")
	if c.get("p19", 29) != nil {
		t.Error("dropped form still found")
	}
	if hits, misses := c.counts(); hits != 3 || misses != 5 {
		t.Errorf("counts %d hits, %d misses; want 3, 5", hits, misses)
	}
}
