package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Badger key prefixes owned by this package (all under "i:").
const (
	keyAlloc             = "i:m:alloc"    // next docID to allocate (written by every Put)
	keyFlush             = "i:m:flush"    // flush watermark, term count, postings bytes (written by every flush)
	keyAnalyzer          = "i:m:analyzer" // Analyzer.Version the postings were made with
	prefixURL            = "i:u:"         // url -> docID (4 bytes BE), then heldMark for a held page
	prefixDoc            = "i:d:"         // docID -> page record without Raw: summary, then compressed (appendStored)
	prefixRaw            = "i:r:"         // docID -> raw body, compressed (pagecodec.go)
	prefixHost           = "i:h:"         // host 0x00 docID -> empty
	prefixLens           = "i:l:"         // docID -> field lengths, static rank, host (written when postings are flushed)
	prefixTomb           = "i:x:"         // docID -> empty: tombstone of a deleted or replaced doc
	prefixAnchors        = "i:a:"         // url -> anchor texts received from other pages
	prefixAnchorsChanged = "i:q:"         // url -> empty: anchors changed, update the page's anchor postings
	prefixPostings       = "i:p:"         // term 0x00 lastDocID -> postings block
	prefixAnchorPostings = "i:n:"         // term 0x00 update part -> anchor postings block (anchorpost.go)
	keyAnchorSeq         = "i:m:anchors"  // last anchor update number
	prefixHeld           = "i:z:"         // host 0x00 docID -> the page's analysed form (maybe empty): a held page (held.go)
	maxAnchors           = 256
	maxAnchorBytes       = 256
	maxURLBytes          = 4096
	maxHeaderValues      = 64
)

// Document is a fetched, parsed page handed to Put.
type Document struct {
	URL, Host   string // Host = crawl.HostKey form: lowercase host[:port]
	Title       string
	Headings    []string
	Body        string
	Lang        string
	Status      int
	FetchedAt   time.Time
	ContentType string
	Charset     string
	Header      map[string][]string
	Raw         []byte // raw body as received (stored compressed)
	// RawS2 is Raw as one S2 block when the caller has it (the crawler
	// keeps fetched bodies so): Put stores it instead of compressing Raw
	// again. It is used only when it states Raw's length and Raw is within
	// Options.MaxRawBytes; otherwise Raw is compressed as without it.
	RawS2       []byte
	StaticRank  float64 // OPIC importance (node computes)
	ContentHash [16]byte
	SimHash     uint64
}

// PageRecord is a stored page: every Document field plus the anchor texts
// received from other pages and the page's current docID.
type PageRecord struct {
	Document
	Anchors []string
	DocID   uint32
}

func docKey(prefix string, id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte(prefix), id)
}

func hostKey(host string, id uint32) []byte {
	b := append([]byte(prefixHost), host...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, id)
}

type recWriter struct{ b []byte }

func (w *recWriter) str(s string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}
func (w *recWriter) u64(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

type recReader struct {
	b   []byte
	err error
}

func (r *recReader) u64() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated record")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) str() string {
	n := r.u64()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errors.New("truncated record string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *recReader) count(limit int) int {
	n := r.u64()
	if n > uint64(limit) || n > uint64(len(r.b)) {
		if r.err == nil {
			r.err = errors.New("record count out of range")
		}
		return 0
	}
	return int(n)
}

// A page record (the i:d: value) is stored as
//
//	0x01, uvarint length, summary, compressed rest (pagecodec.go)
//
// where the summary is what a result list needs (URL, host, title, content
// and near-duplicate hashes), uncompressed, and the rest is everything
// else, compressed. A shard builds 50 candidates per query and shows
// snippets for 10: before, each candidate decompressed its whole page
// record, over two fifths of the shards' search CPU on the corpus (BENCHMARKS.md,
// "Stop 20: document frequencies per host, page summaries"). The summary
// is not compressed: on the synthetic 10,000 pages the store's size moved
// less than compaction timing moves it. Records written before are one
// zstd frame of the whole record (recordVersion 1 inside; a zstd frame's
// first byte is 0x28) and are read as before.
const (
	storedWithSummary = 0x01
	recordVersion     = 1 // the whole record, in a legacy zstd frame
	restVersion       = 2 // the record after its summary
)

// Summary is a stored page's URL, host, title and hashes.
type Summary struct {
	URL, Host, Title string
	ContentHash      [16]byte
	SimHash          uint64
}

// appendStored appends d's page record in its stored form, compressing
// the rest with compress.
func appendStored(b []byte, d *Document, compress func(src, dst []byte) []byte) []byte {
	w := recWriter{}
	w.str(d.URL)
	w.str(d.Host)
	w.str(d.Title)
	w.b = append(w.b, d.ContentHash[:]...)
	w.b = binary.BigEndian.AppendUint64(w.b, d.SimHash)
	b = append(b, storedWithSummary)
	b = binary.AppendUvarint(b, uint64(len(w.b)))
	b = append(b, w.b...)
	return compress(encodeRest(d), b)
}

// splitStored returns a stored record's summary (nil for a legacy record)
// and its compressed rest (a zstd frame of the whole record for a legacy
// one).
func splitStored(v []byte) (summary, frame []byte, err error) {
	if len(v) == 0 || v[0] != storedWithSummary {
		return nil, v, nil
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n > uint64(len(v)-1-k) {
		return nil, nil, errors.New("truncated page record summary")
	}
	return v[1+k : 1+k+int(n)], v[1+k+int(n):], nil
}

func decodeSummary(b []byte, s *Summary) error {
	r := recReader{b: b}
	s.URL = r.str()
	s.Host = r.str()
	s.Title = r.str()
	if r.err == nil && len(r.b) != 24 {
		r.err = errors.New("page record summary of the wrong length")
	}
	if r.err != nil {
		return fmt.Errorf("decode page record summary: %w", r.err)
	}
	copy(s.ContentHash[:], r.b[:16])
	s.SimHash = binary.BigEndian.Uint64(r.b[16:24])
	return nil
}

func (s *Summary) fill(d *Document) {
	d.URL, d.Host, d.Title, d.ContentHash, d.SimHash = s.URL, s.Host, s.Title, s.ContentHash, s.SimHash
}

// encodeRest serializes what the summary leaves out, but Raw and Anchors
// (stored elsewhere).
func encodeRest(d *Document) []byte {
	w := recWriter{b: make([]byte, 0, len(d.Body)+256)}
	w.u64(restVersion)
	w.u64(uint64(len(d.Headings)))
	for _, h := range d.Headings {
		w.str(h)
	}
	w.str(d.Body)
	w.str(d.Lang)
	w.u64(uint64(int64(d.Status)))
	w.u64(uint64(d.FetchedAt.UnixNano()))
	w.str(d.ContentType)
	w.str(d.Charset)
	keys := make([]string, 0, len(d.Header))
	for k := range d.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.u64(uint64(len(keys)))
	for _, k := range keys {
		w.str(k)
		vs := d.Header[k]
		if len(vs) > maxHeaderValues {
			vs = vs[:maxHeaderValues]
		}
		w.u64(uint64(len(vs)))
		for _, v := range vs {
			w.str(v)
		}
	}
	w.u64(math.Float64bits(d.StaticRank))
	return w.b
}

// decodeRecord decodes a decompressed record: the rest after a summary
// (restVersion), or a legacy whole record (recordVersion).
func decodeRecord(b []byte, d *Document) error {
	r := recReader{b: b}
	version := r.u64()
	switch version {
	case recordVersion:
		d.URL = r.str()
		d.Host = r.str()
		d.Title = r.str()
	case restVersion:
	default:
		return fmt.Errorf("page record version %d unsupported", version)
	}
	if n := r.count(1 << 16); n > 0 {
		d.Headings = make([]string, n)
		for i := range d.Headings {
			d.Headings[i] = r.str()
		}
	}
	d.Body = r.str()
	d.Lang = r.str()
	d.Status = int(int64(r.u64()))
	d.FetchedAt = time.Unix(0, int64(r.u64())).UTC()
	d.ContentType = r.str()
	d.Charset = r.str()
	if n := r.count(1 << 12); n > 0 {
		d.Header = make(map[string][]string, n)
		for range n {
			k := r.str()
			vs := make([]string, r.count(maxHeaderValues))
			for i := range vs {
				vs[i] = r.str()
			}
			d.Header[k] = vs
		}
	}
	d.StaticRank = math.Float64frombits(r.u64())
	if version == recordVersion {
		if r.err == nil && len(r.b) < 24 {
			r.err = errors.New("truncated record tail")
		}
		if r.err == nil {
			copy(d.ContentHash[:], r.b[:16])
			d.SimHash = binary.BigEndian.Uint64(r.b[16:24])
		}
	}
	if r.err != nil {
		return fmt.Errorf("decode page record: %w", r.err)
	}
	return nil
}

func encodeAnchors(a []string) []byte {
	w := recWriter{}
	w.u64(uint64(len(a)))
	for _, s := range a {
		w.str(s)
	}
	return w.b
}

func decodeAnchors(b []byte) ([]string, error) {
	r := recReader{b: b}
	n := r.count(maxAnchors * 4)
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.str())
	}
	if r.err != nil {
		return nil, fmt.Errorf("decode anchors: %w", r.err)
	}
	return out, nil
}

// docMeta is what a query needs per document without touching Badger:
// field lengths, static rank and host. Persisted under i:l: at flush.
type docMeta struct {
	lens   [NumFields]uint32
	static float64
	host   string
	script script // the page's (pageScript)
}

// anchorState is a doc's current anchor update (anchorpost.go): its
// number (0: none) and the anchor field's length since.
type anchorState struct {
	seq, length uint32
}

// applied returns lens, a doc's field lengths as its main postings have
// them, with the anchor length of update a.
func (a anchorState) applied(lens [NumFields]uint32) [NumFields]uint32 {
	if a.seq != 0 {
		lens[FieldAnchor] = a.length
	}
	return lens
}

// encodeMeta encodes a doc's i:l: record: m (lens[FieldAnchor] is the
// anchor length of its main postings), then its anchor update if any.
func encodeMeta(m *docMeta, a anchorState) []byte {
	w := recWriter{}
	for _, l := range m.lens {
		w.u64(uint64(l))
	}
	w.u64(math.Float64bits(m.static))
	w.str(m.host)
	w.u64(uint64(m.script))
	if a.seq != 0 {
		w.u64(uint64(a.seq))
		w.u64(uint64(a.length))
	}
	return w.b
}

func decodeMeta(b []byte, m *docMeta) (anchorState, error) {
	r := recReader{b: b}
	for f := range m.lens {
		m.lens[f] = uint32(r.u64())
	}
	m.static = math.Float64frombits(r.u64())
	m.host = r.str()
	m.script = script(min(r.u64(), uint64(scriptTraditional)))
	var a anchorState
	if r.err == nil && len(r.b) > 0 {
		seq, length := r.u64(), r.u64()
		if seq == 0 || seq > math.MaxUint32 || length > math.MaxUint32 {
			return a, fmt.Errorf("decode doc meta: anchor update %d of length %d", seq, length)
		}
		a = anchorState{uint32(seq), uint32(length)}
	}
	if r.err != nil {
		return a, fmt.Errorf("decode doc meta: %w", r.err)
	}
	return a, nil
}

// state is the collection state. NextDoc is persisted by Puts (i:m:alloc),
// Flushed/PostSize by flushes (i:m:flush), each in the transaction
// that makes the change; Docs and LenSum are derived from the i:l: keys.
type state struct {
	NextDoc  uint32 // next docID to allocate
	Flushed  uint32 // every docID below has its postings and i:l: key on disk
	Docs     int64  // live flushed documents
	LenSum   [NumFields]int64
	PostSize int64 // bytes of postings blocks
}

func (s *state) encodeAlloc() []byte {
	return binary.AppendUvarint([]byte{1}, uint64(s.NextDoc))
}

func (s *state) decodeAlloc(b []byte) error {
	r := recReader{b: b}
	if len(b) == 0 || b[0] != 1 {
		return errors.New("index alloc state: unknown version")
	}
	r.b = b[1:]
	s.NextDoc = uint32(r.u64())
	if r.err != nil {
		return fmt.Errorf("decode index alloc state: %w", r.err)
	}
	return nil
}

func (s *state) encodeFlush() []byte {
	w := recWriter{b: []byte{2}}
	w.u64(uint64(s.Flushed))
	w.u64(uint64(s.PostSize))
	return w.b
}

func (s *state) decodeFlush(b []byte) error {
	if len(b) == 0 || b[0] != 1 && b[0] != 2 {
		return errors.New("index flush state: unknown version")
	}
	r := recReader{b: b[1:]}
	s.Flushed = uint32(r.u64())
	if b[0] == 1 { // it counted terms; its postings are rebuilt (postingsFormat)
		r.u64()
	}
	s.PostSize = int64(r.u64())
	if r.err != nil {
		return fmt.Errorf("decode index flush state: %w", r.err)
	}
	return nil
}
