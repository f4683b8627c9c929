package node

import (
	"sync"
	"time"
)

// errorRing keeps the most recent errors for the status page.
type errorRing struct {
	mu   sync.Mutex
	max  int
	errs []RecentError
}

// RecentError is one entry of the status page's error list.
type RecentError struct {
	At    time.Time `json:"at"`
	Where string    `json:"where"`
	Error string    `json:"error"`
}

func newErrorRing(max int) *errorRing { return &errorRing{max: max} }

func (r *errorRing) add(where string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, RecentError{At: time.Now(), Where: where, Error: err.Error()})
	if len(r.errs) > r.max {
		r.errs = r.errs[len(r.errs)-r.max:]
	}
}

func (r *errorRing) list() []RecentError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RecentError(nil), r.errs...)
}
