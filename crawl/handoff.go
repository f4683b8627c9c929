package crawl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// HostExport is the crawl state of one host, for handing the host to its new
// owner: the host record (politeness counters, page budget), the robots.txt
// response, and every URL-seen record (queued URLs carry their cash and
// depth, external scripts their includer's base; fetched ones their
// recrawl state). The byte fields are opaque records of this package; the
// node ships them as they are.
type HostExport struct {
	Host   string
	State  []byte   // host record, nil if none
	Robots []byte   // robots.txt record, nil if none
	URLs   [][]byte // URL-seen records
}

// maxImportRecord caps one record from a peer.
const maxImportRecord = 64 << 10

// maxImportHost bounds the host name of an imported host.
const maxImportHost = 300

// maxImportedWait caps how far ahead an imported host record may set the
// host's next request.
const maxImportedWait = time.Hour

// ExportHost snapshots the frontier, URL-seen set and host state of host.
// Responses of the host still in the processing queue are not exported:
// they are processed (and stored) here, and the node hands the stored pages
// over with the rest.
func (c *Crawler) ExportHost(ctx context.Context, host string) (*HostExport, error) {
	e := &HostExport{Host: host}
	if err := c.front.settleHost(host); err != nil {
		return nil, fmt.Errorf("export host %s: %w", host, err)
	}
	err := c.db.View(func(txn *badger.Txn) error {
		if item, err := txn.Get(hostKey(host)); err == nil {
			if e.State, err = item.ValueCopy(nil); err != nil {
				return err
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if item, err := txn.Get(robotsKey(host)); err == nil {
			if e.Robots, err = item.ValueCopy(nil); err != nil {
				return err
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: seenPrefix(host), PrefetchValues: true, PrefetchSize: 100})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			e.URLs = append(e.URLs, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("export host %s: %w", host, err)
	}
	// The in-memory host record is newer than the persisted one while a slot runs.
	c.front.mu.Lock()
	if h := c.front.hosts[host]; h != nil {
		e.State = h.rec.encode()
	}
	c.front.mu.Unlock()
	return e, nil
}

// ImportHost merges an exported host into this crawler. A URL fetched on
// either side stays fetched; cash adds up; queued URLs join the local queue.
// Importing the same export twice only adds its cash twice.
func (c *Crawler) ImportHost(ctx context.Context, e *HostExport) error {
	if e == nil || e.Host == "" || len(e.Host) > maxImportHost {
		return errors.New("import host: missing or bad host")
	}
	host := e.Host
	var hostRec *hostRecord
	if e.State != nil {
		r, err := decodeHostRecord(e.State)
		if err != nil {
			return fmt.Errorf("import host %s: %w", host, err)
		}
		hostRec = &r
	}
	var robots *robotsRecord
	if e.Robots != nil {
		robots = new(robotsRecord)
		if len(e.Robots) > c.cfg.Robots.MaxBytes*2 || json.Unmarshal(e.Robots, robots) != nil {
			return fmt.Errorf("import host %s: bad robots record", host)
		}
	}
	recs := make([]*seenRecord, 0, len(e.URLs))
	for _, b := range e.URLs {
		if len(b) > maxImportRecord {
			return fmt.Errorf("import host %s: URL record of %d bytes", host, len(b))
		}
		r, err := decodeSeenRecord(b)
		if err != nil {
			return fmt.Errorf("import host %s: %w", host, err)
		}
		u, err := NormalizeURL(r.URL, nil)
		if err != nil || HostKey(u) != host || u.String() != r.URL {
			return fmt.Errorf("import host %s: URL %q is not a normalised URL of the host", host, r.URL)
		}
		if r.Base != "" && !validBase(r.Base) {
			return fmt.Errorf("import host %s: URL %q: bad script base", host, r.URL)
		}
		if !(r.Cash >= 0) || !(r.History >= 0) {
			r.Cash, r.History = 0, 0
		}
		recs = append(recs, r)
	}
	chunk := c.front.itemsPerTxn()
	for start := 0; start < len(recs); start += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.front.importRecords(host, recs[start:min(start+chunk, len(recs))], c.recrawlKeyer()); err != nil {
			return fmt.Errorf("import host %s: %w", host, err)
		}
	}
	c.front.mu.Lock()
	h := c.front.host(host)
	h.dropped = false
	if hostRec != nil {
		h.rec.Fetched = max(h.rec.Fetched, hostRec.Fetched)
		// A peer's word on when the host may be asked next is capped: an
		// honest old owner's is at most a Retry-After away, a forged one
		// could park the host for years.
		h.rec.NextAllowed = max(h.rec.NextAllowed, min(hostRec.NextAllowed, time.Now().Add(maxImportedWait).UnixNano()))
		h.rec.SitemapsDone = h.rec.SitemapsDone || hostRec.SitemapsDone
		mergeSitemapProgress(&h.rec, hostRec.SitemapsRead, hostRec.SitemapsPending, c.cfg.Robots.MaxSitemapsPerHost)
	}
	c.front.scheduleLocked(h)
	c.front.mu.Unlock()
	if err := c.front.saveHost(h); err != nil {
		return fmt.Errorf("import host %s: %w", host, err)
	}
	if robots != nil {
		err := c.db.Update(func(txn *badger.Txn) error {
			if _, err := txn.Get(robotsKey(host)); err == nil {
				return nil // ours is at least as good
			}
			return txn.Set(robotsKey(host), e.Robots)
		})
		if err != nil {
			return fmt.Errorf("import host %s robots: %w", host, err)
		}
		c.applyRobotsRecord(host, *robots)
	}
	return nil
}

// recrawlKeyer returns how imported fetched records get a schedule key.
func (c *Crawler) recrawlKeyer() func(host string, h urlHash, rec *seenRecord) []byte {
	if !c.cfg.Recrawl.Enabled {
		return nil
	}
	return func(host string, h urlHash, rec *seenRecord) []byte {
		if rec.NextFetch == 0 {
			return nil
		}
		return recrawlKey(rec.NextFetch, host, h)
	}
}

// importRecords merges seen records of one host in one transaction.
func (f *frontier) importRecords(host string, recs []*seenRecord, recrawlKeyOf func(string, urlHash, *seenRecord) []byte) error {
	defer f.lockHosts(host)()
	var added, removed int64
	var headCash float64 = -1
	var headDepth int
	var low []byte // the least queue key written
	err := f.db.Update(func(txn *badger.Txn) error {
		added, removed, headCash, low = 0, 0, -1, nil
		for _, in := range recs {
			h := hashURL(in.URL)
			sk := seenKey(host, h)
			var local *seenRecord
			if item, err := txn.Get(sk); err == nil {
				if err := item.Value(func(v []byte) error { local, err = decodeSeenRecord(v); return err }); err != nil {
					local = nil
				}
			} else if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			rec := in
			switch {
			case local == nil:
			case local.State == stateDone:
				local.Cash += in.Cash
				local.History += in.History
				if err := txn.Set(sk, local.encode()); err != nil {
					return err
				}
				continue
			default: // local queued: fetched elsewhere wins, else cash adds up
				if err := txn.Delete(local.QKey); err != nil {
					return err
				}
				removed++
				rec.Cash += local.Cash
				rec.History += local.History
				rec.Depth = min(rec.Depth, local.Depth)
			}
			rec.QKey = nil
			if rec.State == stateQueued {
				seq, err := f.seq.Next()
				if err != nil {
					return err
				}
				rec.QKey = queueKey(host, rec.Cash, rec.Depth, seq)
				if err := txn.Set(rec.QKey, []byte(rec.URL)); err != nil {
					return err
				}
				if low == nil || bytes.Compare(rec.QKey, low) < 0 {
					low = rec.QKey
				}
				added++
				if rec.Cash > headCash || (rec.Cash == headCash && rec.Depth < headDepth) {
					headCash, headDepth = rec.Cash, rec.Depth
				}
			} else if recrawlKeyOf != nil {
				if k := recrawlKeyOf(host, h, rec); k != nil {
					if err := txn.Set(k, nil); err != nil {
						return err
					}
				}
			}
			if err := txn.Set(sk, rec.encode()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if low != nil {
		f.lowerQueueMark(host, low)
	}
	if f.bloom != nil {
		for _, r := range recs {
			f.bloom.add(hashURL(r.URL))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.host(host)
	wasEmpty := h.queued == 0
	h.queued += added - removed
	f.queued += added - removed
	if headCash >= 0 && (wasEmpty || headCash > h.headCash || (headCash == h.headCash && headDepth < h.headDepth)) {
		h.headCash, h.headDepth = headCash, headDepth
	}
	if !h.inFlight {
		f.scheduleLocked(h)
	}
	return nil
}

// DropHost forgets everything about host here (after its new owner has
// acknowledged the handoff): queue, URL-seen records, recrawl schedule,
// content claims of its pages, host record and robots.txt. It waits for a
// request in flight to the host to finish first.
func (c *Crawler) DropHost(ctx context.Context, host string) error {
	c.front.mu.Lock()
	h := c.front.hosts[host]
	if h != nil {
		h.dropped = true
		h.gen++ // out of the schedule
	}
	c.front.mu.Unlock()
	for h != nil {
		c.front.mu.Lock()
		busy := h.inFlight
		c.front.mu.Unlock()
		if !busy {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Content claims first: after the records are gone we no longer know them.
	type claim struct {
		url  string
		hash [16]byte
		sim  uint64
	}
	var claims []claim
	err := c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: seenPrefix(host), PrefetchValues: true, PrefetchSize: 100})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			_ = it.Item().Value(func(v []byte) error {
				if r, err := decodeSeenRecord(v); err == nil && len(r.ContentHash) == 16 {
					var cl claim
					cl.url, cl.sim = r.URL, r.SimHash
					copy(cl.hash[:], r.ContentHash)
					claims = append(claims, cl)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drop host %s: %w", host, err)
	}
	for _, cl := range claims {
		if err := c.dups.Release(ctx, cl.url, cl.hash, cl.sim); err != nil {
			return fmt.Errorf("drop host %s: release content claim: %w", host, err)
		}
	}
	if err := c.front.dropKeys(ctx, host); err != nil {
		return fmt.Errorf("drop host %s: %w", host, err)
	}
	return nil
}

// dropKeys deletes every key of host in batches, under the host's lock so
// that no add interleaves, then forgets the host in memory.
func (f *frontier) dropKeys(ctx context.Context, host string) error {
	defer f.lockHosts(host)()
	f.forgetHostCash(host)
	var keys [][]byte
	err := f.db.View(func(txn *badger.Txn) error {
		for _, p := range [][]byte{queuePrefix(host), seenPrefix(host)} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: bytes.Equal(p, seenPrefix(host)), PrefetchSize: 100})
			for it.Rewind(); it.Valid(); it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
				if bytes.Equal(p, seenPrefix(host)) {
					_ = it.Item().Value(func(v []byte) error {
						if r, err := decodeSeenRecord(v); err == nil && r.NextFetch != 0 {
							var h urlHash
							k := it.Item().Key()
							copy(h[:], k[len(k)-16:])
							keys = append(keys, recrawlKey(r.NextFetch, host, h))
						}
						return nil
					})
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return err
	}
	keys = append(keys, hostKey(host), robotsKey(host))
	wb := f.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	delete(f.queueFrom[stripeOf(host)], host)
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil {
		f.queued -= h.queued
		h.gen++
		delete(f.hosts, host)
	}
	return nil
}

// Hosts lists the hosts with any crawl state here, sorted.
func (c *Crawler) Hosts(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.front.mu.Lock()
	out := make([]string, 0, len(c.front.hosts))
	for k, h := range c.front.hosts {
		if !h.dropped {
			out = append(out, k)
		}
	}
	c.front.mu.Unlock()
	slices.Sort(out)
	return out, nil
}

// MarkFetched records URLs as fetched in the URL-seen set without queueing
// them (a queued one leaves the frontier). A replica that takes over a dead
// owner's host holds its pages but not its seen set; it calls MarkFetched
// for those pages, then Add with their links. Bad URLs are skipped.
func (c *Crawler) MarkFetched(ctx context.Context, urls []string) error {
	chunk := c.front.itemsPerTxn()
	for start := 0; start < len(urls); start += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		var batch []addItem
		for _, raw := range urls[start:min(start+chunk, len(urls))] {
			u, err := NormalizeURL(raw, nil)
			if err != nil {
				c.count.filter("bad_url")
				continue
			}
			batch = append(batch, addItem{url: u.String(), host: HostKey(u)})
		}
		if err := c.front.markDone(batch, c.clock.Now()); err != nil {
			return fmt.Errorf("mark fetched: %w", err)
		}
	}
	return nil
}

// markDone sets items to the fetched state, creating records as needed.
func (f *frontier) markDone(items []addItem, now time.Time) error {
	hosts := make([]string, 0, len(items))
	for _, it := range items {
		hosts = append(hosts, it.host)
	}
	defer f.lockHosts(hosts...)()
	removed := map[string]int64{}
	err := f.db.Update(func(txn *badger.Txn) error {
		clear(removed)
		for _, it := range items {
			h := hashURL(it.url)
			sk := seenKey(it.host, h)
			rec := &seenRecord{URL: it.url}
			if item, err := txn.Get(sk); err == nil {
				var old *seenRecord
				if err := item.Value(func(v []byte) error { old, err = decodeSeenRecord(v); return err }); err == nil {
					rec = old
				}
			} else if !errors.Is(err, badger.ErrKeyNotFound) {
				return err
			}
			if _, err := txn.Get(hostKey(it.host)); errors.Is(err, badger.ErrKeyNotFound) {
				// A host known only from marked URLs must still be listed by Hosts.
				if err := txn.Set(hostKey(it.host), hostRecord{}.encode()); err != nil {
					return err
				}
			}
			if rec.State == stateDone {
				continue
			}
			if rec.State == stateQueued {
				if err := txn.Delete(rec.QKey); err != nil {
					return err
				}
				removed[it.host]++
			}
			rec.State, rec.QKey, rec.Outcome = stateDone, nil, "marked"
			if rec.FetchedAt == 0 {
				rec.FetchedAt = now.UnixNano()
			}
			if err := txn.Set(sk, rec.encode()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for host := range removed {
		f.forgetQueuedURL(host)
	}
	if f.bloom != nil {
		for _, it := range items {
			f.bloom.add(hashURL(it.url))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, it := range items {
		f.host(it.host)
	}
	for host, n := range removed {
		h := f.host(host)
		h.queued -= n
		f.queued -= n
	}
	return nil
}

// NoteSitemaps records sitemaps of host that a previous owner read and the
// child sitemaps it learned and had not read yet (a node taking the host
// over from its replica pages): they are then neither read again nor
// forgotten.
func (c *Crawler) NoteSitemaps(ctx context.Context, host string, read, pending []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.front.mu.Lock()
	h := c.front.host(host)
	mergeSitemapProgress(&h.rec, read, pending, c.cfg.Robots.MaxSitemapsPerHost)
	h.sitemaps = slices.DeleteFunc(h.sitemaps, func(s string) bool { return slices.Contains(h.rec.SitemapsRead, s) })
	c.front.mu.Unlock()
	return c.front.saveHost(h)
}

// mergeSitemapProgress adds read and pending sitemaps to rec (bounded):
// read wins over pending.
func mergeSitemapProgress(rec *hostRecord, read, pending []string, limit int) {
	if rec.SitemapsDone {
		return
	}
	for _, s := range read {
		if len(rec.SitemapsRead) < limit && !slices.Contains(rec.SitemapsRead, s) {
			rec.SitemapsRead = append(rec.SitemapsRead, s)
		}
	}
	rec.SitemapsPending = slices.DeleteFunc(rec.SitemapsPending, func(s string) bool { return slices.Contains(rec.SitemapsRead, s) })
	for _, s := range pending {
		if len(rec.SitemapsPending) < limit && !slices.Contains(rec.SitemapsRead, s) && !slices.Contains(rec.SitemapsPending, s) {
			rec.SitemapsPending = append(rec.SitemapsPending, s)
		}
	}
}

// KnownURL returns a URL of e's host that the crawl state knows (fetched
// or not; the first record that decodes), or "" if none: a host given up
// with nothing queued passes it on, so that its owner hears of the host
// and takes it over from the members that hold its pages.
func (e *HostExport) KnownURL() string {
	for _, b := range e.URLs {
		if r, err := decodeSeenRecord(b); err == nil && r.URL != "" {
			return r.URL
		}
	}
	return ""
}

// Queued returns the URLs of e not fetched yet, as links to add where the
// host is crawled: a host given up without a handoff passes them on.
// Records that do not decode are skipped.
func (e *HostExport) Queued() []Discovered {
	var out []Discovered
	for _, b := range e.URLs {
		r, err := decodeSeenRecord(b)
		if err != nil || r.State != stateQueued {
			continue
		}
		out = append(out, Discovered{URL: r.URL, Cash: r.Cash, Depth: r.Depth, Base: r.Base})
	}
	return out
}
