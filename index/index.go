package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/zstd"
)

// ErrNotFound is returned by Get for a URL that is not stored.
var ErrNotFound = errors.New("index: page not found")

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("index: closed")

// Options configures an Index.
type Options struct {
	FlushDocs     int           // docs buffered before a postings flush
	FlushInterval time.Duration // a non-empty buffer is flushed at least this often (0 = only by FlushDocs/Flush)
	MaxBodyBytes  int           // body text stored and indexed per page
	MaxRawBytes   int           // raw bytes stored per page (the cached copy)
}

// DefaultOptions suits a crawler node: flush every 2,000 pages or second.
func DefaultOptions() Options {
	return Options{FlushDocs: 2000, FlushInterval: time.Second, MaxBodyBytes: 1 << 20, MaxRawBytes: 4 << 20}
}

// Stats describes the shard.
type Stats struct {
	Docs          int64 // live documents with flushed postings
	Terms         int64 // distinct terms (including terms of deleted docs not yet purged)
	PostingsBytes int64 // encoded postings blocks
	FieldLenSum   [NumFields]int64
	AvgFieldLen   [NumFields]float64
	Pending       int    // documents stored but not yet searchable
	NextDocID     uint32 // docIDs allocated so far
}

// docTerms is one analyzed document waiting for a flush.
type docTerms struct {
	id    uint32
	meta  docMeta
	terms []docTerm
	dead  bool
}

type docTerm struct {
	term string
	tf   [NumFields]uint32
	pos  []uint32
}

// Index is one node's shard: page store and positional postings in the
// node's Badger under "i:".
type Index struct {
	db  *badger.DB
	opt Options
	log *slog.Logger
	an  *Analyzer
	enc *zstd.Encoder
	dec *zstd.Decoder

	flushMu   sync.Mutex // serializes flushes; taken before mu, never after
	mu        sync.Mutex // serializes page-store writers; guards st, pending, reindex
	kick      chan struct{}
	st        state
	pending   []*docTerms
	pendingBy map[uint32]*docTerms
	reindex   map[string]struct{}
	closed    bool
	splits    int // flushes split because a batch exceeded one Badger transaction

	metaMu sync.RWMutex // guards metas growth, deleted growth, pub, hosts
	hosts  map[string]*hostAgg
	// maxStatic bounds every doc's static rank (never lowered on delete),
	// so the engine's static-rank bound is tight enough to prune with.
	maxStatic float64
	metas     []docMeta
	deleted   []atomic.Uint64
	pub       state
	pubPend   int

	stop chan struct{}
	done chan struct{}
}

// Open uses the node's shared Badger (keys under "i:" only). Documents that
// were stored but whose postings were not flushed before a crash are
// re-analyzed from the page store and flushed before Open returns.
func Open(db *badger.DB, opts Options, log *slog.Logger) (*Index, error) {
	if db == nil {
		return nil, errors.New("index: nil badger DB")
	}
	def := DefaultOptions()
	if opts.FlushDocs <= 0 {
		opts.FlushDocs = def.FlushDocs
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = def.MaxBodyBytes
	}
	if opts.MaxRawBytes <= 0 {
		opts.MaxRawBytes = def.MaxRawBytes
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(2))
	if err != nil {
		return nil, fmt.Errorf("index: zstd encoder: %w", err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxMemory(64<<20))
	if err != nil {
		return nil, fmt.Errorf("index: zstd decoder: %w", err)
	}
	ix := &Index{
		db: db, opt: opts, log: log, an: SharedAnalyzer(), enc: enc, dec: dec,
		pendingBy: map[uint32]*docTerms{}, reindex: map[string]struct{}{}, hosts: map[string]*hostAgg{},
		stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1),
	}
	if err := ix.load(); err != nil {
		return nil, err
	}
	if err := ix.flushOnce(context.Background()); err != nil {
		return nil, fmt.Errorf("index: flush recovered documents: %w", err)
	}
	go ix.flushLoop()
	return ix, nil
}

// load reads the state, per-doc metadata and tombstones, and re-analyzes
// pending documents.
func (ix *Index) load() error {
	err := ix.db.View(func(txn *badger.Txn) error {
		for _, k := range []struct {
			key string
			dec func([]byte) error
		}{{keyAlloc, ix.st.decodeAlloc}, {keyFlush, ix.st.decodeFlush}} {
			item, err := txn.Get([]byte(k.key))
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
			case err != nil:
				return err
			default:
				if err := item.Value(k.dec); err != nil {
					return err
				}
			}
		}
		ix.metas = make([]docMeta, ix.st.NextDoc, ix.st.NextDoc+1024)
		ix.deleted = make([]atomic.Uint64, (ix.st.NextDoc+1024)/64+1)
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixLens)})
		for it.Rewind(); it.Valid(); it.Next() {
			id := binary.BigEndian.Uint32(it.Item().Key()[len(prefixLens):])
			if id >= ix.st.NextDoc {
				continue
			}
			if err := it.Item().Value(func(v []byte) error { return decodeMeta(v, &ix.metas[id]) }); err != nil {
				it.Close()
				return err
			}
			// N and the field length sums are those of the docs with an
			// i:l: key: written with their postings, deleted with the doc.
			ix.st.Docs++
			for f, l := range ix.metas[id].lens {
				ix.st.LenSum[f] += int64(l)
			}
			ix.hostAdd(&ix.metas[id], 1)
			ix.maxStatic = max(ix.maxStatic, ix.metas[id].static)
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixTomb)})
		for it.Rewind(); it.Valid(); it.Next() {
			id := binary.BigEndian.Uint32(it.Item().Key()[len(prefixTomb):])
			if id < ix.st.NextDoc {
				ix.deleted[id/64].Or(1 << (id % 64))
			}
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixReindex)})
		for it.Rewind(); it.Valid(); it.Next() {
			ix.reindex[string(it.Item().Key()[len(prefixReindex):])] = struct{}{}
		}
		it.Close()
		return nil
	})
	if err != nil {
		return fmt.Errorf("index: load state: %w", err)
	}
	// Documents past the flush watermark were stored (page record committed)
	// but their postings were not: analyze them again.
	for id := ix.st.Flushed; id < ix.st.NextDoc; id++ {
		if ix.isDeleted(id) {
			continue
		}
		rec, err := ix.getByID(nil, id, false)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("index: recover doc %d: %w", id, err)
		}
		dt := ix.analyzeDoc(&rec.Document, rec.Anchors)
		dt.id = id
		ix.metas[id] = dt.meta
		ix.maxStatic = max(ix.maxStatic, dt.meta.static)
		ix.pending = append(ix.pending, dt)
		ix.pendingBy[id] = dt
	}
	if n := len(ix.pending); n > 0 {
		ix.log.Info("index: re-indexing documents not flushed before shutdown", "docs", n)
	}
	ix.publish()
	return nil
}

func (ix *Index) flushLoop() {
	defer close(ix.done)
	interval := ix.opt.FlushInterval
	if interval <= 0 {
		interval = 24 * time.Hour // flush on kicks only
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ix.stop:
			return
		case <-t.C:
		case <-ix.kick:
		}
		if err := ix.Flush(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			ix.log.Error("index: background flush", "err", err)
		}
	}
}

// Close flushes pending documents and stops the flusher. The Badger DB
// stays open (it belongs to the node).
func (ix *Index) Close() error {
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return nil
	}
	ix.closed = true
	ix.mu.Unlock()
	close(ix.stop)
	<-ix.done
	ix.flushMu.Lock()
	err := ix.flushOnce(context.Background())
	ix.flushMu.Unlock()
	ix.enc.Close()
	ix.dec.Close()
	if err != nil {
		return fmt.Errorf("index: close: %w", err)
	}
	return nil
}

// Analyzer returns the shared analyzer.
func (ix *Index) Analyzer() *Analyzer { return ix.an }

func (ix *Index) isDeleted(id uint32) bool {
	w := int(id / 64)
	return w < len(ix.deleted) && ix.deleted[w].Load()&(1<<(id%64)) != 0
}

// publish copies the writer state for readers. Callers hold ix.mu.
func (ix *Index) publish() {
	ix.metaMu.Lock()
	ix.pub = ix.st
	ix.pubPend = len(ix.pending)
	ix.metaMu.Unlock()
}

// Stats reports the shard's size and collection statistics.
func (ix *Index) Stats() Stats {
	ix.metaMu.RLock()
	st, pend := ix.pub, ix.pubPend
	ix.metaMu.RUnlock()
	s := Stats{Docs: st.Docs, Terms: st.Terms, PostingsBytes: st.PostSize, FieldLenSum: st.LenSum, Pending: pend, NextDocID: st.NextDoc}
	for f := range NumFields {
		if st.Docs > 0 {
			s.AvgFieldLen[f] = float64(st.LenSum[f]) / float64(st.Docs)
		}
	}
	return s
}

var urlSeparators = strings.NewReplacer("/", " ", "?", " ", "=", " ", "&", " ", ":", " ", "#", " ", "%", " ", "+", " ", "~", " ")

// urlText is the text of the URL field: host and path words.
func urlText(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	if dec, err := url.PathUnescape(u); err == nil && utf8.ValidString(dec) {
		u = dec
	}
	return urlSeparators.Replace(u)
}

// fieldGap separates fields and anchors in a document's position space so
// that a phrase never matches across them.
const fieldGap = 16

// analyzeDoc turns a document into per-term field TFs and positions.
func (ix *Index) analyzeDoc(d *Document, anchors []string) *docTerms {
	dt := &docTerms{meta: docMeta{static: sanitizeRank(d.StaticRank), host: d.Host}}
	idx := make(map[string]int32, 256)
	base := uint32(0)
	add := func(field int, text string) {
		maxPos := -1
		ix.an.run(text, false, false, func(t span) {
			p := base + uint32(t.pos)
			i, ok := idx[t.term]
			if !ok {
				term := strings.Clone(t.term)
				i = int32(len(dt.terms))
				idx[term] = i
				dt.terms = append(dt.terms, docTerm{term: term})
			}
			e := &dt.terms[i]
			if n := len(e.pos); n > 0 && e.pos[n-1] == p {
				return
			}
			e.pos = append(e.pos, p)
			e.tf[field]++
			dt.meta.lens[field]++
			maxPos = max(maxPos, t.pos)
		})
		base += uint32(maxPos+1) + fieldGap
	}
	add(FieldTitle, d.Title)
	for _, a := range anchors {
		add(FieldAnchor, a)
	}
	for _, h := range d.Headings {
		add(FieldBody, h)
	}
	add(FieldBody, d.Body)
	add(FieldURL, urlText(d.URL))
	return dt
}

func sanitizeRank(r float64) float64 {
	if math.IsNaN(r) || r < 0 || math.IsInf(r, 0) {
		return 0
	}
	return r
}

func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.RuneStart(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	if len(s) > 0 {
		s = s[:len(s)-1]
	}
	return s
}

// validate checks and caps a document; it returns a copy safe to keep.
func (ix *Index) validate(d *Document) (*Document, error) {
	if d == nil {
		return nil, errors.New("index: nil document")
	}
	if d.URL == "" || len(d.URL) > maxURLBytes || strings.IndexByte(d.URL, 0) >= 0 {
		return nil, fmt.Errorf("index: invalid URL %q", truncUTF8(d.URL, 100))
	}
	c := *d
	if c.Host == "" {
		if u, err := url.Parse(c.URL); err == nil {
			c.Host = strings.ToLower(u.Host)
		}
	}
	if len(c.Host) > 1024 || strings.IndexByte(c.Host, 0) >= 0 {
		return nil, fmt.Errorf("index: invalid host for %q", truncUTF8(d.URL, 100))
	}
	c.Title = strings.ToValidUTF8(truncUTF8(c.Title, 4096), "\uFFFD")
	c.Body = strings.ToValidUTF8(truncUTF8(c.Body, ix.opt.MaxBodyBytes), "\uFFFD")
	if len(c.Headings) > 256 {
		c.Headings = c.Headings[:256]
	}
	if len(c.Raw) > ix.opt.MaxRawBytes {
		c.Raw = c.Raw[:ix.opt.MaxRawBytes]
	}
	c.StaticRank = sanitizeRank(c.StaticRank)
	return &c, nil
}

// Put adds or replaces the page at d.URL. The page record is durable when
// Put returns; its postings become searchable at the next flush.
func (ix *Index) Put(ctx context.Context, d *Document) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c, err := ix.validate(d)
	if err != nil {
		return err
	}
	anchors, err := ix.loadAnchors(c.URL)
	if err != nil {
		return err
	}
	// The expensive work (segmentation, compression) runs outside the lock.
	dt := ix.analyzeDoc(c, anchors)
	rec := ix.enc.EncodeAll(encodeRecord(c), nil)
	var raw []byte
	if len(c.Raw) > 0 {
		raw = ix.enc.EncodeAll(c.Raw, nil)
	}
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return ErrClosed
	}
	err = ix.putLocked(c.URL, c.Host, dt, rec, raw)
	pending := len(ix.pending)
	ix.mu.Unlock()
	if err != nil {
		return err
	}
	switch {
	case pending >= 4*ix.opt.FlushDocs:
		// The background flusher is not keeping up: flush here (back
		// pressure on the crawler rather than unbounded memory).
		return ix.Flush(ctx)
	case pending >= ix.opt.FlushDocs:
		select {
		case ix.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

func (ix *Index) loadAnchors(u string) ([]string, error) {
	var anchors []string
	err := ix.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(prefixAnchors + u))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			anchors, err = decodeAnchors(v)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("index: load anchors of %q: %w", u, err)
	}
	return anchors, nil
}

func getDocID(txn *badger.Txn, u string) (uint32, bool, error) {
	item, err := txn.Get([]byte(prefixURL + u))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var id uint32
	err = item.Value(func(v []byte) error {
		if len(v) != 4 {
			return errCorrupt
		}
		id = binary.BigEndian.Uint32(v)
		return nil
	})
	return id, err == nil, err
}

// removeInTxn deletes doc id's keys, writes its tombstone and takes it out
// of the statistics in ns. Callers hold ix.mu.
func (ix *Index) removeInTxn(txn *badger.Txn, id uint32, ns *state) error {
	m := ix.metas[id]
	for _, k := range [][]byte{docKey(prefixDoc, id), docKey(prefixRaw, id), docKey(prefixLens, id), hostKey(m.host, id)} {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	if err := txn.Set(docKey(prefixTomb, id), nil); err != nil {
		return err
	}
	if id < ns.Flushed && !ix.isDeleted(id) { // only flushed docs are counted
		ns.Docs--
		for f := range NumFields {
			ns.LenSum[f] -= int64(m.lens[f])
		}
	}
	return nil
}

// markDeleted updates memory after a committed removal. Callers hold ix.mu.
func (ix *Index) markDeleted(id uint32) {
	if id < ix.st.Flushed && !ix.isDeleted(id) {
		ix.metaMu.Lock()
		ix.hostAdd(&ix.metas[id], -1)
		ix.metaMu.Unlock()
	}
	ix.deleted[id/64].Or(1 << (id % 64))
	if dt := ix.pendingBy[id]; dt != nil {
		dt.dead = true
		delete(ix.pendingBy, id)
	}
}

func (ix *Index) putLocked(u, host string, dt *docTerms, rec, raw []byte) error {
	ns := ix.st
	id := ns.NextDoc
	if id == math.MaxUint32 {
		return errors.New("index: docID space exhausted")
	}
	ns.NextDoc++
	dt.id = id
	txn := ix.db.NewTransaction(true)
	defer txn.Discard()
	old, hasOld, err := getDocID(txn, u)
	if err != nil {
		return fmt.Errorf("index: put %q: %w", u, err)
	}
	if hasOld {
		if err := ix.removeInTxn(txn, old, &ns); err != nil {
			return fmt.Errorf("index: put %q: replace: %w", u, err)
		}
	}
	sets := []struct{ k, v []byte }{
		{[]byte(prefixURL + u), binary.BigEndian.AppendUint32(nil, id)},
		{docKey(prefixDoc, id), rec},
		{hostKey(host, id), nil},
		{[]byte(keyAlloc), ns.encodeAlloc()},
	}
	if len(raw) > 0 {
		sets = append(sets, struct{ k, v []byte }{docKey(prefixRaw, id), raw})
	}
	for _, s := range sets {
		if err := txn.Set(s.k, s.v); err != nil {
			return fmt.Errorf("index: put %q: %w", u, err)
		}
	}
	if _, ok := ix.reindex[u]; ok {
		if err := txn.Delete([]byte(prefixReindex + u)); err != nil {
			return fmt.Errorf("index: put %q: %w", u, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("index: put %q: commit: %w", u, err)
	}
	delete(ix.reindex, u)
	ix.metaMu.Lock()
	ix.metas = append(ix.metas, dt.meta)
	ix.maxStatic = max(ix.maxStatic, dt.meta.static)
	if need := int(id/64) + 1; need > len(ix.deleted) {
		grown := make([]atomic.Uint64, need*2)
		for i := range ix.deleted {
			grown[i].Store(ix.deleted[i].Load())
		}
		ix.deleted = grown
	}
	ix.metaMu.Unlock()
	if hasOld {
		ix.markDeleted(old)
	}
	ix.st = ns
	ix.pending = append(ix.pending, dt)
	ix.pendingBy[id] = dt
	ix.publish()
	return nil
}

// Delete removes the page at url (handoff to another owner, or gone).
func (ix *Index) Delete(ctx context.Context, u string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return ErrClosed
	}
	txn := ix.db.NewTransaction(true)
	defer txn.Discard()
	id, ok, err := getDocID(txn, u)
	if err != nil {
		return fmt.Errorf("index: delete %q: %w", u, err)
	}
	if !ok {
		return nil
	}
	ns := ix.st
	if err := ix.removeInTxn(txn, id, &ns); err != nil {
		return fmt.Errorf("index: delete %q: %w", u, err)
	}
	for _, k := range []string{prefixURL + u, prefixAnchors + u, prefixReindex + u} {
		if err := txn.Delete([]byte(k)); err != nil {
			return fmt.Errorf("index: delete %q: %w", u, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("index: delete %q: commit: %w", u, err)
	}
	ix.st = ns
	ix.markDeleted(id)
	delete(ix.reindex, u)
	ix.publish()
	return nil
}

// AddAnchors records anchor text that other pages use for url. It may
// arrive before the page: it is kept and indexed when the page is Put. For a
// stored page, the page is re-indexed with the new anchor field at the next
// flush (the request is persisted, so it survives a crash).
func (ix *Index) AddAnchors(ctx context.Context, u string, anchors []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u == "" || len(u) > maxURLBytes {
		return fmt.Errorf("index: add anchors: invalid URL %q", truncUTF8(u, 100))
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return ErrClosed
	}
	cur, err := ix.loadAnchors(u)
	if err != nil {
		return err
	}
	changed := false
	for _, a := range anchors {
		a = strings.TrimSpace(strings.ToValidUTF8(truncUTF8(a, maxAnchorBytes), ""))
		if a == "" || len(cur) >= maxAnchors || slices.Contains(cur, a) {
			continue
		}
		cur = append(cur, a)
		changed = true
	}
	if !changed {
		return nil
	}
	txn := ix.db.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set([]byte(prefixAnchors+u), encodeAnchors(cur)); err != nil {
		return fmt.Errorf("index: add anchors %q: %w", u, err)
	}
	_, exists, err := getDocID(txn, u)
	if err != nil {
		return fmt.Errorf("index: add anchors %q: %w", u, err)
	}
	if exists {
		if err := txn.Set([]byte(prefixReindex+u), nil); err != nil {
			return fmt.Errorf("index: add anchors %q: %w", u, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("index: add anchors %q: commit: %w", u, err)
	}
	if exists {
		ix.reindex[u] = struct{}{}
	}
	return nil
}

// Flush writes buffered postings so that every page stored before the
// call is searchable when it returns.
func (ix *Index) Flush(ctx context.Context) error {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	ix.mu.Lock()
	closed := ix.closed
	ix.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ix.flushOnce(ctx)
}

// flushOnce takes the pending batch and writes its postings. Puts and
// queries go on meanwhile: the postings are built and staged without ix.mu,
// which is taken only to commit. Callers hold flushMu.
func (ix *Index) flushOnce(ctx context.Context) error {
	ix.mu.Lock()
	// Pages whose anchor field changed are re-put from the page store.
	for u := range ix.reindex {
		if err := ctx.Err(); err != nil {
			ix.mu.Unlock()
			return err
		}
		if err := ix.reindexLocked(u); err != nil {
			ix.mu.Unlock()
			return err
		}
	}
	batch := make([]*docTerms, 0, len(ix.pending))
	for _, dt := range ix.pending {
		if !dt.dead {
			batch = append(batch, dt)
		}
	}
	end, flushed := ix.st.NextDoc, ix.st.Flushed
	ix.pending = nil
	clear(ix.pendingBy)
	snap := flushSnapshot{metas: ix.metas, deleted: ix.deleted}
	ix.mu.Unlock()
	if len(batch) == 0 && flushed == end {
		return nil
	}
	start := time.Now()
	if err := ix.flushRange(ctx, batch, end, &snap); err != nil {
		// Keep the unflushed docs pending (flushRange commits in order, so
		// they are the tail of the batch).
		ix.mu.Lock()
		var back []*docTerms
		for _, dt := range batch {
			if dt.id >= ix.st.Flushed && !ix.isDeleted(dt.id) {
				back = append(back, dt)
				ix.pendingBy[dt.id] = dt
			}
		}
		ix.pending = append(back, ix.pending...)
		ix.publish()
		ix.mu.Unlock()
		return err
	}
	ix.log.Debug("index: flushed", "docs", len(batch), "took", time.Since(start))
	return nil
}

// flushSnapshot is the per-doc data a flush reads without ix.mu: elements
// below the batch's end never change once set.
type flushSnapshot struct {
	metas   []docMeta
	deleted []atomic.Uint64
}

func (f *flushSnapshot) isDeleted(id uint32) bool {
	w := int(id / 64)
	return w < len(f.deleted) && f.deleted[w].Load()&(1<<(id%64)) != 0
}

func (ix *Index) reindexLocked(u string) error {
	var rec *PageRecord
	err := ix.db.View(func(txn *badger.Txn) error {
		id, ok, err := getDocID(txn, u)
		if err != nil || !ok {
			return err
		}
		rec, err = ix.getByID(txn, id, true)
		return err
	})
	if err != nil {
		return fmt.Errorf("index: re-index %q: %w", u, err)
	}
	if rec == nil { // page gone: drop the request
		delete(ix.reindex, u)
		return ix.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(prefixReindex + u)) })
	}
	dt := ix.analyzeDoc(&rec.Document, rec.Anchors)
	var raw []byte
	if len(rec.Raw) > 0 {
		raw = ix.enc.EncodeAll(rec.Raw, nil)
	}
	return ix.putLocked(u, rec.Host, dt, ix.enc.EncodeAll(encodeRecord(&rec.Document), nil), raw)
}

// flushRange writes docs' postings and advances the watermark to end in one
// transaction; a batch too big for one Badger transaction is split in two,
// each half atomic on its own (the watermark moves past the first half only
// when its postings are committed).
func (ix *Index) flushRange(ctx context.Context, docs []*docTerms, end uint32, snap *flushSnapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := ix.flushTxn(docs, end, snap)
	if errors.Is(err, badger.ErrTxnTooBig) && len(docs) > 1 {
		mid := len(docs) / 2
		ix.splits++
		if err := ix.flushRange(ctx, docs[:mid], docs[mid].id, snap); err != nil {
			return err
		}
		return ix.flushRange(ctx, docs[mid:], end, snap)
	}
	if err != nil {
		return fmt.Errorf("index: flush %d docs: %w", len(docs), err)
	}
	return nil
}

func mergeBounds(maxTF, minLen *[NumFields]uint32, tf, lens [NumFields]uint32) {
	for f := range NumFields {
		if tf[f] == 0 {
			continue
		}
		maxTF[f] = max(maxTF[f], tf[f])
		if minLen[f] == 0 || lens[f] < minLen[f] {
			minLen[f] = lens[f]
		}
	}
}

func (ix *Index) flushTxn(docs []*docTerms, end uint32, snap *flushSnapshot) error {
	nterms := 0
	for _, dt := range docs {
		nterms += len(dt.terms)
	}
	lists := make(map[string]*postingList, nterms/4+16)
	for _, dt := range docs {
		for i := range dt.terms {
			t := &dt.terms[i]
			pl := lists[t.term]
			if pl == nil {
				pl = &postingList{}
				lists[t.term] = pl
			}
			pl.add(dt.id, t.tf, t.pos)
		}
	}
	terms := make([]string, 0, len(lists))
	for t := range lists {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	lensOf := func(id uint32) [NumFields]uint32 { return snap.metas[id].lens }

	var dTerms, dPost int64
	txn := ix.db.NewTransaction(true)
	defer txn.Discard()
	var merged postingList
	var db decodedBlock
	for _, term := range terms {
		fresh := lists[term]
		tk := blockKey(nil, term, tailKey)
		var cum BlockHeader
		merged.reset()
		item, err := txn.Get(tk)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			dTerms++
		case err != nil:
			return err
		default:
			val, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if _, err := decodeHeader(val, &cum); err != nil {
				return fmt.Errorf("term %q: %w", term, err)
			}
			if cum.N < BlockSize {
				// Lazy merge: the partial tail block is rewritten with the
				// new postings, dropping deleted documents on the way.
				if err := decodeBlock(val, &db); err != nil {
					return fmt.Errorf("term %q: %w", term, err)
				}
				if err := db.toList(&merged, snap.isDeleted); err != nil {
					return fmt.Errorf("term %q: %w", term, err)
				}
				dPost -= int64(len(val) + len(tk))
				cum.CumDF -= uint32(cum.N)
			} else if err := txn.Set(blockKey(nil, term, cum.LastDoc), val); err != nil {
				return err // a full tail keeps its bytes under its real key
			}
		}
		src := fresh // no partial tail: encode the new postings in place
		if len(merged.docs) > 0 {
			for i := range fresh.docs {
				merged.add(fresh.docs[i], fresh.tfs[i], fresh.positions(i))
			}
			src = &merged
		}
		for lo := 0; lo < len(src.docs); lo += BlockSize {
			hi := min(lo+BlockSize, len(src.docs))
			h := BlockHeader{CumMaxTF: cum.CumMaxTF, CumMinLen: cum.CumMinLen}
			for i := lo; i < hi; i++ {
				mergeBounds(&h.MaxTF, &h.MinLen, src.tfs[i], lensOf(src.docs[i]))
			}
			mergeBounds(&h.CumMaxTF, &h.CumMinLen, h.MaxTF, h.MinLen)
			h.CumDF = cum.CumDF + uint32(hi-lo)
			cum = h
			val := encodeBlock(make([]byte, 0, 64+(hi-lo)*8), &h, src, lo, hi)
			key := tk
			if hi < len(src.docs) {
				key = blockKey(nil, term, src.docs[hi-1])
			}
			if err := txn.Set(key, val); err != nil {
				return err
			}
			dPost += int64(len(key) + len(val))
		}
	}
	// Commit under ix.mu so that no Delete slips between the liveness check
	// and the commit: a doc deleted while its postings were being built gets
	// no i:l: key and is not counted.
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var docsAdded int64
	var lensAdded [NumFields]int64
	var added []*docTerms
	for _, dt := range docs {
		if ix.isDeleted(dt.id) {
			continue
		}
		if err := txn.Set(docKey(prefixLens, dt.id), encodeMeta(&dt.meta)); err != nil {
			return err
		}
		added = append(added, dt)
		docsAdded++
		for f := range NumFields {
			lensAdded[f] += int64(dt.meta.lens[f])
		}
	}
	ns := state{Flushed: end, Terms: ix.st.Terms + dTerms, PostSize: ix.st.PostSize + dPost}
	if err := txn.Set([]byte(keyFlush), ns.encodeFlush()); err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	ix.st.Flushed, ix.st.Terms, ix.st.PostSize = end, ns.Terms, ns.PostSize
	ix.st.Docs += docsAdded
	for f := range NumFields {
		ix.st.LenSum[f] += lensAdded[f]
	}
	ix.metaMu.Lock()
	for _, dt := range added {
		ix.hostAdd(&dt.meta, 1)
	}
	ix.metaMu.Unlock()
	ix.publish()
	return nil
}

// hostAgg is the count and field length sums of a host's live flushed docs,
// so that statistics restricted to a set of hosts cost O(hosts), not O(docs).
type hostAgg struct {
	docs   int64
	lenSum [NumFields]int64
}

// hostAdd adds (sign 1) or removes (-1) a doc. Callers hold metaMu (or are
// in Open).
func (ix *Index) hostAdd(m *docMeta, sign int64) {
	a := ix.hosts[m.host]
	if a == nil {
		a = &hostAgg{}
		ix.hosts[m.host] = a
	}
	a.docs += sign
	for f := range NumFields {
		a.lenSum[f] += sign * int64(m.lens[f])
	}
	if a.docs == 0 {
		delete(ix.hosts, m.host)
	}
}

// HostStats returns the number and field length sums of live searchable
// documents on hosts passing keep, and whether every host passed.
func (ix *Index) HostStats(keep func(host string) bool) (docs int64, lenSum [NumFields]int64, all bool) {
	ix.metaMu.RLock()
	defer ix.metaMu.RUnlock()
	all = true
	for h, a := range ix.hosts {
		if !keep(h) {
			all = false
			continue
		}
		docs += a.docs
		for f := range NumFields {
			lenSum[f] += a.lenSum[f]
		}
	}
	return docs, lenSum, all
}
