package index

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func storedAnalyzerVersion(t *testing.T, db *badger.DB) string {
	t.Helper()
	var v []byte
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyAnalyzer))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// An index built by another analyzer (here the one before script
// folding, which indexed Traditional Chinese as written) is re-indexed by
// Open: the old terms are gone, the new ones find every page, the
// statistics count each page once, and the next Open does not do it again.
func TestOpenReindexesOtherAnalyzerVersion(t *testing.T) {
	for _, flushDocs := range []int{1000, 2} { // the re-analysis in one batch, and in several
		t.Run(itoa(flushDocs), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			db := openDB(t, dir)
			defer db.Close()
			old := SharedAnalyzer().WithoutScriptFolding()
			opts := DefaultOptions()
			opts.FlushDocs, opts.FlushInterval, opts.Analyzer = flushDocs, 0, old
			ix, err := Open(db, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			docs := []*Document{
				doc("http://tw.test/1", "開啟檔案", "請開啟檔案並變更設定。"),
				doc("http://cn.test/1", "打开文件", "请打开文件并修改设置。"),
				doc("http://en.test/1", "open a file", "open the file and change the settings"),
				doc("http://en.test/2", "gone", "a page deleted before the re-index"),
				doc("http://tw.test/2", "巨集", "執行巨集。"),
			}
			for _, d := range docs {
				if err := ix.Put(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			if err := ix.Delete(ctx, "http://en.test/2"); err != nil {
				t.Fatal(err)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			if got := storedAnalyzerVersion(t, db); got != storedVersion(old) {
				t.Fatalf("stored version %q, want %q", got, storedVersion(old))
			}

			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			opts.Analyzer = nil
			ix, err = Open(db, opts, log)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "re-indexing every stored page") {
				t.Errorf("no re-index logged: %s", logs.String())
			}
			if got, want := storedAnalyzerVersion(t, db), storedVersion(SharedAnalyzer()); got != want {
				t.Errorf("stored version %q, want %q", got, want)
			}
			for _, tc := range []struct {
				term string
				want []string
			}{
				{"檔案", nil}, // the old analyzer's term
				{"文件", []string{"http://cn.test/1", "http://tw.test/1"}},
				{"设置", []string{"http://cn.test/1", "http://tw.test/1"}},
				{"宏", []string{"http://tw.test/2"}},
				{"file", []string{"http://en.test/1"}},
				{"gone", nil},
			} {
				if got := termDocs(t, ix, tc.term); !slices.Equal(got, tc.want) {
					t.Errorf("%q: got %v, want %v", tc.term, got, tc.want)
				}
			}
			st := ix.Stats()
			if st.Docs != 4 || st.Pending != 0 {
				t.Errorf("stats after re-index: %+v", st)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}

			logs.Reset()
			ix, err = Open(db, opts, log)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			if strings.Contains(logs.String(), "re-indexing") {
				t.Errorf("re-indexed again: %s", logs.String())
			}
			if got := ix.Stats(); got.Docs != st.Docs || got.PostingsBytes != st.PostingsBytes {
				t.Errorf("stats changed by a plain reopen: %+v, then %+v", st, got)
			}
		})
	}
}

// A new index records its analyzer's version; an empty index of another
// version just takes the new one.
func TestOpenRecordsAnalyzerVersion(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	opts := DefaultOptions()
	opts.Analyzer = SharedAnalyzer().WithoutScriptFolding()
	ix, err := Open(db, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storedAnalyzerVersion(t, db); got != storedVersion(opts.Analyzer) {
		t.Fatalf("stored %q, want %q", got, storedVersion(opts.Analyzer))
	}
	ix = openIndex(t, db, 100)
	defer ix.Close()
	if got := storedAnalyzerVersion(t, db); got != storedVersion(SharedAnalyzer()) {
		t.Fatalf("stored %q, want %q", got, storedVersion(SharedAnalyzer()))
	}
}

// An index whose postings are of another format (recorded under the
// analyzer version alone, as before postingsFormat) is rebuilt by Open:
// the blocks it cannot read are dropped and every page indexed again.
func TestOpenRebuildsOtherPostingsFormat(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 1000)
	if err := ix.Put(ctx, doc("http://fmt.test/1", "walrus", "a walrus page")); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	// What a build of the old format left: its version, and a tail block
	// under the key this format reads as no block at all.
	err := db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte(keyAnalyzer), []byte(SharedAnalyzer().Version())); err != nil {
			return err
		}
		return txn.Set(blockKey(nil, "walru", appendMark), []byte("old tail"))
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ix, err = Open(db, DefaultOptions(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if !strings.Contains(logs.String(), "re-indexing every stored page") {
		t.Errorf("no rebuild logged: %s", logs.String())
	}
	if got := storedAnalyzerVersion(t, db); got != storedVersion(SharedAnalyzer()) {
		t.Errorf("stored %q, want %q", got, storedVersion(SharedAnalyzer()))
	}
	if got := searchDocs(t, ix, "walrus"); !slices.Equal(got, []string{"http://fmt.test/1"}) {
		t.Errorf("walrus finds %v", got)
	}
	entries := dumpPostings(t, db)
	for _, e := range entries {
		if bytes.Equal(e[1], []byte("old tail")) {
			t.Errorf("old block %q kept", e[0])
		}
	}
	checkRun(t, "rebuilt", db, entries, ix.Stats())
}
