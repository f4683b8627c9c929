package search

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"sou/index"
)

// Transport is how the coordinator reaches the other shards. node adapts p2p
// to it; search knows nothing of libp2p.
type Transport interface {
	// Self is this node's member ID.
	Self() string
	// Members lists the live members, this node included.
	Members() []string
	// Request sends req to member and returns its answer, honouring ctx's
	// deadline.
	Request(ctx context.Context, member string, req []byte) ([]byte, error)
}

// HostHolders is implemented by a Transport that knows which members hold
// a host (its owner and replicas by this node's view). With it, the
// coordinator drops the results a member sends for hosts it does not hold:
// a peer cannot inject pages into the answer for hosts that honest peers
// own. Without it (tests, a single node) every result is accepted.
type HostHolders interface {
	// Holds reports whether member may answer for host.
	Holds(member, host string) bool
}

// CoordinatorConfig tunes the scatter-gather.
type CoordinatorConfig struct {
	// Deadline is the default overall time a search may take.
	Deadline time.Duration
	// MaxDeadline caps what a caller may ask for.
	MaxDeadline time.Duration
	// ShardK is the number of candidates each shard returns beyond what the
	// requested page needs, so that global rescoring can promote a document
	// that a shard's local statistics ranked lower.
	ShardK int
	// CacheEntries and CacheTTL size the result cache.
	CacheEntries int
	CacheTTL     time.Duration
	// NearDupDistance is the SimHash distance at or below which two results
	// are collapsed as near-duplicates.
	NearDupDistance int
	Params          Params
}

// DefaultCoordinatorConfig suits a LAN or a small WAN network.
func DefaultCoordinatorConfig() CoordinatorConfig {
	return CoordinatorConfig{
		Deadline:        800 * time.Millisecond,
		MaxDeadline:     10 * time.Second,
		ShardK:          40,
		CacheEntries:    500,
		CacheTTL:        30 * time.Second,
		NearDupDistance: 3,
		Params:          DefaultParams(),
	}
}

// Request is one search as a user asks it.
type Request struct {
	Query   string
	Page    int // 1-based
	N       int // results per page
	Timeout time.Duration
	// Script is the script the reader reads Chinese in (from their
	// language: zh-CN Simplified, zh-TW Traditional), ScriptUnknown if
	// not known. A query whose own characters do not tell a script (Latin
	// letters, or Han characters both scripts use) prefers pages in it,
	// as a query in one script prefers its own (Params.SameScript).
	Script index.Script
}

// MaxResultsPerPage bounds Request.N.
const MaxResultsPerPage = 100

// MaxPage bounds Request.Page: at most 1,000 results can be paged
// through (10 pages of 100), and a shard is never asked for more than
// MaxPage·MaxResultsPerPage plus ShardK candidates. A deeper page would
// make every shard rank thousands of candidates for one request.
const MaxPage = 10

// Result is one ranked hit. Title and Snippet are plain text, never HTML:
// whoever shows them escapes them.
type Result struct {
	URL     string `json:"url"`
	Title   string `json:"title"`
	Snippet string `json:"snippet"`
	// Highlights are the query-term matches in Snippet, found by this
	// coordinator: [start, end) offsets in Unicode code points, in order,
	// not overlapping (see SnippetParts).
	Highlights [][2]int `json:"highlights,omitempty"`
	Host       string   `json:"host"`
	Score      float64  `json:"score"`
	Shard      string   `json:"shard"`
	// Duplicates are other URLs with the same or nearly the same content.
	Duplicates []string `json:"duplicates,omitempty"`
	simhash    uint64
	noSnippet  bool // the snippet is still to come from its shard
	// termPlaces says where the page has each query term (see
	// Local.Snippets).
	termPlaces []int8
}

// ShardStatus says what became of one member's part of a search.
type ShardStatus struct {
	Member    string  `json:"member"`
	State     string  `json:"state"` // answered, timeout, failed
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
	Hits      int     `json:"hits"`
	// Dropped counts results refused because the member does not hold
	// their host.
	Dropped int `json:"dropped,omitempty"`
}

// Coverage reports which members contributed.
type Coverage struct {
	Asked    int `json:"asked"`
	Answered int `json:"answered"`
	TimedOut int `json:"timed_out"`
	Failed   int `json:"failed"`
	// Dropped counts results refused because their shard does not hold
	// their host (see HostHolders).
	Dropped int `json:"dropped,omitempty"`
	// SnippetsMissing counts results on the page shown without a snippet
	// because their shard did not answer the snippet request in time.
	SnippetsMissing int           `json:"snippets_missing,omitempty"`
	Complete        bool          `json:"complete"`
	Shards          []ShardStatus `json:"shards"`
}

// Response is a page of results with its coverage.
type Response struct {
	Query     string    `json:"query"`
	Terms     []string  `json:"terms"`
	Page      int       `json:"page"`
	N         int       `json:"n"`
	Total     int64     `json:"total"`
	Results   []Result  `json:"results"`
	Coverage  Coverage  `json:"coverage"`
	Cached    bool      `json:"cached"`
	ElapsedMS float64   `json:"elapsed_ms"`
	At        time.Time `json:"at"`
}

// Coordinator runs searches across the network and answers other
// coordinators' shard requests with this node's local shard.
type Coordinator struct {
	local     *Local
	transport Transport
	cfg       CoordinatorConfig
	analyzer  *index.Analyzer
	cache     *resultCache
	lat       *latencyTracker
	// hostFilter restricts a shard answer to the hosts this node owns
	// (replicas hold pages they must not answer for). nil = all.
	hostFilter func(host string) bool
	// deep admits one shard request for more than maxShallowK candidates
	// at a time (see ErrDeepBusy).
	deep chan struct{}
}

// maxShallowK is the most candidates a coordinator asks of a shard for a
// first page (N up to MaxResultsPerPage plus its ShardK).
const maxShallowK = MaxResultsPerPage + 100

// ErrDeepBusy refuses a shard request for more than maxShallowK
// candidates while another runs. The cost of a shard search grows with
// the candidates asked for, and a member may ask for up to
// MaxPage·MaxResultsPerPage: without this, a member asking for the most
// at once keeps the shard's search workers busy with them (the fair queue
// serves it in turn, but each turn is long), and every first page waits.
// Deep pages are rare; one at a time keeps a worker for the others, and a
// deep page refused here comes back with that shard missing from its
// coverage.
var ErrDeepBusy = errors.New("busy: a search for a deep page is already running here")

// NewCoordinator returns a coordinator over local, reaching peers through
// t. Queries are analyzed with local's index's analyzer, whose version the
// coordinator announces and requires of every shard.
func NewCoordinator(local *Local, t Transport, cfg CoordinatorConfig, hostFilter func(string) bool) *Coordinator {
	return &Coordinator{
		local: local, transport: t, cfg: cfg, analyzer: local.ix.Analyzer(),
		cache: newResultCache(cfg.CacheEntries, cfg.CacheTTL), lat: newLatencyTracker(),
		hostFilter: hostFilter, deep: make(chan struct{}, 1),
	}
}

// Invalidate empties the result cache (membership changed, or pages
// arrived that could change answers).
func (c *Coordinator) Invalidate() { c.cache.clear() }

// PeerLatency returns the recent (EWMA) shard latency per member.
func (c *Coordinator) PeerLatency() map[string]time.Duration { return c.lat.snapshot() }

// ErrBadRequest wraps every problem with what the caller asked.
var ErrBadRequest = errors.New("bad search request")

// Search runs req across every live member with one deadline.
func (c *Coordinator) Search(ctx context.Context, req Request) (*Response, error) {
	start := time.Now()
	if req.Page == 0 {
		req.Page = 1
	}
	if req.N == 0 {
		req.N = 10
	}
	if req.Page < 1 || req.Page > MaxPage {
		return nil, fmt.Errorf("%w: page must be 1..%d", ErrBadRequest, MaxPage)
	}
	if req.N < 1 || req.N > MaxResultsPerPage {
		return nil, fmt.Errorf("%w: n must be 1..%d", ErrBadRequest, MaxResultsPerPage)
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = c.cfg.Deadline
	}
	if timeout < 0 || timeout > c.cfg.MaxDeadline {
		return nil, fmt.Errorf("%w: timeout must be between 1ms and %v", ErrBadRequest, c.cfg.MaxDeadline)
	}
	if req.Script > index.ScriptTraditional {
		return nil, fmt.Errorf("%w: unknown script %d", ErrBadRequest, req.Script)
	}
	q, err := ParseQuery(req.Query, c.analyzer)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	q.preferScript(req.Script)
	// An answer is only as complete as the membership it asked: one
	// cached before a member joined must not be served after.
	members := c.transport.Members()
	key := cacheKey(q, req.Page, req.N, members)
	if r, ok := c.cache.get(key); ok {
		cp := *r
		cp.Cached = true
		cp.ElapsedMS = msSince(start)
		return &cp, nil
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Shards answer without snippets; the page's results get theirs in a
	// second round (fillSnippets), so no shard builds a snippet that is not
	// shown.
	answers, cov := c.scatter(ctx, q, req.Page*req.N+c.cfg.ShardK, members)

	// Sum collection statistics into global ones, then rescore every
	// candidate with them: a document's score no longer depends on which
	// shard held it.
	global := &CollectionStats{DF: map[string]int64{}}
	var total int64
	for _, a := range answers {
		global.Add(&a.res.Stats)
		total += a.res.Total
	}
	var all []scored
	for _, a := range answers {
		for i := range a.res.Candidates {
			cand := &a.res.Candidates[i]
			all = append(all, scored{c: cand, shard: a.member, score: Score(c.cfg.Params, global, q, cand)})
		}
	}
	results := c.merge(all, q.Terms())
	resp := &Response{
		Query: req.Query, Terms: q.Terms(), Page: req.Page, N: req.N, Total: total,
		Coverage: cov, At: time.Now(),
	}
	from := (req.Page - 1) * req.N
	if from < len(results) {
		resp.Results = results[from:min(len(results), from+req.N)]
	}
	if resp.Results == nil {
		resp.Results = []Result{}
	}
	resp.Coverage.SnippetsMissing = c.fillSnippets(ctx, q, resp.Results)
	highlightResults(q, resp.Results)
	resp.ElapsedMS = msSince(start)
	if cov.Complete && resp.Coverage.SnippetsMissing == 0 {
		c.cache.put(key, resp)
	}
	return resp, nil
}

type scored struct {
	c     *Candidate
	shard string
	score float64
}

type shardAnswer struct {
	member string
	res    *ShardResult
}

// scatter asks every member at once and gathers until all answered or the
// deadline passed; a member that has not answered by then is reported, never
// waited for.
func (c *Coordinator) scatter(ctx context.Context, q *Query, k int, members []string) ([]shardAnswer, Coverage) {
	self := c.transport.Self()
	type reply struct {
		member  string
		res     *ShardResult
		err     error
		took    time.Duration
		dropped int
	}
	replies := make(chan reply, len(members))
	wire := EncodeShardRequest(ShardRequest{Analyzer: c.analyzer.Version(), Query: q.Raw(), Script: q.script, K: k})
	terms := q.Terms()
	for _, m := range members {
		go func(m string) {
			t0 := time.Now()
			var res *ShardResult
			var rerr error
			dropped := 0
			switch {
			case m == self:
				res, rerr = c.localShard(ctx, q, k)
			default:
				var b []byte
				b, rerr = c.transport.Request(ctx, m, wire)
				if rerr == nil {
					res, rerr = DecodeShardResponse(b, c.analyzer.Version(), terms, k)
				}
				if rerr == nil {
					rerr = validateShardResult(res, q, k)
				}
				if rerr == nil {
					dropped = c.dropUnheld(m, res)
				}
			}
			replies <- reply{member: m, res: res, err: rerr, took: time.Since(t0), dropped: dropped}
		}(m)
	}
	cov := Coverage{Asked: len(members)}
	var answers []shardAnswer
	pending := map[string]bool{}
	for _, m := range members {
		pending[m] = true
	}
	t0 := time.Now()
gather:
	for range members {
		select {
		case r := <-replies:
			delete(pending, r.member)
			st := ShardStatus{Member: r.member, LatencyMS: ms(r.took), Dropped: r.dropped}
			cov.Dropped += r.dropped
			switch {
			case r.err == nil && ctx.Err() != nil:
				// The answer and the deadline raced; the deadline wins, so
				// that no answer is ever merged after it.
				st.State = "timeout"
				st.Error = "answered after the deadline"
				cov.TimedOut++
				c.lat.observe(r.member, r.took)
			case r.err == nil:
				st.State = "answered"
				st.Hits = len(r.res.Candidates)
				cov.Answered++
				answers = append(answers, shardAnswer{member: r.member, res: r.res})
				c.lat.observe(r.member, r.took)
			case errors.Is(r.err, context.DeadlineExceeded) || ctx.Err() != nil:
				st.State = "timeout"
				st.Error = "no answer before the deadline"
				cov.TimedOut++
				c.lat.observe(r.member, r.took)
			default:
				st.State = "failed"
				st.Error = r.err.Error()
				if len(st.Error) > maxStatusErrorBytes {
					st.Error = st.Error[:maxStatusErrorBytes]
				}
				cov.Failed++
			}
			cov.Shards = append(cov.Shards, st)
		case <-ctx.Done():
			break gather
		}
	}
	for m := range pending {
		cov.TimedOut++
		cov.Shards = append(cov.Shards, ShardStatus{Member: m, State: "timeout", LatencyMS: msSince(t0), Error: "no answer before the deadline"})
		c.lat.observe(m, time.Since(t0))
	}
	sort.Slice(cov.Shards, func(i, j int) bool { return cov.Shards[i].Member < cov.Shards[j].Member })
	cov.Complete = cov.Answered == cov.Asked
	return answers, cov
}

// maxStatusErrorBytes bounds the error text a shard's status carries.
const maxStatusErrorBytes = 512

// dropUnheld removes from res the candidates whose host member does not
// hold by this node's view and returns how many it removed. The shard's
// statistics stay: they describe its own hosts, which it filtered by its
// own (possibly briefly different) view.
func (c *Coordinator) dropUnheld(member string, res *ShardResult) int {
	hh, ok := c.transport.(HostHolders)
	if !ok {
		return 0
	}
	// Candidates share few hosts, and Holds ranks members by distance
	// to the host each time.
	holds := map[string]bool{}
	kept := res.Candidates[:0]
	for _, cand := range res.Candidates {
		ok, seen := holds[cand.Host]
		if !seen {
			ok = hh.Holds(member, cand.Host)
			holds[cand.Host] = ok
		}
		if ok {
			kept = append(kept, cand)
		}
	}
	dropped := len(res.Candidates) - len(kept)
	res.Candidates = kept
	return dropped
}

// localShard answers for this node's shard: candidates without snippets.
func (c *Coordinator) localShard(ctx context.Context, q *Query, k int) (*ShardResult, error) {
	return c.local.SearchSnippets(ctx, q, k, 0, nil, c.hostFilter)
}

// HandleShardRequest answers another coordinator with this node's shard:
// candidates for a query, or the snippets of pages it asked for. A
// coordinator of another analyzer version gets this node's version and
// nothing else: its query's terms and this shard's are not comparable.
func (c *Coordinator) HandleShardRequest(ctx context.Context, req []byte) ([]byte, error) {
	r, err := DecodeShardRequest(req)
	if err != nil {
		return nil, err
	}
	version := c.analyzer.Version()
	if r.Analyzer != version {
		if len(r.SnippetURLs) > 0 {
			return EncodeSnippetResponse(version, nil, nil)
		}
		return EncodeShardResponse(version, nil, nil)
	}
	q, err := ParseQuery(r.Query, c.analyzer)
	if err != nil {
		return nil, fmt.Errorf("parse forwarded query: %w", err)
	}
	q.preferScript(r.Script)
	if len(r.SnippetURLs) > 0 {
		snips, err := c.local.Snippets(ctx, q, r.SnippetURLs, r.TermPlaces, c.hostFilter)
		if err != nil {
			return nil, err
		}
		return EncodeSnippetResponse(version, r.SnippetURLs, snips)
	}
	if r.K > maxShallowK {
		select {
		case c.deep <- struct{}{}:
			defer func() { <-c.deep }()
		default:
			return nil, ErrDeepBusy
		}
	}
	res, err := c.localShard(ctx, q, r.K)
	if err != nil {
		return nil, err
	}
	return EncodeShardResponse(version, q.Terms(), res)
}

// fillSnippets fetches the snippets of the results on the page from the
// shards that answered them, one request per shard, all at once, within
// ctx. It returns how many are still missing.
func (c *Coordinator) fillSnippets(ctx context.Context, q *Query, results []Result) int {
	byShard := map[string][]int{}
	for i := range results {
		if results[i].noSnippet {
			byShard[results[i].Shard] = append(byShard[results[i].Shard], i)
		}
	}
	if len(byShard) == 0 {
		return 0
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for member, idx := range byShard {
		urls := make([]string, len(idx))
		places := make([][]int8, len(idx))
		for j, i := range idx {
			urls[j], places[j] = results[i].URL, results[i].termPlaces
		}
		wg.Go(func() {
			snips, err := c.snippetsFrom(ctx, member, q, urls, places)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, i := range idx {
				if s, ok := snips[results[i].URL]; ok {
					results[i].Snippet, results[i].noSnippet = s, false
				}
			}
		})
	}
	wg.Wait()
	missing := 0
	for i := range results {
		if results[i].noSnippet {
			missing++
		}
	}
	return missing
}

func (c *Coordinator) snippetsFrom(ctx context.Context, member string, q *Query, urls []string, places [][]int8) (map[string]string, error) {
	if member == c.transport.Self() {
		return c.local.Snippets(ctx, q, urls, places, c.hostFilter)
	}
	version := c.analyzer.Version()
	wire := EncodeShardRequest(ShardRequest{Analyzer: version, Query: q.Raw(), K: 1, SnippetURLs: urls, TermPlaces: places})
	b, err := c.transport.Request(ctx, member, wire)
	if err != nil {
		return nil, err
	}
	return DecodeSnippetResponse(b, version, urls)
}

// candidatePlaces is termPlaces of a candidate's TFs, in terms' order.
func candidatePlaces(c *Candidate, terms []string) []int8 {
	tfs := make([][index.NumFields]uint32, len(terms))
	for i, t := range terms {
		tfs[i] = c.TF[t]
	}
	return termPlaces(tfs)
}

// highlightResults turns every snippet on the page into plain text with
// the shard's marks as highlights (readSnippet). Every shard's snippet is
// taken as text, this node's own included, so no shard's markup ever
// reaches a result.
func highlightResults(q *Query, results []Result) {
	terms := q.Terms()
	for i := range results {
		var marks [][2]int
		results[i].Snippet, marks = readSnippet(results[i].Snippet)
		if len(marks) == 0 {
			// A snippet the shard marked nothing in (a match in the title
			// or URL only, or a shard that does not mark) gets this
			// node's own highlights.
			marks = highlightRunes(results[i].Snippet, terms)
		}
		results[i].Highlights = marks
	}
}

// merge orders candidates by global score (URL as the tie-break, so every
// coordinator returns the same order) and collapses the same URL answered
// twice and exact or near duplicate content. Exact copies are shown under
// their canonical URL: a copy crawled before the canonical one was indexed
// too, and may score a little higher (its own URL words, anchors).
func (c *Coordinator) merge(all []scored, terms []string) []Result {
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		// Of copies that score alike (a mirror, a page's untranslated
		// copies) the canonical one comes first and is the one shown.
		return canonicalBefore(all[i].c.URL, all[j].c.URL)
	})
	var out []Result
	seenURL := map[string]int{}
	seenHash := map[[16]byte]int{}
	var zero [16]byte
	for _, s := range all {
		if _, ok := seenURL[s.c.URL]; ok {
			continue // the same page from another replica
		}
		if s.c.ContentHash != zero {
			if i, ok := seenHash[s.c.ContentHash]; ok {
				if canonicalBefore(s.c.URL, out[i].URL) {
					// The same content at its canonical URL (the copy the
					// crawlers keep, see crawl's canonicalBefore), shown at
					// the rank of the best-scored copy.
					out[i].Duplicates = append(out[i].Duplicates, out[i].URL)
					out[i].URL, out[i].Title, out[i].Host, out[i].Shard = s.c.URL, s.c.Title, s.c.Host, s.shard
					out[i].termPlaces = candidatePlaces(s.c, terms)
				} else {
					out[i].Duplicates = append(out[i].Duplicates, s.c.URL)
				}
				seenURL[s.c.URL] = i
				continue
			}
		}
		dup := -1
		if s.c.SimHash != 0 {
			for i := range out {
				if h := out[i].simhash; h != 0 && bits.OnesCount64(h^s.c.SimHash) <= c.cfg.NearDupDistance {
					dup = i
					break
				}
			}
		}
		if dup >= 0 {
			out[dup].Duplicates = append(out[dup].Duplicates, s.c.URL)
			seenURL[s.c.URL] = dup
			continue
		}
		seenURL[s.c.URL] = len(out)
		if s.c.ContentHash != zero {
			seenHash[s.c.ContentHash] = len(out)
		}
		out = append(out, Result{
			URL: s.c.URL, Title: s.c.Title, Host: s.c.Host,
			Score: s.score, Shard: s.shard, simhash: s.c.SimHash, noSnippet: true,
			termPlaces: candidatePlaces(s.c, terms),
		})
	}
	return out
}

// canonicalBefore is crawl's rule for which of two copies of one content is
// canonical: the shorter URL, then byte order.
func canonicalBefore(a, b string) bool {
	return len(a) < len(b) || len(a) == len(b) && a < b
}

// cacheKey names an answer by its normalised query, script, page and
// size, and the members it asks (in any order).
func cacheKey(q *Query, page, n int, members []string) string {
	ms := slices.Sorted(slices.Values(members))
	return fmt.Sprintf("%s\x00%d\x00%d\x00%d\x00%s", strings.Join(strings.Fields(q.Raw()), " "), q.script, page, n, strings.Join(ms, ","))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func msSince(t time.Time) float64 { return ms(time.Since(t)) }

// latencyTracker keeps an EWMA of each member's shard latency.
type latencyTracker struct {
	mu  sync.Mutex
	ewm map[string]time.Duration
}

func newLatencyTracker() *latencyTracker { return &latencyTracker{ewm: map[string]time.Duration{}} }

func (l *latencyTracker) observe(m string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.ewm[m]; ok {
		l.ewm[m] = (old*7 + d*3) / 10
	} else {
		l.ewm[m] = d
	}
}

func (l *latencyTracker) snapshot() map[string]time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]time.Duration, len(l.ewm))
	for k, v := range l.ewm {
		out[k] = v
	}
	return out
}
