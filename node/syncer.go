package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// syncer makes what peers delivered durable before it is acknowledged
// (--sync acked) with one fsync of Badger's logs for every message that
// asked since the last one began: group commit. A message that asks while
// a sync is under way waits for the next, which covers it; under load many
// messages share one. Rounds begin at least gap apart. A sync of
// Badger's memory-mapped logs (msync) costs CPU however little it covers;
// with the gap, messages that would each have had a sync share one, and
// a sender's outbox, whose next message waits for this acknowledgement,
// gathers more records into it.
type syncer struct {
	db      *badger.DB
	gap     time.Duration
	mu      sync.Mutex
	running bool
	next    *syncRound // the round new requests join
	kick    chan struct{}
	rounds  int // syncs made by the loop (Status.SyncRounds)
}

// syncGap is the least time between the starts of two sync rounds: a
// delivery's acknowledgement waits at most this long for company, short
// beside a replica's WaitMax (placement).
const syncGap = 10 * time.Millisecond

type syncRound struct {
	done chan struct{}
	err  error // set before done is closed
}

func newSyncer(db *badger.DB, gap time.Duration) *syncer {
	return &syncer{db: db, gap: gap, kick: make(chan struct{}, 1)}
}

// sync returns once a sync that began after the call has ended, or ctx
// ends. Without the loop running (before Run, after it), it syncs itself.
func (s *syncer) sync(ctx context.Context) error {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		if err := s.db.Sync(); err != nil {
			return fmt.Errorf("sync before acknowledging: %w", err)
		}
		return nil
	}
	r := s.next
	if r == nil {
		r = &syncRound{done: make(chan struct{})}
		s.next = r
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
		if r.err != nil {
			return fmt.Errorf("sync before acknowledging: %w", r.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run syncs for the requests that gathered, one round at a time, until
// ctx ends; a round pending then is synced before run returns.
func (s *syncer) run(ctx context.Context) {
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
		s.round()
	}()
	var last time.Time // when the last round began
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		s.mu.Lock()
		pending := s.next != nil
		s.mu.Unlock()
		if !pending {
			continue // a kick for requests an earlier round covered
		}
		if wait := time.Until(last.Add(s.gap)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		s.round()
	}
}

// syncRounds is the number of syncs the loop made.
func (s *syncer) syncRounds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rounds
}

// round syncs once for the requests gathered so far.
func (s *syncer) round() {
	s.mu.Lock()
	r := s.next
	s.next = nil
	s.mu.Unlock()
	if r == nil {
		return
	}
	r.err = s.db.Sync()
	s.mu.Lock()
	s.rounds++
	s.mu.Unlock()
	close(r.done)
}
