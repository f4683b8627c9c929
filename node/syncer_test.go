package node

import (
	"context"
	"sync"
	"testing"

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
	s := newSyncer(db)
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
