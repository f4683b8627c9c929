package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
)

// formWireDocs are the form tests' pages and, when the real corpus is
// installed, 200 pages each of LibreOffice's Chinese help and the Chinese
// manual pages (real segmentation, compounds, both scripts).
func formWireDocs(t *testing.T) []*Document {
	docs := append(formTestDocs(t), testCorpus(20)...)
	for _, pattern := range []string{
		"/usr/share/libreoffice/help/zh-CN/text/shared/01/*.html",
		"/usr/share/libreoffice/help/zh-TW/text/shared/01/*.html",
		"/var/lib/sou-corpus/manpages-zh/zh_CN/man1/*.html",
		"/var/lib/sou-corpus/manpages-zh/zh_TW/man1/*.html",
	} {
		t.Run("corpus", func(t *testing.T) { docs = append(docs, corpusPages(t, pattern, 200)...) })
	}
	return docs
}

// Every form an analysis makes survives its encoding, and its checks:
// honest forms are never refused.
func TestFormWireRoundTrip(t *testing.T) {
	ix := &Index{an: SharedAnalyzer()}
	av := ix.an.Version()
	for i, d := range formWireDocs(t) {
		for _, anchors := range [][]string{nil, {"首页", "Home page"}} {
			dp := ix.analyzeDoc(d, anchors)
			form := formOf(dp)
			ix.releaseDoc(dp)
			got, err := decodeForm(appendForm(nil, form, av), av)
			if err != nil {
				t.Fatalf("doc %d (%s): %v", i, d.URL, err)
			}
			if !reflect.DeepEqual(got, form) {
				t.Fatalf("doc %d (%s): decoded form differs", i, d.URL)
			}
		}
	}
}

// A replica that indexes pages from their owner's forms writes the
// postings it would write by analysing them, with anchors it received
// before and after the pages; the forms are replayed, not analysed.
func TestPutAnalysedBatchWritesSameBytes(t *testing.T) {
	ctx := context.Background()
	docs := append(formTestDocs(t), testCorpus(200)...)
	open := func(formBytes int) (*Index, func() [][2][]byte) {
		db := openDB(t, t.TempDir())
		t.Cleanup(func() { db.Close() })
		opts := DefaultOptions()
		opts.FlushDocs, opts.FlushInterval, opts.FormCacheBytes = 1<<30, 0, formBytes
		ix, err := Open(db, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ix, func() [][2][]byte {
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			return dumpPostings(t, db)
		}
	}
	owner, _ := open(32 << 20)
	if err := owner.PutBatch(ctx, docs); err != nil {
		t.Fatal(err)
	}
	forms := formsAt(t, owner, docs)
	for i, d := range docs {
		if forms[i] == nil {
			t.Fatalf("owner has no form for %s", d.URL)
		}
	}
	anchorsBefore := map[string][]string{docs[0].URL: {"首页"}, docs[3].URL: {"資訊檢索 guide"}, docs[10].URL: {"ten"}}
	anchorsAfter := map[string][]string{docs[1].URL: {"next 下一页"}, docs[10].URL: {"again"}}
	fill := func(ix *Index, forms [][]byte) {
		if err := ix.AddAnchorsBatch(ctx, anchorsBefore); err != nil {
			t.Fatal(err)
		}
		if err := ix.PutAnalysedBatch(ctx, docs, forms); err != nil {
			t.Fatal(err)
		}
		if err := ix.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ix.AddAnchorsBatch(ctx, anchorsAfter); err != nil {
			t.Fatal(err)
		}
	}
	analysed, closeAnalysed := open(0)
	fill(analysed, nil)
	want := closeAnalysed()
	for _, formBytes := range []int{0, 32 << 20} {
		replica, closeReplica := open(formBytes)
		fill(replica, forms)
		st := replica.Stats()
		samePostings(t, fmt.Sprintf("replica, form cache %d", formBytes), closeReplica(), want)
		if st.FormsReplayed != uint64(len(docs)) || st.FormsRefused != 0 {
			t.Errorf("form cache %d: %d forms replayed, %d refused; want %d, 0", formBytes, st.FormsReplayed, st.FormsRefused, len(docs))
		}
	}
}

// handForm encodes a form of the given title and rest tokens (term index,
// position) by hand, for forms no analysis makes.
func handForm(av string, script byte, titleSpan int, terms []string, title, rest [][2]int, bounds ...int) []byte {
	b := []byte{formWireVersion}
	b = binary.AppendUvarint(b, uint64(len(av)))
	b = append(b, av...)
	b = append(b, script)
	n := len(title) + len(rest)
	if bounds == nil {
		bounds = []int{len(title), len(title), len(title), n}
	}
	b = binary.AppendUvarint(b, uint64(titleSpan))
	for _, v := range bounds {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	}
	var toks []byte
	for _, part := range [][][2]int{title, rest} {
		prev := 0
		for _, tok := range part {
			toks = binary.AppendUvarint(toks, uint64(tok[0]))
			toks = binary.AppendUvarint(toks, uint64(uint32(tok[1]-prev)))
			prev = tok[1]
		}
	}
	b = binary.AppendUvarint(b, uint64(len(toks)))
	return append(b, toks...)
}

// Received forms are hostile: every malformed one is refused before it is
// trusted, and the page is then indexed by analysing it, as if no form had
// come.
func TestReceivedFormAttacks(t *testing.T) {
	ix := &Index{an: SharedAnalyzer(), log: slog.New(slog.DiscardHandler)}
	av := ix.an.Version()
	d := formTestDocs(t)[2]
	dp := ix.analyzeDoc(d, nil)
	honest := appendForm(nil, formOf(dp), av)
	ix.releaseDoc(dp)
	terms := []string{"one", "two"}
	ok := handForm(av, 0, 10, terms, [][2]int{{0, 0}, {1, 1}}, [][2]int{{0, 0}, {1, 3}})
	if _, err := decodeForm(ok, av); err != nil {
		t.Fatalf("the hand-made form is refused: %v", err)
	}
	long := string(bytes.Repeat([]byte("x"), maxTokenBytes+1))
	attacks := map[string][]byte{
		"empty":                        {},
		"encoding version":             append([]byte{formWireVersion + 1}, honest[1:]...),
		"another analyzer":             appendForm(nil, formOf(ix.analyzeDoc(d, nil)), av+"x"),
		"trailing byte":                append(bytes.Clone(honest), 0),
		"script":                       handForm(av, 7, 10, terms, [][2]int{{0, 0}}, nil),
		"boundaries out of order":      handForm(av, 0, 10, terms, [][2]int{{0, 0}}, [][2]int{{1, 0}}, 1, 2, 1, 2),
		"more tokens than bytes":       handForm(av, 0, 10, terms, [][2]int{{0, 0}}, nil, 1, 1, 1, 1000),
		"term out of the table":        handForm(av, 0, 10, terms, [][2]int{{2, 0}}, nil),
		"term too long":                handForm(av, 0, 10, []string{long}, [][2]int{{0, 0}}, nil),
		"empty term":                   handForm(av, 0, 10, []string{""}, [][2]int{{0, 0}}, nil),
		"invalid UTF-8 term":           handForm(av, 0, 10, []string{"\xff\xfe"}, [][2]int{{0, 0}}, nil),
		"title past its span":          handForm(av, 0, 2, terms, [][2]int{{0, 0}, {1, 5}}, nil),
		"a term goes back":             handForm(av, 0, 10, terms, nil, [][2]int{{0, 5}, {1, 6}, {0, 4}}),
		"a term twice at one position": handForm(av, 0, 10, terms, nil, [][2]int{{0, 5}, {0, 5}}),
		"position past the bound":      handForm(av, 0, 10, terms, nil, [][2]int{{0, maxFormPosition}}),
		"term count over tokens":       handForm(av, 0, 10, []string{"a", "b", "c"}, [][2]int{{0, 0}}, nil),
	}
	for i := 1; i < len(honest); i += max(1, len(honest)/50) {
		attacks[fmt.Sprintf("cut at %d of %d bytes", i, len(honest))] = honest[:i]
	}
	want := ix.analyzeDoc(d, []string{"anchor"})
	defer ix.releaseDoc(want)
	for name, b := range attacks {
		f, err := decodeForm(b, av)
		if err == nil {
			t.Errorf("%s: accepted: %+v", name, f)
			continue
		}
		if name == "encoding version" || name == "another analyzer" {
			if !errors.Is(err, errFormVersion) {
				t.Errorf("%s: %v, want errFormVersion", name, err)
			}
		} else if !errors.Is(err, errCorrupt) {
			t.Errorf("%s: %v, want errCorrupt", name, err)
		}
		got, form := ix.replayReceived(d, b, []string{"anchor"})
		if got != nil || form != nil {
			t.Errorf("%s: replayed", name)
		}
	}
	if n := ix.formsRefused.Load(); n != uint64(len(attacks)) {
		t.Errorf("%d forms counted refused, want %d", n, len(attacks))
	}
}

// A form that decodes replays, and encodes to a form that decodes to it.
func FuzzDecodeForm(f *testing.F) {
	ix := &Index{an: SharedAnalyzer(), log: slog.New(slog.DiscardHandler)}
	av := ix.an.Version()
	for _, d := range formTestDocs(f)[2:] { // the short pages: the fuzzer slows down on long inputs
		dp := ix.analyzeDoc(d, nil)
		f.Add(appendForm(nil, formOf(dp), av))
		ix.releaseDoc(dp)
	}
	f.Add(handForm(av, 0, 10, []string{"one", "two"}, [][2]int{{0, 0}, {1, 1}}, [][2]int{{0, 0}, {1, 3}}))
	d := doc("http://fuzz.example/page", "title", "body")
	f.Fuzz(func(t *testing.T, b []byte) {
		form, err := decodeForm(b, av)
		if err != nil {
			return
		}
		dp, err := ix.replayForm(d, form, []string{"anchor text"})
		if err != nil {
			t.Fatalf("a form that decodes does not replay: %v", err)
		}
		ix.releaseDoc(dp)
		again, err := decodeForm(appendForm(nil, form, av), av)
		if err != nil || !reflect.DeepEqual(again, form) {
			t.Fatalf("re-encoded form: %v", err)
		}
	})
}
