package p2p

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// searchQueue runs the search requests of other members on a fixed number
// of workers. A shard search is CPU work, so more workers than cores would
// only make every search slower. When a worker frees up it goes to the
// waiting peer that has used the least worker time lately (service time,
// halved every serviceHalfLife), oldest request first: a member that
// sends many or costly searches waits behind its own, while a coordinator
// asking now and then is served next. A request that is not started by
// its deadline leaves the queue.
type searchQueue struct {
	mu      sync.Mutex
	workers int
	busy    int
	waiting map[peer.ID][]chan struct{} // per peer, oldest first
	used    map[peer.ID]float64         // recent worker time, seconds
	decayed time.Time
	now     func() time.Time
}

// serviceHalfLife is how fast a peer's past use of the workers is forgiven.
const serviceHalfLife = 10 * time.Second

func newSearchQueue(workers int) *searchQueue {
	return &searchQueue{
		workers: max(workers, 1), waiting: map[peer.ID][]chan struct{}{},
		used: map[peer.ID]float64{}, now: time.Now,
	}
}

// acquire waits for a worker for p's request until ctx ends. On success
// the caller must call release with the time acquire returned.
func (q *searchQueue) acquire(ctx context.Context, p peer.ID) (time.Time, error) {
	q.mu.Lock()
	if q.busy < q.workers && len(q.waiting) == 0 {
		q.busy++
		q.mu.Unlock()
		return q.now(), nil
	}
	ready := make(chan struct{})
	q.waiting[p] = append(q.waiting[p], ready)
	q.mu.Unlock()
	select {
	case <-ready:
		return q.now(), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-ready:
		// Handed a worker just as ctx ended: pass it on.
		q.handOnLocked()
		return time.Time{}, ctx.Err()
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
	} else {
		q.waiting[p] = w
	}
	return time.Time{}, ctx.Err()
}

// release frees the worker p's request acquired at start, charging p the
// time it held it.
func (q *searchQueue) release(p peer.ID, start time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.decayLocked()
	q.used[p] += q.now().Sub(start).Seconds()
	q.handOnLocked()
}

// decayLocked halves every peer's recent use once per serviceHalfLife and
// forgets peers whose use has faded.
func (q *searchQueue) decayLocked() {
	now := q.now()
	for now.Sub(q.decayed) >= serviceHalfLife {
		q.decayed = q.decayed.Add(serviceHalfLife)
		if now.Sub(q.decayed) > time.Hour {
			q.decayed = now
		}
		for p, u := range q.used {
			if u < 1e-3 && len(q.waiting[p]) == 0 {
				delete(q.used, p)
				continue
			}
			q.used[p] = u / 2
		}
	}
}

// handOnLocked gives a freed worker to the oldest request of the waiting
// peer with the least recent use, or frees it.
func (q *searchQueue) handOnLocked() {
	var next peer.ID
	found := false
	for p := range q.waiting {
		if !found || q.used[p] < q.used[next] || q.used[p] == q.used[next] && p < next {
			next, found = p, true
		}
	}
	if !found {
		q.busy--
		return
	}
	w := q.waiting[next]
	if len(w) > 1 {
		q.waiting[next] = w[1:]
	} else {
		delete(q.waiting, next)
	}
	close(w[0])
}
