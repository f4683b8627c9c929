package crawl

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Badger key prefixes owned by the engine half of the package (see doc.go).
const (
	pfxQueue   = "c:q/" // c:q/<host>/<prio 10><seq 8> -> URL
	pfxHost    = "c:h/" // c:h/<host> -> hostRecord (JSON)
	pfxSeen    = "c:u/" // c:u/<host>/<hash 16> -> seenRecord (JSON)
	pfxRobots  = "c:r/" // c:r/<host> -> robotsRecord (JSON)
	pfxProc    = "c:p/" // c:p/<seq 8> -> procEntry (JSON): fetched, awaiting processing
	pfxRecrawl = "c:t/" // c:t/<due 8><host>/<hash 16> -> nil
	keySeq     = "c:m/seq"
)

const prioLen = 10 // 8 bytes inverted cash + 2 bytes depth

func queuePrefix(host string) []byte { return []byte(pfxQueue + host + "/") }
func seenPrefix(host string) []byte  { return []byte(pfxSeen + host + "/") }
func hostKey(host string) []byte     { return []byte(pfxHost + host) }
func robotsKey(host string) []byte   { return []byte(pfxRobots + host) }

func seenKey(host string, h urlHash) []byte {
	k := make([]byte, 0, len(pfxSeen)+len(host)+1+len(h))
	k = append(k, pfxSeen...)
	k = append(k, host...)
	k = append(k, '/')
	return append(k, h[:]...)
}

// encodePrio makes byte order equal crawl order: more cash first, then
// shallower (the Tianwang depth heuristic), then FIFO by sequence number.
func encodePrio(dst []byte, cash float64, depth int) []byte {
	if !(cash >= 0) || math.IsInf(cash, 1) { // NaN, negative, +Inf from a bad peer
		cash = 0
	}
	dst = binary.BigEndian.AppendUint64(dst, ^math.Float64bits(cash))
	return binary.BigEndian.AppendUint16(dst, uint16(min(max(depth, 0), math.MaxUint16)))
}

func queueKey(host string, cash float64, depth int, seq uint64) []byte {
	k := make([]byte, 0, len(pfxQueue)+len(host)+1+prioLen+8)
	k = append(k, pfxQueue...)
	k = append(k, host...)
	k = append(k, '/')
	k = encodePrio(k, cash, depth)
	return binary.BigEndian.AppendUint64(k, seq)
}

// decodeQueueKey returns host, cash and depth of a queue key.
func decodeQueueKey(k []byte) (host string, cash float64, depth int, err error) {
	if !bytes.HasPrefix(k, []byte(pfxQueue)) || len(k) < len(pfxQueue)+2+prioLen+8 {
		return "", 0, 0, fmt.Errorf("bad queue key %q", k)
	}
	tail := k[len(k)-prioLen-8:]
	host = string(k[len(pfxQueue) : len(k)-prioLen-8-1])
	cash = math.Float64frombits(^binary.BigEndian.Uint64(tail[:8]))
	depth = int(binary.BigEndian.Uint16(tail[8:10]))
	return host, cash, depth, nil
}

// Clock is the time source of the crawler; tests inject a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// schedItem is one host in a schedule heap; stale when gen != host.gen.
type schedItem struct {
	h     *hostState
	gen   uint64
	ready int64 // unix nanos
	cash  float64
	depth int
}

// readyHeap orders waiting hosts by ready time.
type readyHeap []schedItem

func (q readyHeap) Len() int           { return len(q) }
func (q readyHeap) Less(i, j int) bool { return q[i].ready < q[j].ready }
func (q readyHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *readyHeap) Push(x any)        { *q = append(*q, x.(schedItem)) }
func (q *readyHeap) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// dueHeap orders hosts whose politeness timer has expired by head priority.
type dueHeap []schedItem

func (q dueHeap) Len() int { return len(q) }
func (q dueHeap) Less(i, j int) bool {
	if q[i].cash != q[j].cash {
		return q[i].cash > q[j].cash
	}
	if q[i].depth != q[j].depth {
		return q[i].depth < q[j].depth
	}
	return q[i].ready < q[j].ready
}
func (q dueHeap) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *dueHeap) Push(x any)   { *q = append(*q, x.(schedItem)) }
func (q *dueHeap) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// frontier is the persistent URL frontier: per-host queues in Badger, and in
// memory only per-host counts, head priorities and the two-level schedule
// (hosts waiting for their politeness timer; due hosts ordered by priority).
//
// Locking: every Badger transaction that touches the queue or seen keys of a
// host holds that host's stripe lock (hosts hash onto 256 stripes; several
// are taken in ascending order), so read-modify-write of a URL's record never
// interleaves, while transactions on different hosts commit concurrently and
// Badger batches their writes. mu guards the in-memory state and is never
// held across I/O. Order: stripes, then mu.
type frontier struct {
	db     *badger.DB
	cfg    PolitenessConfig
	budget int64 // max pages per host, 0 = unlimited
	clock  Clock
	seq    *badger.Sequence
	bloom  *bloomFilter

	stripes [256]sync.Mutex
	// cash holds per stripe the seen URLs that links read lately and
	// what links credited them since (linkcash.go); guarded by stripes[i].
	cash [256]map[urlHash]*cashEntry
	// queueFrom holds per host a queue key at or below the host's first
	// live queue entry; reading the head seeks there instead of rewinding
	// to the queue prefix. Why: a fetched entry is deleted at the front of
	// its queue, and a rewind steps over every tombstone Badger has not
	// compacted away yet, so its cost grew with the pages fetched from the
	// host (BENCHMARKS.md: 18 % of a node's CPU on the corpus). Entries of
	// stripe i live in queueFrom[i], guarded by stripes[i]. A mark that is
	// too high would only delay a better entry (an empty seek falls back to
	// the prefix), never lose one. A mark read as a host's first live
	// key also keeps that entry's URL (queueMark.url), so that the head a
	// worker takes next is not sought a second time: the release after a
	// fetch reads the next head to schedule the host by it, and the
	// worker's next slot takes it from the mark. A lowered mark has no
	// URL; head checks an entry taken from a mark against its seen record,
	// as one it sought.
	queueFrom [256]map[string]queueMark

	mu      sync.Mutex
	hosts   map[string]*hostState
	waiting readyHeap
	due     dueHeap
	queued  int64 // total entries
	flying  int
	wake    chan struct{}
	// epoch is bumped after every change that Idle looks at.
	epoch atomic.Uint64
}

func newFrontier(db *badger.DB, cfg PolitenessConfig, budget int, clock Clock, bloomExpected int) (*frontier, error) {
	seq, err := db.GetSequence([]byte(keySeq), 1000)
	if err != nil {
		return nil, fmt.Errorf("frontier sequence: %w", err)
	}
	f := &frontier{
		db: db, cfg: cfg, budget: int64(budget), clock: clock, seq: seq,
		hosts: make(map[string]*hostState),
		wake:  make(chan struct{}, 1),
	}
	for i := range f.queueFrom {
		f.queueFrom[i] = make(map[string]queueMark)
	}
	if bloomExpected > 0 {
		f.bloom = newBloomFilter(bloomExpected)
	}
	if err := f.load(); err != nil {
		_ = seq.Release()
		return nil, err
	}
	return f, nil
}

func (f *frontier) close() error {
	settled := f.settleAll(false)
	if err := f.seq.Release(); err != nil {
		return errors.Join(settled, fmt.Errorf("release frontier sequence: %w", err))
	}
	return settled
}

// load rebuilds the in-memory state from Badger: host records, queue counts
// and heads (key-only iteration; the first key of a host is its head), and
// the Bloom filter from the seen keys.
func (f *frontier) load() error {
	return f.db.View(func(txn *badger.Txn) error {
		opt := badger.DefaultIteratorOptions
		opt.Prefix = []byte(pfxHost)
		it := txn.NewIterator(opt)
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			host := string(item.Key()[len(pfxHost):])
			var rec hostRecord
			err := item.Value(func(v []byte) error {
				var err error
				rec, err = decodeHostRecord(v)
				return err
			})
			if err != nil {
				it.Close()
				return fmt.Errorf("load host %q: %w", host, err)
			}
			f.host(host).rec = rec
		}
		it.Close()

		opt = badger.IteratorOptions{Prefix: []byte(pfxQueue)}
		it = txn.NewIterator(opt)
		var cur *hostState
		for it.Rewind(); it.Valid(); it.Next() {
			host, cash, depth, err := decodeQueueKey(it.Item().Key())
			if err != nil {
				continue // not ours to interpret; left alone
			}
			if cur == nil || cur.key != host {
				cur = f.host(host)
				cur.headCash, cur.headDepth = cash, depth
			}
			cur.queued++
			f.queued++
		}
		it.Close()

		if f.bloom != nil {
			it = txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxSeen)})
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().Key()
				if len(k) < len(pfxSeen)+16 {
					continue
				}
				var h urlHash
				copy(h[:], k[len(k)-16:])
				f.bloom.add(h)
			}
			it.Close()
		}
		for _, h := range f.hosts {
			f.scheduleLocked(h)
		}
		return nil
	})
}

// lockHosts takes the stripe locks of hosts in ascending order and returns
// the function that releases them.
func (f *frontier) lockHosts(hosts ...string) func() {
	var idx []int
	var seen [256]bool
	for _, h := range hosts {
		i := int(stripeOf(h))
		if !seen[i] {
			seen[i] = true
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	for _, i := range idx {
		f.stripes[i].Lock()
	}
	return func() {
		for j := len(idx) - 1; j >= 0; j-- {
			f.stripes[idx[j]].Unlock()
		}
	}
}

func stripeOf(host string) uint8 {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(host); i++ {
		h ^= uint32(host[i])
		h *= 16777619
	}
	return uint8(h ^ h>>8 ^ h>>16 ^ h>>24)
}

// host returns the state of host, creating it. Caller holds mu (or is load).
func (f *frontier) host(key string) *hostState {
	h := f.hosts[key]
	if h == nil {
		h = &hostState{key: key}
		f.hosts[key] = h
	}
	return h
}

func (f *frontier) exhausted(h *hostState) bool {
	return f.budget > 0 && h.rec.Fetched >= f.budget
}

// schedulable: work to do, not in flight, not excluded.
func (f *frontier) schedulable(h *hostState) bool {
	return h.queued > 0 && !h.inFlight && !h.dropped && !h.skip && !f.exhausted(h)
}

// scheduleLocked (re)places h in the schedule. Caller holds mu.
func (f *frontier) scheduleLocked(h *hostState) {
	defer f.epoch.Add(1)
	h.gen++
	if !f.schedulable(h) {
		return
	}
	heap.Push(&f.waiting, schedItem{h: h, gen: h.gen, ready: h.readyAt().UnixNano(), cash: h.headCash, depth: h.headDepth})
	f.compactLocked()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// compactLocked drops stale heap items when they outnumber live hosts.
func (f *frontier) compactLocked() {
	if len(f.waiting)+len(f.due) < 2*len(f.hosts)+1024 {
		return
	}
	w := f.waiting[:0]
	for _, it := range f.waiting {
		if it.gen == it.h.gen {
			w = append(w, it)
		}
	}
	f.waiting = w
	heap.Init(&f.waiting)
	d := f.due[:0]
	for _, it := range f.due {
		if it.gen == it.h.gen {
			d = append(d, it)
		}
	}
	f.due = d
	heap.Init(&f.due)
}

// startupDelay makes every host wait its politeness delay after a start: the
// previous process may have been killed right after a request whose delay it
// had no time to persist.
func (f *frontier) startupDelay(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.hosts {
		d := max(f.cfg.MinDelay, f.cfg.robotsDelay(h))
		if t := now.Add(d).UnixNano(); d > 0 && t > h.rec.NextAllowed {
			h.rec.NextAllowed = t
			f.scheduleLocked(h)
		}
	}
}

// next takes the due host with the best head priority and marks it in
// flight. If none is due it returns the wait until the earliest one (or -1
// when nothing is scheduled at all).
func (f *frontier) next(now time.Time) (*hostState, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := now.UnixNano()
	for len(f.waiting) > 0 && f.waiting[0].ready <= n {
		it := heap.Pop(&f.waiting).(schedItem)
		if it.gen == it.h.gen {
			heap.Push(&f.due, it)
		}
	}
	for len(f.due) > 0 {
		it := heap.Pop(&f.due).(schedItem)
		if it.gen != it.h.gen {
			continue
		}
		h := it.h
		h.inFlight = true
		h.gen++
		f.flying++
		f.epoch.Add(1)
		if len(f.due) > 0 { // let another worker take the next due host
			select {
			case f.wake <- struct{}{}:
			default:
			}
		}
		return h, 0
	}
	for len(f.waiting) > 0 {
		it := f.waiting[0]
		if it.gen != it.h.gen {
			heap.Pop(&f.waiting)
			continue
		}
		return nil, time.Duration(it.ready - n)
	}
	return nil, -1
}

// release ends h's slot: politeness bookkeeping, then back into the schedule.
// The head priority is refreshed from Badger because the slot may have
// removed the head. A gated slot touched no queue entry, and adds keep the
// in-memory head current, so it skips the read: a host waiting for its
// takeover is gated every half second.
func (f *frontier) release(h *hostState, now time.Time, o fetchOutcome, resp, retryAfter, minWait time.Duration) {
	gated := o == outcomeGated
	var cash float64
	var depth int
	var ok bool
	if !gated {
		// Under the host's lock no add can commit between reading the head
		// and updating the in-memory state, so both agree with Badger.
		defer f.lockHosts(h.key)()
		cash, depth, ok = f.readHead(h.key)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg.release(h, now, o, resp, retryAfter)
	h.gated = gated
	h.gatedUntil = 0
	switch t := now.Add(minWait).UnixNano(); {
	case h.gated:
		// No request was made: the pause is how soon to ask the gate
		// again, not politeness owed to the host, so it stays out of the
		// record, and a slot gated again changes nothing to save.
		h.gatedUntil = t
	case minWait > 0 && t > h.rec.NextAllowed:
		h.rec.NextAllowed = t
	}
	switch {
	case gated: // the head is as adds left it
	case ok:
		h.headCash, h.headDepth = cash, depth
	case h.queued != 0:
		// Badger has no entry left: trust it, or the host would spin.
		f.queued -= h.queued
		h.queued = 0
	}
	h.inFlight = false
	f.flying--
	f.scheduleLocked(h)
}

func (f *frontier) readHead(host string) (cash float64, depth int, ok bool) {
	_ = f.db.View(func(txn *badger.Txn) error {
		key, _, err := f.firstQueued(txn, host)
		if err == nil && key != nil {
			_, cash, depth, err = decodeQueueKey(key)
			ok = err == nil
		}
		return nil
	})
	return cash, depth, ok
}

// queueMark is a host's queue mark: a key at or below its first live
// queue entry, and, when the key was read as that entry, its URL.
type queueMark struct {
	key, url []byte
}

// firstQueued returns host's first live queue key (nil if none) and its
// URL, from the host's mark when the mark holds the entry read last,
// else seeking from the mark, which it then moves to that key. Callers
// hold host's stripe lock, so no add commits a key below the mark
// between the read and the move.
func (f *frontier) firstQueued(txn *badger.Txn, host string) (key, val []byte, err error) {
	marks := f.queueFrom[stripeOf(host)]
	from := marks[host]
	if from.url != nil {
		return from.key, from.url, nil
	}
	prefix := queuePrefix(host)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 1})
	defer it.Close()
	if from.key == nil {
		it.Rewind()
	} else if it.Seek(from.key); !it.Valid() {
		it.Rewind() // empty above the mark: make sure before saying so
	}
	if !it.Valid() {
		delete(marks, host)
		return nil, nil, nil
	}
	key = it.Item().KeyCopy(nil)
	if val, err = it.Item().ValueCopy(nil); err != nil {
		return nil, nil, err
	}
	marks[host] = queueMark{key: key, url: val}
	return key, val, nil
}

// forgetQueuedURL keeps host's mark but not the entry read there, which
// turned out not to be live. Callers hold host's stripe lock.
func (f *frontier) forgetQueuedURL(host string) {
	marks := f.queueFrom[stripeOf(host)]
	if m, ok := marks[host]; ok {
		marks[host] = queueMark{key: m.key}
	}
}

// lowerQueueMark keeps host's mark at or below key, a queue key just
// committed. Callers hold host's stripe lock.
func (f *frontier) lowerQueueMark(host string, key []byte) {
	marks := f.queueFrom[stripeOf(host)]
	if from, ok := marks[host]; ok && bytes.Compare(key, from.key) < 0 {
		marks[host] = queueMark{key: key}
	}
}

// queued is one frontier entry as read by a worker.
type queued struct {
	key  []byte
	host string
	hash urlHash
	rec  *seenRecord
}

// head returns the first live entry of host's queue; orphan keys (no seen
// record pointing at them, which only a bug or a torn import could leave)
// are deleted on the way.
func (f *frontier) head(ctx context.Context, host string) (*queued, error) {
	for range 100 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var q *queued
		var orphan []byte
		unlock := f.lockHosts(host)
		err := f.db.View(func(txn *badger.Txn) error {
			key, u, err := f.firstQueued(txn, host)
			if err != nil || key == nil {
				return err
			}
			hash := hashURL(string(u))
			rec, err := queuedRecord(txn, host, hash, key)
			if err != nil {
				return err
			}
			if rec == nil {
				orphan = key
				return nil
			}
			q = &queued{key: key, host: host, hash: hash, rec: rec}
			return nil
		})
		if orphan != nil || err != nil {
			f.forgetQueuedURL(host)
		}
		unlock()
		if err != nil {
			return nil, fmt.Errorf("frontier head of %s: %w", host, err)
		}
		if orphan == nil {
			return q, nil
		}
		if err := f.deleteOrphan(host, orphan); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("frontier head of %s: too many orphan queue keys", host)
}

// queuedRecord is the seen record of the URL whose hash is hash, when it
// is queued under key; nil when key is an orphan (no record, one that does
// not decode, or one that is not queued there).
func queuedRecord(txn *badger.Txn, host string, hash urlHash, key []byte) (*seenRecord, error) {
	item, err := txn.Get(seenKey(host, hash))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var rec *seenRecord
	if item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err }) != nil ||
		rec.State != stateQueued || !bytes.Equal(rec.QKey, key) {
		return nil, nil
	}
	return rec, nil
}

func (f *frontier) deleteOrphan(host string, key []byte) error {
	defer f.lockHosts(host)()
	err := f.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(key); errors.Is(err, badger.ErrKeyNotFound) {
			key = nil
			return nil
		}
		return txn.Delete(key)
	})
	if err != nil {
		return fmt.Errorf("delete orphan queue key: %w", err)
	}
	if key != nil {
		f.mu.Lock()
		f.hosts[host].queued--
		f.queued--
		f.mu.Unlock()
	}
	return nil
}

// addItem is one URL for the frontier, already normalised and filtered.
type addItem struct {
	url   string
	host  string
	cash  float64
	depth int
	// base: an external script (Discovered.Base).
	base string
	// recrawl marks a fetched URL going back into the queue (it is not new).
	recrawl bool
}

// addedKey is a queue key an add wrote.
type addedKey struct {
	host string
	key  []byte
}

// addResult counts what add did.
type addResult struct{ New, Known int }

// itemsPerTxn is how many URLs one frontier transaction takes when their
// number is up to a peer or a page (a handed-off host's records, URLs
// marked fetched, a page's links once they did not fit together). Each
// writes its seen record and its queue entry and deletes the old entry:
// keys carry the host (at most maxImportHost bytes), and a
// value is inline in the transaction up to Badger's value threshold (a
// record is at most maxImportRecord), beyond it a pointer; a transaction
// holds up to Badger's MaxBatchSize (15 % of a memtable).
func (f *frontier) itemsPerTxn() int {
	perItem := 3*(2*maxImportHost+64) + 2*min(int(f.db.Opts().ValueThreshold), maxImportRecord)
	return max(16, min(500, int(f.db.MaxBatchSize())/perItem))
}

// add puts items into the frontier in one transaction together with extra
// (the processing stage deletes its queue entry in the same transaction, so
// links are enqueued exactly once). A URL already queued gets the cash
// added and moves up its host queue: at once for the link that reads its
// record, at the next settle for the links after it (linkcash.go). A URL
// already fetched keeps the cash for its next visit and its importance.
// An external script keeps the base of the first page that included it.
func (f *frontier) add(items []addItem, extra func(txn *badger.Txn) error, extraHosts ...string) (addResult, error) {
	hosts := extraHosts
	for _, it := range items {
		hosts = append(hosts, it.host)
	}
	defer f.lockHosts(hosts...)()
	type delta struct {
		n           int64
		cash        float64
		depth       int
		improveHead bool
	}
	var res addResult
	deltas := map[string]*delta{}
	var newHashes []urlHash
	inBatch := map[urlHash]bool{} // the Bloom filter learns of this batch only after commit
	var newKeys []addedKey
	var linked []linkCredit   // links to URLs seen before, credited in memory
	var requeued []linkCredit // fetched URLs queued again, their credited cash folded in
	err := f.db.Update(func(txn *badger.Txn) error {
		res = addResult{}
		clear(deltas)
		clear(inBatch)
		newKeys = newKeys[:0]
		newHashes = newHashes[:0]
		linked, requeued = linked[:0], requeued[:0]
		for _, it := range items {
			h := hashURL(it.url)
			// A script include may set a queued URL's base: that takes
			// its record.
			if e := f.remembered(it.host, h); e != nil && !it.recrawl && (it.base == "" || !e.queued) {
				res.Known++
				e.used = true // kept should the stripe fill before the credit
				linked = append(linked, linkCredit{host: it.host, hash: h, cash: it.cash, depth: it.depth, credit: true})
				continue
			}
			sk := seenKey(it.host, h)
			var rec *seenRecord
			if f.bloom == nil || it.recrawl || inBatch[h] || f.bloom.mayContain(h) {
				item, err := txn.Get(sk)
				switch {
				case errors.Is(err, badger.ErrKeyNotFound):
				case err != nil:
					return err
				default:
					if err := item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err }); err != nil {
						rec = nil // a corrupt record is replaced
					}
				}
			}
			if rec == nil && it.recrawl {
				continue // dropped (handoff) since it was scheduled
			}
			var oldKey []byte
			switch {
			case rec == nil:
				res.New++
				rec = &seenRecord{URL: it.url, State: stateQueued, Cash: it.cash, History: it.cash, Depth: it.depth, Base: it.base}
				newHashes = append(newHashes, h)
				inBatch[h] = true
			case it.recrawl:
				if rec.State != stateDone {
					continue
				}
				rec.State = stateQueued
				rec.Attempts = 0
				rec.NextFetch = 0
				if e := f.remembered(it.host, h); e != nil {
					rec.Cash += e.pending
					rec.History += e.pending
				}
				requeued = append(requeued, linkCredit{host: it.host, hash: h})
			case rec.State == stateQueued:
				res.Known++
				if it.base != "" && rec.Base == "" {
					// Queued as a link, now included as a script: it is
					// fetched as one. The first includer's base stays.
					rec.Base = it.base
					if err := txn.Set(sk, rec.encode()); err != nil {
						return err
					}
				}
				// This link moves it up now; from the next link on, cash
				// and depth wait in memory for a settle, which moves it
				// once for all of them (linkcash.go).
				if it.cash <= 0 && it.depth >= rec.Depth {
					linked = append(linked, linkCredit{host: it.host, hash: h, read: true, queued: true, recDepth: rec.Depth})
					continue
				}
				oldKey = rec.QKey
				rec.Cash += max(it.cash, 0)
				rec.History += max(it.cash, 0)
				rec.Depth = min(rec.Depth, it.depth)
				linked = append(linked, linkCredit{host: it.host, hash: h, read: true, queued: true, recDepth: rec.Depth})
			default: // fetched: the cash waits for the next visit; from the next link on, in memory (linkcash.go)
				res.Known++
				linked = append(linked, linkCredit{host: it.host, hash: h, read: true})
				if it.cash <= 0 {
					continue
				}
				rec.Cash += it.cash
				rec.History += it.cash
				if err := txn.Set(sk, rec.encode()); err != nil {
					return err
				}
				continue
			}
			seq, err := f.seq.Next()
			if err != nil {
				return fmt.Errorf("frontier sequence: %w", err)
			}
			rec.QKey = queueKey(it.host, rec.Cash, rec.Depth, seq)
			if oldKey != nil {
				if err := txn.Delete(oldKey); err != nil {
					return err
				}
			}
			if err := txn.Set(rec.QKey, []byte(it.url)); err != nil {
				return err
			}
			newKeys = append(newKeys, addedKey{it.host, rec.QKey})
			if err := txn.Set(sk, rec.encode()); err != nil {
				return err
			}
			d := deltas[it.host]
			if d == nil {
				d = &delta{cash: -1}
				deltas[it.host] = d
			}
			if oldKey == nil {
				d.n++
			}
			if rec.Cash > d.cash || (rec.Cash == d.cash && rec.Depth < d.depth) {
				d.cash, d.depth, d.improveHead = rec.Cash, rec.Depth, true
			}
		}
		if extra != nil {
			return extra(txn)
		}
		return nil
	})
	if err != nil {
		return addResult{}, fmt.Errorf("frontier add: %w", err)
	}
	for _, k := range newKeys {
		f.lowerQueueMark(k.host, k.key)
	}
	for _, r := range requeued {
		delete(f.cash[stripeOf(r.host)], r.hash)
	}
	f.credit(linked)
	if f.bloom != nil {
		for _, h := range newHashes {
			f.bloom.add(h)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.epoch.Add(1)
	for host, d := range deltas {
		h := f.host(host)
		wasEmpty := h.queued == 0
		h.queued += d.n
		f.queued += d.n
		better := d.improveHead && (wasEmpty || d.cash > h.headCash || (d.cash == h.headCash && d.depth < h.headDepth))
		if better {
			h.headCash, h.headDepth = d.cash, d.depth
		}
		if (wasEmpty || better) && !h.inFlight {
			f.scheduleLocked(h)
		}
	}
	return res, nil
}

// finish removes a fetched entry from the frontier in one transaction with
// extra (which writes the processing-queue entry): from then on the URL is
// never fetched again, whatever happens to the process. The seen record is
// re-read under the host's lock because a settle may have moved the key
// while the fetch was running, and the cash credited in memory since the
// last settle is taken into it. update may change the record before it is
// written.
func (f *frontier) finish(q *queued, update func(rec *seenRecord), extra func(txn *badger.Txn, rec *seenRecord) error) error {
	defer f.lockHosts(q.host)()
	removed := false
	credited := func() {}
	err := f.db.Update(func(txn *badger.Txn) error {
		removed = false
		sk := seenKey(q.host, q.hash)
		item, err := txn.Get(sk)
		if err != nil {
			return fmt.Errorf("seen record of %s: %w", q.rec.URL, err)
		}
		var rec *seenRecord
		if err := item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err }); err != nil {
			return err
		}
		credited = f.takeCredit(q.host, q.hash, rec)
		if rec.State == stateQueued {
			if err := txn.Delete(rec.QKey); err != nil {
				return err
			}
			removed = true
		}
		rec.State = stateDone
		rec.QKey = nil
		if update != nil {
			update(rec)
		}
		if extra != nil {
			if err := extra(txn, rec); err != nil {
				return err
			}
		}
		return txn.Set(sk, rec.encode())
	})
	if err != nil {
		return fmt.Errorf("frontier finish %s: %w", q.rec.URL, err)
	}
	credited()
	if removed {
		f.forgetQueuedURL(q.host) // the entry read at the mark, most likely
		f.mu.Lock()
		f.hosts[q.host].queued--
		f.queued--
		f.mu.Unlock()
	}
	return nil
}

// settleQueued settles up to limit of host's queued URLs, best first,
// without fetching them, each as finish would with update, in one
// transaction: a host that cannot be reached gives up its queue in one
// read and one write, not a read and a write per URL. Queue keys without
// a live seen record are deleted (as head deletes them) and count
// towards limit. It returns how many URLs it settled, and whether the
// queue may hold more.
func (f *frontier) settleQueued(host string, limit int, update func(rec *seenRecord)) (settled int, more bool, err error) {
	defer f.lockHosts(host)()
	type entry struct{ key, url []byte }
	var credited []func()
	err = f.db.Update(func(txn *badger.Txn) error {
		credited, settled = credited[:0], 0
		var entries []entry
		from := f.queueFrom[stripeOf(host)][host].key
		it := txn.NewIterator(badger.IteratorOptions{Prefix: queuePrefix(host), PrefetchValues: true, PrefetchSize: min(limit, 100)})
		// Nothing is queued below the mark (lowerQueueMark); an empty
		// queue above it is checked from the start, as firstQueued does.
		if it.Seek(from); from != nil && !it.Valid() {
			it.Rewind()
		}
		for ; it.Valid() && len(entries) < limit; it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				it.Close()
				return err
			}
			entries = append(entries, entry{it.Item().KeyCopy(nil), v})
		}
		it.Close()
		more = len(entries) == limit
		for _, e := range entries {
			if err := txn.Delete(e.key); err != nil {
				return err
			}
			hash := hashURL(string(e.url))
			rec, err := queuedRecord(txn, host, hash, e.key)
			if err != nil {
				return err
			}
			if rec == nil {
				continue // an orphan queue key
			}
			credited = append(credited, f.takeCredit(host, hash, rec))
			rec.State, rec.QKey = stateDone, nil
			update(rec)
			if err := txn.Set(seenKey(host, hash), rec.encode()); err != nil {
				return err
			}
			settled++
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("frontier settle the queue of %s: %w", host, err)
	}
	for _, c := range credited {
		c()
	}
	f.forgetQueuedURL(host)
	if settled > 0 {
		f.mu.Lock()
		f.hosts[host].queued -= int64(settled)
		f.queued -= int64(settled)
		f.mu.Unlock()
	}
	return settled, more, nil
}

// retry keeps the entry queued after a transient failure, counting the
// attempt (the URL is re-queued in place, never duplicated).
func (f *frontier) retry(q *queued, outcome string) error {
	defer f.lockHosts(q.host)()
	err := f.db.Update(func(txn *badger.Txn) error {
		sk := seenKey(q.host, q.hash)
		item, err := txn.Get(sk)
		if err != nil {
			return err
		}
		var rec *seenRecord
		if err := item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err }); err != nil {
			return err
		}
		rec.Attempts++
		rec.Outcome = outcome
		return txn.Set(sk, rec.encode())
	})
	if err != nil {
		return fmt.Errorf("frontier retry %s: %w", q.rec.URL, err)
	}
	return nil
}

// hostRecordOf returns h's record as saveHost writes it.
func (f *frontier) hostRecordOf(h *hostState) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return h.rec.encode()
}

// saveHost persists h's record.
func (f *frontier) saveHost(h *hostState) error { return f.saveHostChanged(h, nil) }

// saveHostChanged persists h's record unless it is still before (from
// hostRecordOf at the start of a slot): a slot that made no request
// changes nothing (most are of hosts the Sink's gate holds back while
// their takeover runs, asked again every half second), and each save is
// a transaction of its own. A record changed meanwhile by another path
// was saved by it.
func (f *frontier) saveHostChanged(h *hostState, before []byte) error {
	f.mu.Lock()
	v, dropped := h.rec.encode(), h.dropped
	f.mu.Unlock()
	if dropped || bytes.Equal(v, before) {
		return nil
	}
	if err := f.db.Update(func(txn *badger.Txn) error { return txn.Set(hostKey(h.key), v) }); err != nil {
		return fmt.Errorf("save host %s: %w", h.key, err)
	}
	return nil
}

// counts returns totals for Stats and Idle.
type frontierCounts struct {
	Queued, Hosts, Active, InFlight, Parked, Skipped, Exhausted int64
	// SoonDue: hosts with queued work whose timer expires before the horizon
	// (parked hosts never count: they are presumed dead until they answer).
	SoonDue int64
	// Busy lists up to the busy argument of counts of the hosts that keep
	// the crawler from being idle: in flight first, then the soonest due.
	Busy []BusyHost
}

func (f *frontier) counts(now time.Time, horizon time.Duration, busy int) frontierCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := frontierCounts{Queued: f.queued, Hosts: int64(len(f.hosts)), InFlight: int64(f.flying)}
	limit := now.Add(horizon).UnixNano()
	for _, h := range f.hosts {
		if h.queued > 0 {
			c.Active++
		}
		if h.parked(now) {
			c.Parked++
		}
		if h.skip {
			c.Skipped++
		}
		if f.exhausted(h) && h.queued > 0 {
			c.Exhausted++
		}
		soon := f.schedulable(h) && !h.parked(now) && h.readyAt().UnixNano() <= limit
		if soon {
			c.SoonDue++
		}
		if busy > 0 && (soon || h.inFlight) {
			c.Busy = append(c.Busy, BusyHost{Host: h.key, Queued: h.queued, InFlight: h.inFlight, Gated: h.gated, ReadyAt: h.readyAt()})
		}
	}
	slices.SortFunc(c.Busy, func(a, b BusyHost) int {
		if a.InFlight != b.InFlight {
			if a.InFlight {
				return -1
			}
			return 1
		}
		return a.ReadyAt.Compare(b.ReadyAt)
	})
	if len(c.Busy) > busy {
		c.Busy = c.Busy[:busy]
	}
	return c
}
