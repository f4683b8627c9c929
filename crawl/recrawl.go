package crawl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// RecrawlConfig controls revisits of stored pages. Each page has its own
// interval: halved when a visit finds it changed, doubled when unchanged (or
// 304), always within [Min, Max]. The default Min of one day means a testnet
// run never recrawls.
type RecrawlConfig struct {
	Enabled      bool
	Initial      time.Duration // interval after the first visit
	Min, Max     time.Duration
	ScanInterval time.Duration // how often due pages are moved into the frontier
	MaxBatch     int           // pages moved per scan
}

// DefaultRecrawlConfig revisits pages between daily and monthly.
func DefaultRecrawlConfig() RecrawlConfig {
	return RecrawlConfig{
		Enabled:      true,
		Initial:      7 * 24 * time.Hour,
		Min:          24 * time.Hour,
		Max:          30 * 24 * time.Hour,
		ScanInterval: time.Minute,
		MaxBatch:     1000,
	}
}

func (r RecrawlConfig) validate() error {
	if !r.Enabled {
		return nil
	}
	switch {
	case r.Min <= 0 || r.Max < r.Min:
		return fmt.Errorf("recrawl: need 0 < Min <= Max, got %v, %v", r.Min, r.Max)
	case r.Initial < r.Min || r.Initial > r.Max:
		return fmt.Errorf("recrawl: Initial %v outside [Min %v, Max %v]", r.Initial, r.Min, r.Max)
	case r.ScanInterval <= 0:
		return fmt.Errorf("recrawl: ScanInterval %v <= 0", r.ScanInterval)
	case r.MaxBatch < 1:
		return fmt.Errorf("recrawl: MaxBatch %d < 1", r.MaxBatch)
	}
	return nil
}

// nextInterval adapts a page's revisit interval to whether it changed.
func (r RecrawlConfig) nextInterval(prev time.Duration, changed, firstVisit bool) time.Duration {
	var d time.Duration
	switch {
	case firstVisit || prev <= 0:
		d = r.Initial
	case changed:
		d = prev / 2
	default:
		d = prev * 2
	}
	return min(max(d, r.Min), r.Max)
}

func recrawlKey(due int64, host string, h urlHash) []byte {
	k := make([]byte, 0, len(pfxRecrawl)+8+len(host)+1+16)
	k = append(k, pfxRecrawl...)
	k = binary.BigEndian.AppendUint64(k, uint64(max(due, 0)))
	k = append(k, host...)
	k = append(k, '/')
	return append(k, h[:]...)
}

func decodeRecrawlKey(k []byte) (due int64, host string, h urlHash, err error) {
	if len(k) < len(pfxRecrawl)+8+2+16 {
		return 0, "", h, fmt.Errorf("bad recrawl key %q", k)
	}
	due = int64(binary.BigEndian.Uint64(k[len(pfxRecrawl):]))
	host = string(k[len(pfxRecrawl)+8 : len(k)-17])
	copy(h[:], k[len(k)-16:])
	return due, host, h, nil
}

// scheduleRecrawl sets the record's next visit after a visit at now and
// writes its schedule key (replacing the previous one). The caller writes rec.
func (c *Crawler) scheduleRecrawl(txn *badger.Txn, host string, h urlHash, rec *seenRecord, changed bool, now time.Time) error {
	if !c.cfg.Recrawl.Enabled {
		return nil
	}
	if rec.NextFetch != 0 {
		if err := txn.Delete(recrawlKey(rec.NextFetch, host, h)); err != nil {
			return err
		}
	}
	iv := c.cfg.Recrawl.nextInterval(time.Duration(rec.Interval), changed, rec.Interval == 0)
	rec.Interval = int64(iv)
	rec.NextFetch = now.Add(iv).UnixNano()
	return txn.Set(recrawlKey(rec.NextFetch, host, h), nil)
}

// recrawlLoop moves due pages back into the frontier every ScanInterval.
func (c *Crawler) recrawlLoop(ctx context.Context) {
	for {
		if _, err := c.recrawlDue(c.clock.Now()); err != nil {
			c.log.Error("recrawl scan", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(c.cfg.Recrawl.ScanInterval):
		}
	}
}

// recrawlDue re-queues up to MaxBatch pages due at now, deleting their
// schedule keys in the same transaction.
func (c *Crawler) recrawlDue(now time.Time) (int, error) {
	var keys [][]byte
	var items []addItem
	err := c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxRecrawl)})
		defer it.Close()
		for it.Rewind(); it.Valid() && len(keys) < c.cfg.Recrawl.MaxBatch; it.Next() {
			k := it.Item().KeyCopy(nil)
			due, host, h, err := decodeRecrawlKey(k)
			if err != nil {
				continue
			}
			if due > now.UnixNano() {
				break
			}
			keys = append(keys, k)
			item, err := txn.Get(seenKey(host, h))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			} else if err != nil {
				return err
			}
			var rec *seenRecord
			if err := item.Value(func(v []byte) error { rec, err = decodeSeenRecord(v); return err }); err != nil {
				continue
			}
			items = append(items, addItem{url: rec.URL, host: host, cash: rec.Cash, depth: rec.Depth, recrawl: true})
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	_, err = c.front.add(items, func(txn *badger.Txn) error {
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("recrawl enqueue: %w", err)
	}
	return len(items), nil
}
