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
	// Pages whose anchor field changed get it indexed again
	// (anchorpost.go): all of them when forced or when no page was stored
	// since the last flush, else those waiting for longer than
	// AnchorDelay.
	delay := ix.opt.AnchorDelay
	if delay <= 0 {
		delay = DefaultOptions().AnchorDelay
	}
	puts := ix.putsSinceFlush
	ix.putsSinceFlush = 0
	due := anchorUpdatesDue(ix.anchorsDue, time.Now().Add(-delay), force || puts == 0, puts)
	// A queued page is analysed with its anchors of the moment below.
	due = slices.DeleteFunc(due, ix.isQueuedLocked)
	ix.mu.Unlock()
	if err := ix.updateAnchors(ctx, due); err != nil {
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
		// Keep the docs whose i:l: key was not committed pending. Their
		// postings may already be on disk; the flushes up to end skip
		// those (see flushPending).
		ix.carefulUntil = max(ix.carefulUntil, end)
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
// but each term's update (its new blocks and the appended blocks they
// replace) is inside one transaction, so every term's list on disk is
// always whole. A crash after some of them leaves those terms holding
// docs at or above the watermark; a failed flush leaves them too. The
// flushes after either (up to the last docID the lost flush may have
// written, ix.carefulUntil) are careful: per term they look up the last
// docID on disk and skip the new docs not above it, so that they neither
// lose nor double a posting. Each postings transaction also writes
// i:m:flush with the unchanged watermark and the byte count so far, so
// the statistics stay exact across such a crash.
//
// The terms, sorted, are cut into chunks that worker goroutines encode
// while this goroutine writes the chunks in order; commits are pipelined,
// one in flight while the next is built.
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
	careful := flushed < ix.carefulUntil
	seq := ix.flushSeq
	ix.flushSeq++

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
			enc := termEncoder{snap: snap, chunkBytes: max(w.maxSize/4, 4096), careful: careful, seq: seq}
			rtxn := ix.db.NewTransaction(false)
			defer rtxn.Discard()
			enc.it = rtxn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(prefixPostings)})
			defer enc.it.Close()
			for c := range jobs {
				if stop.Load() || ctx.Err() != nil {
					c.err = errFlushStopped
				} else {
					c.err = enc.encodeChunk(pend, c)
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
			jobs <- &chunks[dispatched]
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
	// mergeEvery: a term's appended blocks are merged into full blocks
	// in one flush of every mergeEvery that has new postings for it (or
	// when its new postings fill a block), so a list ends in about
	// mergeEvery appended blocks on average, and a flush reads the
	// appended blocks of about one term in mergeEvery.
	mergeEvery = 8
)

var errFlushStopped = errors.New("flush stopped")

type termRef struct {
	term string
	li   int32
}

// flushChunk is a run of sorted terms, encoded by a worker.
type flushChunk struct {
	refs []termRef
	ups  []termUpdate
	err  error
	done chan struct{}
}

// termUpdate is one atomic update of a term's list: blocks to write and
// blocks to delete.
type termUpdate struct {
	term    string
	entries []kv
	dPost   int64
}

// kv is a write, or a delete when del is set.
type kv struct {
	k, v []byte
	del  bool
}

// mergeDue reports whether the flush numbered seq merges term's appended
// blocks: a fixed one flush in mergeEvery per term, spread over the terms
// by a hash, so that no flush merges them all and no memory is kept per
// term.
func mergeDue(term string, seq uint64) bool {
	return anchorRank(term)%mergeEvery == seq%mergeEvery
}

// appendedBlock is an appended block read back for a merge.
type appendedBlock struct {
	key, val []byte
}

// termEncoder turns pending postings into term updates; one per worker.
type termEncoder struct {
	snap       *flushSnapshot
	chunkBytes int64
	careful    bool
	seq        uint64
	it         *badger.Iterator // over postings keys, for merges
	fresh      postingList
	carry      postingList
	blk        decodedBlock
	appended   []appendedBlock
}

func (e *termEncoder) encodeChunk(pend *pendingIndex, c *flushChunk) error {
	for _, r := range c.refs {
		l := &pend.lists[r.li]
		merge := e.careful || l.n >= BlockSize || mergeDue(r.term, e.seq)
		var last uint32
		var found bool
		e.appended = e.appended[:0]
		if merge {
			var err error
			if last, found, err = e.readAppended(r.term); err != nil {
				return fmt.Errorf("term %q: %w", r.term, err)
			}
		}
		e.fresh.reset()
		if err := decodePending(l, &e.fresh, e.snap.isDeleted, last, e.careful && found); err != nil {
			return fmt.Errorf("pending postings of %q: %w", r.term, err)
		}
		if len(e.fresh.docs) == 0 {
			continue
		}
		var err error
		if c.ups, err = e.encodeTerm(c.ups, r.term); err != nil {
			return fmt.Errorf("term %q: %w", r.term, err)
		}
	}
	return nil
}

// readAppended reads term's appended blocks into e.appended and returns
// the last docID of its list (found is false for a term without postings).
// A careful flush walks the keys of the whole list for that docID; else
// only the appended blocks are visited (those are what a merge rewrites).
func (e *termEncoder) readAppended(term string) (last uint32, found bool, err error) {
	kp := termPrefix(term)
	from := kp
	if !e.careful {
		from = blockKey(nil, term, appendMark)
	}
	for e.it.Seek(from); e.it.ValidForPrefix(kp); e.it.Next() {
		item := e.it.Item()
		l, appended, ok := parseBlockKey(item.Key(), len(kp))
		if !ok {
			continue
		}
		last, found = l, true
		if !appended {
			continue
		}
		val, err := item.ValueCopy(nil)
		if err != nil {
			return 0, false, err
		}
		e.appended = append(e.appended, appendedBlock{key: item.KeyCopy(nil), val: val})
	}
	return last, found, nil
}

// encodeTerm appends the updates that add e.fresh (docs above every doc
// of the term's list) to the term: e.appended's postings (read for a
// merge) and the new ones are cut into full blocks, written under
// blockKey, and a last partial block, appended under appendKey; the
// blocks read are deleted. Deleted docs are dropped on the way. A term
// whose new postings exceed a quarter of a transaction is written in
// chunks of docs, each a complete update of the list (the next chunk
// takes over the previous one's partial block), so the crash argument of
// flushPending holds for it too.
func (e *termEncoder) encodeTerm(ups []termUpdate, term string) ([]termUpdate, error) {
	e.carry.reset()
	var dels []appendedBlock
	for _, b := range e.appended {
		if err := decodeBlock(b.val, &e.blk); err != nil {
			return ups, err
		}
		if err := e.blk.toList(&e.carry, e.snap.isDeleted); err != nil {
			return ups, err
		}
		dels = append(dels, b)
	}
	fresh := &e.fresh
	for lo := 0; lo < len(fresh.docs); {
		hi, est := lo, int64(0)
		for hi < len(fresh.docs) && (hi == lo || est < e.chunkBytes) {
			est += 4 + 2*int64(fresh.posOff[hi+1]-fresh.posOff[hi])
			hi++
		}
		u := termUpdate{term: term}
		for _, b := range dels {
			u.entries = append(u.entries, kv{k: b.key, del: true})
			u.dPost -= int64(len(b.key) + len(b.val))
		}
		dels = dels[:0]
		src, from, to := fresh, lo, hi // nothing carried: encode the new postings in place
		if len(e.carry.docs) > 0 {
			for i := lo; i < hi; i++ {
				e.carry.add(fresh.docs[i], fresh.tfs[i], fresh.positions(i))
			}
			src, from, to = &e.carry, 0, len(e.carry.docs)
		}
		partial := e.encodeBlocks(&u, src, from, to)
		ups = append(ups, u)
		lo = hi
		if partial < to && lo < len(fresh.docs) {
			// The next chunk rewrites this chunk's partial block.
			var next postingList
			for i := partial; i < to; i++ {
				next.add(src.docs[i], src.tfs[i], src.positions(i))
			}
			e.carry = next
			last := u.entries[len(u.entries)-1]
			dels = append(dels, appendedBlock{key: last.k, val: last.v})
		} else {
			e.carry.reset()
		}
	}
	return ups, nil
}

// encodeBlocks adds to u the full blocks of src[from:to] and, for the
// docs after them, an appended block; it returns where that block starts
// (to when there is none).
func (e *termEncoder) encodeBlocks(u *termUpdate, src *postingList, from, to int) int {
	metas := e.snap.metas
	b := from
	for ; b < to; b += BlockSize {
		end := min(b+BlockSize, to)
		var h BlockHeader
		for i := b; i < end; i++ {
			mergeBounds(&h.MaxTF, &h.MinLen, src.tfs[i], metas[src.docs[i]].lens)
		}
		val := encodeBlock(make([]byte, 0, 64+(end-b)*8), &h, src, b, end)
		var key []byte
		if end-b == BlockSize {
			key = blockKey(nil, u.term, src.docs[end-1])
		} else {
			key = appendKey(nil, u.term, src.docs[end-1])
		}
		u.entries = append(u.entries, kv{k: key, v: val})
		u.dPost += int64(len(key) + len(val))
		if end-b < BlockSize {
			return b
		}
	}
	return to
}

// postingsWriter groups term updates into Badger transactions under the
// batch limits and commits them one after another, the next built while
// the previous is being written.
type postingsWriter struct {
	ix                *Index
	flushed           uint32
	maxSize, maxCount int64

	postSize int64 // committed total

	txn         *badger.Txn
	size, count int64
	dPost       int64

	inflight *inflightCommit
	commits  int
}

type inflightCommit struct {
	done  chan error
	dPost int64
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
		postSize: ix.st.PostSize,
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
		var err error
		if e.del {
			err = w.txn.Delete(e.k)
		} else {
			err = w.txn.Set(e.k, e.v)
		}
		if err != nil {
			return err
		}
	}
	w.size += est
	w.count += n
	w.dPost += u.dPost
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
	ns := state{Flushed: w.flushed, PostSize: w.postSize + w.dPost}
	if err := w.txn.Set([]byte(keyFlush), ns.encodeFlush()); err != nil {
		return err
	}
	f := &inflightCommit{done: make(chan error, 1), dPost: w.dPost}
	w.txn.CommitWith(func(err error) { f.done <- err })
	w.inflight = f
	w.commits++
	w.txn, w.size, w.count, w.dPost = nil, 0, 0, 0
	return nil
}

// wait waits for the commit in flight and applies it to the in-memory
// statistics.
func (w *postingsWriter) wait() error {
	f := w.inflight
	if f == nil {
		return nil
	}
	w.inflight = nil
	if err := <-f.done; err != nil {
		return fmt.Errorf("commit postings: %w", err)
	}
	w.postSize += f.dPost
	ix := w.ix
	ix.mu.Lock()
	ix.st.PostSize = w.postSize
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
			k, v := docKey(prefixLens, d.id), encodeMeta(&d.meta, anchorState{})
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
		ns := state{Flushed: upTo, PostSize: ix.st.PostSize}
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
