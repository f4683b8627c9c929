package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// dumpPostings returns every postings key and value, in key order.
func dumpPostings(t *testing.T, db *badger.DB) [][2][]byte {
	t.Helper()
	var out [][2][]byte
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixPostings)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out = append(out, [2][]byte{it.Item().KeyCopy(nil), v})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func samePostings(t *testing.T, name string, got, want [][2][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d postings keys, want %d", name, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i][0], want[i][0]) || !bytes.Equal(got[i][1], want[i][1]) {
			t.Fatalf("%s: postings entry %d differs: key %q vs %q", name, i, got[i][0], want[i][0])
		}
	}
}

// testCorpus is deterministic pages with a few very frequent terms (so
// lists span many blocks and flushes merge partial tails), many rare ones,
// and one term repeated many times per page (its postings of one flush
// exceed a small Badger transaction and are written in chunks).
func testCorpus(n int) []*Document {
	rng := rand.New(rand.NewPCG(7, 8))
	docs := make([]*Document, n)
	for i := range docs {
		var b strings.Builder
		for range 60 {
			fmt.Fprintf(&b, "w%d ", rng.IntN(3000))
		}
		for range 40 {
			b.WriteString("heavy ")
		}
		if i%2 == 0 {
			b.WriteString("even 搜索引擎 ")
		}
		docs[i] = doc(fmt.Sprintf("http://c%d.example/p%d", i%5, i), fmt.Sprintf("title %d", i%17), b.String())
	}
	return docs
}

type corpusRun struct {
	flushDocs  int
	memtable   int64
	deleteEach int // delete every deleteEach-th doc after putting it (0 = none)
}

func runCorpus(t *testing.T, docs []*Document, cr corpusRun) ([][2][]byte, Stats) {
	t.Helper()
	entries, st, db := runCorpusDB(t, docs, cr)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return entries, st
}

// runCorpusDB puts docs, flushing every cr.flushDocs, closes the index
// and returns its postings entries and statistics and the open DB.
func runCorpusDB(t *testing.T, docs []*Document, cr corpusRun) ([][2][]byte, Stats, *badger.DB) {
	t.Helper()
	ctx := context.Background()
	bopts := badger.DefaultOptions(t.TempDir()).WithLogger(nil)
	if cr.memtable > 0 {
		bopts = bopts.WithMemTableSize(cr.memtable).WithValueThreshold(1 << 10)
	}
	db, err := badger.Open(bopts)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	// Flushes only where the test calls Flush: a background flush at
	// another instant relative to the deletes would change the lists.
	opts.FlushDocs, opts.FlushInterval = 1<<30, 0
	ix, err := Open(db, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		if err := ix.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
		if cr.deleteEach > 0 && i%cr.deleteEach == cr.deleteEach-1 {
			if err := ix.Delete(ctx, docs[i/2].URL); err != nil {
				t.Fatal(err)
			}
		}
		if (i+1)%cr.flushDocs == 0 {
			if err := ix.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	return dumpPostings(t, db), ix.Stats(), db
}

// termList is a term's postings as read back from its blocks.
type termList struct {
	docs      []uint32
	tfs       [][NumFields]uint32
	positions [][]uint32
	appended  int // blocks under appendKey
}

// readLists decodes every term's list from the postings entries, checking
// the layout flush.go promises: full blocks of exactly BlockSize docs
// under blockKey, then appended blocks of fewer under appendKey, keys
// naming their blocks' last docs, docs ascending across blocks, and
// block bounds that are their docs' largest TFs. It returns the lists of
// the docs live says are live, and the bytes of all entries.
func readLists(t *testing.T, entries [][2][]byte, live func(uint32) bool) (map[string]*termList, int64) {
	t.Helper()
	lists := map[string]*termList{}
	var size int64
	var term string
	var prev uint32
	for _, e := range entries {
		k, v := e[0], e[1]
		size += int64(len(k) + len(v))
		rest := k[len(prefixPostings):]
		sep := bytes.IndexByte(rest, 0)
		if sep < 0 {
			t.Fatalf("postings key %q without a term", k)
		}
		tm := string(rest[:sep])
		last, appended, ok := parseBlockKey(k, len(prefixPostings)+sep+1)
		if !ok {
			t.Fatalf("postings key %q of neither form", k)
		}
		l := lists[tm]
		if l == nil {
			l = &termList{}
			lists[tm] = l
		}
		var d decodedBlock
		if err := decodeBlock(v, &d); err != nil {
			t.Fatalf("term %q block %d: %v", tm, last, err)
		}
		switch {
		case d.hdr.LastDoc != last:
			t.Fatalf("term %q: block ending at doc %d under key %d", tm, d.hdr.LastDoc, last)
		case appended && d.hdr.N >= BlockSize, !appended && d.hdr.N != BlockSize:
			t.Fatalf("term %q: block of %d docs, appended %v", tm, d.hdr.N, appended)
		case !appended && l.appended > 0:
			t.Fatalf("term %q: full block after an appended one", tm)
		case tm == term && d.docs[0] <= prev:
			t.Fatalf("term %q: block starting at doc %d after doc %d", tm, d.docs[0], prev)
		}
		var maxTF [NumFields]uint32
		for i, doc := range d.docs {
			for f := range NumFields {
				maxTF[f] = max(maxTF[f], d.tfs[i][f])
			}
			pos, err := d.positions(i, nil)
			if err != nil {
				t.Fatalf("term %q doc %d: %v", tm, doc, err)
			}
			if live(doc) {
				l.docs = append(l.docs, doc)
				l.tfs = append(l.tfs, d.tfs[i])
				l.positions = append(l.positions, pos)
			}
		}
		if maxTF != d.hdr.MaxTF {
			t.Fatalf("term %q block %d: bound %v, docs' largest TFs %v", tm, last, d.hdr.MaxTF, maxTF)
		}
		if appended {
			l.appended++
		}
		term, prev = tm, last
	}
	return lists, size
}

// sameLists checks that two runs hold the same postings for every term.
func sameLists(t *testing.T, name string, got, want map[string]*termList) {
	t.Helper()
	for tm, w := range want {
		if len(w.docs) == 0 {
			continue
		}
		g := got[tm]
		if g == nil {
			t.Fatalf("%s: term %q missing", name, tm)
		}
		if !slices.Equal(g.docs, w.docs) || !slices.Equal(g.tfs, w.tfs) {
			t.Fatalf("%s: term %q: docs %v tfs %v, want %v %v", name, tm, g.docs, g.tfs, w.docs, w.tfs)
		}
		for i := range g.positions {
			if !slices.Equal(g.positions[i], w.positions[i]) {
				t.Fatalf("%s: term %q doc %d: positions %v, want %v", name, tm, g.docs[i], g.positions[i], w.positions[i])
			}
		}
	}
	for tm, g := range got {
		if len(g.docs) > 0 && (want[tm] == nil || len(want[tm].docs) == 0) {
			t.Fatalf("%s: unexpected term %q", name, tm)
		}
	}
}

// liveDocs reads which docs have an i:l: key (flushed and not deleted).
func liveDocs(t *testing.T, db *badger.DB) func(uint32) bool {
	t.Helper()
	live := map[uint32]bool{}
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixLens)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			live[binary.BigEndian.Uint32(k[len(prefixLens):])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(id uint32) bool { return live[id] }
}

// checkRun reads a run's lists, checking the layout and that the
// statistics count the bytes on disk.
func checkRun(t *testing.T, name string, db *badger.DB, entries [][2][]byte, st Stats) map[string]*termList {
	t.Helper()
	lists, size := readLists(t, entries, liveDocs(t, db))
	if size != st.PostingsBytes {
		t.Fatalf("%s: %d bytes of postings on disk, statistics say %d", name, size, st.PostingsBytes)
	}
	return lists
}

// How a flush is cut into transactions, and how pages are batched into
// flushes, change the blocks a flush writes, never the postings a list
// holds of its live docs.
func TestFlushWritesSamePostings(t *testing.T) {
	docs := testCorpus(700)
	for _, tc := range []struct {
		name string
		ref  corpusRun
		runs []corpusRun
	}{
		{"deletes", corpusRun{flushDocs: 97, deleteEach: 9}, []corpusRun{
			{flushDocs: 97, deleteEach: 9, memtable: 1 << 20}, // small transactions
			{flushDocs: 13, deleteEach: 9},
			{flushDocs: 1, deleteEach: 9},
		}},
		{"batching", corpusRun{flushDocs: len(docs)}, []corpusRun{
			{flushDocs: 97},
			{flushDocs: 13, memtable: 1 << 20},
			{flushDocs: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := runCorpusLists(t, docs, tc.ref)
			for _, cr := range tc.runs {
				sameLists(t, fmt.Sprintf("%+v", cr), runCorpusLists(t, docs, cr), want)
			}
		})
	}
}

// A term's appended blocks are merged often enough that a list ends in
// at most mergeEvery of them when the term is in every flush, and in one
// after a flush that fills a block.
func TestFlushMergesAppendedBlocks(t *testing.T) {
	for _, tc := range []struct {
		docs, flushDocs int
		most            int // appended blocks of a term in every doc
	}{
		{200, 1, mergeEvery},
		{260, 130, 1},
	} {
		docs := testCorpus(tc.docs)
		lists := runCorpusLists(t, docs, corpusRun{flushDocs: tc.flushDocs})
		everywhere := 0
		for tm, l := range lists {
			if len(l.docs) != len(docs) {
				continue
			}
			everywhere++
			if l.appended == 0 || l.appended > tc.most {
				t.Errorf("%d docs flushed %d at a time: term %q in every doc ends in %d appended blocks, want 1 to %d", tc.docs, tc.flushDocs, tm, l.appended, tc.most)
			}
		}
		if everywhere < 2 {
			t.Fatalf("%d terms in every doc", everywhere)
		}
	}
}

func runCorpusLists(t *testing.T, docs []*Document, cr corpusRun) map[string]*termList {
	t.Helper()
	entries, st, db := runCorpusDB(t, docs, cr)
	defer db.Close()
	return checkRun(t, fmt.Sprintf("%+v", cr), db, entries, st)
}

// A flush that fails after some of its postings transactions committed,
// then a crash: the restarted index re-flushes the batch without losing or
// doubling a posting, and its statistics are exact.
func TestFlushCrashBetweenTransactions(t *testing.T) {
	ctx := context.Background()
	docs := testCorpus(300)
	want := runCorpusLists(t, docs, corpusRun{flushDocs: 150, memtable: 1 << 20})
	_, wantSt := runCorpus(t, docs, corpusRun{flushDocs: 150, memtable: 1 << 20})
	for _, killed := range []bool{false, true} {
		dir := t.TempDir()
		open := func() *badger.DB {
			db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(1 << 20).WithValueThreshold(1 << 10))
			if err != nil {
				t.Fatal(err)
			}
			return db
		}
		db := open()
		ix := openIndex(t, db, 1<<30) // no background flush: the test decides
		for _, d := range docs[:150] {
			if err := ix.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		if err := ix.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, d := range docs[150:] {
			if err := ix.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		errDisk := errors.New("disk on fire")
		ix.commitHook = func(n int) error {
			if n >= 2 {
				return errDisk
			}
			return nil
		}
		if err := ix.Flush(ctx); !errors.Is(err, errDisk) {
			t.Fatalf("flush: %v, want the injected error", err)
		}
		ix.commitHook = nil
		if st := ix.Stats(); st.Pending != 150 || st.Docs != 150 {
			t.Fatalf("after failed flush: %+v", st)
		}
		if killed {
			crash(t, ix, db)
			db = open()
			ix = openIndex(t, db, 1<<30)
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("crash=%v", killed)
		st := ix.Stats()
		sameLists(t, name, checkRun(t, name, db, dumpPostings(t, db), st), want)
		if st.Docs != wantSt.Docs || st.FieldLenSum != wantSt.FieldLenSum {
			t.Errorf("%s: stats %+v, want %+v", name, st, wantSt)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// PutBatch stores exactly what the same Puts in order would.
func TestPutBatchMatchesPuts(t *testing.T) {
	ctx := context.Background()
	docs := testCorpus(300)
	docs = append(docs, docs[5], docs[17]) // replacements inside a batch
	want, wantSt := runCorpus(t, docs, corpusRun{flushDocs: 1 << 30})
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 1<<30)
	if err := ix.PutBatch(ctx, docs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := ix.PutBatch(ctx, docs[1:]); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	samePostings(t, "PutBatch", dumpPostings(t, db), want)
	if st := ix.Stats(); st.Docs != wantSt.Docs || st.PostingsBytes != wantSt.PostingsBytes || st.FieldLenSum != wantSt.FieldLenSum {
		t.Errorf("stats %+v, want %+v", st, wantSt)
	}
	bad := []*Document{docs[0], {URL: ""}, docs[1]}
	ix2 := openIndex(t, db, 1<<30)
	defer ix2.Close()
	if err := ix2.PutBatch(ctx, bad); err == nil {
		t.Error("PutBatch accepted a document without URL")
	}
}

func TestNextFlushWait(t *testing.T) {
	for _, tc := range []struct {
		interval, took, want time.Duration
	}{
		{time.Second, 0, time.Second},
		{time.Second, 100 * time.Millisecond, time.Second},
		{time.Second, 250 * time.Millisecond, time.Second},
		{time.Second, 500 * time.Millisecond, 2 * time.Second},
		{3 * time.Second, time.Second, 4 * time.Second},
		{time.Second, time.Minute, 10 * time.Second},
	} {
		if got := nextFlushWait(tc.interval, tc.took); got != tc.want {
			t.Errorf("nextFlushWait(%v, %v) = %v, want %v", tc.interval, tc.took, got, tc.want)
		}
	}
}

func TestAnchorUpdatesDue(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	waiting := map[string]time.Time{}
	for i := range 1000 {
		waiting[fmt.Sprintf("http://h/%04d", i)] = t0.Add(time.Duration(i) * time.Second)
	}
	for _, tc := range []struct {
		name      string
		due       time.Time
		all       bool
		puts      int
		wantN     int
		wantFirst string
	}{
		{"nothing due", t0.Add(-time.Second), false, 10, 0, ""},
		{"due within budget", t0.Add(99 * time.Second), false, 1000, 100, "http://h/0000"},
		{"minimum budget", t0.Add(999 * time.Second), false, 10, anchorUpdateMin, "http://h/0000"},
		{"budget is a share of new pages", t0.Add(999 * time.Second), false, 1200, 600, "http://h/0000"},
		{"quiet flush takes all", t0.Add(-time.Hour), true, 0, 1000, "http://h/0000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := anchorUpdatesDue(waiting, tc.due, tc.all, tc.puts)
			if len(got) != tc.wantN {
				t.Fatalf("%d pages picked, want %d", len(got), tc.wantN)
			}
			if tc.wantN > 0 && got[0] != tc.wantFirst {
				t.Errorf("first %s, want %s", got[0], tc.wantFirst)
			}
			for i := 1; i < len(got); i++ {
				if waiting[got[i]].Before(waiting[got[i-1]]) {
					t.Fatalf("not oldest first at %d", i)
				}
			}
		})
	}
}
