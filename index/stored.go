package index

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"
)

// StoredPage is a page as an index stores it, for another index to hold
// as it is: its page record and raw body, compressed (the i:d: and i:r:
// values), and its analysed form (empty when there is none). Sending it
// spares the sender decompressing the page and the receiver compressing
// it again, and the wire carries the compressed bytes.
type StoredPage struct{ Record, Raw, Form []byte }

// maxStoredRecordBytes bounds a stored page record from a peer, and
// maxStoredRestBytes what its compressed part declares it decompresses
// to (a page's text and fetch metadata).
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
		item, err := txn.Get(docKey(prefixDoc, id))
		if err != nil {
			return fmt.Errorf("doc %d: %w", id, err)
		}
		if p.Record, err = item.ValueCopy(nil); err != nil {
			return err
		}
		switch item, err := txn.Get(docKey(prefixRaw, id)); {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("doc %d: raw: %w", id, err)
		default:
			if p.Raw, err = item.ValueCopy(nil); err != nil {
				return err
			}
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

// CheckStored checks a stored page from a peer before anything trusts
// it, without decompressing it: its record has a summary with a valid
// URL and the URL's host, its compressed parts start zstd frames that
// declare no size beyond this index's caps, and its form is within its
// cap (its content is checked when it is used: IndexHeld). It returns the
// summary, by whose host the caller authorises the sender. What a part
// decompresses to is bounded when it is read, by the decoder's memory
// limit (Open); a part that does not decompress fails that read only.
func (ix *Index) CheckStored(p StoredPage) (Summary, error) {
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
	if err := checkFrame(rest, maxStoredRestBytes); err != nil {
		return s, fmt.Errorf("index: stored page %q: record: %w", truncUTF8(s.URL, 100), err)
	}
	if len(p.Raw) > 0 {
		if err := checkFrame(p.Raw, ix.opt.MaxRawBytes); err != nil {
			return s, fmt.Errorf("index: stored page %q: raw body: %w", truncUTF8(s.URL, 100), err)
		}
	}
	return s, nil
}

// checkFrame checks that b starts a zstd frame that does not declare
// more than max bytes (frames from EncodeAll declare no size).
func checkFrame(b []byte, max int) error {
	var h zstd.Header
	if err := h.Decode(b); err != nil {
		return err
	}
	if h.Skippable || (h.HasFCS && h.FrameContentSize > uint64(max)) {
		return fmt.Errorf("zstd frame declaring %d bytes (skippable: %v), cap %d", h.FrameContentSize, h.Skippable, max)
	}
	return nil
}

// Decode returns the page p holds, decompressed (for a page to index
// rather than hold). p must have passed CheckStored.
func (ix *Index) Decode(p StoredPage) (*Document, error) {
	var d Document
	if err := ix.decodeStored(p.Record, &d); err != nil {
		return nil, fmt.Errorf("index: stored page: %w", err)
	}
	if len(p.Raw) > 0 {
		raw, err := ix.dec.DecodeAll(p.Raw, nil)
		if err != nil {
			return nil, fmt.Errorf("index: stored page %q: raw body: %w", truncUTF8(d.URL, 100), err)
		}
		d.Raw = raw
	}
	return &d, nil
}

// HoldStoredBatch is HoldBatch for pages as their owner's index stores
// them: the record and raw body are kept as they are. Each page must have
// passed CheckStored; one that fails it now is an error and stops the
// batch (the pages before it are held).
func (ix *Index) HoldStoredBatch(ctx context.Context, pages []StoredPage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return ErrClosed
	}
	defer ix.publish()
	for _, p := range pages {
		s, err := ix.CheckStored(p)
		if err != nil {
			return err
		}
		if err := ix.holdLocked(s.URL, s.Host, p.Form, p.Record, p.Raw); err != nil {
			return err
		}
	}
	return nil
}
