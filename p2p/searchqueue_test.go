package p2p

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestSearchQueueTakesTurns: with one worker busy, a peer that queues
// many requests and a peer that queues one are served in turn, one
// request each, and a request whose deadline passes leaves the queue.
func TestSearchQueueTakesTurns(t *testing.T) {
	q := newSearchQueue(1)
	ctx := context.Background()
	if err := q.acquire(ctx, "flooder"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []peer.ID
	var wg sync.WaitGroup
	enqueue := func(p peer.ID) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.acquire(ctx, p); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, p)
			mu.Unlock()
			q.release()
		}()
		time.Sleep(20 * time.Millisecond) // queued in this order
	}
	for range 3 {
		enqueue("flooder")
	}
	enqueue("honest")
	// A request that gives up before its turn.
	gone, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := q.acquire(gone, "quitter"); err == nil {
		t.Fatal("acquired a worker while it was busy")
	}
	q.release()
	wg.Wait()
	want := []peer.ID{"flooder", "honest", "flooder", "flooder"}
	if len(order) != len(want) {
		t.Fatalf("served %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("served %v, want %v", order, want)
		}
	}
	if q.busy != 0 || len(q.turns) != 0 || len(q.waiting) != 0 {
		t.Fatalf("queue not empty after: busy %d turns %v waiting %v", q.busy, q.turns, q.waiting)
	}
}
