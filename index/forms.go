package index

import (
	"encoding/binary"
	"sync"
)

// analysedForm is a page's analysis without its anchors: the tokens that
// analyzeDoc kept for the title and for the fields after it (headings,
// body, URL), in emission order, with positions relative to where each
// part starts. Anchors come last, from anchorBase on, so a page analysed
// with other anchors is these tokens as they are and the new anchors
// analysed: replaying a form gives the docPostings analyzeDoc would (a
// test checks it byte for byte), without normalising, folding or
// segmenting the page again. A page's replicas index it from its form.
type analysedForm struct {
	terms   string   // the distinct terms, concatenated
	termEnd []uint32 // terms[termEnd[i-1]:termEnd[i]] is term i
	// toks is, per kept token, the uvarint term index then the uvarint
	// gap from the previous token's position, modulo 2^32 (mostly 0 or 1;
	// a bigram may go back); the title starts at 0, the rest at
	// titleSpan.
	toks      []byte
	titleToks int    // the first titleToks tokens are the title's
	bodyFrom  int    // tokens from titleToks to bodyFrom are headings', then the body's
	urlFrom   int    // tokens from urlFrom on are the URL field's
	nToks     int    // all tokens
	titleSpan uint32 // where the rest starts: past the title and its gap
	page      script // the page's script, which the anchors' analysis takes
}

func (f *analysedForm) size() int {
	return len(f.terms) + 4*len(f.termEnd) + cap(f.toks) + formOverhead
}

// formOverhead approximates the cache entry, map slot and headers.
const formOverhead = 160

// formOf builds the form of dp, which analyzeDoc or replayForm filled.
// The form owns its terms.
func formOf(dp *docPostings) *analysedForm {
	parts := dp.parts
	f := &analysedForm{titleSpan: parts.titleSpan, page: dp.page}
	termBytes := 0
	for _, t := range dp.terms {
		termBytes += len(t)
	}
	terms := make([]byte, 0, termBytes)
	f.termEnd = make([]uint32, 0, len(dp.terms))
	// dp's term index -> the form's, plus one; dp.start is encode's
	// scratch, free once dp is encoded.
	used := dp.start[:0]
	for range dp.terms {
		used = append(used, 0)
	}
	n := parts.anchorsFrom
	toks := make([]byte, 0, 2*n+n/2)
	prev := uint32(0)
	for k := range n {
		if k == parts.titleEnd {
			prev = parts.titleSpan
		}
		t := dp.occTerm[k]
		if used[t] == 0 {
			terms = append(terms, dp.terms[t]...)
			f.termEnd = append(f.termEnd, uint32(len(terms)))
			used[t] = uint32(len(f.termEnd))
		}
		toks = binary.AppendUvarint(toks, uint64(used[t]-1))
		toks = binary.AppendUvarint(toks, uint64(dp.occPos[k]-prev))
		prev = dp.occPos[k]
	}
	dp.start = used
	f.terms, f.toks = string(terms), toks
	f.titleToks, f.bodyFrom, f.urlFrom, f.nToks = parts.titleEnd, parts.bodyFrom, parts.urlFrom, n
	return f
}

// analysisParts is where analyzeDoc's parts end: token counts (indexes
// into docPostings.occTerm) and positions.
type analysisParts struct {
	titleEnd, bodyFrom, urlFrom, anchorsFrom int
	titleSpan                                uint32
}

func (f *analysedForm) term(i uint64) (string, bool) {
	if i >= uint64(len(f.termEnd)) {
		return "", false
	}
	lo := uint32(0)
	if i > 0 {
		lo = f.termEnd[i-1]
	}
	return f.terms[lo:f.termEnd[i]], true
}

// formCache keeps the analysed forms of recently indexed pages, by URL
// and docID, for the pages' replicas (Form). Least recently used forms go
// past maxBytes. It is only an optimisation: a form is used only for the docID
// it was analysed for (docIDs are never reused, and a page's content
// changes only with its docID), and a page without one is analysed.
type formCache struct {
	mu       sync.Mutex
	maxBytes int
	bytes    int
	m        map[string]*formEntry
	head     formEntry // sentinel: head.next is the most recently used
}

type formEntry struct {
	url        string
	id         uint32
	form       *analysedForm
	prev, next *formEntry
}

func (e *formEntry) size() int { return len(e.url) + e.form.size() }

func newFormCache(maxBytes int) *formCache {
	c := &formCache{maxBytes: maxBytes, m: map[string]*formEntry{}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *formCache) enabled() bool { return c != nil && c.maxBytes > 0 }

// wants says whether dp's form could be kept: a form larger than a
// sixteenth of the cache is not (one long page would evict too many), so
// it is not built either (the size is estimated from dp's counts).
func (c *formCache) wants(dp *docPostings) bool {
	if !c.enabled() {
		return false
	}
	toks := dp.parts.anchorsFrom
	return 2*toks+4*len(dp.terms)+formOverhead <= c.maxBytes/16
}

func (c *formCache) unlink(e *formEntry) { e.prev.next, e.next.prev = e.next, e.prev }

func (c *formCache) pushFront(e *formEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// lookup returns the form of the page at u stored as docID id (moved to
// the front), or nil.
func (c *formCache) lookup(u string, id uint32) *analysedForm {
	if !c.enabled() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[u]
	if !ok || e.id != id {
		return nil
	}
	c.unlink(e)
	c.pushFront(e)
	return e.form
}

// Form returns the encoded analysed form (formwire.go) of the page at u
// stored as docID id, for the page's replicas (PutAnalysedBatch), when
// the form cache is on: a page still queued for the flush is analysed
// now (queue.go), an indexed one's form comes from the cache while the
// pages indexed after it fit; nil otherwise.
func (ix *Index) Form(u string, id uint32) []byte {
	f := ix.forms.lookup(u, id)
	if f == nil && ix.forms.enabled() {
		f = ix.queuedForm(u, id)
	}
	if f == nil {
		return nil
	}
	return appendForm(nil, f, ix.an.Version())
}

// put records that the page at u, stored as docID id, has form f.
func (c *formCache) put(u string, id uint32, f *analysedForm) {
	if !c.enabled() || f == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(u)
	e := &formEntry{url: u, id: id, form: f}
	if e.size() > c.maxBytes/16 {
		return // one long page would evict too many
	}
	c.m[u] = e
	c.bytes += e.size()
	c.pushFront(e)
	for c.bytes > c.maxBytes && c.head.prev != &c.head {
		c.removeLocked(c.head.prev.url)
	}
}

// drop forgets the page at u.
func (c *formCache) drop(u string) {
	if !c.enabled() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(u)
}

// removeLocked forgets the page at u; c.mu is held.
func (c *formCache) removeLocked(u string) {
	if e, ok := c.m[u]; ok {
		c.bytes -= e.size()
		c.unlink(e)
		delete(c.m, u)
	}
}
