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
	FlushInterval time.Duration // a non-empty buffer is flushed this often, or up to 10× less often when flushes are slow (0 = only by FlushDocs/Flush)
	MaxBodyBytes  int           // body text stored and indexed per page
	MaxRawBytes   int           // raw bytes stored per page (the cached copy)
	// FlushBytes also starts a flush when the buffered postings reach
	// this much memory (0 = default; it bounds memory on pages with huge
	// bodies, where FlushDocs alone would not).
	FlushBytes int
	// AnchorDelay: the new anchors of a page already flushed are
	// indexed (as anchor postings, anchorpost.go) by the background
	// flush once its oldest unindexed change is this old, or as soon as
	// a flush finds no new page stored since the last one (the crawl of
	// its site has quieted down). Anchors reach a page for as long as
	// pages linking to it are fetched; waiting coalesces them into few
	// updates. Flush and Close index every change. 0 = default (30 s).
	AnchorDelay time.Duration
	// FormCacheBytes bounds the cache of recently indexed pages'
	// analysed forms (analysedForm; 0 or negative = off, the default).
	// A form in the cache goes to the page's replicas (Form), which then
	// do not analyse the page. Replication needs the forms of the last
	// seconds' pages only.
	FormCacheBytes int
	// SummaryCacheBytes bounds the cache of documents' summaries (URL,
	// host, title, hashes) that spares a query a Badger read per
	// candidate (0 = default, negative = off).
	SummaryCacheBytes int
	// Analyzer turns text into terms (nil = LoadAnalyzer()). An index
	// built with another analyzer version is re-indexed by Open.
	Analyzer *Analyzer
}

// DefaultOptions suits a crawler node: flush every 2,000 pages or second,
// or at 64 MiB of buffered postings; 4 MiB of summary cache; no cache of
// analysed forms.
func DefaultOptions() Options {
	return Options{FlushDocs: 2000, FlushInterval: time.Second, MaxBodyBytes: 1 << 20, MaxRawBytes: 4 << 20,
		FlushBytes: 64 << 20, SummaryCacheBytes: 4 << 20, AnchorDelay: 30 * time.Second}
}

// Stats describes the shard.
type Stats struct {
	Docs          int64 // live documents with flushed postings
	PostingsBytes int64 // encoded postings blocks
	FieldLenSum   [NumFields]int64
	AvgFieldLen   [NumFields]float64
	Pending       int    // documents stored, or waiting for an anchor update, but not yet searchable
	NextDocID     uint32 // docIDs allocated so far
	// AnchorUpdates counts the pages whose anchor field was indexed again
	// for new anchor text since Open (anchorpost.go).
	AnchorUpdates uint64
	// Pages put since Open whose text was analysed, pages put with a received analysed form
	// (PutAnalysedBatch) that were indexed by replaying it, and received
	// forms refused (malformed, or of another analyzer version; those
	// pages were analysed).
	PutsAnalysed, FormsReplayed, FormsRefused uint64
	// Held counts the pages stored without postings (held.go).
	Held int
}

// Index is one node's shard: page store and positional postings in the
// node's Badger under "i:".
type Index struct {
	db  *badger.DB
	opt Options
	log *slog.Logger
	an  *Analyzer
	// dec decompresses legacy zstd parts of stored pages (pagecodec.go);
	// checkDec those of stored pages from peers (CheckStored), up to the
	// caps of what they may hold.
	dec, checkDec *zstd.Decoder

	flushMu sync.Mutex // serializes flushes; taken before mu, never after
	// anchorMu serializes writers of i:a: keys (AddAnchorsBatch's
	// read-modify-write, Delete); taken before mu, so that reading and
	// merging a page's links' anchors holds up no Put.
	anchorMu sync.Mutex
	recorded *recordedAnchors // guarded by anchorMu
	mu       sync.Mutex       // serializes page-store writers; guards st, pending, queued, anchorsDue
	kick     chan struct{}
	st       state
	pending  *pendingIndex // nil when empty
	// pendingHint sizes the next pending index (terms of the last batch).
	pendingHint int
	anchorsDue  map[string]time.Time // URL -> first anchor change not yet indexed
	// queued are the stored pages whose postings the next flush adds, in
	// docID order (queue.go); queuedURL finds them by URL, queuedBytes is
	// the text they hold.
	queued      []*queuedDoc
	queuedURL   map[string]*queuedDoc
	queuedBytes int
	// held marks the docIDs of held pages (held.go), heldHosts counts
	// them per host and heldPages in all.
	held      []uint64
	heldHosts map[string]int
	heldPages int
	// putsSinceFlush counts Puts since the last flush (guarded by mu): a
	// flush that finds none updates the anchors of every page waiting.
	putsSinceFlush int
	closed         bool
	splits         int // flushes written in more than one Badger transaction
	// The flusher's own (under flushMu): flushes of docIDs below
	// carefulUntil may find postings of theirs on disk (flushPending);
	// flushSeq numbers flushes for merges (mergeDue).
	carefulUntil uint32
	flushSeq     uint64
	// anchorSeq is the last anchor update number (anchorpost.go), the
	// flusher's own.
	anchorSeq uint32
	forms     *formCache
	// putsAnalysed counts Puts that analysed their page; formsReplayed
	// and formsRefused, received analysed forms (PutAnalysedBatch) used
	// and not used.
	putsAnalysed, formsReplayed, formsRefused atomic.Uint64
	anchorUpdates                             atomic.Uint64 // docs given a new anchor field since Open
	summaries                                 *summaryCache // nil when off
	docPool                                   sync.Pool     // *docPostings scratch for analysis
	recBufs                                   sync.Pool     // *[]byte buffers for decompressing page records
	encodeBufs                                sync.Pool     // *[]byte buffers compressPage encodes into
	// commitHook, when set (tests only), runs before each postings
	// commit of a flush; an error fails that commit, as a disk error would.
	commitHook func(commits int) error

	metaMu sync.RWMutex // guards metas growth, deleted growth, pub, hosts, host IDs
	hosts  map[string]*hostAgg
	// docHosts[id] is doc id's host as an index into hostNames (interned by
	// hostIDs, append-only): a query filters its candidates by host with a
	// slice lookup on a dense array instead of hashing a string per doc.
	docHosts  []uint32
	hostNames []string
	hostIDs   map[string]uint32
	// maxStatic bounds every doc's static rank (never lowered on delete),
	// so the engine's static-rank bound is tight enough to prune with.
	maxStatic float64
	metas     []docMeta
	anchorTab *anchorTable
	// anchorTerms: the terms that have anchor blocks (anchorpost.go).
	anchorTerms *anchorTermSet
	deleted     []atomic.Uint64
	// deletions counts markDeleted calls, each counted after its bit is
	// set: a reader that sees the count unchanged across a pass over
	// postings knows no document died during the pass (Reader.Deletions).
	deletions atomic.Uint64
	pub       state
	pubPend   int
	pubHeld   int

	stop chan struct{}
	done chan struct{}
}

// Open uses the node's shared Badger (keys under "i:" only). Documents that
// were stored but whose postings were not flushed before a crash are
// re-analyzed from the page store and flushed before Open returns; so is
// every document when the index was built with another analyzer version.
func Open(db *badger.DB, opts Options, log *slog.Logger) (*Index, error) {
	if db == nil {
		return nil, errors.New("index: nil badger DB")
	}
	an := opts.Analyzer
	if an == nil {
		var err error
		if an, err = LoadAnalyzer(); err != nil {
			return nil, err
		}
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
	if opts.FlushBytes <= 0 {
		opts.FlushBytes = def.FlushBytes
	}
	if opts.SummaryCacheBytes == 0 {
		opts.SummaryCacheBytes = def.SummaryCacheBytes
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxMemory(maxLocalPartBytes))
	if err != nil {
		return nil, fmt.Errorf("index: zstd decoder: %w", err)
	}
	checkDec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxMemory(uint64(max(maxStoredRestBytes, opts.MaxRawBytes))))
	if err != nil {
		return nil, fmt.Errorf("index: zstd decoder: %w", err)
	}
	ix := &Index{
		db: db, opt: opts, log: log, an: an, dec: dec, checkDec: checkDec,
		anchorsDue: map[string]time.Time{}, queuedURL: map[string]*queuedDoc{}, heldHosts: map[string]int{}, hosts: map[string]*hostAgg{},
		recorded: newRecordedAnchors(),
		// Host ID 0 is the empty host, so a doc without metadata (never Live) has a valid one.
		hostIDs: map[string]uint32{"": 0}, hostNames: []string{""},
		stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1),
	}
	if opts.FormCacheBytes > 0 {
		ix.forms = newFormCache(opts.FormCacheBytes)
	}
	if opts.SummaryCacheBytes > 0 {
		ix.summaries = newSummaryCache(opts.SummaryCacheBytes)
	}
	ix.anchorTab, ix.anchorTerms = &anchorTable{}, newAnchorTermSet()
	dropped, err := ix.checkAnalyzer()
	if err != nil {
		return nil, err
	}
	if err := ix.load(); err != nil {
		return nil, err
	}
	if !dropped {
		// Postings of docs at or above the watermark may be on disk (a
		// crash during a flush).
		ix.carefulUntil = ix.st.NextDoc
	}
	ctx := context.Background()
	if err := ix.reanalyze(ctx); err != nil {
		return nil, err
	}
	if err := ix.flushOnce(ctx, true); err != nil {
		return nil, fmt.Errorf("index: flush recovered documents: %w", err)
	}
	go ix.flushLoop()
	return ix, nil
}

// checkAnalyzer makes the index one of ix.an's version and of this
// postings format (storedVersion): when it holds documents indexed by
// another, it drops every postings block and i:l: key, moves the flush
// watermark to 0 and reports that it did, so that Open analyzes every
// document again (reanalyze). A crash in between leaves the old version
// recorded, and the next Open starts over.
func (ix *Index) checkAnalyzer() (dropped bool, err error) {
	var stored string
	var docs bool
	err = ix.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyAnalyzer))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			stored = string(v)
		}
		var st state
		item, err = txn.Get([]byte(keyAlloc))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
		case err != nil:
			return err
		default:
			if err := item.Value(st.decodeAlloc); err != nil {
				return err
			}
			docs = st.NextDoc > 0
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("index: read analyzer version: %w", err)
	}
	want := storedVersion(ix.an)
	if stored == want {
		return false, nil
	}
	if docs {
		ix.log.Warn("index: built with another analyzer or postings format: re-indexing every stored page before searching", "was", stored, "now", want)
		if err := ix.db.DropPrefix([]byte(prefixPostings), []byte(prefixAnchorPostings), []byte(prefixLens)); err != nil {
			return false, fmt.Errorf("index: drop postings of analyzer %q: %w", stored, err)
		}
	}
	err = ix.db.Update(func(txn *badger.Txn) error {
		if docs {
			if err := txn.Set([]byte(keyFlush), (&state{}).encodeFlush()); err != nil {
				return err
			}
		}
		return txn.Set([]byte(keyAnalyzer), []byte(want))
	})
	if err != nil {
		return false, fmt.Errorf("index: record analyzer version: %w", err)
	}
	return docs, nil
}

// postingsFormat names the layout of postings blocks and keys (codec.go);
// change it with the layout, so that Open rebuilds an index of another.
const postingsFormat = "postings 3"

// storedVersion is what i:m:analyzer holds for an index of an's terms in
// this postings format.
func storedVersion(an *Analyzer) string { return an.Version() + " " + postingsFormat }

// load reads the state, per-doc metadata, tombstones and anchor update
// requests.
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
		ix.docHosts = make([]uint32, ix.st.NextDoc, ix.st.NextDoc+1024)
		ix.deleted = make([]atomic.Uint64, (ix.st.NextDoc+1024)/64+1)
		var err error
		if ix.anchorSeq, err = loadAnchorSeq(txn); err != nil {
			return err
		}
		loadAnchorTerms(txn, ix.anchorTerms)
		var ups []anchorUpdate
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixLens)})
		for it.Rewind(); it.Valid(); it.Next() {
			id := binary.BigEndian.Uint32(it.Item().Key()[len(prefixLens):])
			if id >= ix.st.NextDoc {
				continue
			}
			var a anchorState
			err := it.Item().Value(func(v []byte) (err error) {
				a, err = decodeMeta(v, &ix.metas[id])
				return err
			})
			if err != nil {
				it.Close()
				return err
			}
			if a.seq != 0 {
				ups = append(ups, anchorUpdate{id: id, seq: a.seq, length: a.length})
			}
			ix.docHosts[id] = ix.internHost(&ix.metas[id])
			// N and the field length sums are those of the docs with an
			// i:l: key: written with their postings, deleted with the doc.
			ix.st.Docs++
			m := ix.metas[id]
			m.lens = a.applied(m.lens)
			for f, l := range m.lens {
				ix.st.LenSum[f] += int64(l)
			}
			ix.hostAdd(&m, 1)
			ix.maxStatic = max(ix.maxStatic, ix.metas[id].static)
		}
		it.Close()
		ix.anchorTab = ix.anchorTab.with(ups)
		it = txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixTomb)})
		for it.Rewind(); it.Valid(); it.Next() {
			id := binary.BigEndian.Uint32(it.Item().Key()[len(prefixTomb):])
			if id < ix.st.NextDoc {
				ix.deleted[id/64].Or(1 << (id % 64))
			}
		}
		it.Close()
		if err := ix.loadHeld(txn); err != nil {
			return err
		}
		it = txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixAnchorsChanged)})
		for it.Rewind(); it.Valid(); it.Next() {
			ix.anchorsDue[string(it.Item().Key()[len(prefixAnchorsChanged):])] = time.Time{} // due at once
		}
		it.Close()
		return nil
	})
	if err != nil {
		return fmt.Errorf("index: load state: %w", err)
	}
	ix.publish()
	return nil
}

// analyzeStored analyzes the stored document id (nil if it is deleted).
func (ix *Index) analyzeStored(id uint32) (*docPostings, error) {
	if ix.isDeleted(id) || ix.isHeld(id) {
		return nil, nil
	}
	rec, err := ix.getByID(nil, id, false)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("doc %d: %w", id, err)
	}
	return ix.analyzeDoc(&rec.Document, rec.Anchors), nil
}

// reanalyze analyzes again the documents stored at or above the flush
// watermark (stored before a crash but not flushed, or every document
// after a change of analyzer) from their page records, on all cores, and
// flushes them FlushDocs at a time, moving the watermark each time, so
// that memory stays that of one batch and a crash resumes where it
// stopped. Called by Open only.
func (ix *Index) reanalyze(ctx context.Context) error {
	total := ix.st.NextDoc - ix.st.Flushed
	if total > 0 {
		ix.log.Info("index: analyzing stored documents", "docs", total)
	}
	for ix.st.Flushed < ix.st.NextDoc {
		from := ix.st.Flushed
		to := from + min(ix.st.NextDoc-from, uint32(ix.opt.FlushDocs))
		analyzed := make([]*docPostings, to-from)
		errs := make([]error, to-from)
		pend := newPendingIndex(ix.pendingHint)
		err := inWindows(ctx, int(to-from),
			func(i int) { analyzed[i], errs[i] = ix.analyzeStored(from + uint32(i)) },
			func(lo, hi int) error {
				for i := lo; i < hi; i++ {
					if errs[i] != nil {
						return errs[i]
					}
					dp := analyzed[i]
					if dp == nil {
						continue
					}
					id := from + uint32(i)
					ix.metas[id] = dp.meta
					ix.docHosts[id] = ix.internHost(&ix.metas[id])
					ix.maxStatic = max(ix.maxStatic, dp.meta.static)
					pend.add(id, dp)
					ix.releaseDoc(dp)
					analyzed[i] = nil
				}
				return nil
			})
		if err != nil {
			for _, dp := range analyzed {
				if dp != nil {
					ix.releaseDoc(dp)
				}
			}
			return fmt.Errorf("index: analyze stored documents: %w", err)
		}
		ix.pendingHint = len(pend.terms) * 5 / 4
		snap := flushSnapshot{metas: ix.metas, deleted: ix.deleted}
		if err := ix.flushPending(ctx, pend, from, to, &snap); err != nil {
			return fmt.Errorf("index: flush re-analyzed documents: %w", err)
		}
		if to < ix.st.NextDoc {
			ix.log.Info("index: analyzing stored documents", "done", to-(ix.st.NextDoc-total), "of", total)
		}
	}
	return nil
}

func (ix *Index) flushLoop() {
	defer close(ix.done)
	t := time.NewTimer(ix.opt.FlushInterval)
	if ix.opt.FlushInterval <= 0 {
		t.Stop() // flush on kicks only
	}
	defer t.Stop()
	for {
		select {
		case <-ix.stop:
			return
		case <-t.C:
		case <-ix.kick:
		}
		start := time.Now()
		if err := ix.flush(context.Background(), false); err != nil && !errors.Is(err, ErrClosed) {
			ix.log.Error("index: background flush", "err", err)
		}
		if ix.opt.FlushInterval > 0 {
			t.Reset(nextFlushWait(ix.opt.FlushInterval, time.Since(start)))
		}
	}
}

// flushShare is the most of its wall time the background flusher may
// spend flushing.
const flushShare = 0.2

// nextFlushWait is the time until the next timed flush after one that
// took took. A flush writes a block for every term it touches, so its
// cost grows with the terms of a batch more than with its documents: on
// a loaded node, where a flush takes a good part of an interval,
// flushing every interval would spend much of the indexing CPU on small
// blocks and their merges, while waiting longer batches more documents
// per term. The wait stretches so that flushing takes at most
// flushShare of the time, up to ten intervals: a page is searchable at
// most that long after it was stored (FlushDocs and FlushBytes still
// flush sooner).
func nextFlushWait(interval, took time.Duration) time.Duration {
	wait := time.Duration(float64(took) * (1 - flushShare) / flushShare)
	return min(max(wait, interval), 10*interval)
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
	err := ix.flushOnce(context.Background(), true)
	ix.flushMu.Unlock()
	// The zstd decoders are not closed: used through DecodeAll only, they
	// run no goroutines, and a reader (a late query) racing with Close may
	// still use them; the GC reclaims them with the Index.
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

// pendingBytes is the size of the buffered postings. Callers hold ix.mu.
func (ix *Index) pendingBytes() int {
	if ix.pending == nil {
		return ix.queuedBytes
	}
	return ix.pending.bytes + ix.queuedBytes
}

// pendingDocs is the number of stored documents whose postings are
// buffered. Callers hold ix.mu.
func (ix *Index) pendingDocs() int {
	if ix.pending == nil {
		return len(ix.queued)
	}
	return len(ix.pending.docs) + len(ix.queued)
}

// publish copies the writer state for readers. Callers hold ix.mu.
func (ix *Index) publish() {
	ix.metaMu.Lock()
	ix.pub = ix.st
	// Every docID from the watermark on is stored but not searchable yet:
	// the buffer's docs, and those of a flush in progress, which are no
	// longer in the buffer (counting only the buffer let a node report
	// itself idle in the middle of a flush).
	ix.pubPend = int(ix.st.NextDoc-ix.st.Flushed) + len(ix.anchorsDue)
	ix.pubHeld = ix.heldPages
	ix.metaMu.Unlock()
}

// Stats reports the shard's size and collection statistics.
func (ix *Index) Stats() Stats {
	ix.metaMu.RLock()
	st, pend, held := ix.pub, ix.pubPend, ix.pubHeld
	ix.metaMu.RUnlock()
	s := Stats{Docs: st.Docs, PostingsBytes: st.PostSize, FieldLenSum: st.LenSum, Pending: pend, NextDocID: st.NextDoc, Held: held}
	s.AnchorUpdates = ix.anchorUpdates.Load()
	s.PutsAnalysed, s.FormsReplayed, s.FormsRefused = ix.putsAnalysed.Load(), ix.formsReplayed.Load(), ix.formsRefused.Load()
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

// anchorBase is where a document's anchor texts start in its position
// space, above any position of its other fields (a received form's are
// below maxFormPosition, a page's own below MaxAnalyzeBytes per field).
// Anchors come last and at a fixed place so that the rest of the page's
// positions do not depend on them: an update of the anchor field
// (anchorpost.go) replaces positions from anchorBase on and leaves the
// others as they are.
const anchorBase = 1 << 30

// analyzeDoc turns a document into per-term field TFs and positions. The
// result is pooled scratch: hand it back with releaseDoc. It also notes
// where its parts end (docPostings.parts), from which formOf builds the
// page's analysed form.
func (ix *Index) analyzeDoc(d *Document, anchors []string) *docPostings {
	dp := ix.newDocPostings(d)
	dp.page = ix.an.pageScript(d.Title, d.Body)
	dp.meta.script = dp.page
	base := ix.analyzeField(dp, FieldTitle, d.Title, 0)
	dp.parts.titleEnd, dp.parts.titleSpan = len(dp.occTerm), base
	for _, h := range d.Headings {
		base = ix.analyzeField(dp, FieldHeading, h, base)
	}
	dp.parts.bodyFrom = len(dp.occTerm)
	base = ix.analyzeField(dp, FieldBody, d.Body, base)
	dp.parts.urlFrom = len(dp.occTerm)
	ix.analyzeField(dp, FieldURL, urlText(d.URL), base)
	ix.analyzeAnchors(dp, anchors)
	dp.encode()
	return dp
}

// replayForm is analyzeDoc for a page whose analysed form is known: the
// anchors are analysed, the rest is the form's tokens. d supplies the
// static rank and host only.
func (ix *Index) replayForm(d *Document, f *analysedForm, anchors []string) (*docPostings, error) {
	dp := ix.newDocPostings(d)
	dp.page = f.page
	dp.meta.script = f.page
	r := byteReader{b: f.toks}
	next := func() (string, uint32, error) {
		t, ok := f.term(uint64(r.uvarint()))
		p := r.uvarint()
		if r.err != nil || !ok {
			return "", 0, errCorrupt
		}
		return t, p, nil
	}
	fail := func() (*docPostings, error) {
		ix.releaseDoc(dp)
		return nil, fmt.Errorf("index: analysed form of %q: %w", truncUTF8(d.URL, 100), errCorrupt)
	}
	pos := uint32(0)
	for range f.titleToks {
		t, gap, err := next()
		if err != nil {
			return fail()
		}
		pos += gap
		dp.token(t, FieldTitle, pos)
	}
	dp.parts.titleEnd, dp.parts.titleSpan = len(dp.occTerm), f.titleSpan
	pos = f.titleSpan
	for k := f.titleToks; k < f.nToks; k++ {
		t, gap, err := next()
		if err != nil {
			return fail()
		}
		field := FieldHeading
		switch {
		case k >= f.urlFrom:
			field = FieldURL
		case k >= f.bodyFrom:
			field = FieldBody
		}
		pos += gap
		dp.token(t, field, pos)
	}
	if r.off != len(r.b) {
		return fail()
	}
	dp.parts.bodyFrom, dp.parts.urlFrom = f.bodyFrom, f.urlFrom
	ix.analyzeAnchors(dp, anchors)
	dp.encode()
	return dp, nil
}

func (ix *Index) newDocPostings(d *Document) *docPostings {
	dp, _ := ix.docPool.Get().(*docPostings)
	if dp == nil {
		dp = &docPostings{idx: make(map[string]int32, 256)}
		dp.emit = dp.emitToken
	}
	dp.meta = docMeta{static: sanitizeRank(d.StaticRank), host: d.Host}
	return dp
}

// analyzeField adds text as field at position base and returns where the
// next field starts.
func (ix *Index) analyzeField(dp *docPostings, field int, text string, base uint32) uint32 {
	dp.field, dp.base, dp.maxPos = field, base, -1
	ix.an.run(text, false, false, dp.page, dp.emit)
	return base + uint32(dp.maxPos+1) + fieldGap
}

// analyzeAnchors adds each anchor text as a field from anchorBase on and
// notes where the anchors' tokens start (docPostings.parts).
func (ix *Index) analyzeAnchors(dp *docPostings, anchors []string) {
	dp.parts.anchorsFrom = len(dp.occTerm)
	base := uint32(anchorBase)
	for _, a := range anchors {
		base = ix.analyzeField(dp, FieldAnchor, a, base)
	}
}

// releaseDoc returns analysis scratch to the pool (not if a huge page made
// it large: the pool would keep that memory).
func (ix *Index) releaseDoc(dp *docPostings) {
	if dp == nil || dp.idx == nil { // none, or a frozen copy (queue.go)
		return
	}
	if cap(dp.enc) > 1<<20 || cap(dp.occPos) > 1<<18 {
		return
	}
	dp.reset()
	ix.docPool.Put(dp)
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
	p := &preparedDoc{doc: c, rec: appendStored(nil, c, ix.compressPage)}
	p.raw = ix.rawPart(c)
	return ix.store(ctx, p)
}

// PutBatch stores docs as that many Puts in order would, but analyzes and
// compresses them on up to GOMAXPROCS goroutines (segmentation is most of
// a Put's cost), for callers that hold many pages at once (replication,
// handoff, bulk loads). It stops at the first error; the docs before it
// are stored.
func (ix *Index) PutBatch(ctx context.Context, docs []*Document) error {
	return ix.PutAnalysedBatch(ctx, docs, nil)
}

// PutAnalysedBatch is PutBatch for pages analysed by another index: a
// non-empty forms[i] is docs[i]'s encoded analysed form (Form), and the
// page is indexed by replaying it with this index's anchors for the page,
// without analysing its text. The postings are those an analysis would
// make. A form that does not decode or was made by another analyzer
// version is not used: that page is analysed (Stats.FormsRefused). The
// form is trusted as the page's text is: the caller has authorised its
// sender for the page's host (formwire.go says what is checked).
func (ix *Index) PutAnalysedBatch(ctx context.Context, docs []*Document, forms [][]byte) error {
	prepared := make([]*preparedDoc, len(docs))
	errs := make([]error, len(docs))
	formAt := func(i int) []byte {
		if i < len(forms) {
			return forms[i]
		}
		return nil
	}
	return inWindows(ctx, len(docs),
		func(i int) { prepared[i], errs[i] = ix.prepare(docs[i], formAt(i)) },
		func(lo, hi int) error {
			var err error
			for i := lo; i < hi; i++ {
				if err == nil {
					err = errs[i]
				}
				if err == nil {
					err = ix.store(ctx, prepared[i])
				}
				if prepared[i] != nil {
					ix.releaseDoc(prepared[i].dp)
				}
				prepared[i] = nil
			}
			return err
		})
}

// preparedDoc is a validated, analyzed and compressed page ready to store.
type preparedDoc struct {
	doc      *Document
	anchors  []string // the anchors analysed with it
	dp       *docPostings
	form     *analysedForm // nil without a form cache
	rec, raw []byte
}

// prepare does the expensive part of a Put (segmentation, compression),
// which needs no lock. A non-empty form is the page's encoded analysed
// form, replayed instead of analysing the page when it is usable.
func (ix *Index) prepare(d *Document, form []byte) (*preparedDoc, error) {
	c, err := ix.validate(d)
	if err != nil {
		return nil, err
	}
	anchors, err := ix.loadAnchors(c.URL)
	if err != nil {
		return nil, err
	}
	p := &preparedDoc{doc: c, anchors: anchors, rec: appendStored(nil, c, ix.compressPage)}
	if len(form) > 0 {
		p.dp, p.form = ix.replayReceived(c, form, anchors)
	}
	if p.dp == nil {
		ix.putsAnalysed.Add(1)
		p.dp = ix.analyzeDoc(c, anchors)
		if ix.forms.wants(p.dp) {
			p.form = formOf(p.dp)
		}
	}
	p.raw = ix.rawPart(c)
	return p, nil
}

// replayReceived indexes d from its received form b, or returns nil if
// the form is unusable (logged at debug level: a peer of another version
// sends such forms all the time). The decoded form is returned to be
// cached when the cache would keep it.
func (ix *Index) replayReceived(d *Document, b []byte, anchors []string) (*docPostings, *analysedForm) {
	f, err := decodeForm(b, ix.an.Version())
	var dp *docPostings
	if err == nil {
		dp, err = ix.replayForm(d, f, anchors)
	}
	if err != nil {
		ix.formsRefused.Add(1)
		ix.log.Debug("index: received analysed form not used", "url", truncUTF8(d.URL, 200), "err", err)
		return nil, nil
	}
	ix.formsReplayed.Add(1)
	if !ix.forms.wants(dp) {
		f = nil
	}
	return dp, f
}

// store commits a prepared page and starts (or, when the flusher is far
// behind, runs) a flush.
func (ix *Index) store(ctx context.Context, p *preparedDoc) error {
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return ErrClosed
	}
	e := &queuedDoc{doc: analysisFields(p.doc)}
	if p.dp != nil {
		e = newAnalysedEntry(p.doc.URL, p.doc.Host, p.anchors, p.dp, p.form)
	}
	err := ix.putLocked(p.doc.URL, p.doc.Host, e, p.rec, p.raw)
	if err == nil {
		ix.putsSinceFlush++
	}
	pending, pendBytes := ix.pendingDocs(), ix.pendingBytes()
	ix.mu.Unlock()
	if err != nil {
		return err
	}
	return ix.maybeFlush(ctx, pending, pendBytes)
}

// maybeFlush starts a flush, or runs one, for pending docs of pendBytes
// buffered postings.
func (ix *Index) maybeFlush(ctx context.Context, pending, pendBytes int) error {
	switch {
	case pending >= 4*ix.opt.FlushDocs || pendBytes >= 2*ix.opt.FlushBytes:
		// The background flusher is not keeping up: flush here (back
		// pressure on the crawler rather than unbounded memory).
		return ix.flush(ctx, false)
	case pending >= ix.opt.FlushDocs || pendBytes >= ix.opt.FlushBytes:
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
		var err error
		anchors, err = anchorsIn(txn, u)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("index: load anchors of %q: %w", u, err)
	}
	return anchors, nil
}

func getDocID(txn *badger.Txn, u string) (uint32, bool, error) {
	id, ok, _, err := getDoc(txn, u)
	return id, ok, err
}

// getDoc is getDocID that also tells whether the page is held (held.go).
func getDoc(txn *badger.Txn, u string) (id uint32, ok, held bool, err error) {
	item, err := txn.Get([]byte(prefixURL + u))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, false, nil
	}
	if err != nil {
		return 0, false, false, err
	}
	err = item.Value(func(v []byte) error {
		switch {
		case len(v) == 4:
		case len(v) == 5 && v[4] == heldMark:
			held = true
		default:
			return errCorrupt
		}
		id = binary.BigEndian.Uint32(v)
		return nil
	})
	return id, err == nil, held, err
}

// removeInTxn deletes doc id's keys, writes its tombstone and takes it out
// of the statistics in ns. Callers hold ix.mu.
func (ix *Index) removeInTxn(txn *badger.Txn, id uint32, ns *state) error {
	m := ix.metas[id]
	keys := [][]byte{docKey(prefixDoc, id), docKey(prefixRaw, id), docKey(prefixLens, id), hostKey(m.host, id)}
	held := ix.isHeld(id)
	if held {
		keys = append(keys, heldKey(m.host, id))
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	if err := txn.Set(docKey(prefixTomb, id), nil); err != nil {
		return err
	}
	if id < ns.Flushed && !ix.isDeleted(id) && !held { // only flushed docs are counted
		ns.Docs--
		lens := ix.liveLensLocked(id)
		for f := range NumFields {
			ns.LenSum[f] -= int64(lens[f])
		}
	}
	return nil
}

// markDeleted updates memory after a committed removal. Callers hold ix.mu.
func (ix *Index) markDeleted(id uint32) {
	if ix.isHeld(id) {
		ix.unhold(id)
	} else if id < ix.st.Flushed && !ix.isDeleted(id) {
		ix.metaMu.Lock()
		m := ix.metas[id]
		m.lens = ix.liveLensLocked(id)
		ix.hostAdd(&m, -1)
		ix.metaMu.Unlock()
	}
	ix.deleted[id/64].Or(1 << (id % 64)) // a pending doc's postings are dropped by the flush
	ix.deletions.Add(1)
	if ix.summaries != nil {
		ix.summaries.drop(id)
	}
}

// putLocked stores a page and queues it (queue.go) for the flush, which
// adds its postings: e holds the page's text, or its postings when it was
// analysed already. A page replaced by it is deleted.
func (ix *Index) putLocked(u, host string, e *queuedDoc, rec, raw []byte) error {
	ns := ix.st
	txn := ix.db.NewTransaction(true)
	defer txn.Discard()
	id, old, hasOld, err := ix.newPageInTxn(txn, &ns, u, host, false, rec, raw)
	if err != nil {
		return fmt.Errorf("index: put %q: %w", u, err)
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("index: put %q: commit: %w", u, err)
	}
	meta := docMeta{static: e.doc.StaticRank, host: host}
	if e.dp != nil {
		meta = e.dp.meta
	}
	ix.appendMetaLocked(id, meta)
	if hasOld {
		ix.markDeleted(old)
	}
	ix.st = ns
	e.id, e.url, e.host = id, u, host
	ix.queueLocked(e)
	ix.publish()
	return nil
}

// newPageInTxn allocates the next docID in ns and writes the page at u
// under it in txn: its URL entry (the docID, then heldMark for a held
// page), record, raw body (none if empty), host listing and the
// allocation, removing the page stored at u before, whose docID it
// returns. Callers hold ix.mu.
func (ix *Index) newPageInTxn(txn *badger.Txn, ns *state, u, host string, held bool, rec, raw []byte) (id, old uint32, hasOld bool, err error) {
	id = ns.NextDoc
	if id == math.MaxUint32 {
		return 0, 0, false, errors.New("docID space exhausted")
	}
	ns.NextDoc++
	if old, hasOld, err = getDocID(txn, u); err != nil {
		return 0, 0, false, err
	}
	if hasOld {
		if err := ix.removeInTxn(txn, old, ns); err != nil {
			return 0, 0, false, fmt.Errorf("replace: %w", err)
		}
	}
	urlValue := binary.BigEndian.AppendUint32(nil, id)
	if held {
		urlValue = append(urlValue, heldMark)
	}
	sets := []struct{ k, v []byte }{
		{[]byte(prefixURL + u), urlValue},
		{docKey(prefixDoc, id), rec},
		{hostKey(host, id), nil},
		{[]byte(keyAlloc), ns.encodeAlloc()},
	}
	if len(raw) > 0 {
		sets = append(sets, struct{ k, v []byte }{docKey(prefixRaw, id), raw})
	}
	for _, s := range sets {
		if err := txn.Set(s.k, s.v); err != nil {
			return 0, 0, false, err
		}
	}
	return id, old, hasOld, nil
}

// appendMetaLocked records the metadata of the docID just allocated.
// Callers hold ix.mu.
func (ix *Index) appendMetaLocked(id uint32, m docMeta) {
	ix.metaMu.Lock()
	defer ix.metaMu.Unlock()
	ix.metas = append(ix.metas, m)
	ix.docHosts = append(ix.docHosts, ix.internHost(&ix.metas[len(ix.metas)-1]))
	ix.maxStatic = max(ix.maxStatic, m.static)
	if need := int(id/64) + 1; need > len(ix.deleted) {
		grown := make([]atomic.Uint64, need*2)
		for i := range ix.deleted {
			grown[i].Store(ix.deleted[i].Load())
		}
		ix.deleted = grown
	}
}

// Delete removes the page at url (handoff to another owner, or gone).
func (ix *Index) Delete(ctx context.Context, u string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ix.anchorMu.Lock()
	defer ix.anchorMu.Unlock()
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
	anchors, err := anchorsIn(txn, u)
	if err != nil {
		return fmt.Errorf("index: delete %q: %w", u, err)
	}
	for _, k := range []string{prefixURL + u, prefixAnchors + u, prefixAnchorsChanged + u} {
		if err := txn.Delete([]byte(k)); err != nil {
			return fmt.Errorf("index: delete %q: %w", u, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("index: delete %q: commit: %w", u, err)
	}
	ix.st = ns
	ix.markDeleted(id)
	for _, a := range anchors {
		ix.recorded.forget(ix.recorded.hash(u, a))
	}
	delete(ix.anchorsDue, u)
	ix.forms.drop(u)
	ix.publish()
	return nil
}

// AddAnchors records anchor text that other pages use for url. It may
// arrive before the page: it is kept and indexed when the page is Put. For a
// page already flushed, a later flush indexes its new anchor field alone
// (anchorpost.go, Options.AnchorDelay); the request is persisted, so it
// survives a crash.
func (ix *Index) AddAnchors(ctx context.Context, u string, anchors []string) error {
	return ix.AddAnchorsBatch(ctx, map[string][]string{u: anchors})
}

// AddAnchorsBatch is AddAnchors for the links of a whole page (URL ->
// anchor texts), in as few transactions as fit. It reads and merges the
// recorded anchors under anchorMu only, not the writer lock (a page's
// links are many Badger reads): a Put that analysed a page before the
// merge committed notices the change itself (see putLocked).
func (ix *Index) AddAnchorsBatch(ctx context.Context, byURL map[string][]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for u := range byURL {
		if u == "" || len(u) > maxURLBytes {
			return fmt.Errorf("index: add anchors: invalid URL %q", truncUTF8(u, 100))
		}
	}
	ix.anchorMu.Lock()
	defer ix.anchorMu.Unlock()
	ix.mu.Lock()
	closed := ix.closed
	ix.mu.Unlock()
	if closed {
		return ErrClosed
	}
	txn := ix.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	var stored, unstored []string // changed in txn: URLs of stored pages, of others
	var recorded []uint64         // pairs recorded once the last commit is made
	commit := func() error {
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("index: add anchors: commit: %w", err)
		}
		if err := ix.requestAnchorUpdates(stored, unstored); err != nil {
			return err
		}
		stored, unstored = stored[:0], unstored[:0]
		txn = ix.db.NewTransaction(true)
		return nil
	}
	var given []string  // a URL's anchors, cleaned
	var hashes []uint64 // their pairs' hashes
	for u, anchors := range byURL {
		given, hashes = given[:0], hashes[:0]
		known := true
		for _, a := range anchors {
			if a = cleanAnchor(a); a == "" {
				continue
			}
			h := ix.recorded.hash(u, a)
			given, hashes = append(given, a), append(hashes, h)
			known = known && ix.recorded.holds(h)
		}
		if known {
			continue
		}
		cur, err := anchorsIn(txn, u)
		if err != nil {
			return fmt.Errorf("index: add anchors %q: %w", u, err)
		}
		cur, changed, evicted := mergeAnchors(cur, given)
		for i, a := range given {
			if _, ok := slices.BinarySearchFunc(cur, a, anchorOrder); ok {
				recorded = append(recorded, hashes[i])
			}
		}
		for _, a := range evicted {
			ix.recorded.forget(ix.recorded.hash(u, a))
		}
		if !changed {
			continue
		}
		// A held page is indexed with the anchors recorded when it is.
		_, found, held, err := getDoc(txn, u)
		if err != nil {
			return fmt.Errorf("index: add anchors %q: %w", u, err)
		}
		exists := found && !held
		set := func() error {
			if err := txn.Set([]byte(prefixAnchors+u), encodeAnchors(cur)); err != nil {
				return err
			}
			if exists {
				return txn.Set([]byte(prefixAnchorsChanged+u), nil)
			}
			return nil
		}
		err = set()
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := commit(); err != nil {
				return err
			}
			err = set()
		}
		if err != nil {
			return fmt.Errorf("index: add anchors %q: %w", u, err)
		}
		if exists {
			stored = append(stored, u)
		} else {
			unstored = append(unstored, u)
		}
	}
	if err := commit(); err != nil {
		return err
	}
	for _, h := range recorded {
		ix.recorded.add(h)
	}
	return nil
}

// requestAnchorUpdates queues for an anchor update the pages whose new anchors were
// just committed: those stored when the anchors were read (their request
// is in the commit), and those of unstored that a Put stored since,
// analysed without the new anchors and checked against the anchors before
// the commit. A Put after this, under mu, sees the new anchors (see
// putLocked). A page put meanwhile that already holds them gets an update
// that changes nothing, which is harmless.
func (ix *Index) requestAnchorUpdates(stored, unstored []string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var late []string
	err := ix.db.View(func(txn *badger.Txn) error {
		for _, u := range unstored {
			_, ok, held, err := getDoc(txn, u)
			if err != nil {
				return err
			}
			if ok && !held {
				late = append(late, u)
			}
		}
		return nil
	})
	late = slices.DeleteFunc(late, ix.isQueuedLocked)
	if err == nil && len(late) > 0 {
		// As many transactions as the requests need: a page links to as
		// many pages as it likes.
		wb := ix.db.NewWriteBatch()
		for _, u := range late {
			if err = wb.Set([]byte(prefixAnchorsChanged+u), nil); err != nil {
				break
			}
		}
		if err == nil {
			err = wb.Flush()
		} else {
			wb.Cancel()
		}
	}
	if err != nil {
		return fmt.Errorf("index: add anchors: anchor update requests: %w", err)
	}
	now := time.Now()
	for _, u := range slices.Concat(stored, late) {
		if e := ix.queuedURL[u]; e != nil {
			e.keyed = true // the flush reads its anchors
			continue
		}
		if _, waiting := ix.anchorsDue[u]; !waiting {
			ix.anchorsDue[u] = now
		}
	}
	ix.publish()
	return nil
}

// Flush writes buffered postings so that every page stored before the
// call is searchable when it returns, with every anchor recorded for it.
func (ix *Index) Flush(ctx context.Context) error { return ix.flush(ctx, true) }

// flush: force updates the anchors of every page waiting; otherwise
// only those due (see Options.AnchorDelay).
func (ix *Index) flush(ctx context.Context, force bool) error {
	ix.flushMu.Lock()
	defer ix.flushMu.Unlock()
	ix.mu.Lock()
	closed := ix.closed
	ix.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ix.flushOnce(ctx, force)
}

// hostAgg is the count and field length sums of a host's live flushed docs,
// so that statistics restricted to a set of hosts cost O(hosts), not O(docs).
type hostAgg struct {
	docs   int64
	lenSum [NumFields]int64
}

// hostAdd adds (sign 1) or removes (-1) a doc. Callers hold metaMu (or are
// in Open).
// internHost returns m's host ID, assigning the next one to a host not
// seen before, and makes m share the interned copy of its host name.
// Callers hold metaMu for writing (or run before the index is shared).
func (ix *Index) internHost(m *docMeta) uint32 {
	id, ok := ix.hostIDs[m.host]
	if !ok {
		id = uint32(len(ix.hostNames))
		ix.hostIDs[m.host] = id
		ix.hostNames = append(ix.hostNames, m.host)
	}
	m.host = ix.hostNames[id]
	return id
}

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
