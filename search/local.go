package search

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"

	"sou/index"
)

// DefaultSnippetRunes is the snippet length in characters.
const DefaultSnippetRunes = 160

// ShardResult is what one shard answers for a query.
type ShardResult struct {
	Stats      CollectionStats // this shard's statistics for the query's terms
	Candidates []Candidate     // best first
	Total      int64           // matching documents (see TotalExact)
	// TotalExact is false when pruning skipped documents without deciding
	// whether they match; Total is then a lower bound.
	TotalExact bool
}

// Local executes queries on one index shard.
type Local struct {
	ix           *index.Index
	p            Params
	SnippetRunes int
	dfs          dfCache
}

// NewLocal returns a local engine over ix with BM25F parameters p.
func NewLocal(ix *index.Index, p Params) *Local {
	return &Local{ix: ix, p: p.sanitized(), SnippetRunes: DefaultSnippetRunes}
}

// boundSlack inflates upper bounds so that floating-point rounding in the
// (monotone in exact arithmetic) score formula can never make a bound
// smaller than a real score.
const boundSlack = 1 + 1e-9

type termCursor struct {
	p         *index.Postings
	term      int // index in q.Terms()
	idf       float64
	bound     float64 // over the whole list
	blkLast   uint32
	blkBound  float64
	blkCached bool
}

// shallow returns the last docID and score bound of the block that may hold
// the first doc >= d.
func (c *termCursor) shallow(e *exec, d uint32) (uint32, float64) {
	last, h := c.p.ShallowAdvance(d)
	if h == nil {
		return index.NoMoreDocs, 0
	}
	if !c.blkCached || last != c.blkLast {
		c.blkLast, c.blkCached = last, true
		c.blkBound = termWeight(&e.p, c.idf, &e.avg, &h.MaxTF, &h.MinLen) * boundSlack
	}
	return last, c.blkBound
}

// rewind moves c back to its list's first doc.
func (c *termCursor) rewind() {
	c.p.Rewind()
	c.blkCached = false
}

type clauseExec struct {
	cursors []*termCursor
	phrase  bool
	pos     []int
}

type groupExec struct {
	clauses []clauseExec
	cursors []*termCursor
}

type hit struct {
	doc   uint32
	score float64
	tfs   [][index.NumFields]uint32
	prox  []uint32
}

// hitHeap is a min-heap on (score, -doc): the root is the worst hit kept.
// Docs are visited in increasing order, so on equal scores the earlier doc
// wins, which is also the exhaustive order (score desc, docID asc).
type hitHeap []hit

func (h hitHeap) Len() int { return len(h) }
func (h hitHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score < h[j].score
	}
	return h[i].doc > h[j].doc
}
func (h hitHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)   { *h = append(*h, x.(hit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type exec struct {
	p      Params
	avg    [index.NumFields]float64
	q      *Query
	terms  []string
	r      *index.Reader
	groups []groupExec
	excl   []clauseExec
	all    []*termCursor
	// hostOK is the verdict per host ID (index.Reader.HostID): 0 not
	// asked yet, hostAllowedYes or hostAllowedNo.
	hostOK []int8
	// [skipFrom, allowedAt): docIDs nextAllowed found on refused hosts;
	// allowedAt is the allowed doc that ends the run.
	skipFrom, allowedAt uint32
	filter              func(string) bool
	posBufs             [][]uint32
	tfs                 [][index.NumFields]uint32
	has                 []bool
	cur                 []*termCursor // per term, a cursor on the doc being evaluated
	idfs                []float64
	pruned              bool
	matched             int64
	staticUB            float64
	// relaxed: documents lacking terms match too (Params.Relax and
	// Query.Relaxable), each unit (term) with its cursor and penalty.
	relaxed bool
	units   []*termCursor
	pens    []float64
	// proxUB bounds the proximity part of any doc's score (0: no pairs
	// or proximity off); prox and pos are scratch for the counts.
	proxUB float64
	// positions: the cursors copy positions with their lists, since
	// proximity reads them for many documents and reading a block's
	// again from the store costs more than the copy.
	positions bool
	prox      []uint32
	pos       [2][]uint32
}

func (e *exec) open(c Clause, terms map[string]int) (clauseExec, error) {
	ce := clauseExec{phrase: c.Phrase, pos: c.Pos}
	for _, t := range c.Terms {
		p, err := e.r.Postings(t, c.Phrase || e.positions)
		if err != nil {
			return ce, err
		}
		ce.cursors = append(ce.cursors, &termCursor{p: p, term: terms[t]})
	}
	return ce, nil
}

// Search returns the top k documents for q. Statistics for scoring come
// from global when given (the coordinator's sums), else from this shard.
// hostFilter (nil = all) restricts results to hosts this shard should answer
// for. Execution is document-at-a-time over all required groups with
// block-max pruning: a run of documents is skipped when the sum of its
// blocks' score bounds cannot beat the k-th best score, so the result equals
// exhaustive scoring.
func (l *Local) Search(ctx context.Context, q *Query, k int, global *CollectionStats, hostFilter func(host string) bool) (*ShardResult, error) {
	return l.SearchSnippets(ctx, q, k, k, global, hostFilter)
}

// SearchSnippets is Search with snippets for only the best snippetTop
// candidates (none when snippetTop is 0); the others come back with
// NoSnippet set. A coordinator shows page·n results but asks each shard
// for page·n + ShardK candidates, and a snippet (scanning the page's text)
// is most of a candidate's cost on long pages, so it asks for none and
// fetches those of the results it shows with Snippets.
func (l *Local) SearchSnippets(ctx context.Context, q *Query, k, snippetTop int, global *CollectionStats, hostFilter func(host string) bool) (*ShardResult, error) {
	if q == nil || len(q.Groups) == 0 {
		return nil, ErrEmptyQuery
	}
	if k <= 0 {
		k = 10
	}
	k = min(k, 10000)
	r := l.ix.NewReader()
	defer r.Close()
	e := &exec{p: l.p, q: q, terms: q.Terms(), r: r, hostOK: make([]int8, r.NumHosts()), filter: hostFilter}
	e.positions = l.p.Prox > 0 && len(e.terms) > 1
	termIdx := make(map[string]int, len(e.terms))
	for i, t := range e.terms {
		termIdx[t] = i
	}
	for _, g := range q.Groups {
		var ge groupExec
		for _, c := range g.Clauses {
			ce, err := e.open(c, termIdx)
			if err != nil {
				return nil, fmt.Errorf("search: %w", err)
			}
			ge.clauses = append(ge.clauses, ce)
			ge.cursors = append(ge.cursors, ce.cursors...)
			e.all = append(e.all, ce.cursors...)
		}
		e.groups = append(e.groups, ge)
	}
	for _, c := range q.Exclude {
		ce, err := e.open(c, nil)
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		e.excl = append(e.excl, ce)
	}
	st, err := l.statsWith(ctx, r, e.terms, hostFilter)
	if err != nil {
		return nil, err
	}
	res := &ShardResult{Stats: *st}
	if global == nil {
		global = &res.Stats
	}
	e.avg = avgLens(global)
	for _, c := range e.all {
		c.idf = idf(global.Docs, global.DF[c.p.Term])
		c.bound = termWeight(&e.p, c.idf, &e.avg, &c.p.MaxTF, &c.p.MinLen) * boundSlack
	}
	e.idfs = make([]float64, len(e.terms))
	for i, t := range e.terms {
		e.idfs[i] = idf(global.Docs, global.DF[t])
	}
	// The static bound covers what a page gets whatever its terms: its
	// static rank and the script bonus.
	e.staticUB = (staticScore(&e.p, r.MaxStaticRank()) + sameScript(&e.p, q, q.script)) * boundSlack
	e.proxUB = proxBound(&e.p, e.idfs) * boundSlack
	e.tfs = make([][index.NumFields]uint32, len(e.terms))
	e.has = make([]bool, len(e.terms))
	e.cur = make([]*termCursor, len(e.terms))
	if e.proxUB > 0 {
		e.prox = make([]uint32, len(e.terms)-1)
	}

	h := make(hitHeap, 0, k)
	e.relaxed = e.p.Relax && q.Relaxable()
	e.resetSkips()
	if err := e.run(ctx, k, &h); err != nil {
		return nil, err
	}
	if e.relaxed {
		// The strict pass above scored the documents that have every
		// term; those lacking some are found next, against the k-th
		// score it reached, which prunes most of them unseen.
		for _, c := range e.all {
			c.rewind()
		}
		e.resetSkips()
		if err := e.runRelaxed(ctx, k, &h); err != nil {
			return nil, err
		}
	}
	for _, c := range e.all {
		if err := c.p.Err(); err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
	}
	res.Total, res.TotalExact = e.matched, !e.pruned
	hits := []hit(h)
	slices.SortFunc(hits, func(a, b hit) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return int(int64(a.doc) - int64(b.doc))
	})
	for _, ht := range hits {
		// Only candidates that get a snippet need the page's text; the
		// others are built from the record's uncompressed summary.
		withSnippet := len(res.Candidates) < snippetTop
		var sum *index.Summary
		var rec *index.PageRecord
		var err error
		if withSnippet {
			rec, err = r.Record(ht.doc)
			if err == nil {
				sum = &index.Summary{URL: rec.URL, Host: rec.Host, Title: rec.Title, ContentHash: rec.ContentHash, SimHash: rec.SimHash}
			}
		} else {
			sum, err = r.Summary(ht.doc)
		}
		if errors.Is(err, index.ErrNotFound) {
			continue // deleted after this view's metadata snapshot
		}
		if err != nil {
			return nil, fmt.Errorf("search: load doc %d: %w", ht.doc, err)
		}
		c := Candidate{
			URL: sum.URL, Host: sum.Host, Title: sum.Title,
			ContentHash: sum.ContentHash, SimHash: sum.SimHash,
			StaticRank: r.StaticRank(ht.doc), FieldLen: r.FieldLens(ht.doc), Script: r.Script(ht.doc),
			TF: make(map[string][index.NumFields]uint32, len(e.terms)),
		}
		for i, t := range e.terms {
			if ht.tfs[i] != ([index.NumFields]uint32{}) {
				c.TF[t] = ht.tfs[i]
			}
		}
		c.Prox = ht.prox
		if withSnippet {
			c.Snippet = l.snippet(rec, snippetTerms(e.terms, termPlaces(ht.tfs), rec), r.Script(ht.doc))
		} else {
			c.NoSnippet = true
		}
		c.Score = Score(l.p, global, q, &c)
		res.Candidates = append(res.Candidates, c)
	}
	return res, nil
}

// Where a page has a query term, as far as its snippet is concerned
// (termPlaces; the second round's request carries them, see Snippets).
const (
	termAbsent  int8 = iota // not in the body or the headings
	termInBody              // in the body
	termHeading             // in the headings only
)

// termPlaces says, per query term, where a page with these TFs has it.
func termPlaces(tfs [][index.NumFields]uint32) []int8 {
	out := make([]int8, len(tfs))
	for i, tf := range tfs {
		switch {
		case tf[index.FieldBody] > 0:
			out[i] = termInBody
		case tf[index.FieldHeading] > 0:
			out[i] = termHeading
		}
	}
	return out
}

// snippetTerms are the terms a snippet of rec looks for: those its text
// has (places, from the postings' TFs), so that the snippet does not
// search the whole text for a term that is only in the title, the URL or
// the anchors, or that a relaxed query's match lacks (a term not found
// makes the snippet analyze the page's text).
func snippetTerms(terms []string, places []int8, rec *index.PageRecord) []string {
	out := make([]string, 0, len(terms))
	for i, t := range terms {
		if places[i] == termInBody || len(rec.Body) < 200 && places[i] == termHeading {
			out = append(out, t)
		}
	}
	return out
}

func (l *Local) snippet(rec *index.PageRecord, terms []string, sc index.Script) string {
	body := rec.Body
	if len(rec.Headings) > 0 && len(body) < 200 {
		body = body + " " + rec.Headings[0]
	}
	return index.PageSnippet(body, terms, l.SnippetRunes, sc)
}

// Snippets returns q's snippets of the pages at urls that this shard holds
// (hostFilter, nil = all), by URL; a URL it does not hold or no longer
// has is left out. places[i] says where urls[i] has each of q's terms
// (termPlaces of its candidate's TFs), so that the snippet looks for the
// same terms as SearchSnippets would.
func (l *Local) Snippets(ctx context.Context, q *Query, urls []string, places [][]int8, hostFilter func(host string) bool) (map[string]string, error) {
	if q == nil {
		return nil, ErrEmptyQuery
	}
	terms := q.Terms()
	if len(places) != len(urls) {
		return nil, fmt.Errorf("search: snippets of %d pages with term places for %d", len(urls), len(places))
	}
	for _, p := range places {
		if len(p) != len(terms) {
			return nil, fmt.Errorf("search: term places for %d terms, the query has %d", len(p), len(terms))
		}
	}
	r := l.ix.NewReader()
	defer r.Close()
	out := make(map[string]string, len(urls))
	for i, u := range urls {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := r.RecordByURL(u)
		if errors.Is(err, index.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("search: snippet of %s: %w", u, err)
		}
		if hostFilter != nil && !hostFilter(rec.Host) {
			continue
		}
		out[u] = l.snippet(rec, snippetTerms(terms, places[i], rec), r.Script(rec.DocID))
	}
	return out, nil
}

func (e *exec) run(ctx context.Context, k int, h *hitHeap) error {
	if len(e.groups) == 0 {
		return nil
	}
	d := uint32(0)
	for iter := 0; d != index.NoMoreDocs; iter++ {
		if iter&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if h.Len() == k {
			theta := (*h)[0].score
			// Term-level bound first (cheap), then the block-max bound.
			ub := e.staticUB + e.proxUB
			for _, c := range e.all {
				ub += c.bound
			}
			if ub <= theta {
				e.pruned = true
				return nil
			}
			ub = e.staticUB + e.proxUB
			end := uint32(index.NoMoreDocs)
			for _, c := range e.all {
				last, b := c.shallow(e, d)
				ub += b
				end = min(end, last)
			}
			if ub <= theta {
				e.pruned = true
				if end == index.NoMoreDocs {
					return nil
				}
				d = end + 1
				continue
			}
		}
		next := d
		for gi := range e.groups {
			gmin := uint32(index.NoMoreDocs)
			for _, c := range e.groups[gi].cursors {
				gmin = min(gmin, c.p.Advance(d))
			}
			if gmin == index.NoMoreDocs {
				return nil
			}
			next = max(next, gmin)
		}
		if next > d {
			d = next
			continue
		}
		if a := e.nextAllowed(d); a != d {
			d = a
			continue
		}
		if err := e.evaluate(d, k, h); err != nil {
			return err
		}
		d++
	}
	return nil
}

func (e *exec) clauseMatches(c *clauseExec, d uint32) (bool, error) {
	for _, tc := range c.cursors {
		if tc.p.Doc() != d {
			return false, nil
		}
	}
	if !c.phrase {
		return true, nil
	}
	for len(e.posBufs) < len(c.cursors) {
		e.posBufs = append(e.posBufs, nil)
	}
	var err error
	for i, tc := range c.cursors {
		if e.posBufs[i], err = tc.p.Positions(e.posBufs[i][:0]); err != nil {
			return false, err
		}
	}
	return phraseAt(e.posBufs[:len(c.cursors)], c.pos), nil
}

// runRelaxed follows run for a relaxed query: a document matches when it
// has any of the query's terms, and pays missPenalty for those it lacks;
// run has scored (or pruned) every document that has them all, so this
// pass skips those and starts from the k-th score run reached.
// Document-at-a-time over the union of the terms' lists with MaxScore
// pruning: the terms are ordered by score bound, and once k hits are held,
// the longest prefix of them whose bounds, less the penalties of all the
// other terms, cannot beat the k-th score is non-essential: a document
// found only in their lists cannot enter, so candidates come from the
// other (essential) lists only. Each candidate's bound (the bounds of the
// terms it has, less the penalties of those it lacks) is checked before
// it is evaluated. Exact like run: ties break on docID, the visiting
// order.
func (e *exec) runRelaxed(ctx context.Context, k int, h *hitHeap) error {
	n := len(e.terms)
	e.units = make([]*termCursor, n)
	for _, c := range e.all {
		if e.units[c.term] == nil {
			e.units[c.term] = c
		}
	}
	e.pens = make([]float64, n)
	order := make([]int, 0, n)
	for i := range n {
		if e.units[i] == nil {
			return fmt.Errorf("search: relaxed query term %q has no cursor", e.terms[i])
		}
		e.pens[i] = e.p.Miss * e.idfs[i]
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch ba, bb := e.units[a].bound, e.units[b].bound; {
		case ba < bb:
			return -1
		case ba > bb:
			return 1
		}
		return 0
	})
	// ubOnly[j]: the bound of a document found in none of the lists
	// order[j:], that is of one having at most the terms order[:j].
	ubOnly := make([]float64, n+1)
	may := make([]bool, n) // per term: may the document have it
	for j := 0; j <= n; j++ {
		ub := e.staticUB
		for i, u := range order {
			may[u] = i < j
			if i < j {
				ub += e.units[u].bound
			} else {
				ub -= e.pens[u]
			}
		}
		ubOnly[j] = ub + e.proxBoundMay(may)
	}
	essential := 0 // order[:essential] are non-essential
	bounds := make([]float64, n)
	for iter := 0; ; iter++ {
		if iter&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if h.Len() == k {
			theta := (*h)[0].score
			for essential < n && ubOnly[essential+1] <= theta {
				essential++
				e.pruned = true
			}
			if essential == n {
				return nil
			}
		}
		d := uint32(index.NoMoreDocs)
		for _, u := range order[essential:] {
			d = min(d, e.units[u].p.Doc())
		}
		if d == index.NoMoreDocs {
			return nil
		}
		if a := e.nextAllowed(d); a != d {
			if a == index.NoMoreDocs {
				return nil
			}
			for _, u := range order[essential:] {
				e.units[u].p.Advance(a)
			}
			continue
		}
		if h.Len() == k {
			theta := (*h)[0].score
			// Block-max: the blocks each list holds at d bound every doc
			// up to the first of them to end; a run the sum cannot beat
			// is skipped without decoding.
			ub := e.staticUB
			end := uint32(index.NoMoreDocs)
			for _, u := range order {
				last, b := e.units[u].shallow(e, d)
				end = min(end, last)
				may[u] = last != index.NoMoreDocs
				if may[u] {
					ub += b
				} else {
					ub -= e.pens[u]
				}
			}
			if ub += e.proxBoundMay(may); ub <= theta {
				e.pruned = true
				if end == index.NoMoreDocs {
					return nil
				}
				for _, u := range order[essential:] {
					e.units[u].p.Advance(end + 1)
				}
				continue
			}
			// d itself: the terms it lacks pay instead of adding, the
			// essential ones known already, the others found by advancing
			// their cursors, best bound first, while d can still enter.
			ub = e.staticUB
			for _, u := range order {
				c := e.units[u]
				_, bounds[u] = c.shallow(e, d)
				may[u] = c.p.Doc() <= d
				if may[u] {
					ub += bounds[u]
				} else {
					ub -= e.pens[u]
				}
			}
			ub += e.proxBoundMay(may)
			for i := essential - 1; i >= 0 && ub > theta; i-- {
				u := order[i]
				c := e.units[u]
				if c.p.Doc() > d {
					continue // already paying for lacking the term
				}
				if c.p.Advance(d) != d {
					ub -= bounds[u] + e.pens[u]
				}
			}
			if ub <= theta {
				e.pruned = true
			} else {
				for _, u := range order[:essential] {
					e.units[u].p.Advance(d)
				}
				if err := e.evaluateRelaxed(d, k, h); err != nil {
					return err
				}
			}
		} else {
			for _, u := range order[:essential] {
				e.units[u].p.Advance(d)
			}
			if err := e.evaluateRelaxed(d, k, h); err != nil {
				return err
			}
		}
		for _, u := range order[essential:] {
			if c := e.units[u]; c.p.Doc() == d {
				c.p.Next()
			}
		}
	}
}

// excluded reports whether doc d matches one of the query's excluded
// clauses (-word, -"phrase").
func (e *exec) excluded(d uint32) (bool, error) {
	for ci := range e.excl {
		c := &e.excl[ci]
		for _, tc := range c.cursors {
			tc.p.Advance(d)
		}
		if ok, err := e.clauseMatches(c, d); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// evaluateRelaxed checks and scores doc d, which some term's cursor is on
// and every other's is past or on, on a host nextAllowed accepted; a doc
// with every term was run's.
func (e *exec) evaluateRelaxed(d uint32, k int, h *hitHeap) error {
	all := true
	for _, u := range e.units {
		if u.p.Doc() != d {
			all = false
			break
		}
	}
	if all || !e.r.Live(d) {
		return nil
	}
	if excluded, err := e.excluded(d); excluded || err != nil {
		return err
	}
	return e.score(d, k, h)
}

// phraseAt reports whether some p in lists[0] has p+rel[i]-rel[0] in
// lists[i] for every i (all lists sorted ascending).
func phraseAt(lists [][]uint32, rel []int) bool {
	idx := make([]int, len(lists))
	for _, p0 := range lists[0] {
		ok := true
		for i := 1; i < len(lists); i++ {
			want := int64(p0) + int64(rel[i]-rel[0])
			l := lists[i]
			for idx[i] < len(l) && int64(l[idx[i]]) < want {
				idx[i]++
			}
			if idx[i] >= len(l) {
				return false
			}
			if int64(l[idx[i]]) != want {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// nextAllowed returns the first docID from d on whose host the query and
// the shard's filter accept (NoMoreDocs if none). Most of a shard's
// documents can be replicas it holds for hosts it does not answer for, and
// a host's pages have neighbouring docIDs, so a pass jumps every cursor
// over such a run at once instead of visiting its documents. A pass visits
// docIDs in increasing order, so each scan resumes where the last ended.
func (e *exec) nextAllowed(d uint32) uint32 {
	if d >= e.skipFrom && d <= e.allowedAt {
		return e.allowedAt
	}
	e.skipFrom = d
	n := e.r.NumDocIDs()
	for ; d < n; d++ {
		if e.hostAllowed(e.r.HostID(d)) {
			e.allowedAt = d
			return d
		}
	}
	e.allowedAt = index.NoMoreDocs
	return index.NoMoreDocs
}

// resetSkips forgets nextAllowed's run, before a pass from docID 0.
func (e *exec) resetSkips() { e.skipFrom, e.allowedAt = 1, 0 }

const (
	hostAllowedYes int8 = 1
	hostAllowedNo  int8 = 2
)

// hostAllowed reports whether the query and the shard's host filter
// accept the host whose ID is hid, asking them once per host.
func (e *exec) hostAllowed(hid uint32) bool {
	switch e.hostOK[hid] {
	case hostAllowedYes:
		return true
	case hostAllowedNo:
		return false
	}
	host := e.r.HostName(hid)
	ok := e.q.MatchHost(host) && (e.filter == nil || e.filter(host))
	e.hostOK[hid] = hostAllowedNo
	if ok {
		e.hostOK[hid] = hostAllowedYes
	}
	return ok
}

// evaluate checks and scores doc d, on which every group has a cursor, on
// a host nextAllowed accepted.
func (e *exec) evaluate(d uint32, k int, h *hitHeap) error {
	if !e.r.Live(d) {
		return nil
	}
	for gi := range e.groups {
		g := &e.groups[gi]
		any := false
		for ci := range g.clauses {
			ok, err := e.clauseMatches(&g.clauses[ci], d)
			if err != nil {
				return err
			}
			if ok {
				any = true
				break
			}
		}
		if !any {
			return nil
		}
	}
	if excluded, err := e.excluded(d); excluded || err != nil {
		return err
	}
	return e.score(d, k, h)
}

// score scores doc d, which passed every check, from the cursors on it,
// and keeps it if it is among the best k so far.
func (e *exec) score(d uint32, k int, h *hitHeap) error {
	e.matched++
	clear(e.has)
	for _, c := range e.all {
		if c.p.Doc() == d && !e.has[c.term] {
			e.has[c.term] = true
			e.tfs[c.term] = c.p.TF()
			e.cur[c.term] = c
		}
	}
	lens := e.r.FieldLens(d)
	s := textScore(&e.p, e.idfs, &e.avg, e.tfs, e.has, &lens)
	if e.relaxed {
		s -= missPenalty(&e.p, e.idfs, e.has)
	}
	static := staticScore(&e.p, e.r.StaticRank(d))
	script := sameScript(&e.p, e.q, e.r.Script(d))
	var prox []uint32
	if e.prox != nil {
		// Positions are read only for a doc that could enter the top k
		// with the largest proximity its TFs allow.
		if h.Len() == k {
			root := (*h)[0]
			ub := (s + e.proxBoundTF() + script + static) * boundSlack
			if ub < root.score || ub == root.score && d > root.doc {
				return nil
			}
		}
		var err error
		if prox, err = e.proxCounts(); err != nil {
			return err
		}
		s += proxScore(&e.p, e.idfs, prox)
	}
	s += script
	s += static
	if h.Len() == k {
		root := (*h)[0]
		if s < root.score || s == root.score && d > root.doc {
			return nil
		}
	}
	tfs := make([][index.NumFields]uint32, len(e.terms))
	for i := range e.terms {
		if e.has[i] {
			tfs[i] = e.tfs[i]
		}
	}
	if prox != nil {
		prox = slices.Clone(prox)
	}
	if h.Len() == k {
		(*h)[0] = hit{doc: d, score: s, tfs: tfs, prox: prox}
		heap.Fix(h, 0)
	} else {
		heap.Push(h, hit{doc: d, score: s, tfs: tfs, prox: prox})
	}
	return nil
}

// proxBoundMay bounds the proximity part of a doc that has at most the
// terms may marks: only a pair of terms it may both have can count.
func (e *exec) proxBoundMay(may []bool) float64 {
	if e.proxUB == 0 {
		return 0
	}
	s := 0.0
	for i := 0; i+1 < len(e.terms); i++ {
		if may[i] && may[i+1] {
			s += e.p.Prox * min(e.idfs[i], e.idfs[i+1])
		}
	}
	return s * boundSlack
}

// proxBoundTF bounds the proximity part of the doc being evaluated by
// its TFs: a pair's count is at most either term's occurrences.
func (e *exec) proxBoundTF() float64 {
	s := 0.0
	for i := 0; i+1 < len(e.terms); i++ {
		if !e.has[i] || !e.has[i+1] {
			continue
		}
		x := min(tfSum(&e.tfs[i]), tfSum(&e.tfs[i+1]))
		s += e.p.Prox * min(e.idfs[i], e.idfs[i+1]) * float64(x) / (e.p.ProxK + float64(x))
	}
	return s
}

// proxCounts counts, for the doc being evaluated, how close each pair of
// neighbouring terms occurs (proxCount); nil when no pair is close.
func (e *exec) proxCounts() ([]uint32, error) {
	clear(e.prox)
	any := false
	prev := -1 // the term whose positions are in e.pos[0]
	for i := 0; i+1 < len(e.terms); i++ {
		if !e.has[i] || !e.has[i+1] {
			continue
		}
		var err error
		if prev != i {
			if e.pos[0], err = e.cur[i].p.Positions(e.pos[0][:0]); err != nil {
				return nil, err
			}
		}
		if e.pos[1], err = e.cur[i+1].p.Positions(e.pos[1][:0]); err != nil {
			return nil, err
		}
		e.prox[i] = proxCount(e.pos[0], e.pos[1], proxWindow)
		any = any || e.prox[i] > 0
		e.pos[0], e.pos[1] = e.pos[1], e.pos[0]
		prev = i + 1
	}
	if !any {
		return nil, nil
	}
	return e.prox, nil
}

func tfSum(tf *[index.NumFields]uint32) uint32 {
	n := uint32(0)
	for _, v := range tf {
		n += v
	}
	return n
}

// LocalStats returns this shard's statistics for q restricted to hosts
// passing hostFilter (nil = all), for a two-phase exact search.
func (l *Local) LocalStats(ctx context.Context, q *Query, hostFilter func(host string) bool) (*CollectionStats, error) {
	r := l.ix.NewReader()
	defer r.Close()
	return l.statsWith(ctx, r, q.Terms(), hostFilter)
}

// statsWith computes a shard's statistics over its live documents on hosts
// passing hostFilter (nil = all). Docs and FieldLenSum come from per-host
// aggregates. DF is always counted over live documents, never taken from
// the postings header: the header also counts documents replaced or deleted
// whose postings are not purged yet, and how many of those a node carries
// depends on its history (an owner updates a page's anchor field each
// time new anchor text arrives, which leaves stale anchor postings until
// a merge; a replica that takes the host over indexes the page once).
// Header DFs made the same page score differently on the owner and on the
// replica that took over from it, so a takeover reordered results. The
// count comes from the DF cache (dfcache.go), per host and exact while no
// document is deleted and no anchor field changes, summed over the hosts
// the filter keeps.
func (l *Local) statsWith(ctx context.Context, r *index.Reader, terms []string, hostFilter func(string) bool) (*CollectionStats, error) {
	var keep func(string) bool
	if hostFilter != nil {
		// Asked once per host for the collection and once per host of
		// each query term: remember the answers for this query.
		ok := map[string]bool{}
		keep = func(h string) bool {
			v, seen := ok[h]
			if !seen {
				v = hostFilter(h)
				ok[h] = v
			}
			return v
		}
	}
	st := &CollectionStats{DF: make(map[string]int64, len(terms))}
	all := keep == nil
	if !all {
		st.Docs, st.FieldLenSum, all = l.ix.HostStats(keep)
	}
	if all {
		st.Docs, st.FieldLenSum = r.Docs(), r.FieldLenSum()
		keep = nil
	}
	for _, t := range terms {
		if _, done := st.DF[t]; done {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		df, err := l.dfs.count(r, t, keep)
		if err != nil {
			return nil, err
		}
		st.DF[t] = df
	}
	return st, nil
}
