package index

import (
	"encoding/binary"
	"math"
	"strings"
)

// docPostings is one analyzed document: its distinct terms, and per term
// the field mask, per-field TFs and position d-gaps already varint-encoded
// (the layout the pending index stores). Terms may alias the analyzed text.
// It is scratch space: Index.analyzeDoc takes one from a pool and the
// caller hands it back with releaseDoc once it is in the pending index.
type docPostings struct {
	meta  docMeta
	terms []string
	enc   []byte
	off   []uint32 // enc[off[i]:off[i+1]] is terms[i]'s encoding
	// page is the page's script; parts says where its analysis's parts
	// end (see formOf).
	page  script
	parts analysisParts
	// The field being analysed, where it starts and its last kept
	// position (-1: none yet); emit is emitToken, bound once per scratch.
	field  int
	base   uint32
	maxPos int
	emit   func(span)

	// Analysis scratch, kept for reuse.
	idx     map[string]int32
	tf      [][NumFields]uint32
	lastPos []uint32 // last position of each term, plus one (0 = none)
	occTerm []int32  // term of each kept token, in emission order
	occPos  []uint32
	grouped []uint32
	start   []uint32
}

func (dp *docPostings) reset() {
	clear(dp.terms) // drop references to the analyzed text
	clear(dp.idx)
	dp.meta, dp.page, dp.parts = docMeta{}, 0, analysisParts{}
	dp.terms, dp.enc, dp.off = dp.terms[:0], dp.enc[:0], dp.off[:0]
	dp.tf, dp.lastPos, dp.occTerm, dp.occPos = dp.tf[:0], dp.lastPos[:0], dp.occTerm[:0], dp.occPos[:0]
}

// emitToken records a token of the field being analysed.
func (dp *docPostings) emitToken(t span) {
	if dp.token(t.term, dp.field, dp.base+uint32(t.pos)) {
		dp.maxPos = max(dp.maxPos, t.pos)
	}
}

// token records one analyzed token at document position p in field.
func (dp *docPostings) token(term string, field int, p uint32) bool {
	i, ok := dp.idx[term]
	if !ok {
		i = int32(len(dp.terms))
		dp.idx[term] = i
		dp.terms = append(dp.terms, term)
		dp.tf = append(dp.tf, [NumFields]uint32{})
		dp.lastPos = append(dp.lastPos, 0)
	}
	// A term met twice at one position (a sub-word equal to a compound
	// part) counts once.
	if dp.lastPos[i] == p+1 {
		return false
	}
	dp.lastPos[i] = p + 1
	dp.tf[i][field]++
	dp.meta.lens[field]++
	dp.occTerm = append(dp.occTerm, i)
	dp.occPos = append(dp.occPos, p)
	return true
}

// encode groups the kept tokens by term (a counting sort, so each term's
// positions stay in increasing order) and encodes each term's entry.
func (dp *docPostings) encode() {
	n := len(dp.terms)
	dp.start = append(dp.start[:0], make([]uint32, n+1)...)
	for _, t := range dp.occTerm {
		dp.start[t+1]++
	}
	for i := 1; i <= n; i++ {
		dp.start[i] += dp.start[i-1]
	}
	if cap(dp.grouped) < len(dp.occPos) {
		dp.grouped = make([]uint32, len(dp.occPos))
	}
	g := dp.grouped[:len(dp.occPos)]
	fill := dp.lastPos[:n] // reused as per-term fill counters
	clear(fill)
	for k, t := range dp.occTerm {
		g[dp.start[t]+fill[t]] = dp.occPos[k]
		fill[t]++
	}
	for i := range n {
		dp.off = append(dp.off, uint32(len(dp.enc)))
		dp.enc = appendDocEntry(dp.enc, &dp.tf[i], g[dp.start[i]:dp.start[i+1]])
	}
	dp.off = append(dp.off, uint32(len(dp.enc)))
}

// appendDocEntry encodes one doc's entry of a term: the mask of fields
// present, their TFs, then the positions as d-gaps (as many as the TFs sum
// to). It is the per-doc part of a block (see encodeBlock) without the docID.
func appendDocEntry(dst []byte, tf *[NumFields]uint32, pos []uint32) []byte {
	var mask byte
	for f := range NumFields {
		if tf[f] > 0 {
			mask |= 1 << f
		}
	}
	dst = append(dst, mask)
	for f := range NumFields {
		if tf[f] > 0 {
			dst = binary.AppendUvarint(dst, uint64(tf[f]))
		}
	}
	last := uint32(0)
	for _, q := range pos {
		dst = binary.AppendUvarint(dst, uint64(q-last))
		last = q
	}
	return dst
}

// pendingList is one term's buffered postings, in docID order: per doc the
// docID gap (the first doc's ID itself) then its appendDocEntry encoding.
// About 4 bytes per posting instead of the 60+ of per-document term lists.
type pendingList struct {
	buf  []byte
	last uint32
	n    uint32
}

// pendingDoc is a stored document whose postings are buffered.
type pendingDoc struct {
	id   uint32
	meta docMeta
}

// pendingIndex is the in-memory inverted index of the documents stored
// since the last flush ("lazy merge" buffer). A flush takes it whole.
type pendingIndex struct {
	terms map[string]int32 // term -> index in lists
	lists []pendingList
	docs  []pendingDoc
	slab  []byte // small lists start inside it: one allocation for many rare terms
	bytes int    // approximate memory held
}

// newPendingIndex sizes the term map for about hint terms (the previous
// batch's count), so that a batch does not rehash its way up.
func newPendingIndex(hint int) *pendingIndex {
	hint = min(max(hint, 4096), 1<<18)
	return &pendingIndex{terms: make(map[string]int32, hint), lists: make([]pendingList, 0, hint)}
}

const (
	pendingSlabBytes    = 64 << 10
	pendingInitialBytes = 16
	pendingTermOverhead = 80 // map entry, list header, term string header
)

// add appends doc id's postings. Callers hold ix.mu, which also orders
// docIDs, so every list stays sorted.
func (p *pendingIndex) add(id uint32, dp *docPostings) {
	p.docs = append(p.docs, pendingDoc{id: id, meta: dp.meta})
	for i, t := range dp.terms {
		li, ok := p.terms[t]
		if !ok {
			if cap(p.slab)-len(p.slab) < pendingInitialBytes {
				p.slab = make([]byte, 0, pendingSlabBytes)
				p.bytes += pendingSlabBytes
			}
			n := len(p.slab)
			p.slab = p.slab[:n+pendingInitialBytes]
			li = int32(len(p.lists))
			p.terms[strings.Clone(t)] = li
			p.lists = append(p.lists, pendingList{buf: p.slab[n : n : n+pendingInitialBytes]})
			p.bytes += len(t) + pendingTermOverhead
		}
		l := &p.lists[li]
		gap := id
		if l.n > 0 {
			gap = id - l.last
		}
		c0 := cap(l.buf)
		l.buf = binary.AppendUvarint(l.buf, uint64(gap))
		l.buf = append(l.buf, dp.enc[dp.off[i]:dp.off[i+1]]...)
		if c := cap(l.buf); c != c0 {
			p.bytes += c - c0 // the old buffer is garbage now
		}
		l.last = id
		l.n++
	}
}

// appendPending moves newer's postings after p's (newer holds only larger
// docIDs): a failed flush puts its batch back in front of what arrived
// meanwhile.
func (p *pendingIndex) appendPending(newer *pendingIndex) {
	if newer == nil {
		return
	}
	p.docs = append(p.docs, newer.docs...)
	for t, ni := range newer.terms {
		nl := &newer.lists[ni]
		li, ok := p.terms[t]
		if !ok {
			p.terms[t] = int32(len(p.lists))
			p.lists = append(p.lists, *nl)
			continue
		}
		l := &p.lists[li]
		first, k := binary.Uvarint(nl.buf)
		if k <= 0 || l.n == 0 {
			continue // cannot happen: lists are never empty
		}
		l.buf = binary.AppendUvarint(l.buf, first-uint64(l.last))
		l.buf = append(l.buf, nl.buf[k:]...)
		l.last, l.n = nl.last, l.n+nl.n
	}
	p.bytes += newer.bytes
}

// decodePending appends l's postings to dst, skipping docs for which drop
// returns true and docs at or below after (already written by an
// interrupted flush).
func decodePending(l *pendingList, dst *postingList, drop func(uint32) bool, after uint32, hasAfter bool) error {
	r := byteReader{b: l.buf}
	doc := uint32(0)
	if len(dst.posOff) == 0 {
		dst.posOff = append(dst.posOff, 0)
	}
	for i := uint32(0); i < l.n; i++ {
		g := r.uvarint()
		if i > 0 && g == 0 || uint64(doc)+uint64(g) > math.MaxUint32 {
			return errCorrupt
		}
		doc += g
		mask := r.byte()
		var tf [NumFields]uint32
		for f := range NumFields {
			if mask&(1<<f) != 0 {
				tf[f] = r.uvarint()
			}
		}
		if r.err != nil {
			return r.err
		}
		n := tfSum(tf)
		if drop(doc) || hasAfter && doc <= after {
			for range n {
				r.uvarint()
			}
			continue
		}
		last := uint32(0)
		for range n {
			last += r.uvarint()
			dst.pos = append(dst.pos, last)
		}
		dst.docs = append(dst.docs, doc)
		dst.tfs = append(dst.tfs, tf)
		dst.posOff = append(dst.posOff, uint32(len(dst.pos)))
	}
	return r.err
}
