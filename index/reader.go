package index

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// NoMoreDocs is the docID of an exhausted postings cursor.
const NoMoreDocs = math.MaxUint32

// Reader is a consistent read view of the shard for one query: a Badger
// read transaction plus a snapshot of the in-memory per-document data.
// Not safe for concurrent use; Close it.
type Reader struct {
	ix        *Index
	txn       *badger.Txn
	it        *badger.Iterator // over main postings
	ait       *badger.Iterator // over anchor postings
	anchors   *anchorTable
	metas     []docMeta
	docHosts  []uint32
	hostNames []string
	deleted   []atomic.Uint64
	st        state
	maxRank   float64
}

// NewReader opens a read view. The anchor table is taken before the
// Badger snapshot: a view may then hold anchor postings of an update its
// table does not name yet (skipped as stale), never name an update whose
// postings it cannot see.
func (ix *Index) NewReader() *Reader {
	ix.metaMu.RLock()
	anchors := ix.anchorTab
	ix.metaMu.RUnlock()
	txn := ix.db.NewTransaction(false)
	ix.metaMu.RLock()
	r := &Reader{ix: ix, txn: txn, anchors: anchors, metas: ix.metas, docHosts: ix.docHosts, hostNames: ix.hostNames, deleted: ix.deleted, st: ix.pub, maxRank: ix.maxStatic}
	ix.metaMu.RUnlock()
	return r
}

// Close releases the read transaction.
func (r *Reader) Close() {
	for _, it := range []**badger.Iterator{&r.it, &r.ait} {
		if *it != nil {
			(*it).Close()
			*it = nil
		}
	}
	r.txn.Discard()
}

// Docs is the number of live searchable documents.
func (r *Reader) Docs() int64 { return r.st.Docs }

// FieldLenSum is the sum of each field's length over live documents.
func (r *Reader) FieldLenSum() [NumFields]int64 { return r.st.LenSum }

// Live reports whether id is a searchable (flushed), not deleted document.
func (r *Reader) Live(id uint32) bool {
	if id >= r.st.Flushed || int(id) >= len(r.metas) {
		return false
	}
	w := int(id / 64)
	return w >= len(r.deleted) || r.deleted[w].Load()&(1<<(id%64)) == 0
}

// Flushed is the view's watermark: every docID below it has its postings
// written, and none at or above it is Live.
func (r *Reader) Flushed() uint32 { return r.st.Flushed }

// Deletions counts the documents deleted or replaced since the index was
// opened, read now rather than when the view was opened; current reports
// whether the view still shares the index's tombstone bits (they are
// copied when docIDs outgrow them, and a view holding the old copy misses
// later deletions). A deleted document stops being Live in every view
// sharing the bits at once, and the count moves only after that. So a
// caller that reads the same count, current both times, before and after
// a pass over postings saw every deletion counted by it, and no other.
func (r *Reader) Deletions() (n uint64, current bool) {
	r.ix.metaMu.RLock()
	current = len(r.deleted) == len(r.ix.deleted) && (len(r.deleted) == 0 || &r.deleted[0] == &r.ix.deleted[0])
	n = r.ix.deletions.Load()
	r.ix.metaMu.RUnlock()
	return n, current
}

// FieldLens returns the per-field lengths (token counts) of doc id.
func (r *Reader) FieldLens(id uint32) [NumFields]uint32 {
	return r.anchors.get(id).applied(r.metas[id].lens)
}

// AnchorGeneration names the anchor fields of the view's documents: two
// views with the same generation see every document's anchors alike
// (anchor updates change it; Deletions counts the other changes to
// documents already searchable).
func (r *Reader) AnchorGeneration() uint64 { return r.anchors.gen }

// StaticRank returns the static rank of doc id as given to Put.
func (r *Reader) StaticRank(id uint32) float64 { return r.metas[id].static }

// Script returns the script doc id is written in.
func (r *Reader) Script(id uint32) Script { return Script(r.metas[id].script) }

// MaxStaticRank bounds the static rank of every doc in the view.
func (r *Reader) MaxStaticRank() float64 { return r.maxRank }

// Host returns the host of doc id.
func (r *Reader) Host(id uint32) string { return r.metas[id].host }

// HostID returns doc id's host as a number below NumHosts: two docs of one
// view have the same host exactly when their HostIDs are equal.
func (r *Reader) HostID(id uint32) uint32 { return r.docHosts[id] }

// HostName returns the host whose HostID is hid.
func (r *Reader) HostName(hid uint32) string { return r.hostNames[hid] }

// NumHosts bounds the HostIDs of this view.
func (r *Reader) NumHosts() int { return len(r.hostNames) }

// NumDocIDs bounds the docIDs that can appear in this view.
func (r *Reader) NumDocIDs() uint32 { return uint32(len(r.metas)) }

// Record loads doc id's page record without the raw bytes.
func (r *Reader) Record(id uint32) (*PageRecord, error) {
	return r.ix.getByID(r.txn, id, false)
}

// Summary loads doc id's URL, host, title and hashes, without
// decompressing the rest of its record. The summary is shared (the index
// caches it): callers must not modify it.
func (r *Reader) Summary(id uint32) (*Summary, error) {
	return r.ix.summaryByID(r.txn, id)
}

// RecordByURL loads url's page record without the raw bytes, or
// ErrNotFound.
func (r *Reader) RecordByURL(url string) (*PageRecord, error) {
	id, ok, err := getDocID(r.txn, url)
	if err != nil {
		return nil, err
	}
	if !ok || !r.Live(id) {
		return nil, ErrNotFound
	}
	return r.Record(id)
}

type rawBlock struct {
	last     uint32
	appended bool // stored under appendKey, else blockKey
	hdr      BlockHeader
	from, to int // in Postings.arena
}

// Postings is a cursor over one term's postings list: its main blocks
// merged, by docID, with its anchor postings (anchorpost.go). Blocks are
// read as encoded bytes; a block's docIDs and TFs are decoded only when
// the cursor enters it, and positions only when asked for, so block-max
// pruning can skip blocks without decoding them. A cursor opened without
// positions reads a block's positions from the store the first time
// Positions asks for one of its docs. Anchor postings, a few entries per
// doc whose anchors changed since its flush, are decoded whole when the
// cursor opens.
type Postings struct {
	Term string
	// DF counts documents in the list (tombstoned ones not yet purged,
	// and stale anchor entries, included).
	DF int64
	// MaxTF and MinLen bound the term's per-field TF and length over the list.
	MaxTF, MinLen [NumFields]uint32

	arena  []byte
	blocks []rawBlock
	bi     int // current block
	dec    int // decoded block index, -1 if none
	blk    decodedBlock
	i      int
	mdoc   uint32 // the main list's current doc
	err    error
	// withPos says the arena holds positions; otherwise posBlock is the
	// block whose positions blk holds (read through txn), -1 if none.
	withPos  bool
	posBlock int
	txn      *badger.Txn

	// The anchor postings, sorted by docID then update, and the view's
	// anchor table, which says which update is a doc's current one.
	anc     []anchorEntry
	ancPos  []uint32
	ai      int // first entry not below the last target
	anchors *anchorTable

	// The merged cursor's current doc: its TFs, whether the main list
	// has it and whether its main anchor field is replaced, and its
	// current anchor entry (-1: none).
	doc      uint32
	tf       [NumFields]uint32
	inMain   bool
	replaced bool
	cur      int
	shallow  BlockHeader
}

// Postings opens the postings of term (an empty cursor if the term is
// unknown). Positions are read only when withPositions is set (phrases);
// they are most of a list's bytes.
func (r *Reader) Postings(term string, withPositions bool) (*Postings, error) {
	p := &Postings{Term: term, dec: -1, doc: NoMoreDocs, mdoc: NoMoreDocs, withPos: withPositions, posBlock: -1, txn: r.txn, anchors: r.anchors, cur: -1}
	if r.it == nil {
		r.it = r.txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixPostings)})
	}
	kp := termPrefix(term)
	for r.it.Seek(kp); r.it.ValidForPrefix(kp); r.it.Next() {
		item := r.it.Item()
		last, appended, ok := parseBlockKey(item.Key(), len(kp))
		if !ok {
			continue
		}
		b := rawBlock{from: len(p.arena), appended: appended}
		err := item.Value(func(v []byte) error {
			off, err := decodeHeader(v, &b.hdr)
			if err != nil {
				return err
			}
			if !withPositions {
				v = v[:off+b.hdr.docBytes]
			}
			p.arena = append(p.arena, v...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("index: postings of %q: %w", term, err)
		}
		b.to = len(p.arena)
		b.last = b.hdr.LastDoc
		if b.last != last {
			return nil, fmt.Errorf("index: postings of %q: block of doc %d under key %d", term, b.last, last)
		}
		if n := len(p.blocks); n > 0 && b.last <= p.blocks[n-1].last {
			return nil, fmt.Errorf("index: postings of %q: blocks out of order", term)
		}
		p.blocks = append(p.blocks, b)
		p.DF += int64(b.hdr.N)
		mergeBounds(&p.MaxTF, &p.MinLen, b.hdr.MaxTF, b.hdr.MinLen)
	}
	if r.ix.anchorTerms.has(term) {
		if err := p.readAnchorPostings(r); err != nil {
			return nil, fmt.Errorf("index: anchor postings of %q: %w", term, err)
		}
	}
	if len(p.blocks) > 0 || len(p.anc) > 0 {
		p.Advance(0)
	}
	return p, nil
}

// readAnchorPostings decodes the term's anchor blocks into p.anc.
func (p *Postings) readAnchorPostings(r *Reader) error {
	if r.ait == nil {
		r.ait = r.txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixAnchorPostings)})
	}
	kp := anchorTermPrefix(p.Term)
	parts := 0
	for r.ait.Seek(kp); r.ait.ValidForPrefix(kp); r.ait.Next() {
		if len(r.ait.Item().Key()) != len(kp)+6 {
			continue // another term's, which has this one as a prefix up to a 0 byte
		}
		err := r.ait.Item().Value(func(v []byte) error {
			var err error
			p.anc, p.ancPos, err = decodeAnchorBlock(v, p.anc, p.ancPos)
			return err
		})
		if err != nil {
			return err
		}
		parts++
	}
	if parts > 1 {
		slices.SortFunc(p.anc, compareAnchorEntries)
	}
	for _, e := range p.anc {
		mergeBounds(&p.MaxTF, &p.MinLen, anchorTF(e.tf), anchorTF(e.length))
	}
	p.DF += int64(len(p.anc))
	return nil
}

// anchorTF is v in the anchor field alone.
func anchorTF(v uint32) [NumFields]uint32 {
	var a [NumFields]uint32
	a[FieldAnchor] = v
	return a
}

// Rewind moves the cursor back to the list's first doc without reading
// the store again.
func (p *Postings) Rewind() {
	if p.err != nil || len(p.blocks) == 0 && len(p.anc) == 0 {
		return
	}
	p.bi, p.dec, p.posBlock, p.i, p.ai = 0, -1, -1, 0, 0
	p.mdoc, p.doc = NoMoreDocs, NoMoreDocs
	p.Advance(0)
}

// Doc is the current docID, NoMoreDocs when exhausted.
func (p *Postings) Doc() uint32 { return p.doc }

// Err reports a decoding error met by the cursor (it then reads as exhausted).
func (p *Postings) Err() error { return p.err }

// ShallowAdvance moves to the block that may contain the first doc >= target
// without decoding it, returning its last docID and the bounds of the docs
// from target to it (NoMoreDocs, nil past the end). Call Advance before
// reading the doc.
func (p *Postings) ShallowAdvance(target uint32) (uint32, *BlockHeader) {
	for p.bi < len(p.blocks) && p.blocks[p.bi].last < target {
		p.bi++
	}
	if len(p.anc) == 0 {
		if p.bi >= len(p.blocks) {
			return NoMoreDocs, nil
		}
		return p.blocks[p.bi].last, &p.blocks[p.bi].hdr
	}
	j := p.ai + sort.Search(len(p.anc)-p.ai, func(k int) bool { return p.anc[p.ai+k].doc >= target })
	var last uint32
	if p.bi < len(p.blocks) {
		last = p.blocks[p.bi].last
		p.shallow = p.blocks[p.bi].hdr
	} else {
		if j >= len(p.anc) {
			return NoMoreDocs, nil
		}
		last = p.anc[len(p.anc)-1].doc
		p.shallow = BlockHeader{}
	}
	for ; j < len(p.anc) && p.anc[j].doc <= last; j++ {
		mergeBounds(&p.shallow.MaxTF, &p.shallow.MinLen, anchorTF(p.anc[j].tf), anchorTF(p.anc[j].length))
	}
	return last, &p.shallow
}

// Advance moves to the first doc >= target and returns it. A doc of the
// main list whose anchors were updated counts without its main anchor
// field, and with its current anchor entry's; a doc left with no field
// at all is passed over.
func (p *Postings) Advance(target uint32) uint32 {
	if p.doc != NoMoreDocs && p.doc >= target {
		return p.doc
	}
	for {
		dm := p.advanceMain(target)
		if p.err != nil {
			p.doc = NoMoreDocs
			return p.doc
		}
		if len(p.anc) == 0 && dm != NoMoreDocs {
			// The common case, a term without anchor entries: the main
			// list's doc as it is, unless an update replaced its anchors.
			if tf := &p.blk.tfs[p.i]; tf[FieldAnchor] == 0 || p.anchors.get(dm).seq == 0 {
				p.doc, p.tf, p.inMain, p.cur, p.replaced = dm, *tf, true, -1, false
				return dm
			}
		}
		for p.ai < len(p.anc) && p.anc[p.ai].doc < target {
			p.ai++
		}
		d := dm
		if p.ai < len(p.anc) {
			d = min(d, p.anc[p.ai].doc)
		}
		if d == NoMoreDocs {
			p.doc = NoMoreDocs
			return p.doc
		}
		var tf [NumFields]uint32
		if dm == d {
			tf = p.blk.tfs[p.i]
		}
		p.cur, p.replaced = -1, false
		if p.ai < len(p.anc) && p.anc[p.ai].doc == d || tf[FieldAnchor] != 0 {
			if seq := p.anchors.get(d).seq; seq != 0 {
				p.replaced = true
				tf[FieldAnchor] = 0
				for j := p.ai; j < len(p.anc) && p.anc[j].doc == d; j++ {
					if p.anc[j].seq == seq {
						p.cur = j
						tf[FieldAnchor] = p.anc[j].tf
					}
				}
			}
		}
		if tf == ([NumFields]uint32{}) {
			target = d + 1
			continue
		}
		p.doc, p.tf, p.inMain = d, tf, dm == d
		return d
	}
}

// advanceMain moves the main list to its first doc >= target.
func (p *Postings) advanceMain(target uint32) uint32 {
	if p.dec >= 0 && p.mdoc != NoMoreDocs && p.mdoc >= target {
		return p.mdoc
	}
	if p.err != nil {
		return NoMoreDocs
	}
	// Gallop over blocks by their last docID (keys), no decoding.
	if p.bi < len(p.blocks) && p.blocks[p.bi].last < target {
		rest := p.blocks[p.bi:]
		p.bi += sort.Search(len(rest), func(i int) bool { return rest[i].last >= target })
	}
	if p.bi >= len(p.blocks) {
		p.mdoc = NoMoreDocs
		return p.mdoc
	}
	if p.dec != p.bi {
		b := &p.blocks[p.bi]
		if err := decodeBlock(p.arena[b.from:b.to], &p.blk); err != nil {
			p.err = fmt.Errorf("term %q block %d: %w", p.Term, p.bi, err)
			p.mdoc = NoMoreDocs
			return p.mdoc
		}
		p.dec = p.bi
		p.i = 0
	}
	docs := p.blk.docs
	for p.i < len(docs) && docs[p.i] < target {
		p.i++
	}
	if p.i >= len(docs) { // corrupt: last key lied; move on
		p.bi++
		return p.advanceMain(target)
	}
	p.mdoc = docs[p.i]
	return p.mdoc
}

// Next moves to the next doc.
func (p *Postings) Next() uint32 {
	if p.doc == NoMoreDocs {
		return p.doc
	}
	return p.Advance(p.doc + 1)
}

// TF returns the current doc's per-field term frequencies.
func (p *Postings) TF() [NumFields]uint32 { return p.tf }

// Positions appends the current doc's positions to dst. A cursor opened
// without positions reads the current block's from the store once.
func (p *Postings) Positions(dst []uint32) ([]uint32, error) {
	if p.inMain {
		if !p.withPos && p.posBlock != p.dec {
			if err := p.loadPositions(); err != nil {
				return dst, err
			}
		}
		n := len(dst)
		var err error
		if dst, err = p.blk.positions(p.i, dst); err != nil {
			return dst, err
		}
		if p.replaced { // the main anchor positions come last
			k := n
			for k < len(dst) && dst[k] < anchorBase {
				k++
			}
			dst = dst[:k]
		}
	}
	if p.cur >= 0 {
		e := p.anc[p.cur]
		dst = append(dst, p.ancPos[e.from:e.from+e.tf]...)
	}
	return dst, nil
}

// loadPositions reads the decoded block again, whole, from the reader's
// snapshot and keeps its positions section.
func (p *Postings) loadPositions() error {
	if p.dec < 0 || p.dec >= len(p.blocks) {
		return fmt.Errorf("index: positions of %q: no current block", p.Term)
	}
	b := &p.blocks[p.dec]
	key := blockKey(nil, p.Term, b.last)
	if b.appended {
		key = appendKey(nil, p.Term, b.last)
	}
	item, err := p.txn.Get(key)
	if err != nil {
		return fmt.Errorf("index: positions of %q: %w", p.Term, err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return fmt.Errorf("index: positions of %q: %w", p.Term, err)
	}
	var h BlockHeader
	off, err := decodeHeader(v, &h)
	if err != nil || h.LastDoc != b.hdr.LastDoc || h.N != b.hdr.N || h.docBytes != b.hdr.docBytes {
		return fmt.Errorf("index: positions of %q: %w", p.Term, errCorrupt)
	}
	p.blk.posRaw = v[off+h.docBytes:]
	p.blk.posAt = p.blk.posAt[:0]
	p.posBlock = p.dec
	return nil
}
