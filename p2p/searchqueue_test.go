package p2p

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestSearchQueueServesTheLightestFirst: with one worker, a peer that has
// held it long and queues more requests waits behind a peer that asks
// now and then; a request whose deadline passes leaves the queue, and
// nothing is left over.
func TestSearchQueueServesTheLightestFirst(t *testing.T) {
	q := newSearchQueue(1)
	ctx := context.Background()
	start, err := q.acquire(ctx, "flooder")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []peer.ID
	var wg sync.WaitGroup
	enqueue := func(p peer.ID) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := q.acquire(ctx, p)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, p)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			q.release(p, s)
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
	if _, err := q.acquire(gone, "quitter"); err == nil {
		t.Fatal("acquired a worker while it was busy")
	}
	time.Sleep(50 * time.Millisecond) // the flooder holds the worker a while
	q.release("flooder", start)
	wg.Wait()
	want := []peer.ID{"honest", "flooder", "flooder", "flooder"}
	if len(order) != len(want) {
		t.Fatalf("served %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("served %v, want %v", order, want)
		}
	}
	if q.busy != 0 || len(q.waiting) != 0 {
		t.Fatalf("queue not empty after: busy %d waiting %v", q.busy, q.waiting)
	}
}

// TestSearchQueueForgets: recent use halves every serviceHalfLife.
func TestSearchQueueForgets(t *testing.T) {
	now := time.Unix(1700000000, 0)
	q := newSearchQueue(1)
	q.now = func() time.Time { return now }
	q.decayed = now
	s, _ := q.acquire(context.Background(), "p")
	now = now.Add(4 * time.Second)
	q.release("p", s)
	if q.used["p"] != 4 {
		t.Fatalf("used %v, want 4", q.used["p"])
	}
	now = now.Add(2 * serviceHalfLife)
	q.mu.Lock()
	q.decayLocked()
	q.mu.Unlock()
	if q.used["p"] != 1 {
		t.Fatalf("used %v after two half-lives, want 1", q.used["p"])
	}
}
