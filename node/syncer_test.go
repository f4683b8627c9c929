package node

import (
	"context"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// openSyncDB opens a Badger database in a test directory for a syncer.
func openSyncDB(t *testing.T) *badger.DB {
	t.Helper()
	db, err := badger.Open(BadgerOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// startSyncer runs s's loop until the returned stop is called, which
// returns once the loop has ended; it returns when the loop is running.
func startSyncer(s *syncer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.run(ctx); close(done) }()
	for {
		s.mu.Lock()
		running := s.running
		s.mu.Unlock()
		if running {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return func() { cancel(); <-done }
}

// TestSyncerSharesRounds: many messages asking for a sync at once share
// fsyncs, and every one returns after a sync that began after it asked;
// without the loop each syncs itself.
func TestSyncerSharesRounds(t *testing.T) {
	db := openSyncDB(t)
	s := newSyncer(db, 0)
	if err := s.sync(context.Background()); err != nil {
		t.Fatalf("sync without the loop: %v", err)
	}
	stop := startSyncer(s)
	const askers = 64
	var wg sync.WaitGroup
	for i := range askers {
		wg.Go(func() {
			if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte{byte(i)}, []byte("v")) }); err != nil {
				t.Error(err)
				return
			}
			if err := s.sync(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	stop()
	if rounds := s.syncRounds(); rounds == 0 || rounds >= askers {
		t.Fatalf("%d syncs for %d askers: none shared", rounds, askers)
	}
	t.Logf("%d askers, %d syncs", askers, s.syncRounds())
}

// TestSyncerGap: rounds begin at least the gap apart, so messages that
// ask one after another wait for company; a round pending when the loop
// stops is still synced.
func TestSyncerGap(t *testing.T) {
	const gap = 40 * time.Millisecond
	s := newSyncer(openSyncDB(t), gap)
	stop := startSyncer(s)
	const asks = 4
	start := time.Now()
	for range asks {
		if err := s.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < (asks-1)*gap {
		t.Errorf("%d syncs one after another took %v: rounds closer than %v", asks, took, gap)
	}
	if got := s.syncRounds(); got != asks {
		t.Errorf("%d rounds for %d asks one after another", got, asks)
	}
	stop()
	// A request waiting for the gap when the loop stops is synced on the
	// loop's way out.
	s = newSyncer(openSyncDB(t), time.Hour)
	stop = startSyncer(s)
	if err := s.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	asked := make(chan error, 1)
	go func() { asked <- s.sync(context.Background()) }()
	for {
		s.mu.Lock()
		pending := s.next != nil
		s.mu.Unlock()
		if pending {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-asked; err != nil {
		t.Fatalf("request pending at stop: %v", err)
	}
	if got := s.syncRounds(); got != 2 {
		t.Errorf("%d rounds, want the first and the one on the way out", got)
	}
}
