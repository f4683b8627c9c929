package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Fields for BM25F. FieldHeading comes last so that the older four keep
// their numbers.
const (
	FieldTitle = iota
	FieldAnchor
	FieldBody
	FieldURL
	FieldHeading
	NumFields
)

// BlockSize is the number of documents per postings block.
const BlockSize = 128

var errCorrupt = errors.New("index: corrupt postings block")

// postingList is a term's postings in docID order, positions flattened:
// the positions of docs[i] are pos[posOff[i]:posOff[i+1]].
type postingList struct {
	docs   []uint32
	tfs    [][NumFields]uint32
	posOff []uint32
	pos    []uint32
}

func (p *postingList) reset() {
	p.docs, p.tfs, p.posOff, p.pos = p.docs[:0], p.tfs[:0], p.posOff[:0], p.pos[:0]
}

func (p *postingList) add(doc uint32, tf [NumFields]uint32, pos []uint32) {
	if len(p.posOff) == 0 {
		p.posOff = append(p.posOff, 0)
	}
	p.docs = append(p.docs, doc)
	p.tfs = append(p.tfs, tf)
	p.pos = append(p.pos, pos...)
	p.posOff = append(p.posOff, uint32(len(p.pos)))
}

func (p *postingList) positions(i int) []uint32 { return p.pos[p.posOff[i]:p.posOff[i+1]] }

// BlockHeader carries a block's bounds for block-max pruning: the largest
// per-field TF and the smallest per-field length among documents having
// the term in that field. A list's bounds and DF are those of its blocks
// together (Reader.Postings reads every header anyway).
type BlockHeader struct {
	N        int
	docBytes int // length of the doc+TF section, positions follow it
	LastDoc  uint32
	MaxTF    [NumFields]uint32
	MinLen   [NumFields]uint32
}

// encodeBlock appends the block encoding of p's entries [lo,hi) to dst.
// Layout: header (count, last docID, bounds of the fields present); first
// docID then d-gaps; per doc a field mask byte and the TF of each present
// field; then per doc its positions as d-gaps.
func encodeBlock(dst []byte, h *BlockHeader, p *postingList, lo, hi int) []byte {
	dst = appendHeader(dst, h, hi-lo, p.docs[hi-1])
	// The doc+TF section is prefixed by its length so that a reader that
	// needs no positions can copy the block without them.
	sec := appendDocGaps(make([]byte, 0, 4*(hi-lo)), p, lo, hi)
	sec = appendTFs(sec, p, lo, hi)
	dst = binary.AppendUvarint(dst, uint64(len(sec)))
	dst = append(dst, sec...)
	return appendPositions(dst, p, lo, hi)
}

// appendHeader appends the header of a block of n docs ending at last.
func appendHeader(dst []byte, h *BlockHeader, n int, last uint32) []byte {
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, uint64(last))
	return appendBounds(dst, &h.MaxTF, &h.MinLen)
}

// appendDocGaps appends the docIDs of p[lo:hi]: the first whole, then
// the gaps between them.
func appendDocGaps(dst []byte, p *postingList, lo, hi int) []byte {
	prev := uint32(0)
	for i := lo; i < hi; i++ {
		dst = binary.AppendUvarint(dst, uint64(p.docs[i]-prev))
		prev = p.docs[i]
	}
	return dst
}

// appendTFs appends each doc's field mask and per-field TFs.
func appendTFs(dst []byte, p *postingList, lo, hi int) []byte {
	for i := lo; i < hi; i++ {
		var mask byte
		for f := range NumFields {
			if p.tfs[i][f] > 0 {
				mask |= 1 << f
			}
		}
		dst = append(dst, mask)
		for f := range NumFields {
			if p.tfs[i][f] > 0 {
				dst = binary.AppendUvarint(dst, uint64(p.tfs[i][f]))
			}
		}
	}
	return dst
}

// appendPositions appends each doc's positions as gaps.
func appendPositions(dst []byte, p *postingList, lo, hi int) []byte {
	for i := lo; i < hi; i++ {
		last := uint32(0)
		for _, q := range p.positions(i) {
			dst = binary.AppendUvarint(dst, uint64(q-last))
			last = q
		}
	}
	return dst
}

type byteReader struct {
	b   []byte
	off int
	err error
}

func (r *byteReader) uvarint() uint32 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 || v > 1<<32-1 {
		r.err = errCorrupt
		return 0
	}
	r.off += n
	return uint32(v)
}

func (r *byteReader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.err = errCorrupt
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// decodeHeader reads a block header and returns the offset of the doc section.
func decodeHeader(b []byte, h *BlockHeader) (int, error) {
	r := byteReader{b: b}
	h.N = int(r.uvarint())
	h.LastDoc = r.uvarint()
	readBounds(&r, &h.MaxTF, &h.MinLen)
	h.docBytes = int(r.uvarint())
	if r.err == nil && h.docBytes > len(b)-r.off {
		r.err = errCorrupt
	}
	if r.err == nil && (h.N <= 0 || h.N > 1<<20) {
		r.err = errCorrupt
	}
	return r.off, r.err
}

// appendBounds writes a mask of the fields present (bounds only for
// those: the header of a rare term costs a few bytes), then their bounds.
func appendBounds(dst []byte, maxTF, minLen *[NumFields]uint32) []byte {
	var mask byte
	for f := range NumFields {
		if maxTF[f] > 0 {
			mask |= 1 << f
		}
	}
	dst = append(dst, mask)
	for f := range NumFields {
		if mask&(1<<f) != 0 {
			dst = binary.AppendUvarint(dst, uint64(maxTF[f]))
			dst = binary.AppendUvarint(dst, uint64(minLen[f]))
		}
	}
	return dst
}

func readBounds(r *byteReader, maxTF, minLen *[NumFields]uint32) {
	mask := r.byte()
	if mask>>NumFields != 0 {
		r.err = errCorrupt
	}
	*maxTF, *minLen = [NumFields]uint32{}, [NumFields]uint32{}
	for f := range NumFields {
		if mask&(1<<f) != 0 {
			maxTF[f] = r.uvarint()
			minLen[f] = r.uvarint()
		}
	}
}

// decodedBlock is a block with docIDs and TFs decoded; positions stay
// encoded until a phrase needs them.
type decodedBlock struct {
	hdr    BlockHeader
	docs   []uint32
	tfs    [][NumFields]uint32
	posRaw []byte
	posAt  []int32 // byte offset of each doc's positions in posRaw, filled lazily
}

// decodeBlock decodes b into d, reusing d's slices.
func decodeBlock(b []byte, d *decodedBlock) error {
	off, err := decodeHeader(b, &d.hdr)
	if err != nil {
		return err
	}
	r := byteReader{b: b[:off+d.hdr.docBytes], off: off}
	n := d.hdr.N
	d.docs = d.docs[:0]
	d.tfs = d.tfs[:0]
	doc := uint32(0)
	for i := range n {
		g := r.uvarint()
		if i == 0 {
			doc = g
		} else {
			if g == 0 {
				return errCorrupt
			}
			doc += g
		}
		d.docs = append(d.docs, doc)
	}
	if r.err == nil && doc != d.hdr.LastDoc {
		return errCorrupt
	}
	for range n {
		mask := r.byte()
		var tf [NumFields]uint32
		for f := range NumFields {
			if mask&(1<<f) != 0 {
				tf[f] = r.uvarint()
			}
		}
		d.tfs = append(d.tfs, tf)
	}
	if r.err != nil {
		return fmt.Errorf("decode block docs: %w", r.err)
	}
	if r.off != off+d.hdr.docBytes {
		return errCorrupt
	}
	d.posRaw = b[r.off:]
	d.posAt = d.posAt[:0]
	return nil
}

// positions decodes the positions of the i-th doc of the block into dst.
func (d *decodedBlock) positions(i int, dst []uint32) ([]uint32, error) {
	if len(d.posAt) != len(d.docs) {
		// One pass over the varints records where each doc's positions start.
		at := d.posAt[:0]
		off := 0
		b := d.posRaw
		for j := range len(d.docs) {
			at = append(at, int32(off))
			for range tfSum(d.tfs[j]) {
				for off < len(b) && b[off]&0x80 != 0 {
					off++
				}
				if off >= len(b) {
					d.posAt = at[:0]
					return dst, errCorrupt
				}
				off++
			}
		}
		d.posAt = at
	}
	if i < 0 || i >= len(d.posAt) {
		return dst, errCorrupt
	}
	r := byteReader{b: d.posRaw, off: int(d.posAt[i])}
	last := uint32(0)
	for range tfSum(d.tfs[i]) {
		last += r.uvarint()
		dst = append(dst, last)
	}
	return dst, r.err
}

// toList appends the block's postings (with positions) to p, skipping docs
// for which drop returns true.
func (d *decodedBlock) toList(p *postingList, drop func(uint32) bool) error {
	var buf []uint32
	var err error
	for i, doc := range d.docs {
		buf, err = d.positions(i, buf[:0])
		if err != nil {
			return err
		}
		if drop != nil && drop(doc) {
			continue
		}
		p.add(doc, d.tfs[i], buf)
	}
	return nil
}

func tfSum(tf [NumFields]uint32) uint32 {
	var s uint32
	for _, v := range tf {
		s += v
	}
	return s
}

// A term's list is its full blocks, of exactly BlockSize docs each, under
// blockKey(term, last doc), then its appended blocks, of fewer, under
// appendKey(term, last doc): "i:p:" term 0x00 0xFFFFFFFF last doc, which
// sorts after every full block (0xFFFFFFFF is never a docID). A flush
// appends a block of its new docs without reading the list, and merges
// the appended blocks into full ones now and then (flush.go); every
// appended block holds docs above every full block's, so key order is
// docID order.
const appendMark = math.MaxUint32

// blockKey is the key of the full block of term ending at docID last.
func blockKey(dst []byte, term string, last uint32) []byte {
	dst = append(dst, prefixPostings...)
	dst = append(dst, term...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint32(dst, last)
}

// appendKey is the key of the appended block of term ending at docID last.
func appendKey(dst []byte, term string, last uint32) []byte {
	return binary.BigEndian.AppendUint32(blockKey(dst, term, appendMark), last)
}

func termPrefix(term string) []byte {
	b := make([]byte, 0, len(prefixPostings)+len(term)+5)
	b = append(b, prefixPostings...)
	b = append(b, term...)
	return append(b, 0)
}

// parseBlockKey reads the last docID of a postings key of the term whose
// prefix (termPrefix) k has kpLen bytes, and whether the block is
// appended; ok is false for a key of neither form.
func parseBlockKey(k []byte, kpLen int) (last uint32, appended, ok bool) {
	switch len(k) - kpLen {
	case 4:
		last = binary.BigEndian.Uint32(k[kpLen:])
		return last, false, last != appendMark
	case 8:
		if binary.BigEndian.Uint32(k[kpLen:]) != appendMark {
			return 0, false, false
		}
		last = binary.BigEndian.Uint32(k[kpLen+4:])
		return last, true, last != appendMark
	}
	return 0, false, false
}
