package index

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// flushOnce takes the pending batch and writes its postings. Puts and
// queries go on meanwhile: the postings are built and committed without
// ix.mu, which is taken only to commit the documents' i:l: keys and the
// watermark. Callers hold flushMu.
func (ix *Index) flushOnce(ctx context.Context, force bool) error {
	ix.mu.Lock()
	// Pages whose anchor field changed are re-put from the page store: all
	// of them when forced or when no page was stored since the last flush,
	// else those waiting for longer than ReindexDelay. They are analysed
	// without ix.mu (see reindexPages) and join this flush's batch.
	delay := ix.opt.ReindexDelay
	if delay <= 0 {
		delay = DefaultOptions().ReindexDelay
	}
	puts := ix.putsSinceFlush
	ix.putsSinceFlush = 0
	due := reindexDue(ix.reindex, time.Now().Add(-delay), force || puts == 0, puts)
	// A queued page is analysed with its anchors of the moment below.
	due = slices.DeleteFunc(due, ix.isQueuedLocked)
	ix.mu.Unlock()
	if err := ix.reindexPages(ctx, due); err != nil {
		return err
	}
	if err := ix.drainQueue(ctx); err != nil {
		return err
	}
	ix.mu.Lock()
	pend := ix.pending
	ix.pending = nil
	if pend != nil {
		ix.pendingHint = len(pend.terms) * 5 / 4
	}
	// The batch ends at the first page queued since the drain: every
	// docID below it is in pend, held or deleted.
	end, flushed := ix.st.NextDoc, ix.st.Flushed
	if len(ix.queued) > 0 {
		end = ix.queued[0].id
	}
	snap := flushSnapshot{metas: ix.metas, deleted: ix.deleted}
	ix.mu.Unlock()
	if pend == nil {
		if flushed == end {
			return nil
		}
		pend = newPendingIndex(0)
	}
	start := time.Now()
	if err := ix.flushPending(ctx, pend, flushed, end, &snap); err != nil {
		// Badger's content is no longer known for sure: drop the cache.
		ix.tails.reset()
		// Keep the docs whose i:l: key was not committed pending. Their
		// postings may already be on disk; the next flush skips those
		// (see flushPending).
		ix.mu.Lock()
		pend.docs = slices.DeleteFunc(pend.docs, func(d pendingDoc) bool { return d.id < ix.st.Flushed })
		pend.appendPending(ix.pending)
		ix.pending = pend
		ix.publish()
		ix.mu.Unlock()
		return err
	}
	ix.log.Debug("index: flushed", "docs", len(pend.docs), "terms", len(pend.terms), "took", time.Since(start))
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

// flushPending writes pend's postings term by term, then the documents'
// i:l: keys with the watermark.
//
// Postings go in as many transactions as Badger's batch limits require,
// but each term's update (its new full blocks and its new tail) is inside
// one transaction, so every term's list on disk is always whole. A crash
// after some of them leaves those terms holding docs at or above the
// watermark; the next flush (after Open re-analyzes those docs) skips, per
// term, the docs not above its tail's last docID, so it neither loses nor
// doubles a posting. Each postings transaction also writes i:m:flush with
// the unchanged watermark and the term and byte counts so far, so the
// statistics stay exact across such a crash.
//
// The terms, sorted, are cut into chunks that worker goroutines encode
// (merging tails, building blocks) while this goroutine writes the chunks
// in order; commits are pipelined, one in flight while the next is built.
func (ix *Index) flushPending(ctx context.Context, pend *pendingIndex, flushed, end uint32, snap *flushSnapshot) error {
	refs := make([]termRef, 0, len(pend.terms))
	for t, li := range pend.terms {
		refs = append(refs, termRef{t, li})
	}
	slices.SortFunc(refs, func(a, b termRef) int { return strings.Compare(a.term, b.term) })

	ix.mu.Lock()
	w := ix.newPostingsWriter(flushed)
	ix.mu.Unlock()
	defer w.abort()

	nChunks := (len(refs) + flushChunkTerms - 1) / flushChunkTerms
	chunks := make([]flushChunk, nChunks)
	for k := range chunks {
		c := &chunks[k]
		c.refs = refs[k*flushChunkTerms : min((k+1)*flushChunkTerms, len(refs))]
		c.done = make(chan struct{})
	}
	workers := min(runtime.GOMAXPROCS(0), maxFlushWorkers, nChunks)
	jobs := make(chan *flushChunk, nChunks)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			enc := termEncoder{snap: snap, chunkBytes: max(w.maxSize/4, 4096)}
			rtxn := ix.db.NewTransaction(false)
			defer rtxn.Discard()
			for c := range jobs {
				if stop.Load() || ctx.Err() != nil {
					c.err = errFlushStopped
				} else {
					c.err = enc.encodeChunk(rtxn, pend, c)
				}
				close(c.done)
			}
		})
	}
	defer func() {
		stop.Store(true)
		close(jobs)
		wg.Wait()
	}()
	// Chunks are handed out a window ahead of the one being written, so
	// that encoded-but-unwritten postings stay bounded.
	window := 2 * workers
	dispatched := 0
	dispatch := func(upTo int) {
		for ; dispatched < min(upTo, nChunks); dispatched++ {
			c := &chunks[dispatched]
			// The cache belongs to this goroutine: look tails up here.
			c.tails = make([][]byte, len(c.refs))
			for i, r := range c.refs {
				c.tails[i], _ = ix.tails.get(r.term)
			}
			jobs <- c
		}
	}
	for k := range chunks {
		dispatch(k + window)
		c := &chunks[k]
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if c.err != nil {
			return fmt.Errorf("index: flush: %w", c.err)
		}
		for i := range c.ups {
			if err := w.add(&c.ups[i]); err != nil {
				return fmt.Errorf("index: flush: term %q: %w", c.ups[i].term, err)
			}
		}
		*c = flushChunk{} // let the GC have the encoded blocks once committed
	}
	if err := w.finish(); err != nil {
		return fmt.Errorf("index: flush %d docs: %w", len(pend.docs), err)
	}
	if w.commits > 1 {
		ix.splits++
	}
	if err := ix.commitDocs(pend.docs, end, w); err != nil {
		return fmt.Errorf("index: flush %d docs: %w", len(pend.docs), err)
	}
	return nil
}

const (
	flushChunkTerms = 512
	maxFlushWorkers = 4
)

var errFlushStopped = errors.New("flush stopped")

type termRef struct {
	term string
	li   int32
}

// flushChunk is a run of sorted terms, encoded by a worker.
type flushChunk struct {
	refs  []termRef
	tails [][]byte // cached tail blocks (nil: look in Badger)
	ups   []termUpdate
	err   error
	done  chan struct{}
}

// termUpdate is one atomic update of a term's list: blocks to write and
// the new tail.
type termUpdate struct {
	term          string
	entries       []kv
	dTerms, dPost int64
	newTail       []byte
	// firstFlush: the term had no postings before this flush. Its tail
	// is not cached (tailCache says why).
	firstFlush bool
}

type kv struct{ k, v []byte }

type tailUpdate struct {
	term       string
	val        []byte
	firstFlush bool
}

// termEncoder merges pending postings into terms' tails; one per worker.
type termEncoder struct {
	snap       *flushSnapshot
	chunkBytes int64
	fresh      postingList
	merged     postingList
	blk        decodedBlock
	hdr        BlockHeader
	scratch    []byte // appendToBlock's
}

func (e *termEncoder) encodeChunk(rtxn *badger.Txn, pend *pendingIndex, c *flushChunk) error {
	for i, r := range c.refs {
		tail := c.tails[i]
		found := tail != nil
		if !found {
			item, err := rtxn.Get(blockKey(nil, r.term, tailKey))
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
			case err != nil:
				return fmt.Errorf("term %q: %w", r.term, err)
			default:
				if tail, err = item.ValueCopy(nil); err != nil {
					return fmt.Errorf("term %q: %w", r.term, err)
				}
				found = true
			}
		}
		if found {
			if _, err := decodeHeader(tail, &e.hdr); err != nil {
				return fmt.Errorf("term %q: %w", r.term, err)
			}
		}
		e.fresh.reset()
		if err := decodePending(&pend.lists[r.li], &e.fresh, e.snap.isDeleted, e.hdr.LastDoc, found); err != nil {
			return fmt.Errorf("pending postings of %q: %w", r.term, err)
		}
		if len(e.fresh.docs) == 0 {
			continue
		}
		var err error
		if c.ups, err = e.encodeTerm(c.ups, r.term, tail, found); err != nil {
			return fmt.Errorf("term %q: %w", r.term, err)
		}
	}
	return nil
}

// encodeTerm appends the updates that merge e.fresh (docs above the tail's
// last doc) into the term's tail. A term whose new postings exceed a
// quarter of a transaction is written in chunks of docs, each chunk a
// complete update of the list, so the crash argument of flushPending
// holds for it too.
func (e *termEncoder) encodeTerm(ups []termUpdate, term string, tail []byte, found bool) ([]termUpdate, error) {
	fresh := &e.fresh
	tk := blockKey(nil, term, tailKey)
	firstFlush := !found
	for lo := 0; lo < len(fresh.docs); {
		hi, est := lo, int64(0)
		for hi < len(fresh.docs) && (hi == lo || est < e.chunkBytes) {
			est += 4 + 2*int64(fresh.posOff[hi+1]-fresh.posOff[hi])
			hi++
		}
		u := termUpdate{term: term, firstFlush: firstFlush}
		if err := e.encodeRange(&u, tk, tail, found, lo, hi); err != nil {
			return ups, err
		}
		ups = append(ups, u)
		tail, found, lo = u.newTail, true, hi
	}
	return ups, nil
}

// encodeRange fills u with the blocks of the term's list after adding
// fresh[lo:hi] to its tail: the partial tail is rewritten with the new
// postings (dropping deleted documents on the way, the "lazy merge"), a
// full tail keeps its bytes under its real key.
func (e *termEncoder) encodeRange(u *termUpdate, tk, tail []byte, found bool, lo, hi int) error {
	var cum BlockHeader
	e.merged.reset()
	if !found {
		u.dTerms = 1
	} else {
		if _, err := decodeHeader(tail, &cum); err != nil {
			return err
		}
		if cum.N < BlockSize && cum.N+hi-lo <= BlockSize {
			// The new docs fit in the tail: splice them in as bytes.
			h := BlockHeader{MaxTF: cum.MaxTF, MinLen: cum.MinLen, CumMaxTF: cum.CumMaxTF, CumMinLen: cum.CumMinLen, CumDF: cum.CumDF + uint32(hi-lo)}
			metas := e.snap.metas
			for i := lo; i < hi; i++ {
				mergeBounds(&h.MaxTF, &h.MinLen, e.fresh.tfs[i], metas[e.fresh.docs[i]].lens)
			}
			mergeBounds(&h.CumMaxTF, &h.CumMinLen, h.MaxTF, h.MinLen)
			val, scratch, ok, err := appendToBlock(make([]byte, 0, len(tail)+16+(hi-lo)*12), tail, &h, &e.fresh, lo, hi, e.snap.isDeleted, e.scratch)
			e.scratch = scratch
			if err != nil {
				return err
			}
			if ok {
				u.entries = append(u.entries, kv{tk, val})
				u.dPost += int64(len(val) - len(tail))
				u.newTail = val
				return nil
			}
		}
		if cum.N < BlockSize {
			if err := decodeBlock(tail, &e.blk); err != nil {
				return err
			}
			if err := e.blk.toList(&e.merged, e.snap.isDeleted); err != nil {
				return err
			}
			u.dPost -= int64(len(tail) + len(tk))
			cum.CumDF -= uint32(cum.N)
		} else {
			u.entries = append(u.entries, kv{blockKey(nil, u.term, cum.LastDoc), tail})
		}
	}
	fresh := &e.fresh
	src, from, to := fresh, lo, hi // no partial tail: encode the new postings in place
	if len(e.merged.docs) > 0 {
		for i := lo; i < hi; i++ {
			e.merged.add(fresh.docs[i], fresh.tfs[i], fresh.positions(i))
		}
		src, from, to = &e.merged, 0, len(e.merged.docs)
	}
	metas := e.snap.metas
	for b := from; b < to; b += BlockSize {
		end := min(b+BlockSize, to)
		h := BlockHeader{CumMaxTF: cum.CumMaxTF, CumMinLen: cum.CumMinLen}
		for i := b; i < end; i++ {
			mergeBounds(&h.MaxTF, &h.MinLen, src.tfs[i], metas[src.docs[i]].lens)
		}
		mergeBounds(&h.CumMaxTF, &h.CumMinLen, h.MaxTF, h.MinLen)
		h.CumDF = cum.CumDF + uint32(end-b)
		cum = h
		val := encodeBlock(make([]byte, 0, 64+(end-b)*8), &h, src, b, end)
		key := tk
		if end < to {
			key = blockKey(nil, u.term, src.docs[end-1])
		}
		u.entries = append(u.entries, kv{key, val})
		u.dPost += int64(len(key) + len(val))
		u.newTail = val
	}
	return nil
}

// postingsWriter groups term updates into Badger transactions under the
// batch limits and commits them one after another, the next built while
// the previous is being written.
type postingsWriter struct {
	ix                *Index
	flushed           uint32
	maxSize, maxCount int64

	terms, postSize int64 // committed totals

	txn           *badger.Txn
	size, count   int64
	dTerms, dPost int64
	tails         []tailUpdate

	inflight *inflightCommit
	commits  int
}

type inflightCommit struct {
	done          chan error
	dTerms, dPost int64
	tails         []tailUpdate
}

// maxCommitBytes bounds one postings transaction of a flush.
const maxCommitBytes = 1 << 20

// entryOverhead is what Badger's transaction size check adds per entry
// (Entry.estimateSize's two meta bytes plus ten).
const entryOverhead = 12

// newPostingsWriter starts from the committed statistics. Callers hold ix.mu.
func (ix *Index) newPostingsWriter(flushed uint32) *postingsWriter {
	// Three quarters of Badger's limits (room for i:m:flush and for the
	// estimate's slack), and at most maxCommitBytes: every new Badger
	// transaction, a query's or a Put's, waits until the commits in
	// flight are written, so a big commit would stall them all.
	return &postingsWriter{
		ix: ix, flushed: flushed,
		maxSize:  min(ix.db.MaxBatchSize()/4*3, maxCommitBytes),
		maxCount: ix.db.MaxBatchCount() / 4 * 3,
		terms:    ix.st.Terms, postSize: ix.st.PostSize,
	}
}

// add puts one term update into the open transaction, committing that
// first if the update would not fit.
func (w *postingsWriter) add(u *termUpdate) error {
	var est int64
	for _, e := range u.entries {
		est += int64(len(e.k)+len(e.v)) + entryOverhead
	}
	n := int64(len(u.entries))
	if w.txn != nil && (w.size+est > w.maxSize || w.count+n+1 > w.maxCount) {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	if w.txn == nil {
		w.txn = w.ix.db.NewTransaction(true)
	}
	for _, e := range u.entries {
		if err := w.txn.Set(e.k, e.v); err != nil {
			return err
		}
	}
	w.size += est
	w.count += n
	w.dTerms += u.dTerms
	w.dPost += u.dPost
	w.tails = append(w.tails, tailUpdate{u.term, u.newTail, u.firstFlush})
	return nil
}

// rotate commits the open transaction (after the previous commit is done)
// without waiting for it.
func (w *postingsWriter) rotate() error {
	if err := w.wait(); err != nil {
		return err
	}
	if w.txn == nil {
		return nil
	}
	if h := w.ix.commitHook; h != nil {
		if err := h(w.commits); err != nil {
			return err
		}
	}
	ns := state{Flushed: w.flushed, Terms: w.terms + w.dTerms, PostSize: w.postSize + w.dPost}
	if err := w.txn.Set([]byte(keyFlush), ns.encodeFlush()); err != nil {
		return err
	}
	f := &inflightCommit{done: make(chan error, 1), dTerms: w.dTerms, dPost: w.dPost, tails: w.tails}
	w.txn.CommitWith(func(err error) { f.done <- err })
	w.inflight = f
	w.commits++
	w.txn, w.size, w.count, w.dTerms, w.dPost, w.tails = nil, 0, 0, 0, 0, nil
	return nil
}

// wait waits for the commit in flight and applies it to the cache and the
// in-memory statistics.
func (w *postingsWriter) wait() error {
	f := w.inflight
	if f == nil {
		return nil
	}
	w.inflight = nil
	if err := <-f.done; err != nil {
		return fmt.Errorf("commit postings: %w", err)
	}
	w.terms += f.dTerms
	w.postSize += f.dPost
	for _, t := range f.tails {
		if !t.firstFlush {
			w.ix.tails.put(t.term, t.val)
		}
	}
	ix := w.ix
	ix.mu.Lock()
	ix.st.Terms, ix.st.PostSize = w.terms, w.postSize
	ix.publish()
	ix.mu.Unlock()
	return nil
}

// finish commits what is left and waits for it.
func (w *postingsWriter) finish() error {
	if err := w.rotate(); err != nil {
		return err
	}
	return w.wait()
}

// abort discards an open transaction and waits for a commit in flight
// (applying it if it succeeded, so memory matches disk).
func (w *postingsWriter) abort() {
	if w.txn != nil {
		w.txn.Discard()
		w.txn = nil
	}
	if err := w.wait(); err != nil {
		w.ix.log.Error("index: flush: postings commit failed", "err", err)
	}
}

// commitDocs writes each live doc's i:l: key and moves the watermark to
// end, after all the batch's postings are committed; in several
// transactions if Badger's limits require, each with the watermark at its
// first doc not yet written. Under ix.mu, so that no Delete slips between
// the liveness check and the commit: a doc deleted while its postings were
// being built gets no i:l: key and is not counted.
func (ix *Index) commitDocs(docs []pendingDoc, end uint32, w *postingsWriter) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	defer ix.publish()
	for i := 0; ; {
		txn := ix.db.NewTransaction(true)
		var size, count int64
		var docsAdded int64
		var lensAdded [NumFields]int64
		var added []*docMeta
		upTo := end
		for ; i < len(docs); i++ {
			d := &docs[i]
			if ix.isDeleted(d.id) {
				continue
			}
			k, v := docKey(prefixLens, d.id), encodeMeta(&d.meta)
			est := int64(len(k)+len(v)) + entryOverhead
			if count > 0 && (size+est > w.maxSize || count+2 > w.maxCount) {
				upTo = d.id
				break
			}
			if err := txn.Set(k, v); err != nil {
				txn.Discard()
				return err
			}
			size += est
			count++
			added = append(added, &d.meta)
			docsAdded++
			for f := range NumFields {
				lensAdded[f] += int64(d.meta.lens[f])
			}
		}
		ns := state{Flushed: upTo, Terms: ix.st.Terms, PostSize: ix.st.PostSize}
		if err := txn.Set([]byte(keyFlush), ns.encodeFlush()); err != nil {
			txn.Discard()
			return err
		}
		if err := txn.Commit(); err != nil {
			return err
		}
		ix.st.Flushed = upTo
		ix.st.Docs += docsAdded
		for f := range NumFields {
			ix.st.LenSum[f] += lensAdded[f]
		}
		ix.metaMu.Lock()
		for _, m := range added {
			ix.hostAdd(m, 1)
		}
		ix.metaMu.Unlock()
		if i >= len(docs) {
			return nil
		}
	}
}
