package crawl

import (
	"context"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// Cash for fetched URLs is credited in memory and written in batches.
//
// Most links of a site point at pages fetched long ago (its navigation:
// the same pages from every page), and OPIC gives each of them a share of
// the linking page's cash. Written as it arrives, every such link cost a
// read and a rewrite of the target's seen record, which compaction then
// had to carry; a fetched URL's cash only orders its next visit and rates
// its importance then, so nothing needs it before that visit. IRLbot's
// DRUM batches its URL checks and updates against disk for the same
// reason.
//
// The frontier therefore remembers, per lock stripe, URLs it has read to
// be fetched (doneEntry), at most donePerStripe of them, with the cash
// they received since. The link that reads a fetched record writes its
// cash there as before, so a URL linked once costs what it did; from the
// next link on, it costs no Badger access. The credited cash is added to
// the seen record when the stripe fills, every settleInterval
// (Crawler.Run), before a host is exported, when the URL goes back into
// the queue for a recrawl (add folds it in) and at Close. A full stripe
// keeps the URLs credited since it last filled (a site's navigation) and
// forgets the rest. A crash loses the cash credited since the last
// settle, never a URL: the seen records themselves are written as before.
//
// An entry means "fetched in Badger" for as long as it exists: the only
// ways back from fetched are a recrawl (add removes the entry) and a
// dropped host (dropKeys removes its entries); every other writer of a
// fetched record keeps its cash as read, to which a settle adds.

// donePerStripe bounds the fetched URLs each stripe remembers: about 100
// bytes each, so at most 13 MiB when a node's hosts fill all 256 stripes,
// and well under a MiB per host that a node crawls.
const donePerStripe = 512

// doneEntry is a fetched URL, the cash it received since its record was
// last written, and whether it received any since its stripe last filled.
type doneEntry struct {
	host    string
	pending float64
	used    bool
}

// doneCredit is cash for a fetched URL, credited after its transaction
// committed.
type doneCredit struct {
	host string
	hash urlHash
	cash float64
}

// doneKnown reports whether h (of host) is remembered as fetched. Callers
// hold host's stripe lock.
func (f *frontier) doneKnown(host string, h urlHash) bool {
	return f.done[stripeOf(host)][h] != nil
}

// rememberDone remembers fetched URLs whose records were just read (and
// written with their cash). Callers hold the stripes of their hosts.
func (f *frontier) rememberDone(urls []doneCredit) {
	for _, u := range urls {
		f.doneEntry(u.host, u.hash)
	}
}

// creditDone adds cash to remembered fetched URLs. Callers hold the
// stripes of the credits' hosts.
func (f *frontier) creditDone(credits []doneCredit) {
	for _, c := range credits {
		e := f.doneEntry(c.host, c.hash)
		e.pending += max(c.cash, 0)
		e.used = true
	}
}

// doneEntry returns h's entry, creating it, and making room first when
// the stripe is full: settle, then forget the entries not credited since
// the stripe last filled (all of them if that frees too little). A settle
// that fails forgets nothing: the stripe stays over its bound, and the
// next entry created tries again.
func (f *frontier) doneEntry(host string, h urlHash) *doneEntry {
	s := stripeOf(host)
	m := f.done[s]
	if m == nil {
		m = make(map[urlHash]*doneEntry)
		f.done[s] = m
	}
	if e := m[h]; e != nil {
		return e
	}
	if len(m) >= donePerStripe && f.settleStripe(s) == nil {
		for k, e := range m {
			if e.used {
				e.used = false
			} else {
				delete(m, k)
			}
		}
		if len(m) > donePerStripe/2 {
			clear(m)
		}
	}
	e := &doneEntry{host: host}
	m[h] = e
	return e
}

// dropDone forgets h, whose pending cash went into its record. Callers
// hold host's stripe lock.
func (f *frontier) dropDone(host string, h urlHash) {
	delete(f.done[stripeOf(host)], h)
}

// peekDone returns h's pending cash without removing its entry. Callers
// hold host's stripe lock.
func (f *frontier) peekDone(host string, h urlHash) float64 {
	if e := f.done[stripeOf(host)][h]; e != nil {
		return e.pending
	}
	return 0
}

// forgetDone drops host's entries (its records are being deleted).
// Callers hold host's stripe lock.
func (f *frontier) forgetDone(host string) {
	m := f.done[stripeOf(host)]
	for h, e := range m {
		if e.host == host {
			delete(m, h)
		}
	}
}

// settleStripe writes the pending cash of stripe s's entries into their
// seen records. Callers hold stripe s.
func (f *frontier) settleStripe(s uint8) error {
	m := f.done[s]
	var due []urlHash
	for h, e := range m {
		if e.pending > 0 {
			due = append(due, h)
		}
	}
	chunk := f.itemsPerTxn()
	for start := 0; start < len(due); start += chunk {
		part := due[start:min(start+chunk, len(due))]
		err := f.db.Update(func(txn *badger.Txn) error {
			for _, h := range part {
				e := m[h]
				sk := seenKey(e.host, h)
				item, err := txn.Get(sk)
				if errors.Is(err, badger.ErrKeyNotFound) {
					continue
				} else if err != nil {
					return err
				}
				var rec *seenRecord
				if err := item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err }); err != nil || rec.State != stateDone {
					continue // corrupt (replaced when next seen), or not fetched: no entry should say so
				}
				rec.Cash += e.pending
				rec.History += e.pending
				if err := txn.Set(sk, rec.encode()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("settle cash of fetched URLs: %w", err)
		}
		for _, h := range part {
			m[h].pending = 0
		}
	}
	return nil
}

// settleHost settles the stripe of host, so that host's seen records
// carry all their cash.
func (f *frontier) settleHost(host string) error {
	defer f.lockHosts(host)()
	return f.settleStripe(stripeOf(host))
}

// settleAll settles every stripe, one at a time.
func (f *frontier) settleAll() error {
	var errs []error
	for s := range f.stripes {
		f.stripes[s].Lock()
		if len(f.done[s]) > 0 {
			errs = append(errs, f.settleStripe(uint8(s)))
		}
		f.stripes[s].Unlock()
	}
	return errors.Join(errs...)
}

// settleInterval is how often Run writes the cash credited to fetched
// URLs, and so how much of it a crash can lose.
const settleInterval = 10 * time.Second

// settleLoop settles every settleInterval until ctx ends, and once more
// then.
func (c *Crawler) settleLoop(ctx context.Context) {
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-c.clock.After(settleInterval):
		}
		if err := c.front.settleAll(); err != nil {
			c.log.Error("settle cash of fetched URLs", "err", err)
		}
	}
}
