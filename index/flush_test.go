package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	cacheBytes int
	memtable   int64
	deleteEach int // delete every deleteEach-th doc after putting it (0 = none)
}

func runCorpus(t *testing.T, docs []*Document, cr corpusRun) ([][2][]byte, Stats) {
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
	defer db.Close()
	opts := DefaultOptions()
	// Flushes only where the test calls Flush: a background flush at
	// another instant relative to the deletes would change the bytes.
	opts.FlushDocs, opts.FlushInterval, opts.TailCacheBytes = 1<<30, 0, cr.cacheBytes
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
	return dumpPostings(t, db), ix.Stats()
}

// The tail cache, the transaction size and parallel encoding change how a
// flush works, never what it writes.
func TestFlushWritesSameBytes(t *testing.T) {
	runsWriteSame(t, testCorpus(700), corpusRun{flushDocs: 97, cacheBytes: -1, deleteEach: 9}, []corpusRun{
		{flushDocs: 97, cacheBytes: 0, deleteEach: 9},
		{flushDocs: 97, cacheBytes: 2 << 10, deleteEach: 9}, // constant eviction
		{flushDocs: 97, cacheBytes: 0, deleteEach: 9, memtable: 1 << 20},
	})
}

// runsWriteSame checks that every run of docs writes the postings and
// statistics the reference run writes.
func runsWriteSame(t *testing.T, docs []*Document, ref corpusRun, runs []corpusRun) {
	t.Helper()
	want, wantSt := runCorpus(t, docs, ref)
	for _, cr := range runs {
		name := fmt.Sprintf("%+v", cr)
		got, st := runCorpus(t, docs, cr)
		samePostings(t, name, got, want)
		if st.Terms != wantSt.Terms || st.PostingsBytes != wantSt.PostingsBytes || st.Docs != wantSt.Docs {
			t.Errorf("%s: stats %+v, want %+v", name, st, wantSt)
		}
	}
}

// Flushes that append to terms' tails write the bytes one flush of all
// the pages writes: without deletions, a list's blocks do not depend on
// how its docs were batched, whether the new docs were spliced into a
// tail as bytes or the tail was decoded and encoded again.
func TestFlushBatchingWritesSameBytes(t *testing.T) {
	docs := testCorpus(700)
	runsWriteSame(t, docs, corpusRun{flushDocs: len(docs), cacheBytes: -1}, []corpusRun{
		{flushDocs: 97, cacheBytes: -1},
		{flushDocs: 13, cacheBytes: 0},
		{flushDocs: 1, cacheBytes: 2 << 10},
	})
}

// appendToBlock writes what encodeBlock writes for the whole list, and
// declines a block holding a doc to drop.
func TestAppendToBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		var p postingList
		doc := uint32(rng.IntN(1000))
		n := 2 + rng.IntN(BlockSize-1)
		for range n {
			doc += 1 + uint32(rng.IntN(rng.IntN(5000)+1))
			var tf [NumFields]uint32
			var pos []uint32
			at := uint32(0)
			for f := range NumFields {
				if rng.IntN(3) == 0 || f == FieldBody {
					tf[f] = 1 + uint32(rng.IntN(4))
					for range tf[f] {
						at += 1 + uint32(rng.IntN(300))
						pos = append(pos, at)
					}
				}
			}
			p.add(doc, tf, pos)
		}
		k := 1 + rng.IntN(n-1) // the block holds p[:k], p[k:] are new
		bounds := func(lo, hi int) BlockHeader {
			var h BlockHeader
			for i := lo; i < hi; i++ {
				mergeBounds(&h.MaxTF, &h.MinLen, p.tfs[i], [NumFields]uint32{3, 5, 7, 11, 13})
			}
			return h
		}
		prior := BlockHeader{CumMaxTF: [NumFields]uint32{9}, CumMinLen: [NumFields]uint32{2}}
		h0 := bounds(0, k)
		h0.CumMaxTF, h0.CumMinLen = prior.CumMaxTF, prior.CumMinLen
		mergeBounds(&h0.CumMaxTF, &h0.CumMinLen, h0.MaxTF, h0.MinLen)
		h0.CumDF = 40 + uint32(k)
		old := encodeBlock(nil, &h0, &p, 0, k)

		h := bounds(0, n)
		h.CumMaxTF, h.CumMinLen = prior.CumMaxTF, prior.CumMinLen
		mergeBounds(&h.CumMaxTF, &h.CumMinLen, h.MaxTF, h.MinLen)
		h.CumDF = 40 + uint32(n)
		want := encodeBlock(nil, &h, &p, 0, n)
		got, _, ok, err := appendToBlock(nil, old, &h, &p, k, n, func(uint32) bool { return false }, nil)
		if err != nil || !ok || !bytes.Equal(got, want) {
			t.Fatalf("trial %d: appended block differs (ok %v, err %v)", trial, ok, err)
		}
		victim := p.docs[rng.IntN(k)]
		if got, _, ok, err := appendToBlock(nil, old, &h, &p, k, n, func(d uint32) bool { return d == victim }, nil); ok || err != nil || len(got) != 0 {
			t.Fatalf("trial %d: a block with a doc to drop was appended to (ok %v, err %v)", trial, ok, err)
		}
	}
	// A corrupt block is an error, not a block.
	var p postingList
	p.add(5, [NumFields]uint32{0, 0, 1}, []uint32{1})
	p.add(9, [NumFields]uint32{0, 0, 1}, []uint32{2})
	h := BlockHeader{CumDF: 1}
	blk := encodeBlock(nil, &h, &p, 0, 1)
	for _, bad := range [][]byte{blk[:2], append([]byte{}, blk[:len(blk)-3]...)} {
		if _, _, ok, err := appendToBlock(nil, bad, &h, &p, 1, 2, nil, nil); ok || err == nil {
			t.Fatalf("corrupt block %x: ok %v, err %v", bad, ok, err)
		}
	}
}

// A flush that fails after some of its postings transactions committed,
// then a crash: the restarted index re-flushes the batch without losing or
// doubling a posting, and its statistics are exact.
func TestFlushCrashBetweenTransactions(t *testing.T) {
	ctx := context.Background()
	docs := testCorpus(300)
	want, wantSt := runCorpus(t, docs, corpusRun{flushDocs: 150, cacheBytes: 0, memtable: 1 << 20})
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
		samePostings(t, fmt.Sprintf("crash=%v", killed), dumpPostings(t, db), want)
		if st := ix.Stats(); st.Terms != wantSt.Terms || st.PostingsBytes != wantSt.PostingsBytes || st.Docs != wantSt.Docs || st.FieldLenSum != wantSt.FieldLenSum {
			t.Errorf("crash=%v: stats %+v, want %+v", killed, st, wantSt)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTailCacheEvictsByBytes(t *testing.T) {
	c := newTailCache(4 << 10)
	for i := range 200 {
		c.put(fmt.Sprintf("term%03d", i), make([]byte, 100))
	}
	if c.bytes > 4<<10 {
		t.Fatalf("cache holds %d bytes, bound 4096", c.bytes)
	}
	if _, ok := c.get("term199"); !ok {
		t.Error("most recent entry evicted")
	}
	if _, ok := c.get("term000"); ok {
		t.Error("oldest entry kept")
	}
	n := 0
	for e := c.head.next; e != &c.head; e = e.next {
		n++
	}
	if n != len(c.m) {
		t.Fatalf("list %d entries, map %d", n, len(c.m))
	}
	c.reset()
	if _, ok := c.get("term199"); ok || c.bytes != 0 {
		t.Error("reset kept entries")
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
	if st := ix.Stats(); st.Docs != wantSt.Docs || st.Terms != wantSt.Terms || st.FieldLenSum != wantSt.FieldLenSum {
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

func TestReindexDue(t *testing.T) {
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
		{"minimum budget", t0.Add(999 * time.Second), false, 10, reindexMin, "http://h/0000"},
		{"budget is a share of new pages", t0.Add(999 * time.Second), false, 1200, 600, "http://h/0000"},
		{"quiet flush takes all", t0.Add(-time.Hour), true, 0, 1000, "http://h/0000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reindexDue(waiting, tc.due, tc.all, tc.puts)
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
