package node

import (
	"context"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// TestSyncerSharesRounds: many messages asking for a sync at once share
// fsyncs, and every one returns after a sync that began after it asked;
// without the loop each syncs itself.
func TestSyncerSharesRounds(t *testing.T) {
	db, err := badger.Open(BadgerOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := newSyncer(db, 0)
	if err := s.sync(context.Background()); err != nil {
		t.Fatalf("sync without the loop: %v", err)
	}
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
	}
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
	cancel()
	<-done
	s.mu.Lock()
	rounds := s.rounds
	s.mu.Unlock()
	if rounds == 0 || rounds >= askers {
		t.Fatalf("%d syncs for %d askers: none shared", rounds, askers)
	}
	t.Logf("%d askers, %d syncs", askers, rounds)
}

// TestSyncerGap: rounds begin at least the gap apart, so messages that
// ask one after another wait for company; a round pending when the loop
// stops is still synced.
func TestSyncerGap(t *testing.T) {
	db, err := badger.Open(BadgerOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const gap = 40 * time.Millisecond
	s := newSyncer(db, gap)
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
	}
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
	// A request made just before the loop stops is synced on its way out.
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
	cancel()
	<-done
	if err := <-asked; err != nil {
		t.Fatalf("request pending at stop: %v", err)
	}
}
