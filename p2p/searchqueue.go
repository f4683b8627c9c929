package p2p

import (
	"context"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// searchQueue runs the search requests of other members on a fixed number
// of workers and hands free workers to the peers with requests waiting in
// turn, one request each: a member that sends many searches at once waits
// behind its own, not in front of everyone else's. A shard search is CPU
// work, so more workers than cores would only make every search slower. A
// request that is not started by its deadline is dropped from the queue.
type searchQueue struct {
	mu      sync.Mutex
	workers int
	busy    int
	waiting map[peer.ID][]chan struct{} // per peer, oldest first
	turns   []peer.ID                   // peers with requests waiting, next first
}

func newSearchQueue(workers int) *searchQueue {
	return &searchQueue{workers: max(workers, 1), waiting: map[peer.ID][]chan struct{}{}}
}

// acquire waits for a worker for p's request until ctx ends.
func (q *searchQueue) acquire(ctx context.Context, p peer.ID) error {
	q.mu.Lock()
	if q.busy < q.workers && len(q.turns) == 0 {
		q.busy++
		q.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	if len(q.waiting[p]) == 0 {
		q.turns = append(q.turns, p)
	}
	q.waiting[p] = append(q.waiting[p], ready)
	q.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-ready:
		// Handed a worker just as ctx ended: pass it on.
		q.handOnLocked()
		return ctx.Err()
	default:
	}
	w := q.waiting[p]
	for i, c := range w {
		if c == ready {
			w = append(w[:i], w[i+1:]...)
			break
		}
	}
	if len(w) == 0 {
		delete(q.waiting, p)
		for i, t := range q.turns {
			if t == p {
				q.turns = append(q.turns[:i], q.turns[i+1:]...)
				break
			}
		}
	} else {
		q.waiting[p] = w
	}
	return ctx.Err()
}

// release frees a worker: the next peer in turn gets it.
func (q *searchQueue) release() {
	q.mu.Lock()
	q.handOnLocked()
	q.mu.Unlock()
}

// handOnLocked gives the worker of a finished (or abandoned) request to
// the oldest request of the next peer in turn, or frees it.
func (q *searchQueue) handOnLocked() {
	if len(q.turns) == 0 {
		q.busy--
		return
	}
	p := q.turns[0]
	q.turns = q.turns[1:]
	w := q.waiting[p]
	next := w[0]
	if len(w) > 1 {
		q.waiting[p] = w[1:]
		q.turns = append(q.turns, p) // its next request waits for its next turn
	} else {
		delete(q.waiting, p)
	}
	close(next)
}
