package index

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// The analysis queue. A Put stores the page at once (record, raw body,
// docID) and queues it; the next flush analyses it with the anchors
// recorded by then and adds its postings, in docID order, before it
// writes them. A page's links and the links to it arrive in the same
// seconds as the page (its neighbours are fetched and processed right
// after it), so most anchor texts that would otherwise cost a page just
// stored an anchor update are in its one analysis (BENCHMARKS.md, "Analysis at the
// flush"). Pages are searchable at the same moment as before: at the
// flush.
//
// Pages analysed before they are put (a replica's own pages from their
// received forms, IndexHeld) are queued too, with their
// postings, so that the pending index always receives docIDs in order.
// Form analyses a queued page on demand for its replicas; the flush then
// uses that analysis, or replays its form when anchors arrived since.

// queuedDoc is a stored page waiting for the flush to add its postings.
type queuedDoc struct {
	id        uint32
	url, host string
	// keyed: AddAnchorsBatch wrote the page's anchor update request (i:q:)
	// while it was queued, for the flush to settle (guarded by ix.mu).
	keyed bool

	mu       sync.Mutex // held by whichever of the flush and Form analyses it
	doc      *Document  // the fields an analysis reads
	analysed bool
	anchors  []string      // the anchors analysed with, once analysed
	dp       *docPostings  // its postings, once analysed
	form     *analysedForm // nil: none
	err      error
}

// queuedSize is what a queued page holds until the flush, for FlushBytes.
func queuedSize(d *Document) int {
	n := len(d.URL) + len(d.Title) + len(d.Body) + 200
	for _, h := range d.Headings {
		n += len(h) + 16
	}
	return n
}

// analysisFields is d without what an analysis does not read, so that a
// queued page holds no raw body or header.
func analysisFields(d *Document) *Document {
	return &Document{URL: d.URL, Host: d.Host, Title: d.Title, Headings: d.Headings, Body: d.Body, StaticRank: d.StaticRank}
}

// newAnalysedEntry is the queue entry of the page at u analysed by its
// caller with anchors; dp is copied (the caller releases it).
func newAnalysedEntry(u, host string, anchors []string, dp *docPostings, form *analysedForm) *queuedDoc {
	return &queuedDoc{
		doc:      &Document{URL: u, Host: host, StaticRank: dp.meta.static},
		analysed: true,
		anchors:  anchors,
		dp:       frozenPostings(dp),
		form:     form,
	}
}

// frozenPostings copies what the pending index reads of dp (meta, terms
// and their encodings) into memory of its own, for a page queued longer
// than its scratch space can be lent; releaseDoc ignores the copy.
func frozenPostings(dp *docPostings) *docPostings {
	n := 0
	for _, t := range dp.terms {
		n += len(t)
	}
	var b strings.Builder
	b.Grow(n)
	for _, t := range dp.terms {
		b.WriteString(t)
	}
	all := b.String()
	terms := make([]string, len(dp.terms))
	at := 0
	for i, t := range dp.terms {
		terms[i] = all[at : at+len(t)]
		at += len(t)
	}
	return &docPostings{meta: dp.meta, page: dp.page, parts: dp.parts, terms: terms, enc: slices.Clone(dp.enc), off: slices.Clone(dp.off)}
}

// analyse gives e its postings with the page's current anchors: it
// analyses a page not analysed yet, and replays the form of one analysed
// with other anchors (without a form it keeps the postings, and the flush
// leaves the page waiting for an anchor update). keepForm is set by Form, which
// needs the form whatever the cache keeps, and the postings to outlive
// the scratch space.
func (ix *Index) analyse(e *queuedDoc, keepForm bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	anchors, err := ix.loadAnchors(e.url)
	if e.err = err; err != nil {
		return // tried again at the next flush
	}
	switch {
	case !e.analysed:
		ix.putsAnalysed.Add(1)
		dp := ix.analyzeDoc(e.doc, anchors)
		var form *analysedForm
		if keepForm || ix.forms.wants(dp) {
			form = formOf(dp)
		}
		if keepForm {
			frozen := frozenPostings(dp)
			ix.releaseDoc(dp)
			dp = frozen
		}
		e.analysed, e.anchors, e.dp, e.form = true, anchors, dp, form
		if keepForm { // what a replay reads, if anchors arrive before the flush
			e.doc = &Document{URL: e.doc.URL, Host: e.doc.Host, StaticRank: e.doc.StaticRank}
		} else {
			e.doc = nil
		}
	case e.form != nil && e.doc != nil && !slices.Equal(anchors, e.anchors):
		dp, err := ix.replayForm(e.doc, e.form, anchors)
		if err != nil {
			return // keeps its postings; the flush leaves it waiting
		}
		if keepForm {
			frozen := frozenPostings(dp)
			ix.releaseDoc(dp)
			dp = frozen
		}
		ix.releaseDoc(e.dp)
		e.anchors, e.dp = anchors, dp
	}
}

// queuedForm is Form for a queued page: it is analysed now (the flush
// then uses that analysis). nil when u is not queued as id.
func (ix *Index) queuedForm(u string, id uint32) *analysedForm {
	ix.mu.Lock()
	e := ix.queuedURL[u]
	ix.mu.Unlock()
	if e == nil || e.id != id {
		return nil
	}
	ix.analyse(e, true)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.form
}

// queueLocked appends e, stored as docID e.id, to the queue. Callers hold
// ix.mu.
func (ix *Index) queueLocked(e *queuedDoc) {
	if prev := ix.queuedURL[e.url]; prev != nil && prev.keyed {
		e.keyed = true // the request outlives the page it replaced
	}
	ix.queued = append(ix.queued, e)
	ix.queuedURL[e.url] = e
	if !e.analysed {
		ix.queuedBytes += queuedSize(e.doc)
	}
}

// drainQueue analyses the queued pages (on all cores, without ix.mu) and
// adds their postings to the pending index in docID order. Pages put
// meanwhile wait for the next flush. On an error the pages not added go
// back to the front of the queue.
func (ix *Index) drainQueue(ctx context.Context) error {
	ix.mu.Lock()
	q := ix.queued
	ix.queued = nil
	ix.queuedBytes = 0
	// Pages deleted or replaced by now are not analysed (the words of a
	// later bitset may miss later deletions: addQueuedLocked checks again).
	gone := flushSnapshot{deleted: ix.deleted}
	ix.mu.Unlock()
	added := 0
	err := inWindows(ctx, len(q),
		func(i int) {
			if !gone.isDeleted(q[i].id) {
				ix.analyse(q[i], false)
			}
		},
		func(lo, hi int) error {
			ix.mu.Lock()
			defer ix.mu.Unlock()
			if err := ix.addQueuedLocked(q[lo:hi]); err != nil {
				return err
			}
			added = hi
			return nil
		})
	if err != nil {
		ix.mu.Lock()
		back := q[added:]
		for _, e := range back {
			if !e.analysed {
				ix.queuedBytes += queuedSize(e.doc)
			}
		}
		ix.queued = append(back, ix.queued...)
		ix.mu.Unlock()
	}
	return err
}

// addQueuedLocked adds analysed queued pages to the pending index. A page
// deleted or replaced since is dropped. A page whose recorded anchors are
// no longer those it was analysed with (AddAnchorsBatch does not hold mu
// while it merges) is left waiting for an anchor update; otherwise any update
// request it had is settled. Callers hold ix.mu; the pages' locks are held
// throughout, since Form may analyse a page it found queued before.
func (ix *Index) addQueuedLocked(q []*queuedDoc) error {
	for _, e := range q {
		e.mu.Lock()
		defer e.mu.Unlock()
	}
	for _, e := range q {
		if e.err != nil && !ix.isDeleted(e.id) {
			return fmt.Errorf("index: analyse %q: %w", e.url, e.err)
		}
	}
	current := make([]bool, len(q))
	txn := ix.db.NewTransaction(true)
	defer txn.Discard()
	now := time.Now()
	for i, e := range q {
		if ix.isDeleted(e.id) {
			continue
		}
		cur, err := anchorsIn(txn, e.url)
		if err != nil {
			return fmt.Errorf("index: add %q: %w", e.url, err)
		}
		current[i] = slices.Equal(cur, e.anchors)
		_, waiting := ix.anchorsDue[e.url]
		switch {
		case current[i] && (waiting || e.keyed):
			err = txn.Delete([]byte(prefixAnchorsChanged + e.url))
		case !current[i] && !waiting:
			err = txn.Set([]byte(prefixAnchorsChanged+e.url), nil)
		}
		if err != nil {
			return fmt.Errorf("index: add %q: %w", e.url, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("index: add queued pages: commit: %w", err)
	}
	if ix.pending == nil {
		ix.pending = newPendingIndex(ix.pendingHint)
	}
	for i, e := range q {
		if ix.queuedURL[e.url] == e {
			delete(ix.queuedURL, e.url)
		}
		if ix.isDeleted(e.id) {
			ix.releaseDoc(e.dp)
			e.dp = nil
			continue
		}
		_, waiting := ix.anchorsDue[e.url]
		switch {
		case current[i]:
			delete(ix.anchorsDue, e.url)
		case !waiting:
			ix.anchorsDue[e.url] = now
		}
		ix.setMetaLocked(e.id, e.dp.meta)
		ix.pending.add(e.id, e.dp)
		ix.forms.put(e.url, e.id, e.form)
		ix.releaseDoc(e.dp)
		e.dp, e.form, e.doc = nil, nil, nil
	}
	ix.publish()
	return nil
}

// setMetaLocked sets the metadata of a queued doc, whose placeholder
// (host and static rank) Put appended. Callers hold ix.mu.
func (ix *Index) setMetaLocked(id uint32, m docMeta) {
	ix.metaMu.Lock()
	defer ix.metaMu.Unlock()
	m.host = ix.metas[id].host
	ix.metas[id] = m
	ix.maxStatic = max(ix.maxStatic, m.static)
}

// isQueuedLocked reports whether the page at u is queued: the flush reads
// its anchors when it adds it. Callers hold ix.mu.
func (ix *Index) isQueuedLocked(u string) bool {
	_, ok := ix.queuedURL[u]
	return ok
}
