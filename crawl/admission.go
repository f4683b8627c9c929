package crawl

import (
	"context"
	"math"
	"sync"
	"time"
)

// admission bounds the responses a crash would lose: a fetch worker takes
// a credit before it takes a host's slot and gives it back when the slot
// ends without a response to process, or hands it with the response to
// processing, which gives it back once Sink.Store has returned (the page
// settled: stored and replicated). So the credits held are the requests in
// flight plus the responses fetched and not yet settled.
//
// The limit follows Little's law, so that it costs no throughput:
// processing settles ProcessWorkers responses per service time S, so
// keeping it busy needs ProcessWorkers × L / S requests in flight for a
// fetch stage of L (request and frontier transaction), twice that for
// the spread of both, plus one response waiting and one being processed
// per processing worker. Fetch workers beyond the limit wait without a
// host. Where fetching is slow next to processing (the real web: L of
// 0.1–1 s against S of milliseconds to tens of them) the limit is
// Workers and nothing changes; where fetching is fast (a simulated web on
// loopback) the responses no longer wait in fetch workers' hands for room
// in the processing queue, where a SIGKILL took them all. When settling
// slows down (a replica that stopped acknowledging makes each Store wait
// its maximum) S grows and fewer fetches start. Until both means have a
// sample the limit is what processing holds (three per processing
// worker): the first responses tell how far to open it.
type admission struct {
	workers, procWorkers int

	mu   sync.Mutex
	held int
	// fetch is the mean credit time the fetch stage spent per response
	// handed to processing (slots without one count towards the next),
	// process the mean processing time of a response; seconds, 0 until
	// the first sample.
	fetch, process float64
	// unhanded sums the fetch-stage time of slots since the last response
	// handed to processing.
	unhanded float64
	changed  chan struct{}
}

// admissionWeight is the weight of a new sample in the moving means: the
// last few dozen responses, a second or less at the rates where the
// limit matters.
const admissionWeight = 0.05

func newAdmission(workers, procWorkers int) *admission {
	return &admission{workers: workers, procWorkers: procWorkers, changed: make(chan struct{})}
}

// limitLocked is the most credits that may be held now.
func (a *admission) limitLocked() int {
	if a.fetch <= 0 || a.process <= 0 {
		return min(a.workers, 3*a.procWorkers)
	}
	inFlight := 2 * float64(a.procWorkers) * a.fetch / a.process
	if inFlight >= float64(a.workers) { // also guards the conversion below
		return a.workers
	}
	// The epsilon keeps a product that is whole on paper from rounding up.
	return min(a.workers, int(math.Ceil(inFlight-1e-9))+2*a.procWorkers)
}

// limit is the most credits that may be held now.
func (a *admission) limit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limitLocked()
}

// acquire takes a credit, waiting while the limit is reached; it fails
// only when ctx ends.
func (a *admission) acquire(ctx context.Context) error {
	for {
		a.mu.Lock()
		if a.held < a.limitLocked() {
			a.held++
			a.mu.Unlock()
			return nil
		}
		changed := a.changed
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// release gives a credit back.
func (a *admission) release() {
	a.mu.Lock()
	a.held--
	a.wakeLocked()
	a.mu.Unlock()
}

// wakeLocked tells the waiting workers that a credit or the limit changed.
func (a *admission) wakeLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// observeFetch adds the fetch-stage time of a credit: from taking it to
// handing the response to processing (handed), or to the end of a slot
// without one (robots.txt, an error, a host paused), which counts towards
// the next response handed over.
func (a *admission) observeFetch(d time.Duration, handed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.unhanded += d.Seconds()
	if !handed {
		return
	}
	s := a.unhanded
	a.unhanded = 0
	a.observeLocked(&a.fetch, s)
}

// observeProcess adds the time one response took to process.
func (a *admission) observeProcess(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.observeLocked(&a.process, d.Seconds())
}

func (a *admission) observeLocked(mean *float64, s float64) {
	s = max(s, 1e-6)
	before := a.limitLocked()
	if *mean <= 0 {
		*mean = s
	} else {
		*mean += admissionWeight * (s - *mean)
	}
	if a.limitLocked() > before {
		a.wakeLocked()
	}
}

// credits reports the credits held and the limit now.
func (a *admission) credits() (held, limit int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held, a.limitLocked()
}
