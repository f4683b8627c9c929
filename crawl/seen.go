package crawl

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
)

// URL states in the URL-seen set.
const (
	stateQueued uint8 = 1 // in the frontier (QKey says where)
	stateDone   uint8 = 2 // fetched (or given up); only recrawl queues it again
)

// urlHash identifies a normalised URL in the seen set: 128 bits of SHA-256,
// so a collision (which would silently skip a URL) needs ~2^64 URLs.
type urlHash [16]byte

func hashURL(u string) urlHash {
	s := sha256.Sum256([]byte(u))
	var h urlHash
	copy(h[:], s[:16])
	return h
}

// seenRecord is the value of "c:u/<host>/<hash>": everything the crawler
// knows about one URL. It is the source of truth for the URL's queue entry.
// It is read and written for every link of every page, so it has a compact
// binary encoding (version byte, then varints and length-prefixed strings).
// Fields added later are appended and optional: a record that ends before
// them decodes with their zero values, and a decoder that predates them
// ignores them.
type seenRecord struct {
	URL      string
	State    uint8
	QKey     []byte  // full queue key while queued
	Cash     float64 // OPIC cash not yet distributed
	History  float64 // all cash ever received (importance)
	Depth    int
	Attempts int    // transient failures so far
	Outcome  string // last status class or error class

	FetchedAt    int64 // unix nanos
	ETag         string
	LastModified string
	ContentHash  []byte
	SimHash      uint64
	Interval     int64 // recrawl interval, nanos
	NextFetch    int64 // recrawl due time, unix nanos (0: none)

	// Base is set when the URL is an external script (Link.Base): it is
	// fetched for its links, which resolve against Base. Optional field.
	Base string
}

const seenRecordVersion = 1

func (r *seenRecord) encode() []byte {
	b := make([]byte, 0, 64+len(r.URL)+len(r.QKey)+len(r.ETag)+len(r.LastModified)+len(r.ContentHash)+len(r.Base))
	b = append(b, seenRecordVersion, r.State)
	b = appendBytes(b, []byte(r.URL))
	b = appendBytes(b, r.QKey)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.Cash))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.History))
	b = binary.AppendVarint(b, int64(r.Depth))
	b = binary.AppendVarint(b, int64(r.Attempts))
	b = appendBytes(b, []byte(r.Outcome))
	b = binary.AppendVarint(b, r.FetchedAt)
	b = appendBytes(b, []byte(r.ETag))
	b = appendBytes(b, []byte(r.LastModified))
	b = appendBytes(b, r.ContentHash)
	b = binary.LittleEndian.AppendUint64(b, r.SimHash)
	b = binary.AppendVarint(b, r.Interval)
	b = binary.AppendVarint(b, r.NextFetch)
	if r.Base != "" {
		b = appendBytes(b, []byte(r.Base))
	}
	return b
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// recordReader decodes with bounds checks: a record from a peer (handoff)
// or a damaged one yields an error, never a panic.
type recordReader struct {
	b   []byte
	err error
}

func (d *recordReader) fail() {
	if d.err == nil {
		d.err = errors.New("truncated or malformed")
	}
}

func (d *recordReader) bytes() []byte {
	n, w := binary.Uvarint(d.b)
	if w <= 0 || n > uint64(len(d.b)-w) {
		d.fail()
		d.b = nil
		return nil
	}
	out := d.b[w : w+int(n)]
	d.b = d.b[w+int(n):]
	return out
}

func (d *recordReader) varint() int64 {
	v, w := binary.Varint(d.b)
	if w <= 0 {
		d.fail()
		d.b = nil
		return 0
	}
	d.b = d.b[w:]
	return v
}

func (d *recordReader) u64() uint64 {
	if len(d.b) < 8 {
		d.fail()
		d.b = nil
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func decodeSeenRecord(b []byte) (*seenRecord, error) {
	if len(b) < 2 || b[0] != seenRecordVersion {
		return nil, errors.New("decode seen record: unknown format")
	}
	r := &seenRecord{State: b[1]}
	d := &recordReader{b: b[2:]}
	r.URL = string(d.bytes())
	if q := d.bytes(); len(q) > 0 {
		r.QKey = bytes.Clone(q)
	}
	r.Cash = math.Float64frombits(d.u64())
	r.History = math.Float64frombits(d.u64())
	r.Depth = int(d.varint())
	r.Attempts = int(d.varint())
	r.Outcome = string(d.bytes())
	r.FetchedAt = d.varint()
	r.ETag = string(d.bytes())
	r.LastModified = string(d.bytes())
	if h := d.bytes(); len(h) > 0 {
		r.ContentHash = bytes.Clone(h)
	}
	r.SimHash = d.u64()
	r.Interval = d.varint()
	r.NextFetch = d.varint()
	if len(d.b) > 0 {
		r.Base = string(d.bytes())
	}
	switch {
	case d.err != nil:
		return nil, fmt.Errorf("decode seen record: %w", d.err)
	case r.URL == "" || (r.State != stateQueued && r.State != stateDone):
		return nil, fmt.Errorf("decode seen record: bad record (state %d)", r.State)
	case r.State == stateQueued && len(r.QKey) == 0:
		return nil, errors.New("decode seen record: queued without a queue key")
	case r.Depth < 0 || r.Attempts < 0 || r.Interval < 0 || (len(r.ContentHash) != 0 && len(r.ContentHash) != 16):
		return nil, errors.New("decode seen record: field out of range")
	}
	return r, nil
}

// bloomFilter sits in front of the Badger seen set: a "no" skips the Badger
// read for a URL never seen (most links on a fresh crawl are new), a "maybe"
// costs one read. False positives cost only that read, so deleting hosts
// (handoff) never needs to touch the filter. Sized at start for the expected
// number of URLs at ~1% false positives.
type bloomFilter struct {
	mu   sync.RWMutex
	bits []uint64
	k    int
	m    uint64
}

func newBloomFilter(expected int) *bloomFilter {
	if expected < 1024 {
		expected = 1024
	}
	// m = -n ln p / (ln 2)^2 with p = 0.01; k = m/n ln 2.
	m := uint64(math.Ceil(-float64(expected) * math.Log(0.01) / (math.Ln2 * math.Ln2)))
	m = (m + 63) &^ 63
	k := int(math.Round(float64(m) / float64(expected) * math.Ln2))
	return &bloomFilter{bits: make([]uint64, m/64), k: max(k, 1), m: m}
}

func (b *bloomFilter) positions(h urlHash, fn func(pos uint64) bool) bool {
	h1 := binary.LittleEndian.Uint64(h[:8])
	h2 := binary.LittleEndian.Uint64(h[8:]) | 1
	for i := 0; i < b.k; i++ {
		if !fn((h1 + uint64(i)*h2) % b.m) {
			return false
		}
	}
	return true
}

func (b *bloomFilter) add(h urlHash) {
	b.mu.Lock()
	b.positions(h, func(p uint64) bool { b.bits[p/64] |= 1 << (p % 64); return true })
	b.mu.Unlock()
}

func (b *bloomFilter) mayContain(h urlHash) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.positions(h, func(p uint64) bool { return b.bits[p/64]&(1<<(p%64)) != 0 })
}
