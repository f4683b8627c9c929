package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"sou/index"
)

// openDB opens the node's one Badger database under dataDir/db with
// BadgerOptions, or in memory with InMemoryBadgerOptions. Start-up failures
// get an error that says what to do, never a crash loop.
func openDB(dataDir string, inMemory, syncWrites bool, log *slog.Logger) (*badger.DB, error) {
	if inMemory {
		db, err := badger.Open(InMemoryBadgerOptions().WithLogger(badgerLogger{log}).WithLoggingLevel(badger.WARNING))
		if err != nil {
			return nil, fmt.Errorf("open in-memory badger database: %w", err)
		}
		return db, nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	probe := filepath.Join(dataDir, ".write-test")
	if err := os.WriteFile(probe, []byte("ok"), 0o600); err != nil {
		return nil, fmt.Errorf("data directory %s is not writable: %w", dataDir, err)
	}
	_ = os.Remove(probe)
	dir := filepath.Join(dataDir, "db")
	if err := removeTornValueLogs(dir, log); err != nil {
		return nil, err
	}
	opts := BadgerOptions(dir).WithLogger(badgerLogger{log}).WithLoggingLevel(badger.WARNING).WithSyncWrites(syncWrites)
	db, err := badger.Open(opts)
	if err != nil {
		if errors.Is(err, badger.ErrTruncateNeeded) {
			return nil, fmt.Errorf("badger database %s needs repair: %w", dir, err)
		}
		return nil, fmt.Errorf("open badger database %s (another sou node using this --data? corrupt files?): %w", dir, err)
	}
	return db, nil
}

// removeTornValueLogs deletes the empty value-log files in dir, which
// Badger cannot open. Badger creates a value-log file at every open and
// rotation, sizes it and writes its 20-byte header only afterwards; a
// process killed in between leaves a file of zero bytes, and every later
// open fails on it with "Open existing file: ...vlog ... Create a new file"
// (Badger v4.9.6, valueLog.open treats the z.NewFile it gets back as an
// error). An empty file holds no value, so no pointer can lead into it.
func removeTornValueLogs(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list badger database %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || filepath.Ext(e.Name()) != ".vlog" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return fmt.Errorf("badger value log %s: %w", e.Name(), err)
		}
		if info.Size() != 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove empty badger value log %s (left by a crash): %w", path, err)
		}
		log.Warn("removed an empty value-log file left by a crash", "file", path)
	}
	return nil
}

// BadgerOptions are a node's Badger settings for a database in dir (without
// a logger), sized for a volunteer's machine: the RSS target is 300 MB per
// node on the real corpus. Benchmarks open their stores with them too.
//
// Memtables of 4–16 MiB, not Badger's 64, by the process's Go memory
// limit (memTableSize; BENCHMARKS.md, "Small memtables"): the table
// builder that turns a full memtable into an L0 table builds the whole
// table in memory, in buffers from Badger's allocator pool that double
// as they fill (so up to twice the memtable), and the pool keeps up to
// eight allocators with every buffer they grew, handing them round to
// compactions and flushes alike: in time the pool holds about ten to
// twelve memtables, all of it live Go heap that a node at its memory
// limit marks at every collection. A transaction may hold 15 % of a
// memtable (600 KB at 4 MiB); the writers whose size a page or a peer
// decides commit and go on in another transaction (ErrTxnTooBig) or
// size their chunks from db.MaxBatchSize.
//
// No Badger compression. The index already compresses page records
// and cached copies and varint-packs its postings; Snappy on top still
// saved a third of a compacted synthetic store, but every block read paid
// for it: a freshly allocated buffer, a decode, a trip through the block
// cache. Uncompressed, a block read is a slice of the memory-mapped table,
// and Badger needs no block cache. On the corpus those buffers were a
// large share of a node's large allocations, each of which, near the soft
// memory limit, first made the runtime return pages to the kernel; in the
// single-node benchmark peak RSS fell by 120–145 MB at the same rate. The
// price is disk: +17 % before compaction, +52 % after (BENCHMARKS.md,
// "Badger uncompressed, a DF cache"), 0.65× Bleve's.
//
// Values of 64 bytes and more go to the value log (Badger's default is
// 1 MiB). Page records, cached copies, fetched bodies, seen records, and
// the postings blocks a flush appends (tens of bytes for most terms) are
// that large: in the LSM tree every one of them was written to the
// memtable's log, the memtable, an L0 table and each compaction after it,
// each table needing its own index builder and a sync; in the value log
// it is written once and the tree holds a 12-byte pointer. A lower
// threshold leaves the tree with keys and pointers, so compactions and
// table builds shrink with it (BENCHMARKS.md, "Value log threshold", "A
// smaller value-log threshold" and "Pages in S2, a 64-byte threshold");
// the price is disk, and a read of such a value goes through its pointer.
// Queue entries (a URL under its host's key) mostly stay in the tree.
// Merged postings blocks and replaced pages leave garbage in the value
// log, which runValueLogGC reclaims.
//
// Every table the same size (Badger doubles them at each level below the
// base one): a table builder holds about twice its table in memory, and a heap profile at 45,000 pages showed
// 230 MB in compaction builders for 32–64 MB tables, and a quarter of the
// CPU in the garbage collector trying to keep under the memory limit.
// More, smaller files in the deepest levels cost little. Tables written
// compressed by an older build keep their compression (Badger records it
// per table) and are read and compacted as before.
func BadgerOptions(dir string) badger.Options {
	o := badger.DefaultOptions(dir).
		WithLogger(nil).
		WithMemTableSize(memTableSize()).
		WithNumMemtables(3).
		WithBlockCacheSize(0).
		WithIndexCacheSize(8 << 20).
		WithValueLogFileSize(256 << 20).
		WithValueThreshold(64).
		WithCompression(options.None).
		WithNumCompactors(2).
		WithDetectConflicts(false)
	o.TableSizeMultiplier = 1 // Badger has no With method for it
	return o
}

// memTableSize is a node's memtable size for the process's Go memory
// limit (debug.SetMemoryLimit, which cmd/sou sets before it opens a
// node): a 56th of it, so that the table builders' pool (about twelve
// memtables) stays within a fifth of the limit, and at least 4 MiB and
// at most 16 MiB. At a node's default limit of 224 MiB that is 4 MiB;
// without a limit (benchmarks, tests) 16 MiB, where smaller memtables
// only cost more flushes and compactions.
func memTableSize() int64 {
	const lo, hi = 4 << 20, 16 << 20
	return min(max(debug.SetMemoryLimit(-1)/56&^(1<<20-1), lo), hi)
}

// IndexOptions are a node's index settings; benchmarks use them too.
// Rarer postings flushes than the index's default: the flush is most of
// the indexing cost (BENCHMARKS.md), and a page becomes searchable at most
// this long after it was stored (longer when flushes are slow, see
// index.Options.FlushInterval). FlushDocs stays at the default: the
// buffered postings are the largest item of a node's memory.
func IndexOptions() index.Options {
	o := index.DefaultOptions()
	o.FlushInterval = 3 * time.Second
	o.FormCacheBytes = formCacheBytes
	return o
}

// formCacheBytes holds the analysed forms of the pages a node indexed in
// the last seconds. A page's replicas get its form with the page
// (replication.go), so that a replica does not analyse it again: the index
// analyses a page still waiting for its flush when its form is asked for,
// and takes older pages' forms from this cache. Forms are a few KB, so
// this holds hundreds of pages; every cached byte is live heap that a
// node at its memory limit pays for in collections (BENCHMARKS.md,
// "Analyse once").
const formCacheBytes = 4 << 20

// runValueLogGC reclaims value-log space left by deleted and rewritten pages
// until ctx ends.
func runValueLogGC(ctx context.Context, db *badger.DB, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for db.RunValueLogGC(0.5) == nil {
				if ctx.Err() != nil {
					return
				}
			}
		}
	}
}

// badgerLogger routes Badger's own logging into slog.
type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(f string, a ...any) {
	l.log.Error(fmt.Sprintf(f, a...), "component", "badger")
}
func (l badgerLogger) Warningf(f string, a ...any) {
	l.log.Warn(fmt.Sprintf(f, a...), "component", "badger")
}
func (l badgerLogger) Infof(f string, a ...any) {
	l.log.Debug(fmt.Sprintf(f, a...), "component", "badger")
}
func (l badgerLogger) Debugf(f string, a ...any) {
	l.log.Debug(fmt.Sprintf(f, a...), "component", "badger")
}

// dbSize returns the LSM and value-log bytes on disk. Badger refreshes its
// own figures only every few minutes and counts the value log's
// preallocated length, so the files' allocated blocks are measured directly.
func (n *Node) dbSize() (lsm, vlog int64) {
	dir := filepath.Join(n.cfg.DataDir, "db")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return n.db.Size()
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		size := info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			size = st.Blocks * 512
		}
		switch filepath.Ext(e.Name()) {
		case ".sst":
			lsm += size
		case ".vlog":
			vlog += size
		}
	}
	return lsm, vlog
}

// syncAcknowledged makes what a peer delivered durable before it is
// acknowledged, in SyncAcked mode (the sender deletes what is
// acknowledged, so a power loss here would lose it everywhere); wrote
// says whether the message stored anything. Messages share fsyncs
// (syncer).
func (n *Node) syncAcknowledged(ctx context.Context, wrote bool) error {
	if !wrote || n.cfg.Sync != SyncAcked && n.cfg.Sync != "" {
		return nil
	}
	return n.syncs.sync(ctx)
}
