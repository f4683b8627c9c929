package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Held pages.
//
// A replica holds a page in case it must serve it one day, which it does
// only once it owns the page's host: search asks every member only for
// the hosts it owns. So a replica stores the page (its record, raw body
// and the analysed form its owner sent) and writes no postings for it:
// HoldBatch. IndexHeld indexes a host's held pages, from their stored
// forms with the anchors recorded for them by then, when the node comes
// to own the host; a page whose form is missing, malformed or of another
// analyzer version is analysed. A held page gets no anchor updates for new
// anchors (it is indexed with all of them when it is indexed at all), is
// not in the statistics and is found by everything that reads the page
// store (Get, ForEachPage, HostURLs, Delete).
//
// A held page has a docID like any page (its record, raw body and host
// listing are keyed by it); its i:u: value carries heldMark after the
// docID, and i:z:<host>\x00<docID> holds its form (empty when it came
// without one). Indexing it is a Put of the stored values under a new
// docID, so postings stay in docID order.

// heldMark follows the docID in the i:u: value of a held page.
const heldMark = 1

// maxHeldFormBytes bounds a held page's stored form; a larger one is not
// kept and the page is analysed when it is indexed.
const maxHeldFormBytes = 2 << 20

func heldKey(host string, id uint32) []byte {
	k := make([]byte, 0, len(prefixHeld)+len(host)+5)
	k = append(append(append(k, prefixHeld...), host...), 0)
	return binary.BigEndian.AppendUint32(k, id)
}

// isHeld reports whether doc id is a held page. Callers hold ix.mu, or
// run before the index is shared (Open).
func (ix *Index) isHeld(id uint32) bool {
	w := int(id / 64)
	return w < len(ix.held) && ix.held[w]&(1<<(id%64)) != 0
}

// hold marks doc id of host held. Callers hold ix.mu.
func (ix *Index) hold(id uint32, host string) {
	if need := int(id/64) + 1; need > len(ix.held) {
		ix.held = slices.Grow(ix.held, need-len(ix.held))[:need]
	}
	ix.held[id/64] |= 1 << (id % 64)
	ix.heldHosts[host]++
	ix.heldPages++
}

// unhold clears hold after the page's removal. Callers hold ix.mu.
func (ix *Index) unhold(id uint32) {
	ix.held[id/64] &^= 1 << (id % 64)
	ix.heldPages--
	host := ix.metas[id].host
	if ix.heldHosts[host]--; ix.heldHosts[host] <= 0 {
		delete(ix.heldHosts, host)
	}
}

// loadHeld reads the held pages' keys at Open.
func (ix *Index) loadHeld(txn *badger.Txn) error {
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixHeld)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()[len(prefixHeld):]
		sep := len(k) - 5
		if sep < 0 || k[sep] != 0 {
			return fmt.Errorf("held page key %q: %w", it.Item().Key(), errCorrupt)
		}
		id := binary.BigEndian.Uint32(k[sep+1:])
		if id >= ix.st.NextDoc {
			continue
		}
		host := string(k[:sep])
		ix.metas[id].host = host
		ix.docHosts[id] = ix.internHost(&ix.metas[id])
		ix.hold(id, host)
	}
	return nil
}

// Held returns the number of held pages per host.
func (ix *Index) Held() map[string]int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make(map[string]int, len(ix.heldHosts))
	for h, n := range ix.heldHosts {
		out[h] = n
	}
	return out
}

// HoldBatch stores docs as held pages (above), replacing any stored page
// of the same URL: forms[i] (may be nil or missing) is docs[i]'s encoded
// analysed form from its owner (Form), kept as bytes and checked only
// when the page is indexed. Records are compressed on up to GOMAXPROCS
// goroutines. It stops at the first error; the docs before it are stored.
func (ix *Index) HoldBatch(ctx context.Context, docs []*Document, forms [][]byte) error {
	prepared := make([]*preparedDoc, len(docs))
	errs := make([]error, len(docs))
	return inWindows(ctx, len(docs),
		func(i int) { prepared[i], errs[i] = ix.prepareHeld(docs[i]) },
		func(lo, hi int) error {
			ix.mu.Lock()
			defer ix.mu.Unlock()
			if ix.closed {
				return ErrClosed
			}
			defer ix.publish()
			for i := lo; i < hi; i++ {
				if errs[i] != nil {
					return errs[i]
				}
				var form []byte
				if i < len(forms) && len(forms[i]) <= maxHeldFormBytes {
					form = forms[i]
				}
				p := prepared[i]
				prepared[i] = nil
				if err := ix.holdLocked(p.doc.URL, p.doc.Host, form, p.rec, p.raw); err != nil {
					return err
				}
			}
			return nil
		})
}

// prepareHeld validates and compresses d.
func (ix *Index) prepareHeld(d *Document) (*preparedDoc, error) {
	c, err := ix.validate(d)
	if err != nil {
		return nil, err
	}
	return &preparedDoc{doc: c, rec: appendStored(nil, c, ix.compressPage), raw: ix.rawPart(c)}, nil
}

// holdLocked stores a held page under a new docID. Callers hold ix.mu.
func (ix *Index) holdLocked(u, host string, form, rec, raw []byte) error {
	ns := ix.st
	txn := ix.db.NewTransaction(true)
	defer txn.Discard()
	id, old, hasOld, err := ix.newPageInTxn(txn, &ns, u, host, true, rec, raw)
	if err == nil {
		err = txn.Set(heldKey(host, id), form)
	}
	if err != nil {
		return fmt.Errorf("index: hold %q: %w", u, err)
	}
	_, waiting := ix.anchorsDue[u]
	if waiting {
		if err := txn.Delete([]byte(prefixAnchorsChanged + u)); err != nil {
			return fmt.Errorf("index: hold %q: %w", u, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("index: hold %q: commit: %w", u, err)
	}
	delete(ix.anchorsDue, u)
	ix.appendMetaLocked(id, docMeta{host: host})
	if hasOld {
		ix.markDeleted(old)
	}
	ix.hold(id, host)
	ix.st = ns
	ix.forms.drop(u)
	return nil
}

// IndexHeld indexes the pages of host held here (above) and returns how
// many it indexed. Pages are read and analysed (or replayed from their
// forms) on up to GOMAXPROCS goroutines without the writer lock; a page
// replaced or deleted meanwhile is skipped, and one given new anchors
// meanwhile is analysed again under the lock.
func (ix *Index) IndexHeld(ctx context.Context, host string) (int, error) {
	var ids []uint32
	prefix := heldKey(host, 0)[:len(prefixHeld)+len(host)+1]
	err := ix.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if k := it.Item().Key(); len(k) == len(prefix)+4 {
				ids = append(ids, binary.BigEndian.Uint32(k[len(prefix):]))
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("index: held pages of %s: %w", host, err)
	}
	loaded := make([]heldPage, len(ids))
	indexed := 0
	err = inWindows(ctx, len(ids),
		func(i int) { loaded[i] = ix.loadHeldPage(host, ids[i]) },
		func(lo, hi int) error {
			ix.mu.Lock()
			var err error
			for i := lo; i < hi; i++ {
				if err == nil {
					var ok bool
					ok, err = ix.applyHeldLocked(&loaded[i])
					if ok {
						indexed++
						ix.putsSinceFlush++
					}
				}
				loaded[i].release(ix)
				loaded[i] = heldPage{}
			}
			pending, pendBytes := ix.pendingDocs(), ix.pendingBytes()
			ix.mu.Unlock()
			if err != nil {
				return err
			}
			return ix.maybeFlush(ctx, pending, pendBytes)
		})
	return indexed, err
}

// loadHeldPage reads held page id of host and analyses it with its
// anchors, replaying its stored form when it has a usable one. found is
// false when the page is no longer held under id.
func (ix *Index) loadHeldPage(host string, id uint32) heldPage {
	r := heldPage{id: id, host: host}
	var doc Document
	var form []byte
	err := ix.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(heldKey(host, id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if form, err = item.ValueCopy(nil); err != nil {
			return err
		}
		if r.rec, r.raw, err = storedValues(txn, id); err != nil {
			return err
		}
		if err := ix.decodeStored(r.rec, &doc); err != nil {
			// A record that does not decode (corrupted on disk, or
			// held by a build whose check did not decompress it) is
			// dropped, not indexed, and does not stop the host's other
			// pages.
			r.corrupt, r.found = true, true
			r.url = storedURL(r.rec)
			ix.log.Warn("index: held page does not decode; dropped", "doc", id, "host", host, "url", truncUTF8(r.url, 200), "err", err)
			return nil
		}
		cur, ok, held, err := getDoc(txn, doc.URL)
		if err != nil || !ok || !held || cur != id || doc.Host != host {
			return err
		}
		r.url = doc.URL
		if r.anchors, err = anchorsIn(txn, doc.URL); err != nil {
			return err
		}
		r.found = true
		return nil
	})
	if err != nil {
		r.err = fmt.Errorf("index: index held page %d of %s: %w", id, host, err)
		return r
	}
	if !r.found || r.corrupt {
		return r
	}
	if len(form) > 0 {
		r.dp, r.form = ix.replayReceived(&doc, form, r.anchors)
	}
	if r.dp == nil {
		ix.putsAnalysed.Add(1)
		r.dp = ix.analyzeDoc(&doc, r.anchors)
		if ix.forms.wants(r.dp) {
			r.form = formOf(r.dp)
		}
	}
	return r
}

// applyHeldLocked indexes a page read by loadHeldPage if it is still held
// under the docID it was read with, with the anchors recorded now; ok
// says it did. Callers hold ix.mu.
func (ix *Index) applyHeldLocked(r *heldPage) (ok bool, err error) {
	if r.err != nil || !r.found {
		return false, r.err
	}
	if r.corrupt {
		return false, ix.dropHeldLocked(r.id, r.url)
	}
	var anchors []string
	var still bool
	err = ix.db.View(func(txn *badger.Txn) error {
		id, found, held, err := getDoc(txn, r.url)
		if err != nil {
			return err
		}
		still = found && held && id == r.id
		anchors, err = anchorsIn(txn, r.url)
		return err
	})
	if err != nil || !still {
		return false, err
	}
	if !slices.Equal(anchors, r.anchors) {
		r.release(ix)
		if *r = ix.loadHeldPage(r.host, r.id); r.err != nil || !r.found {
			return false, r.err
		}
	}
	return true, ix.putLocked(r.url, r.host, newAnalysedEntry(r.url, r.host, r.anchors, r.dp, r.form), r.rec, r.raw)
}

// storedURL is the URL in a stored record's summary ("" if it has none).
func storedURL(rec []byte) string {
	summary, _, err := splitStored(rec)
	var s Summary
	if err != nil || summary == nil || decodeSummary(summary, &s) != nil {
		return ""
	}
	return s.URL
}

// dropHeldLocked deletes held page id, whose URL is u ("" if unknown),
// if it is still held. Callers hold ix.mu.
func (ix *Index) dropHeldLocked(id uint32, u string) error {
	if !ix.isHeld(id) {
		return nil
	}
	ns := ix.st
	txn := ix.db.NewTransaction(true)
	defer txn.Discard()
	if err := ix.removeInTxn(txn, id, &ns); err != nil {
		return fmt.Errorf("index: drop held page %d: %w", id, err)
	}
	if u != "" {
		if cur, ok, _, err := getDoc(txn, u); err != nil {
			return fmt.Errorf("index: drop held page %d: %w", id, err)
		} else if ok && cur == id {
			if err := txn.Delete([]byte(prefixURL + u)); err != nil {
				return fmt.Errorf("index: drop held page %d: %w", id, err)
			}
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("index: drop held page %d: commit: %w", id, err)
	}
	ix.st = ns
	ix.markDeleted(id)
	ix.publish()
	return nil
}

// heldPage is a held page read and analysed for IndexHeld.
type heldPage struct {
	url      string
	found    bool   // the page is stored
	id       uint32 // its docID when read
	anchors  []string
	host     string
	dp       *docPostings
	form     *analysedForm // the form it was indexed from, or its own for the form cache; nil without
	rec, raw []byte        // the stored values (compressed), written again as they are
	err      error
	corrupt  bool // its record does not decode
}

func (r *heldPage) release(ix *Index) {
	if r.dp != nil {
		ix.releaseDoc(r.dp)
		r.dp = nil
	}
}
