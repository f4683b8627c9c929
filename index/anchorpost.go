package index

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Anchor postings: how new anchor text for a page already flushed is
// indexed without indexing the page again.
//
// A page's anchors known when it is flushed are in its main postings,
// from anchorBase on in its position space. When its recorded anchors
// change later, a flush analyses the anchors alone and writes, for each
// of their terms, an entry (docID, update number, anchor length, TF,
// positions) into that term's anchor blocks (i:n:), and records the
// update number and the new anchor length with the doc (its i:l: record,
// and the index's anchorTable in memory). From then on the doc's anchor
// field is the entry of its current update: a cursor (reader.go) drops
// the anchor TF and positions of the doc's main postings, and adds the
// entry's. Entries of older updates are stale and skipped; a merge drops
// them. Nothing else of the page changes: its docID, record, raw body and
// main postings stay as they are.

// While the crawl is busy, a flush updates the anchors of at most
// anchorUpdateShare as many pages as it has new ones (at least
// anchorUpdateMin).
const (
	anchorUpdateShare = 0.5
	anchorUpdateMin   = 256
)

// anchorUpdatesDue picks the pages whose anchors a flush updates, oldest
// change first: all of them when all is set (forced, or no page stored
// since the last flush), else those waiting longer than due, within the
// budget. Why wait and why a budget: during a long crawl a page's anchors
// trickle in for as long as pages linking to it are fetched, and every
// update analyses and writes the page's whole anchor field again (the
// entries it replaces stay, stale, until their term is merged). Waiting
// coalesces a page's changes into few updates; the budget keeps a busy
// flush's work close to its new pages, and a quieter flush takes the rest.
func anchorUpdatesDue(waiting map[string]time.Time, due time.Time, all bool, puts int) []string {
	type change struct {
		url   string
		since time.Time
	}
	var picked []change
	for u, since := range waiting {
		if all || !since.After(due) {
			picked = append(picked, change{u, since})
		}
	}
	slices.SortFunc(picked, func(a, b change) int {
		if c := a.since.Compare(b.since); c != 0 {
			return c
		}
		return strings.Compare(a.url, b.url)
	})
	if budget := max(anchorUpdateMin, int(float64(puts)*anchorUpdateShare)); !all && len(picked) > budget {
		picked = picked[:budget]
	}
	out := make([]string, len(picked))
	for i, c := range picked {
		out[i] = c.url
	}
	return out
}

// anchorTable maps a docID to its current anchor update: the update's
// number (0: none, the main postings hold the doc's anchors) and the
// anchor field's length. It is copied on write, a page of docIDs at a
// time, and swapped under metaMu, so that a Reader keeps the table of
// the moment it opened: a query sees every doc's anchors as of one
// instant, and its DF count and candidates agree. gen numbers the
// tables; it changes with every update (Reader.AnchorGeneration).
type anchorTable struct {
	gen   uint64
	pages []*[anchorPageSize]uint64 // seq<<32 | length; nil page: no update
}

const (
	anchorPageBits = 8
	anchorPageSize = 1 << anchorPageBits
)

// get returns doc id's current anchor update (seq 0: none).
func (t *anchorTable) get(id uint32) anchorState {
	p := int(id >> anchorPageBits)
	if t == nil || p >= len(t.pages) || t.pages[p] == nil {
		return anchorState{}
	}
	v := t.pages[p][id&(anchorPageSize-1)]
	return anchorState{seq: uint32(v >> 32), length: uint32(v)}
}

// with returns a table with ups applied, sharing the pages ups leave alone.
func (t *anchorTable) with(ups []anchorUpdate) *anchorTable {
	nt := &anchorTable{gen: t.gen + 1, pages: slices.Clone(t.pages)}
	copied := map[int]bool{}
	for _, u := range ups {
		p := int(u.id >> anchorPageBits)
		for p >= len(nt.pages) {
			nt.pages = append(nt.pages, nil)
		}
		if !copied[p] {
			np := new([anchorPageSize]uint64)
			if nt.pages[p] != nil {
				*np = *nt.pages[p]
			}
			nt.pages[p], copied[p] = np, true
		}
		nt.pages[p][u.id&(anchorPageSize-1)] = uint64(u.seq)<<32 | uint64(u.length)
	}
	return nt
}

// anchorTermSet holds a hash of every term that has anchor blocks, so
// that a cursor seeks a term's anchor blocks only when it may have some:
// anchor updates touch a small vocabulary (navigation and link texts),
// and most query terms have none. A term is added before its first
// entries are written and never removed (a merge that drops all of a
// term's entries leaves a harmless false positive, as does a hash
// collision), so a Reader whose transaction holds a term's entries finds
// the term here.
type anchorTermSet struct {
	seed maphash.Seed
	mu   sync.RWMutex
	set  map[uint64]struct{}
}

func newAnchorTermSet() *anchorTermSet {
	return &anchorTermSet{seed: maphash.MakeSeed(), set: map[uint64]struct{}{}}
}

func (s *anchorTermSet) add(terms []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range terms {
		s.set[maphash.String(s.seed, t)] = struct{}{}
	}
}

func (s *anchorTermSet) has(term string) bool {
	h := maphash.String(s.seed, term)
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.set[h]
	return ok
}

// loadAnchorTerms adds the terms of every anchor block in txn to s.
func loadAnchorTerms(txn *badger.Txn, s *anchorTermSet) {
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixAnchorPostings)})
	defer it.Close()
	var terms []string
	last := ""
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) < len(prefixAnchorPostings)+7 {
			continue
		}
		if t := k[len(prefixAnchorPostings) : len(k)-7]; string(t) != last {
			last = string(t)
			terms = append(terms, last)
		}
	}
	s.add(terms)
}

// anchorUpdate is a doc's new anchor field, analysed.
type anchorUpdate struct {
	url     string
	id      uint32
	seq     uint32
	length  uint32
	anchors []string
	dp      *docPostings // the anchors' analysis
}

// liveLensLocked returns doc id's field lengths with its current anchor
// length. Callers hold metaMu or ix.mu.
func (ix *Index) liveLensLocked(id uint32) [NumFields]uint32 {
	return ix.anchorTab.get(id).applied(ix.metas[id].lens)
}

// anchorKey is the key of part part of term's anchor block written by
// update seq.
func anchorKey(term string, seq uint32, part uint16) []byte {
	k := anchorTermPrefix(term)
	k = binary.BigEndian.AppendUint32(k, seq)
	return binary.BigEndian.AppendUint16(k, part)
}

func anchorTermPrefix(term string) []byte {
	b := make([]byte, 0, len(prefixAnchorPostings)+len(term)+7)
	b = append(b, prefixAnchorPostings...)
	b = append(b, term...)
	return append(b, 0)
}

// anchorEntry is one doc's anchor field for a term, as of update seq;
// its positions are pos[from:from+tf] of the slice it was decoded with.
type anchorEntry struct {
	doc, seq, length, tf uint32
	from                 uint32
}

// maxAnchorBlockEntries bounds the entries of one anchor block value: a
// merge writes more as several parts.
const maxAnchorBlockEntries = 4096

// encodeAnchorBlock encodes entries, sorted by docID then update:
//
//	uvarint n
//	n × (uvarint docID gap (the first: docID), uvarint seq, uvarint length,
//	     uvarint tf, tf × uvarint position gap (the first from 0))
func encodeAnchorBlock(dst []byte, entries []anchorEntry, pos []uint32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(entries)))
	prev := uint32(0)
	for _, e := range entries {
		dst = binary.AppendUvarint(dst, uint64(e.doc-prev))
		dst = binary.AppendUvarint(dst, uint64(e.seq))
		dst = binary.AppendUvarint(dst, uint64(e.length))
		dst = binary.AppendUvarint(dst, uint64(e.tf))
		last := uint32(0)
		for _, q := range pos[e.from : e.from+e.tf] {
			dst = binary.AppendUvarint(dst, uint64(q-last))
			last = q
		}
		prev = e.doc
	}
	return dst
}

// decodeAnchorBlock appends b's entries to entries and their positions to
// pos. A block is bytes from disk: counts are checked against what is
// left of it, docIDs must increase (an update may repeat a doc only in a
// merged block, with another seq) and positions must too.
func decodeAnchorBlock(b []byte, entries []anchorEntry, pos []uint32) ([]anchorEntry, []uint32, error) {
	r := byteReader{b: b}
	n := r.uvarint()
	if r.err != nil || int(n) > len(b) {
		return entries, pos, errCorrupt
	}
	doc := uint32(0)
	for i := uint32(0); i < n; i++ {
		g := r.uvarint()
		if uint64(doc)+uint64(g) >= NoMoreDocs {
			return entries, pos, errCorrupt
		}
		doc += g
		e := anchorEntry{doc: doc, seq: r.uvarint(), length: r.uvarint(), tf: r.uvarint(), from: uint32(len(pos))}
		if r.err != nil || e.tf == 0 || int(e.tf) > len(b)-r.off || e.seq == 0 {
			return entries, pos, errCorrupt
		}
		last := uint64(0)
		for k := range e.tf {
			q := last + uint64(r.uvarint())
			if k > 0 && q == last || q > math.MaxUint32 {
				return entries, pos, errCorrupt
			}
			pos = append(pos, uint32(q))
			last = q
		}
		entries = append(entries, e)
	}
	if r.err != nil || r.off != len(b) {
		return entries, pos, errCorrupt
	}
	return entries, pos, nil
}

func compareAnchorEntries(a, b anchorEntry) int {
	if c := cmp.Compare(a.doc, b.doc); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// updateAnchors indexes the new anchors of the pages at urls, which
// flushOnce found due. Analysing a page's anchors (a few short texts)
// runs on all cores without ix.mu; under it each page is checked to be
// the one analysed, with the anchors analysed (else analysed again
// there), and taken off the waiting list. Then, without ix.mu, the
// anchor blocks are written, and under it the docs' i:l: records with
// their update, which makes the update current. A page queued or not
// yet flushed is left waiting: its postings are about to be written
// with the anchors of their moment.
func (ix *Index) updateAnchors(ctx context.Context, urls []string) error {
	if len(urls) == 0 {
		return nil
	}
	loaded := make([]anchorUpdate, len(urls))
	errs := make([]error, len(urls))
	var ups []anchorUpdate
	err := inWindows(ctx, len(urls),
		func(i int) { loaded[i], errs[i] = ix.analyseAnchorsOf(urls[i]) },
		func(lo, hi int) error {
			ix.mu.Lock()
			defer ix.mu.Unlock()
			for i := lo; i < hi; i++ {
				if errs[i] != nil {
					for _, u := range loaded[i:hi] {
						ix.releaseDoc(u.dp)
					}
					return errs[i]
				}
				u, ok, err := ix.takeAnchorUpdateLocked(&loaded[i])
				if err != nil {
					for _, u := range loaded[i+1 : hi] {
						ix.releaseDoc(u.dp)
					}
					return err
				}
				if ok {
					ups = append(ups, u)
				}
			}
			return nil
		})
	defer func() {
		for _, u := range ups {
			ix.releaseDoc(u.dp)
		}
	}()
	if err == nil {
		err = ix.writeAnchorUpdates(ctx, ups)
	}
	if err != nil {
		// Put the pages taken back on the waiting list.
		ix.mu.Lock()
		for _, u := range ups {
			if _, waiting := ix.anchorsDue[u.url]; !waiting {
				ix.anchorsDue[u.url] = time.Time{} // due at once
			}
		}
		ix.publish()
		ix.mu.Unlock()
		return fmt.Errorf("index: anchor update: %w", err)
	}
	return nil
}

// analyseAnchorsOf reads the flushed page at u and analyses its recorded
// anchors; a zero id with a nil dp means the page is not there to update.
func (ix *Index) analyseAnchorsOf(u string) (anchorUpdate, error) {
	up := anchorUpdate{url: u}
	var found bool
	err := ix.db.View(func(txn *badger.Txn) error {
		id, ok, held, err := getDoc(txn, u)
		if err != nil || !ok || held { // a held page waits for IndexHeld
			return err
		}
		found, up.id = true, id
		up.anchors, err = anchorsIn(txn, u)
		return err
	})
	if err != nil {
		return up, fmt.Errorf("index: anchors of %q: %w", u, err)
	}
	if !found {
		return up, nil
	}
	ix.metaMu.RLock()
	page := script(0)
	if int(up.id) < len(ix.metas) {
		page = ix.metas[up.id].script
	}
	ix.metaMu.RUnlock()
	up.dp = ix.analyseAnchorField(page, up.anchors)
	return up, nil
}

// analyseAnchorField analyses anchors as a page in script page does.
func (ix *Index) analyseAnchorField(page script, anchors []string) *docPostings {
	dp := ix.newDocPostings(&Document{})
	dp.page = page
	ix.analyzeAnchors(dp, anchors)
	dp.encode()
	return dp
}

// takeAnchorUpdateLocked checks a page analysed by analyseAnchorsOf
// against the store and takes it off the waiting list; ok is false when
// there is nothing to update now (the page is gone, put again, queued,
// or not flushed yet). Callers hold ix.mu.
func (ix *Index) takeAnchorUpdateLocked(up *anchorUpdate) (_ anchorUpdate, ok bool, err error) {
	if _, waiting := ix.anchorsDue[up.url]; !waiting || ix.isQueuedLocked(up.url) {
		ix.releaseDoc(up.dp)
		return anchorUpdate{}, false, nil // deleted, or put since: the flush analyses it with its anchors
	}
	var id uint32
	var found bool
	var anchors []string
	err = ix.db.View(func(txn *badger.Txn) error {
		var held bool
		if id, found, held, err = getDoc(txn, up.url); err != nil {
			return err
		}
		found = found && !held
		anchors, err = anchorsIn(txn, up.url)
		return err
	})
	if err != nil {
		ix.releaseDoc(up.dp)
		return anchorUpdate{}, false, fmt.Errorf("index: anchors of %q: %w", up.url, err)
	}
	if !found {
		ix.releaseDoc(up.dp)
		delete(ix.anchorsDue, up.url)
		return anchorUpdate{}, false, ix.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(prefixAnchorsChanged + up.url)) })
	}
	if id >= ix.st.Flushed || ix.isDeleted(id) {
		ix.releaseDoc(up.dp)
		return anchorUpdate{}, false, nil // its postings are being written: a later flush updates it
	}
	if up.dp == nil || id != up.id || !slices.Equal(anchors, up.anchors) {
		ix.releaseDoc(up.dp)
		up.id, up.anchors = id, anchors
		up.dp = ix.analyseAnchorField(ix.metas[id].script, anchors)
	}
	delete(ix.anchorsDue, up.url)
	up.length = up.dp.meta.lens[FieldAnchor]
	return *up, true, nil
}

// writeAnchorUpdates writes ups' anchor entries under a new update
// number, then makes them current. The number is recorded first, so that
// no number is used twice even if a crash loses the rest: entries of an
// update that never became current are stale, like older ones.
func (ix *Index) writeAnchorUpdates(ctx context.Context, ups []anchorUpdate) error {
	if len(ups) == 0 {
		return nil
	}
	if ix.anchorSeq == math.MaxUint32 {
		return errors.New("anchor update numbers exhausted")
	}
	seq := ix.anchorSeq + 1
	if err := ix.db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(keyAnchorSeq), binary.BigEndian.AppendUint32(nil, seq))
	}); err != nil {
		return err
	}
	ix.anchorSeq = seq
	slices.SortFunc(ups, func(a, b anchorUpdate) int { return cmp.Compare(a.id, b.id) })

	// Per term, the new entries in docID order.
	type termEntries struct {
		entries []anchorEntry
		pos     []uint32
	}
	byTerm := map[string]*termEntries{}
	for i := range ups {
		u := &ups[i]
		u.seq = seq
		dp := u.dp
		for t, term := range dp.terms {
			tf := dp.tf[t][FieldAnchor]
			if tf == 0 {
				continue
			}
			te := byTerm[term]
			if te == nil {
				te = &termEntries{}
				byTerm[term] = te
			}
			te.entries = append(te.entries, anchorEntry{doc: u.id, seq: seq, length: u.length, tf: tf, from: uint32(len(te.pos))})
			te.pos = append(te.pos, dp.grouped[dp.start[t]:dp.start[t+1]]...)
		}
	}
	terms := make([]string, 0, len(byTerm))
	for t := range byTerm {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	ix.anchorTerms.add(terms)

	ix.mu.Lock()
	w := ix.newPostingsWriter(ix.st.Flushed)
	ix.mu.Unlock()
	defer w.abort()
	ix.metaMu.RLock()
	tab, deleted := ix.anchorTab, ix.deleted
	ix.metaMu.RUnlock()
	snap := flushSnapshot{deleted: deleted}
	rtxn := ix.db.NewTransaction(false)
	defer rtxn.Discard()
	it := rtxn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixAnchorPostings)})
	defer it.Close()
	var old []anchorEntry
	var oldPos []uint32
	for _, term := range terms {
		if err := ctx.Err(); err != nil {
			return err
		}
		te := byTerm[term]
		u := termUpdate{term: term}
		entries, pos := te.entries, te.pos
		if anchorMergeDue(term, seq) {
			// Merge: the term's blocks are read, stale entries dropped
			// and the rest written with the new ones under this update.
			old, oldPos = old[:0], oldPos[:0]
			kp := anchorTermPrefix(term)
			for it.Seek(kp); it.ValidForPrefix(kp); it.Next() {
				item := it.Item()
				err := item.Value(func(v []byte) error {
					var err error
					old, oldPos, err = decodeAnchorBlock(v, old, oldPos)
					u.dPost -= int64(len(item.Key()) + len(v))
					return err
				})
				if err != nil {
					return fmt.Errorf("anchor postings of %q: %w", term, err)
				}
				u.entries = append(u.entries, kv{k: item.KeyCopy(nil), del: true})
			}
			kept := entries
			keptPos := pos
			if len(old) > 0 {
				kept = make([]anchorEntry, 0, len(old)+len(entries))
				keptPos = make([]uint32, 0, len(oldPos)+len(pos))
				keep := func(e anchorEntry, src []uint32) {
					kept = append(kept, e)
					kept[len(kept)-1].from = uint32(len(keptPos))
					keptPos = append(keptPos, src[e.from:e.from+e.tf]...)
				}
				for _, e := range old {
					if tab.get(e.doc).seq == e.seq && !snap.isDeleted(e.doc) {
						keep(e, oldPos)
					}
				}
				for _, e := range entries {
					keep(e, pos)
				}
				slices.SortStableFunc(kept, compareAnchorEntries)
			}
			entries, pos = kept, keptPos
		}
		for part := 0; len(entries) > 0; part++ {
			if part > math.MaxUint16 {
				return fmt.Errorf("anchor postings of %q: too many entries", term)
			}
			n := min(len(entries), maxAnchorBlockEntries)
			k, v := anchorKey(term, seq, uint16(part)), encodeAnchorBlock(nil, entries[:n], pos)
			u.entries = append(u.entries, kv{k: k, v: v})
			u.dPost += int64(len(k) + len(v))
			entries = entries[n:]
		}
		if len(u.entries) == 0 {
			continue
		}
		if err := w.add(&u); err != nil {
			return fmt.Errorf("anchor postings of %q: %w", term, err)
		}
	}
	if err := w.finish(); err != nil {
		return err
	}
	return ix.commitAnchorUpdates(ups, w)
}

// commitAnchorUpdates makes ups current: each live doc's i:l: record
// with its update, and the removal of its page's request unless another
// came since, in transactions within w's limits; then the table and the
// statistics. Under ix.mu, so that no Delete slips in between.
func (ix *Index) commitAnchorUpdates(ups []anchorUpdate, w *postingsWriter) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	defer ix.publish()
	for i := 0; i < len(ups); {
		txn := ix.db.NewTransaction(true)
		var size, count int64
		var done []anchorUpdate
		for ; i < len(ups); i++ {
			u := &ups[i]
			if ix.isDeleted(u.id) {
				continue
			}
			k, v := docKey(prefixLens, u.id), encodeMeta(&ix.metas[u.id], anchorState{u.seq, u.length})
			est := int64(len(k)+len(v)+len(prefixAnchorsChanged)+len(u.url)) + 2*entryOverhead
			if count > 0 && (size+est > w.maxSize || count+2 > w.maxCount) {
				break
			}
			if err := txn.Set(k, v); err != nil {
				txn.Discard()
				return err
			}
			if _, again := ix.anchorsDue[u.url]; !again {
				if err := txn.Delete([]byte(prefixAnchorsChanged + u.url)); err != nil {
					txn.Discard()
					return err
				}
			}
			size += est
			count += 2
			done = append(done, *u)
		}
		if err := txn.Commit(); err != nil {
			return err
		}
		ix.metaMu.Lock()
		for _, u := range done {
			old := ix.liveLensLocked(u.id)
			d := int64(u.length) - int64(old[FieldAnchor])
			ix.st.LenSum[FieldAnchor] += d
			if a := ix.hosts[ix.metas[u.id].host]; a != nil {
				a.lenSum[FieldAnchor] += d
			}
		}
		ix.anchorTab = ix.anchorTab.with(done)
		ix.metaMu.Unlock()
		ix.anchorUpdates.Add(uint64(len(done)))
	}
	return nil
}

// anchorMergeDue reports whether update seq merges term's anchor blocks:
// about one update in mergeEvery of those with entries for the term,
// chosen by a hash of both. Unlike mergeDue it does not tie a term to a
// residue of the update number, which a term updated periodically (a
// site's navigation text, re-linked every few flushes) might never meet.
func anchorMergeDue(term string, seq uint32) bool {
	x := (anchorRank(term) ^ uint64(seq)) * 0x9e3779b97f4a7c15 // Fibonacci hashing: the high bits mix both
	return (x>>40)%mergeEvery == 0
}

// loadAnchorSeq reads the last anchor update number.
func loadAnchorSeq(txn *badger.Txn) (uint32, error) {
	item, err := txn.Get([]byte(keyAnchorSeq))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var seq uint32
	err = item.Value(func(v []byte) error {
		if len(v) != 4 {
			return errCorrupt
		}
		seq = binary.BigEndian.Uint32(v)
		return nil
	})
	return seq, err
}
