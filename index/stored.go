package index

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// StoredPage is a page as an index stores it, for another index to hold
// as it is: its page record and raw body, compressed (the i:d: and i:r:
// values), and its analysed form (empty when there is none). Sending it
// spares the sender decompressing the page and the receiver compressing
// it again, and the wire carries the compressed bytes.
type StoredPage struct{ Record, Raw, Form []byte }

// maxStoredRecordBytes bounds a stored page record from a peer, and
// maxStoredRestBytes what its compressed part decompresses to (a page's
// text and fetch metadata).
const (
	maxStoredRecordBytes = 4 << 20
	maxStoredRestBytes   = 8 << 20
)

// Stored returns the page at u as stored, without decompressing it, with
// the analysed form the form cache or the held page has (else none).
func (ix *Index) Stored(ctx context.Context, u string) (StoredPage, error) {
	if err := ctx.Err(); err != nil {
		return StoredPage{}, err
	}
	var p StoredPage
	var id uint32
	err := ix.db.View(func(txn *badger.Txn) error {
		var ok, held bool
		var err error
		if id, ok, held, err = getDoc(txn, u); err != nil || !ok {
			if err == nil {
				err = ErrNotFound
			}
			return err
		}
		if p.Record, p.Raw, err = storedValues(txn, id); err != nil {
			return err
		}
		if !held {
			return nil
		}
		summary, _, err := splitStored(p.Record)
		var s Summary
		if err == nil && summary != nil && decodeSummary(summary, &s) == nil {
			if item, err := txn.Get(heldKey(s.Host, id)); err == nil {
				p.Form, _ = item.ValueCopy(nil)
			}
		}
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return StoredPage{}, ErrNotFound
	}
	if err != nil {
		return StoredPage{}, fmt.Errorf("index: stored page %q: %w", u, err)
	}
	if p.Form == nil {
		p.Form = ix.Form(u, id)
	}
	return p, nil
}

// CheckedPage is a stored page from a peer that passed CheckStored, with
// the summary the check read. Only CheckStored makes one, so what
// HoldStoredBatch and Decode take has been checked, once: the check
// decompresses both parts of the page.
type CheckedPage struct {
	page    StoredPage
	summary Summary
}

// Summary is the page's summary, as its record states it.
func (c CheckedPage) Summary() Summary { return c.summary }

// CheckStored checks a stored page from a peer before anything trusts
// it: its record has a summary with a valid URL and the URL's host, its
// compressed parts decompress (by a decoder that stops at the caps, so a
// small frame cannot make it work long) to a record that decodes and a
// raw body within the cap, and its form is within its cap (its content
// is checked when it is used: IndexHeld). So a page held here reads back
// wherever it is read. The checked page has the summary, by whose host
// the caller authorises the sender.
func (ix *Index) CheckStored(p StoredPage) (CheckedPage, error) {
	s, err := ix.checkStored(p)
	if err != nil {
		return CheckedPage{}, err
	}
	return CheckedPage{page: p, summary: s}, nil
}

func (ix *Index) checkStored(p StoredPage) (Summary, error) {
	var s Summary
	if len(p.Record) == 0 || len(p.Record) > maxStoredRecordBytes || len(p.Form) > maxHeldFormBytes {
		return s, fmt.Errorf("index: stored page of %d record bytes and %d form bytes", len(p.Record), len(p.Form))
	}
	summary, rest, err := splitStored(p.Record)
	if err == nil && summary == nil {
		err = errors.New("record without a summary")
	}
	if err == nil {
		err = decodeSummary(summary, &s)
	}
	if err != nil {
		return s, fmt.Errorf("index: stored page: %w", err)
	}
	if s.URL == "" || len(s.URL) > maxURLBytes || strings.IndexByte(s.URL, 0) >= 0 {
		return s, fmt.Errorf("index: stored page: invalid URL %q", truncUTF8(s.URL, 100))
	}
	if u, err := url.Parse(s.URL); err != nil || s.Host == "" || strings.ToLower(u.Host) != s.Host {
		return s, fmt.Errorf("index: stored page %q: host %q is not its URL's", truncUTF8(s.URL, 100), truncUTF8(s.Host, 100))
	}
	buf, _ := ix.recBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	defer ix.recBufs.Put(buf)
	plain, err := decompressPage(ix.checkDec, rest, *buf, maxStoredRestBytes)
	if err == nil {
		err = decodeRecord(plain, &Document{})
	}
	if err != nil {
		return s, fmt.Errorf("index: stored page %q: record: %w", truncUTF8(s.URL, 100), err)
	}
	if len(p.Raw) > 0 {
		raw, err := decompressPage(ix.checkDec, p.Raw, plain, ix.opt.MaxRawBytes)
		if err != nil {
			return s, fmt.Errorf("index: stored page %q: raw body: %w", truncUTF8(s.URL, 100), err)
		}
		plain = raw
	}
	if cap(plain) <= 4<<20 {
		*buf = plain[:0]
	}
	return s, nil
}

// Decode returns the page c holds, decompressed (for a page to index
// rather than hold).
func (ix *Index) Decode(c CheckedPage) (*Document, error) {
	p := c.page
	var d Document
	if err := ix.decodeStored(p.Record, &d); err != nil {
		return nil, fmt.Errorf("index: stored page: %w", err)
	}
	if len(p.Raw) > 0 {
		raw, err := decompressPage(ix.dec, p.Raw, nil, maxLocalPartBytes)
		if err != nil {
			return nil, fmt.Errorf("index: stored page %q: raw body: %w", truncUTF8(d.URL, 100), err)
		}
		d.Raw = raw
	}
	return &d, nil
}

// HoldStoredBatch is HoldBatch for pages as their owner's index stores
// them: the record and raw body are kept as they are.
func (ix *Index) HoldStoredBatch(ctx context.Context, pages []CheckedPage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return ErrClosed
	}
	defer ix.publish()
	for _, c := range pages {
		p := c.page
		if err := ix.holdLocked(c.summary.URL, c.summary.Host, p.Form, p.Record, p.Raw); err != nil {
			return err
		}
	}
	return nil
}

// storedValues reads doc id's page record and raw body (nil if it has
// none) as stored, compressed.
func storedValues(txn *badger.Txn, id uint32) (rec, raw []byte, err error) {
	item, err := txn.Get(docKey(prefixDoc, id))
	if err != nil {
		return nil, nil, fmt.Errorf("doc %d: %w", id, err)
	}
	if rec, err = item.ValueCopy(nil); err != nil {
		return nil, nil, fmt.Errorf("doc %d: %w", id, err)
	}
	switch item, err := txn.Get(docKey(prefixRaw, id)); {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return nil, nil, fmt.Errorf("doc %d: raw: %w", id, err)
	default:
		if raw, err = item.ValueCopy(nil); err != nil {
			return nil, nil, fmt.Errorf("doc %d: raw: %w", id, err)
		}
	}
	return rec, raw, nil
}
