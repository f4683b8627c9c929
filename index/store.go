package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// getByID loads a page record; txn may be nil (a read transaction is
// opened). Raw is loaded only when withRaw is set.
func (ix *Index) getByID(txn *badger.Txn, id uint32, withRaw bool) (*PageRecord, error) {
	if txn == nil {
		var rec *PageRecord
		err := ix.db.View(func(txn *badger.Txn) error {
			var err error
			rec, err = ix.getByID(txn, id, withRaw)
			return err
		})
		return rec, err
	}
	item, err := txn.Get(docKey(prefixDoc, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	rec := &PageRecord{DocID: id}
	err = item.Value(func(v []byte) error { return ix.decodeStored(v, &rec.Document) })
	if err != nil {
		return nil, fmt.Errorf("doc %d: %w", id, err)
	}
	if withRaw {
		item, err := txn.Get(docKey(prefixRaw, id))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return nil, err
		default:
			err = item.Value(func(v []byte) error {
				rec.Raw, err = decompressPage(ix.dec, v, nil, maxLocalPartBytes)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("doc %d: decompress raw: %w", id, err)
			}
		}
	}
	if rec.Anchors, err = anchorsIn(txn, rec.URL); err != nil {
		return nil, fmt.Errorf("doc %d: %w", id, err)
	}
	return rec, nil
}

// decodeStored decodes a stored page record (the i:d: value) into d.
// decodeRecord copies what it keeps, so the decompression buffer is reused
// (a page record is tens of KB, and every snippet reads one).
func (ix *Index) decodeStored(v []byte, d *Document) error {
	summary, frame, err := splitStored(v)
	if err != nil {
		return err
	}
	if summary != nil {
		var s Summary
		if err := decodeSummary(summary, &s); err != nil {
			return err
		}
		s.fill(d)
	}
	buf, _ := ix.recBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	plain, err := decompressPage(ix.dec, frame, *buf, maxLocalPartBytes)
	if err != nil {
		return fmt.Errorf("decompress page record: %w", err)
	}
	err = decodeRecord(plain, d)
	if cap(plain) <= 4<<20 {
		*buf = plain
		ix.recBufs.Put(buf)
	}
	return err
}

// summaryByID reads doc id's summary, decompressing only a legacy record.
// The summary may be shared with other callers (the summary cache): it
// must not be modified.
func (ix *Index) summaryByID(txn *badger.Txn, id uint32) (*Summary, error) {
	if ix.summaries != nil {
		if s, ok := ix.summaries.get(id); ok {
			return s, nil
		}
	}
	item, err := txn.Get(docKey(prefixDoc, id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	s := &Summary{}
	err = item.Value(func(v []byte) error {
		summary, _, err := splitStored(v)
		if err != nil {
			return err
		}
		if summary != nil {
			return decodeSummary(summary, s)
		}
		var d Document
		if err := ix.decodeStored(v, &d); err != nil {
			return err
		}
		*s = Summary{URL: d.URL, Host: d.Host, Title: d.Title, ContentHash: d.ContentHash, SimHash: d.SimHash}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("doc %d: %w", id, err)
	}
	if ix.summaries != nil {
		ix.summaries.put(id, s)
	}
	return s, nil
}

// anchorsIn reads the anchor texts recorded for url (nil when none), in
// anchorOrder (anchors.go).
func anchorsIn(txn *badger.Txn, u string) ([]string, error) {
	item, err := txn.Get([]byte(prefixAnchors + u))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var anchors []string
	err = item.Value(func(v []byte) error {
		anchors, err = decodeAnchors(v)
		return err
	})
	sortAnchors(anchors)
	return anchors, err
}

// Get returns the stored page at url (Raw decompressed) or ErrNotFound.
func (ix *Index) Get(ctx context.Context, url string) (*PageRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var rec *PageRecord
	err := ix.db.View(func(txn *badger.Txn) error {
		id, ok, err := getDocID(txn, url)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		rec, err = ix.getByID(txn, id, true)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("index: get %q: %w", url, err)
	}
	return rec, nil
}

// HostURLs returns the URLs of host's stored pages.
func (ix *Index) HostURLs(ctx context.Context, host string) ([]string, error) {
	ids, err := ix.hostDocIDs(host)
	if err != nil {
		return nil, err
	}
	urls := make([]string, 0, len(ids))
	err = ix.db.View(func(txn *badger.Txn) error {
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			s, err := ix.summaryByID(txn, id)
			if errors.Is(err, ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			urls = append(urls, s.URL)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index: URLs of %q: %w", host, err)
	}
	return urls, nil
}

// hostDocIDs lists the docIDs of host's pages ("" = all hosts).
func (ix *Index) hostDocIDs(host string) ([]uint32, error) {
	prefix := []byte(prefixHost)
	if host != "" {
		prefix = append(append(prefix, host...), 0)
	}
	var ids []uint32
	err := ix.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) < len(prefix)+4 {
				continue
			}
			ids = append(ids, binary.BigEndian.Uint32(k[len(k)-4:]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index: list pages of %q: %w", host, err)
	}
	return ids, nil
}

// ForEachPage calls fn for every stored page of host ("" = all hosts), in
// host then docID order, stopping at the first error fn returns.
func (ix *Index) ForEachPage(ctx context.Context, host string, fn func(*PageRecord) error) error {
	// Collect IDs first: fn may take long, and a read transaction held for
	// the whole walk would pin Badger's memtables.
	ids, err := ix.hostDocIDs(host)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := ix.getByID(nil, id, true)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("index: page %d: %w", id, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}
