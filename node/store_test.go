package node

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// TestOpenStoreWrittenCompressed opens, under BadgerOptions (no
// compression, no block cache), a store whose tables an older build wrote
// with Snappy and a block cache, and checks that every value reads back,
// before and after compaction rewrites those tables.
func TestOpenStoreWrittenCompressed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	old := BadgerOptions(dir).WithCompression(options.Snappy).WithBlockCacheSize(16 << 20)
	old.MemTableSize = 1 << 20 // several tables from a few MB of values
	db, err := badger.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20_000
	value := func(i int) string { return fmt.Sprintf("value %d: %0200d", i, i) }
	wb := db.NewWriteBatch()
	for i := range n {
		if err := wb.Set(fmt.Appendf(nil, "k%08d", i), []byte(value(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = badger.Open(BadgerOptions(dir))
	if err != nil {
		t.Fatalf("open a store written with Snappy: %v", err)
	}
	defer db.Close()
	oldTables := 0
	for _, ti := range db.Tables() {
		if ti.KeyCount > 0 {
			oldTables++
		}
	}
	if oldTables == 0 {
		t.Fatal("the old options wrote no tables; the test checks nothing")
	}
	readAll := func(stage string) {
		t.Helper()
		err := db.View(func(txn *badger.Txn) error {
			for i := range n {
				item, err := txn.Get(fmt.Appendf(nil, "k%08d", i))
				if err != nil {
					return fmt.Errorf("key %d: %w", i, err)
				}
				if err := item.Value(func(v []byte) error {
					if string(v) != value(i) {
						return fmt.Errorf("key %d: got %.20q", i, v)
					}
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
	}
	readAll("after reopening")
	if err := db.Flatten(1); err != nil {
		t.Fatalf("compact the old tables: %v", err)
	}
	readAll("after compaction")
}

// TestOpenAfterKillDuringValueLogCreation reopens a store in which a killed
// process left its newest value-log file created but empty, as a SIGKILL
// between Badger's create and its header write does. Badger alone refuses
// such a store once (its failed open writes the header, so the next one
// succeeds: a node would exit and need a second start); openDB must open
// it the first time with every value intact.
func TestOpenAfterKillDuringValueLogCreation(t *testing.T) {
	dataDir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	db, err := openDB(dataDir, false, false, log)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("v"), 4<<10) // over the value threshold: in the value log
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), big) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, "db")
	logs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no value-log files in %s (%v)", dir, err)
	}
	sort.Strings(logs)
	var newest int
	if _, err := fmt.Sscanf(filepath.Base(logs[len(logs)-1]), "%06d.vlog", &newest); err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(dir, fmt.Sprintf("%06d.vlog", newest+1))
	if err := os.WriteFile(torn, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = openDB(dataDir, false, false, log)
	if err != nil {
		t.Fatalf("open after a torn value-log creation: %v", err)
	}
	defer db.Close()
	err = db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("k"))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err == nil && !bytes.Equal(v, big) {
			err = fmt.Errorf("value of %d bytes, want %d", len(v), len(big))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMemTableSizeFollowsMemoryLimit: a node's memtables are a 56th of
// the process's Go memory limit, within 4 and 16 MiB.
func TestMemTableSizeFollowsMemoryLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(was)
	for _, c := range []struct {
		limit int64
		want  int64
	}{
		{math.MaxInt64, 16 << 20}, // no limit
		{224 << 20, 4 << 20},      // a node's default
		{100 << 20, 4 << 20},
		{512 << 20, 9 << 20},
		{2 << 30, 16 << 20},
	} {
		debug.SetMemoryLimit(c.limit)
		if got := BadgerOptions(t.TempDir()).MemTableSize; got != c.want {
			t.Errorf("memory limit %d MiB: memtable %d bytes, want %d", c.limit>>20, got, c.want)
		}
	}
}
