package crawl

import (
	"context"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Cash that links give to URLs already seen is credited in memory and
// written in batches.
//
// Most links of a site point at pages seen before: its navigation, the
// same pages from every page, fetched long ago or still queued. OPIC gives
// each of them a share of the linking page's cash. Written as it arrived,
// every such link cost a read of the target's seen record and a rewrite of
// it; a queued target also moved in its host's queue (its key encodes its
// cash), so that a link cost a read and three writes, which compaction
// then had to carry. Nothing needs a fetched URL's cash before its next
// visit, and a queued URL's order only needs to be about right: IRLbot's
// DRUM batches its URL checks and updates against disk for the same
// reason.
//
// The frontier therefore remembers, per lock stripe, URLs whose seen
// records exist (cashEntry), at most cashPerStripe of them, with the cash
// they received since their record was last written and the least depth
// a link gave them. A URL is remembered when a link reads its record, and
// that link writes its cash (moving a queued URL), so that a URL linked
// once costs what it did and a full stripe can forget the URLs linked
// once without writing them; from the next link on, it costs no Badger
// access. The credit reaches the seen record
// when the stripe fills, every settleInterval (Crawler.Run) and, for
// queued URLs, every queuedSettleInterval; when the URL is fetched
// (finish takes it into the cash the page passes on); before a host is
// exported; when the URL goes back into the queue for a recrawl (add
// folds it in); and at Close. A settle moves a queued URL in its queue
// once for all the links it was credited since the last, so its place
// lags its links by at most queuedSettleInterval. A full stripe forgets
// the URLs that hold nothing to write (linked once, or settled since);
// only when they are too few does it settle and forget all but the URLs
// credited since it last filled (a site's navigation).
// A crash
// loses the cash credited since the last settle, never a URL: a URL seen
// for the first time is written at once.
//
// An entry means "seen record in Badger" for as long as it exists: the
// only path that deletes seen records is a dropped host (dropKeys), which
// forgets its entries first. Every other writer of a record keeps its
// cash and depth as read, to which a settle adds, whatever the record's
// state then.

// cashPerStripe bounds the URLs each stripe remembers: about 100 bytes
// each, so at most 52 MiB when a node's hosts fill all 256 stripes, and
// 200 KiB per stripe its hosts use. The URLs of a site linked more than
// once between two settles (its navigation, its sections' sibling
// links) must fit, or every new entry settles them all, which costs
// more than the writes it saves (BENCHMARKS.md, "Links to queued URLs").
const cashPerStripe = 2048

// cashEntry is a URL whose seen record exists, the cash it received since
// its record was last written, and whether it received any since its
// stripe last filled.
type cashEntry struct {
	host    string
	pending float64
	// depth is the least depth known for a queued URL: its record's when
	// remembered, lowered by links (then lowered is set until the next
	// write of the record). A fetched URL's depth is settled; links do
	// not change it.
	depth   int
	lowered bool
	queued  bool // the record was queued when last read or written here
	used    bool
}

// dirty reports whether the entry holds something its record lacks.
func (e *cashEntry) dirty() bool { return e.pending > 0 || e.lowered }

// linkCredit is a link to a URL whose seen record exists, applied to the
// URL's entry once the link's transaction committed.
type linkCredit struct {
	host  string
	hash  urlHash
	cash  float64 // what the link gives
	depth int     // the depth it gives
	// read: the link read the record, which was queued (then its
	// depth is recDepth) or fetched; the entry takes that state.
	read     bool
	queued   bool
	recDepth int
	// credit: cash and depth are to be credited (not for a link that
	// wrote a fetched record's cash itself).
	credit bool
}

// remembered returns h's entry (nil if none). Callers hold host's stripe
// lock.
func (f *frontier) remembered(host string, h urlHash) *cashEntry {
	return f.cash[stripeOf(host)][h]
}

// credit applies links, in order, to their URLs' entries, creating them.
// Callers hold the stripes of the links' hosts.
func (f *frontier) credit(links []linkCredit) {
	for _, c := range links {
		e := f.cashEntry(c.host, c.hash)
		if c.read {
			e.queued = c.queued
			if !e.lowered {
				e.depth = c.recDepth
			}
		}
		if !c.credit {
			continue
		}
		e.pending += max(c.cash, 0)
		if e.queued && c.depth < e.depth {
			e.depth, e.lowered = c.depth, true
		}
		e.used = true
	}
}

// cashEntry returns h's entry, creating it, and making room first when
// the stripe is full: forget the entries that hold no credit (nothing to
// write: URLs linked once, or settled since), and only if that frees too
// little, settle and forget those not credited since the stripe last
// filled (all of them if that still frees too little). A settle that
// fails forgets no entry that holds credit: the stripe stays over its
// bound, and the next entry created tries again.
func (f *frontier) cashEntry(host string, h urlHash) *cashEntry {
	s := stripeOf(host)
	m := f.cash[s]
	if m == nil {
		m = make(map[urlHash]*cashEntry)
		f.cash[s] = m
	}
	if e := m[h]; e != nil {
		return e
	}
	if len(m) >= cashPerStripe {
		forgetClean(m, false)
		if len(m) > cashPerStripe*3/4 && f.settleStripe(s, false) == nil {
			forgetClean(m, true)
			if len(m) > cashPerStripe/2 {
				clear(m)
			}
		}
		for _, e := range m {
			e.used = false
		}
	}
	e := &cashEntry{host: host}
	m[h] = e
	return e
}

// forgetClean drops the entries of m that hold no credit (only those not
// credited since their stripe last filled if unusedOnly).
func forgetClean(m map[urlHash]*cashEntry, unusedOnly bool) {
	for k, e := range m {
		if !e.dirty() && !(unusedOnly && e.used) {
			delete(m, k)
		}
	}
}

// takeCredit folds h's entry into rec, a record read to be written under
// host's stripe lock, and returns what to call once that write commits
// (with rec as written).
func (f *frontier) takeCredit(host string, h urlHash, rec *seenRecord) (committed func()) {
	e := f.remembered(host, h)
	if e == nil {
		return func() {}
	}
	rec.Cash += e.pending
	rec.History += e.pending
	if e.lowered && rec.State == stateQueued {
		rec.Depth = min(rec.Depth, e.depth)
	}
	return func() {
		e.pending, e.lowered = 0, false
		e.queued, e.depth = rec.State == stateQueued, rec.Depth
	}
}

// forgetHostCash drops host's entries (its records are being deleted).
// Callers hold host's stripe lock.
func (f *frontier) forgetHostCash(host string) {
	m := f.cash[stripeOf(host)]
	for h, e := range m {
		if e.host == host {
			delete(m, h)
		}
	}
}

// requeuedKey is a queue key a settle wrote, for the in-memory state.
type requeuedKey struct {
	host  string
	key   []byte
	cash  float64
	depth int
}

// settleStripe writes what stripe s's entries hold into their seen
// records (only the queued ones' if queuedOnly), moving queued URLs to
// their new place in the queue. Callers hold stripe s and not f.mu.
func (f *frontier) settleStripe(s uint8, queuedOnly bool) error {
	m := f.cash[s]
	var due []urlHash
	for h, e := range m {
		if e.dirty() && (e.queued || !queuedOnly) {
			due = append(due, h)
		}
	}
	chunk := f.itemsPerTxn()
	for start := 0; start < len(due); start += chunk {
		part := due[start:min(start+chunk, len(due))]
		var moved []requeuedKey
		err := f.db.Update(func(txn *badger.Txn) error {
			moved = moved[:0]
			for _, h := range part {
				k, err := f.settleEntry(txn, h, m[h])
				if err != nil {
					return err
				}
				if k != nil {
					moved = append(moved, *k)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("settle cash credited by links: %w", err)
		}
		for _, h := range part {
			e := m[h]
			e.pending, e.lowered = 0, false
		}
		f.requeued(moved)
	}
	return nil
}

// settleEntry adds e to h's seen record in txn; for a queued URL whose
// place changes, it moves the queue key and returns the new one.
func (f *frontier) settleEntry(txn *badger.Txn, h urlHash, e *cashEntry) (*requeuedKey, error) {
	sk := seenKey(e.host, h)
	item, err := txn.Get(sk)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var rec *seenRecord
	if err := item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err }); err != nil {
		return nil, nil // corrupt: replaced when next seen
	}
	e.queued = rec.State == stateQueued
	depth := rec.Depth
	if e.queued && e.lowered {
		depth = min(depth, e.depth)
	}
	e.depth = depth
	if e.pending <= 0 && depth == rec.Depth {
		return nil, nil
	}
	rec.Cash += e.pending
	rec.History += e.pending
	if !e.queued {
		return nil, txn.Set(sk, rec.encode())
	}
	rec.Depth = depth
	seq, err := f.seq.Next()
	if err != nil {
		return nil, fmt.Errorf("frontier sequence: %w", err)
	}
	old := rec.QKey
	rec.QKey = queueKey(e.host, rec.Cash, rec.Depth, seq)
	if err := txn.Delete(old); err != nil {
		return nil, err
	}
	if err := txn.Set(rec.QKey, []byte(rec.URL)); err != nil {
		return nil, err
	}
	if err := txn.Set(sk, rec.encode()); err != nil {
		return nil, err
	}
	return &requeuedKey{host: e.host, key: rec.QKey, cash: rec.Cash, depth: rec.Depth}, nil
}

// requeued brings the in-memory queue state up to keys a settle moved:
// each host's mark, and its head priority where a key beat it. Callers
// hold the stripes of the keys' hosts and not f.mu.
func (f *frontier) requeued(keys []requeuedKey) {
	if len(keys) == 0 {
		return
	}
	for _, k := range keys {
		f.lowerQueueMark(k.host, k.key)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.epoch.Add(1)
	for _, k := range keys {
		h := f.hosts[k.host]
		if h == nil || h.queued == 0 {
			continue
		}
		if k.cash > h.headCash || (k.cash == h.headCash && k.depth < h.headDepth) {
			h.headCash, h.headDepth = k.cash, k.depth
			if !h.inFlight {
				f.scheduleLocked(h)
			}
		}
	}
}

// settleHost settles the stripe of host, so that host's seen records
// carry all their cash.
func (f *frontier) settleHost(host string) error {
	defer f.lockHosts(host)()
	return f.settleStripe(stripeOf(host), false)
}

// settleAll settles every stripe (only the queued URLs if queuedOnly),
// one at a time.
func (f *frontier) settleAll(queuedOnly bool) error {
	var errs []error
	for s := range f.stripes {
		f.stripes[s].Lock()
		if len(f.cash[s]) > 0 {
			errs = append(errs, f.settleStripe(uint8(s), queuedOnly))
		}
		f.stripes[s].Unlock()
	}
	return errors.Join(errs...)
}

// settleInterval is how often Run writes the cash credited to fetched
// URLs, and so how much of it a crash can lose; queuedSettleInterval how
// often it writes queued URLs', and so how long their place in the queue
// may lag their links.
const (
	settleInterval       = 10 * time.Second
	queuedSettleInterval = 2 * time.Second
)

// settleLoop settles queued URLs every queuedSettleInterval and all every
// settleInterval until ctx ends, and all once more then.
func (c *Crawler) settleLoop(ctx context.Context) {
	last := c.clock.Now()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-c.clock.After(queuedSettleInterval):
		}
		all := done || c.clock.Now().Sub(last) >= settleInterval
		if all {
			last = c.clock.Now()
		}
		if err := c.front.settleAll(!all); err != nil {
			c.log.Error("settle cash credited by links", "err", err)
		}
	}
}
