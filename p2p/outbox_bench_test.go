package p2p

import (
	"fmt"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// BenchmarkOutboxDrain is a replication queue as a crawl fills it: a
// record appended and a batch read and deleted per page, with a backlog
// of records waiting; an op is one append, read and delete.
func BenchmarkOutboxDrain(b *testing.B) {
	for _, backlog := range []int{8, 256} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) {
			db, err := badger.Open(badger.DefaultOptions(b.TempDir()).WithLogger(nil))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			n := &Node{db: db}
			n.closed.Store(true) // no senders: the benchmark reads the queue itself
			o := newOutbox(n)
			q := queue{topic: "replica", peer: peer.ID("bench-peer")}
			seq := uint64(0)
			add := func() {
				seq++
				if err := db.Update(func(txn *badger.Txn) error {
					return txn.Set(recordKey(q, seq), []byte("dhttp://example.test/some/page/of/the/site.html"))
				}); err != nil {
					b.Fatal(err)
				}
			}
			for range backlog {
				add()
			}
			b.ResetTimer()
			for range b.N {
				add()
				es, err := o.read(q, 512, 2<<20)
				if err != nil || len(es) == 0 {
					b.Fatal(err, len(es))
				}
				if err := o.delete(q, [][]byte{es[0].key}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestOutboxFrontSkipsNothing: Appends from many goroutines race a reader
// that drains the queue from its front; every record is read, however the
// Appends' commits interleave with the reads.
func TestOutboxFrontSkipsNothing(t *testing.T) {
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := &Node{db: db, cfg: DefaultLANConfig()}
	n.cfg.MaxOutboxPerPeer = 1 << 20
	n.closed.Store(true) // no senders: this test reads the queue itself
	o := newOutbox(n)
	q := queue{topic: "replica", peer: peer.ID("test-peer")}
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				recs := [][]byte{[]byte(fmt.Sprintf("w%d-%d", w, i))}
				if i%7 == 0 {
					recs = append(recs, []byte(fmt.Sprintf("w%d-%d+", w, i)))
				}
				if _, err := o.Append(q.peer, q.topic, recs, false); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[string]bool{}
	finished := false
	for {
		select {
		case <-done:
			finished = true
		default:
		}
		es, err := o.read(q, 5, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		keys := make([][]byte, len(es))
		for i, e := range es {
			if seen[string(e.val)] {
				t.Fatalf("record %s read again after its deletion", e.val)
			}
			seen[string(e.val)] = true
			keys[i] = e.key
		}
		if err := o.delete(q, keys); err != nil {
			t.Fatal(err)
		}
		if finished && len(es) == 0 {
			break
		}
	}
	want := writers * (each + (each+6)/7)
	if len(seen) != want {
		t.Fatalf("read %d records, %d were appended", len(seen), want)
	}
}

// BenchmarkURLBatch is one URL batch encoded and decoded (the compressors
// are reused between batches).
func BenchmarkURLBatch(b *testing.B) {
	recs := realisticBatch()
	b.ReportAllocs()
	for b.Loop() {
		msg, err := encodeURLBatch(recs)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := decodeURLBatch(msg, 4<<20); err != nil {
			b.Fatal(err)
		}
	}
}
