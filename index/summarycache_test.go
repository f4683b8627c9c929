package index

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestSummaryCacheBounded: however many summaries pass through it, the
// cache holds at most two generations' budget, keeps what was asked for
// lately and answers each doc with its own summary.
func TestSummaryCacheBounded(t *testing.T) {
	c := newSummaryCache(64 << 10)
	sum := func(i int) *Summary {
		return &Summary{URL: fmt.Sprintf("http://h%d.test/page-%d.html", i%7, i), Host: fmt.Sprintf("h%d.test", i%7), Title: fmt.Sprintf("page %d", i)}
	}
	for i := range 20000 {
		c.put(uint32(i), sum(i))
		if i%3 == 0 { // a doc asked for again stays
			if s, ok := c.get(0); !ok || s.Title != "page 0" {
				t.Fatalf("after %d puts: doc 0 = %v, %v", i, s, ok)
			}
		}
	}
	held := 0
	for _, gen := range []map[uint32]*Summary{c.cur, c.prev} {
		for id, s := range gen {
			if s.Title != fmt.Sprintf("page %d", id) {
				t.Fatalf("doc %d holds %q", id, s.Title)
			}
			held += summaryBytes(s)
		}
	}
	if held > 64<<10+summaryBytes(sum(19999)) {
		t.Errorf("cache holds %d bytes, budget %d", held, 64<<10)
	}
	if _, ok := c.get(19999); !ok {
		t.Error("the last doc put is not held")
	}
	if _, ok := c.get(1); ok {
		t.Error("an old doc never asked for again is still held")
	}
	c.drop(19999)
	if _, ok := c.get(19999); ok {
		t.Error("a dropped doc is still held")
	}
}

// TestSummaryAfterReplace: a page stored again gets a new docID, whose
// summary is the new one, and the old docID is not served from the cache
// once deleted.
func TestSummaryAfterReplace(t *testing.T) {
	ctx := context.Background()
	ix := openIndex(t, openDB(t, t.TempDir()), 1)
	defer ix.Close()
	doc := &Document{URL: "http://a.test/x", Host: "a.test", Title: "first", Body: "harbour", ContentType: "text/html"}
	if err := ix.Put(ctx, doc); err != nil {
		t.Fatal(err)
	}
	old, err := ix.Get(ctx, doc.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := ix.NewReader()
	if s, err := r.Summary(old.DocID); err != nil || s.Title != "first" {
		t.Fatalf("summary %+v, %v", s, err)
	}
	r.Close()
	doc.Title = "second"
	if err := ix.Put(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cur, err := ix.Get(ctx, doc.URL)
	if err != nil || cur.DocID == old.DocID {
		t.Fatalf("replaced page: %+v, %v", cur, err)
	}
	r = ix.NewReader()
	defer r.Close()
	if s, err := r.Summary(cur.DocID); err != nil || s.Title != "second" {
		t.Fatalf("new doc's summary %+v, %v", s, err)
	}
	if s, err := r.Summary(old.DocID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted doc's summary %+v, %v: want ErrNotFound", s, err)
	}
}
