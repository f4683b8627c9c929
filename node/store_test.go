package node

import (
	"fmt"
	"path/filepath"
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
