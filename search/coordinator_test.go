package search

import (
	"context"
	"errors"
	"fmt"
	"html"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"sou/index"
)

// openCoordShard opens a real index on a Badger in a temp directory.
func openCoordShard(t testing.TB) *index.Index { return openCoordShardWith(t, nil) }

// openCoordShardWith is openCoordShard with analyzer an (nil: the shared one).
func openCoordShardWith(t testing.TB, an *index.Analyzer) *index.Index {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	opts := index.DefaultOptions()
	opts.Analyzer = an
	ix, err := index.Open(db, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close(); db.Close() })
	return ix
}

var coordWords = strings.Fields(`search engine crawler index shard network peer query rank score
document page link anchor title body web host owner replica 搜索 引擎 网络 爬虫 索引 排序 文档 页面 链接 标题`)

func coordDoc(rng *rand.Rand, i int) *index.Document {
	pick := func(n int) string {
		var b strings.Builder
		for j := 0; j < n; j++ {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(coordWords[rng.IntN(len(coordWords))])
		}
		return b.String()
	}
	host := fmt.Sprintf("h%d.sim.test", i%17)
	d := &index.Document{
		URL: fmt.Sprintf("http://%s/p%d.html", host, i), Host: host,
		Title: pick(3), Body: pick(20 + rng.IntN(80)), Status: 200,
		FetchedAt: time.Unix(1700000000, 0), ContentType: "text/html", StaticRank: rng.Float64(),
	}
	d.ContentHash[0], d.ContentHash[1], d.ContentHash[2] = byte(i), byte(i>>8), 1
	d.SimHash = rng.Uint64()
	return d
}

// localTransport connects coordinators in one process through the real
// wire encoding.
type localTransport struct {
	self    string
	members []string
	peers   map[string]*Coordinator
	silent  map[string]bool // members that never answer
	// late members answer (correctly) only once the caller's deadline has
	// passed, as a peer that ignores the deadline would.
	late map[string]bool
	// forge rewrites a member's answer on the wire (a hostile shard), and
	// forgeSnippets its answer to a snippet request.
	forge         map[string]func(*ShardResult)
	forgeSnippets map[string]func(map[string]string)
	// holders maps a host to the member that holds it; nil = any member.
	holders map[string]string
	calls   atomic.Int64
}

// Holds makes localTransport a HostHolders.
func (t *localTransport) Holds(member, host string) bool {
	return t.holders == nil || t.holders[host] == member
}

func (t *localTransport) Self() string      { return t.self }
func (t *localTransport) Members() []string { return t.members }
func (t *localTransport) Request(ctx context.Context, m string, req []byte) ([]byte, error) {
	t.calls.Add(1)
	if t.silent[m] {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c, ok := t.peers[m]
	if !ok {
		return nil, errors.New("unknown member")
	}
	if t.late[m] {
		<-ctx.Done()
		ctx = context.Background()
	}
	b, err := c.HandleShardRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	version := c.analyzer.Version()
	r, err := DecodeShardRequest(req)
	if err != nil {
		return nil, err
	}
	if len(r.SnippetURLs) > 0 {
		if t.forgeSnippets[m] == nil {
			return b, nil
		}
		sn, err := DecodeSnippetResponse(b, version, r.SnippetURLs)
		if err != nil {
			return nil, err
		}
		t.forgeSnippets[m](sn)
		return EncodeSnippetResponse(version, r.SnippetURLs, sn)
	}
	if t.forge[m] == nil {
		return b, nil
	}
	q, err := ParseQuery(r.Query, c.analyzer)
	if err != nil {
		return nil, err
	}
	terms := q.Terms()
	res, err := DecodeShardResponse(b, version, terms, r.K)
	if err != nil {
		return nil, err
	}
	t.forge[m](res)
	// The wire names a term by its index in the query's: a forged term
	// the query lacks takes an index beyond them.
	for _, cand := range res.Candidates {
		for term := range cand.TF {
			if !slices.Contains(terms, term) {
				terms = append(terms, term)
			}
		}
	}
	return EncodeShardResponse(version, terms, res)
}

// network builds shards, puts each doc into one shard, and returns a
// coordinator per shard plus a single reference index holding every doc.
func network(t testing.TB, shards int, docs []*index.Document, place func(i int) int) ([]*Coordinator, []*localTransport, *Local) {
	t.Helper()
	return networkRef(t, shards, docs, place, func(int) bool { return true })
}

// networkRef is network with a reference index holding only the docs
// inRef selects (the pages of the shards whose answers should count).
func networkRef(t testing.TB, shards int, docs []*index.Document, place func(i int) int, inRef func(i int) bool) ([]*Coordinator, []*localTransport, *Local) {
	t.Helper()
	return networkWith(t, make([]*index.Analyzer, shards), docs, place, inRef)
}

// networkWith is networkRef with shard i analyzing with analyzers[i] (nil:
// the shared analyzer), the reference with the shared one.
func networkWith(t testing.TB, analyzers []*index.Analyzer, docs []*index.Document, place func(i int) int, inRef func(i int) bool) ([]*Coordinator, []*localTransport, *Local) {
	t.Helper()
	shards := len(analyzers)
	ref := openCoordShard(t)
	ixs := make([]*index.Index, shards)
	for i := range ixs {
		ixs[i] = openCoordShardWith(t, analyzers[i])
	}
	ctx := context.Background()
	for i, d := range docs {
		if err := ixs[place(i)].Put(ctx, d); err != nil {
			t.Fatal(err)
		}
		if !inRef(i) {
			continue
		}
		if err := ref.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, ix := range append(ixs, ref) {
		if err := ix.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, shards)
	for i := range names {
		names[i] = fmt.Sprintf("m%d", i)
	}
	peers := map[string]*Coordinator{}
	coords := make([]*Coordinator, shards)
	trs := make([]*localTransport, shards)
	cfg := DefaultCoordinatorConfig()
	for i := range coords {
		trs[i] = &localTransport{self: names[i], members: names, peers: peers, silent: map[string]bool{},
			late: map[string]bool{}, forge: map[string]func(*ShardResult){},
			forgeSnippets: map[string]func(map[string]string){}}
		coords[i] = NewCoordinator(NewLocal(ixs[i], cfg.Params), trs[i], cfg, nil)
		peers[names[i]] = coords[i]
	}
	return coords, trs, NewLocal(ref, cfg.Params)
}

// snippetHTML renders a result's snippet as index.Snippet would: escaped,
// highlights in <b>.
func snippetHTML(r Result) string {
	var b strings.Builder
	for _, p := range SnippetParts(r.Snippet, r.Highlights) {
		if p.Match {
			b.WriteString("<b>" + html.EscapeString(p.Text) + "</b>")
		} else {
			b.WriteString(html.EscapeString(p.Text))
		}
	}
	return b.String()
}

func TestDistributedScoresEqualSingleIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var docs []*index.Document
	for i := 0; i < 300; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, _, ref := network(t, 3, docs, func(i int) int { return (i % 17) % 3 })
	ctx := context.Background()
	for _, q := range []string{"search", "crawler index", "搜索引擎", "peer OR replica", `"search engine"`, "web -link", "网络 爬虫"} {
		t.Run(q, func(t *testing.T) {
			pq, err := ParseQuery(q, index.SharedAnalyzer())
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Search(ctx, pq, 10, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			for ci, c := range coords {
				got, err := c.Search(ctx, Request{Query: q, N: 10, Timeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				if !got.Coverage.Complete || got.Coverage.Answered != 3 {
					t.Fatalf("coordinator %d: coverage %+v", ci, got.Coverage)
				}
				if len(got.Results) != len(want.Candidates) {
					t.Fatalf("coordinator %d: %d results, reference %d", ci, len(got.Results), len(want.Candidates))
				}
				if got.Coverage.SnippetsMissing != 0 {
					t.Fatalf("coordinator %d: %d snippets missing", ci, got.Coverage.SnippetsMissing)
				}
				for i, r := range got.Results {
					w := want.Candidates[i]
					if math.Abs(r.Score-w.Score) > 1e-9*math.Max(1, math.Abs(w.Score)) {
						t.Errorf("coordinator %d rank %d: score %.12f (%s), reference %.12f (%s)", ci, i, r.Score, r.URL, w.Score, w.URL)
					}
					// Snippets made in the first round or fetched after
					// the merge are the ones a single index makes, as
					// text, with the same words highlighted.
					if got := snippetHTML(r); r.URL == w.URL && got != w.Snippet {
						t.Errorf("coordinator %d rank %d (%s): snippet %q, reference %q", ci, i, r.URL, got, w.Snippet)
					}
				}
				if got.Total != want.Total && want.TotalExact {
					t.Logf("total %d vs reference %d (pruned shards report lower bounds)", got.Total, want.Total)
				}
			}
		})
	}
}

// TestSnippetsFetchedAfterMerge covers the second round: shards answer
// without snippets, the results shown get theirs from their shard, local
// or remote, and a shard that does not answer leaves them missing,
// counted, and the page uncached.
func TestSnippetsFetchedAfterMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var docs []*index.Document
	for i := 0; i < 120; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, trs, _ := network(t, 3, docs, func(i int) int { return i % 3 })
	ctx := context.Background()
	req := Request{Query: "search", N: 10, Timeout: 5 * time.Second}
	full, err := coords[0].Search(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	shards := map[string]bool{}
	for _, r := range full.Results {
		if r.Snippet == "" {
			t.Fatalf("%s: no snippet", r.URL)
		}
		shards[r.Shard] = true
	}
	if len(shards) < 2 {
		t.Fatalf("results from %d shards; the test needs a local and a remote one", len(shards))
	}
	q, err := ParseQuery(req.Query, index.SharedAnalyzer())
	if err != nil {
		t.Fatal(err)
	}
	wire := EncodeShardRequest(ShardRequest{Analyzer: index.SharedAnalyzer().Version(), Query: req.Query, K: 50})
	b, err := coords[1].HandleShardRequest(ctx, wire)
	if err != nil {
		t.Fatal(err)
	}
	answer, err := DecodeShardResponse(b, index.SharedAnalyzer().Version(), q.Terms(), 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range answer.Candidates {
		if c.Snippet != "" || !c.NoSnippet {
			t.Fatalf("shard answer: %s with snippet %q; snippets are for the second round", c.URL, c.Snippet)
		}
	}
	part, err := coords[0].local.SearchSnippets(ctx, q, 10, 3, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(part.Candidates) <= 3 {
		t.Fatalf("%d candidates; the test needs more than 3", len(part.Candidates))
	}
	for i, c := range part.Candidates {
		if c.NoSnippet != (i >= 3) || (c.Snippet == "") != (i >= 3) {
			t.Fatalf("candidate %d: NoSnippet %v, snippet %q (snippets for the top 3 only)", i, c.NoSnippet, c.Snippet)
		}
	}
	stripped := func() []Result {
		rs := slices.Clone(full.Results)
		for i := range rs {
			rs[i].Snippet, rs[i].noSnippet = "", true
		}
		return rs
	}
	rs := stripped()
	if missing := coords[0].fillSnippets(ctx, q, rs); missing != 0 {
		t.Fatalf("%d snippets missing", missing)
	}
	highlightResults(q, rs)
	for i := range rs {
		if rs[i].Snippet != full.Results[i].Snippet || !slices.Equal(rs[i].Highlights, full.Results[i].Highlights) {
			t.Errorf("%s (shard %s): fetched %q %v, first round %q %v", rs[i].URL, rs[i].Shard,
				rs[i].Snippet, rs[i].Highlights, full.Results[i].Snippet, full.Results[i].Highlights)
		}
	}
	trs[0].silent["m1"] = true
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	rs = stripped()
	want := 0
	for _, r := range rs {
		if r.Shard == "m1" {
			want++
		}
	}
	if missing := coords[0].fillSnippets(sctx, q, rs); missing != want {
		t.Fatalf("%d snippets missing with m1 silent, want %d", missing, want)
	}
}

func TestDeadlineWithSilentPeer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var docs []*index.Document
	for i := 0; i < 60; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, trs, _ := network(t, 3, docs, func(i int) int { return i % 3 })
	trs[0].silent["m2"] = true
	start := time.Now()
	resp, err := coords[0].Search(context.Background(), Request{Query: "search", N: 10, Timeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("search took %v with a 150ms deadline", took)
	}
	cov := resp.Coverage
	if cov.Complete || cov.Asked != 3 || cov.Answered != 2 || cov.TimedOut != 1 {
		t.Fatalf("coverage %+v, want 2 of 3 answered and 1 timed out", cov)
	}
	var sawTimeout bool
	for _, s := range cov.Shards {
		if s.Member == "m2" && s.State == "timeout" {
			sawTimeout = true
		}
	}
	if !sawTimeout {
		t.Fatalf("shard statuses %+v do not name m2 as timed out", cov.Shards)
	}
	if len(resp.Results) == 0 {
		t.Fatal("no results from the two shards that answered")
	}
	// Partial answers are not cached: the next search asks again.
	before := trs[0].calls.Load()
	if _, err := coords[0].Search(context.Background(), Request{Query: "search", N: 10, Timeout: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if trs[0].calls.Load() == before {
		t.Fatal("a partial answer was served from the cache")
	}
}

func TestResultCacheHitsAndInvalidation(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var docs []*index.Document
	for i := 0; i < 40; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, trs, _ := network(t, 2, docs, func(i int) int { return i % 2 })
	ctx := context.Background()
	first, err := coords[0].Search(ctx, Request{Query: "crawler", N: 5, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached {
		t.Fatal("first search came from the cache")
	}
	calls := trs[0].calls.Load()
	tests := []struct {
		name   string
		req    Request
		cached bool
	}{
		{"same query", Request{Query: "crawler", N: 5, Timeout: 5 * time.Second}, true},
		{"extra spaces normalise", Request{Query: "  crawler ", N: 5, Timeout: 5 * time.Second}, true},
		{"other page", Request{Query: "crawler", N: 5, Page: 2, Timeout: 5 * time.Second}, false},
	}
	for _, tc := range tests {
		r, err := coords[0].Search(ctx, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if r.Cached != tc.cached {
			t.Errorf("%s: cached=%v, want %v", tc.name, r.Cached, tc.cached)
		}
		// Only an uncached page asks the peer (for candidates, then
		// for the snippets of its results on the page).
		if now := trs[0].calls.Load(); (now != calls) == tc.cached {
			t.Errorf("%s: remote calls %d after %d (cached %v)", tc.name, now, calls, tc.cached)
		}
		calls = trs[0].calls.Load()
	}
	coords[0].Invalidate()
	r, err := coords[0].Search(ctx, Request{Query: "crawler", N: 5, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Cached {
		t.Error("served from the cache after Invalidate")
	}
	if s := coords[0].CacheStats(); s.Hits < 2 {
		t.Errorf("cache stats %+v", s)
	}
}

func TestDuplicateCollapseAcrossShards(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a := coordDoc(rng, 1)
	a.Title, a.Body = "unique zebra title", "zebra zebra crossing and more zebra text"
	mirror := *a
	mirror.URL, mirror.Host = "http://mirror.sim.test/p1.html", "mirror.sim.test"
	mirror.Title = "zebra zebra zebra title" // the same content scoring higher: shown under a's shorter URL
	near := *a
	near.URL, near.Host = "http://near.sim.test/p1.html", "near.sim.test"
	near.ContentHash[5] = 9          // different exact hash
	near.SimHash = a.SimHash ^ 0b101 // 2 bits away
	other := coordDoc(rng, 2)
	other.Body = "zebra once"
	other.SimHash = ^a.SimHash
	docs := []*index.Document{a, &mirror, &near, other}
	coords, _, _ := network(t, 2, docs, func(i int) int { return i % 2 })
	resp, err := coords[1].Search(context.Background(), Request{Query: "zebra", N: 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 2 {
		t.Fatalf("got %d results, want 2 (three copies collapsed into one, plus the other page): %+v", len(resp.Results), resp.Results)
	}
	copies := map[string]bool{a.URL: true, mirror.URL: true, near.URL: true}
	for _, r := range resp.Results {
		if copies[r.URL] && len(r.Duplicates) != 2 {
			t.Errorf("%s lists duplicates %v, want the two other copies", r.URL, r.Duplicates)
		}
	}
	if !canonicalBefore(a.URL, mirror.URL) {
		t.Fatalf("test setup: %s should be the canonical copy of %s", a.URL, mirror.URL)
	}
	i := slices.IndexFunc(resp.Results, func(r Result) bool { return copies[r.URL] })
	if r := resp.Results[i]; r.URL != a.URL || r.Title != a.Title || !slices.Contains(r.Duplicates, mirror.URL) {
		t.Errorf("copies shown as %s (%q, duplicates %v), want the canonical copy %s listing %s", r.URL, r.Title, r.Duplicates, a.URL, mirror.URL)
	}
}

func TestSearchRejectsBadRequests(t *testing.T) {
	coords, _, _ := network(t, 1, nil, func(int) int { return 0 })
	tests := []Request{
		{Query: "", N: 10},
		{Query: "x", N: MaxResultsPerPage + 1},
		{Query: "x", Page: MaxPage + 1},
		{Query: "x", Page: -1},
		{Query: "x", Timeout: time.Hour},
		{Query: strings.Repeat("字", 20000)},
	}
	for _, req := range tests {
		if _, err := coords[0].Search(context.Background(), req); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Search(%.30q page=%d n=%d timeout=%v) = %v, want ErrBadRequest", req.Query, req.Page, req.N, req.Timeout, err)
		}
	}
}

// BenchmarkCoordinatorVsLocal measures what scatter-gather, global
// rescoring and the merge add to a search over the same documents: one
// local index versus four in-process shards (real wire encoding, no
// network, result cache off). The LAN figures with real libp2p streams come
// from `sou testnet run` (BENCHMARKS.md).
func BenchmarkCoordinatorVsLocal(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 11))
	var docs []*index.Document
	for i := 0; i < 4000; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, _, ref := network(b, 4, docs, func(i int) int { return (i % 17) % 4 })
	queries := []string{"search engine", "crawler", "搜索", "peer replica", "网络 爬虫", "index -shard"}
	ctx := context.Background()
	b.Run("local", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			q, _ := ParseQuery(queries[i%len(queries)], index.SharedAnalyzer())
			if _, err := ref.Search(ctx, q, 10, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("coordinator-4-shards", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			coords[0].Invalidate()
			if _, err := coords[0].Search(ctx, Request{Query: queries[i%len(queries)], N: 10}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// sameAsReference checks a page of results against the reference's ranked
// candidates: same URLs in the same order, same scores.
func sameAsReference(t *testing.T, got []Result, want []Candidate) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d results, reference %d", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		if r.URL != w.URL || math.Abs(r.Score-w.Score) > 1e-9*math.Max(1, math.Abs(w.Score)) {
			t.Errorf("rank %d: %s %.12f, reference %s %.12f", i, r.URL, r.Score, w.URL, w.Score)
		}
	}
}

// A hostile shard inflates the statistics it sends so that its pages
// would rank first. Each forgery is impossible for a real index, so the
// whole answer is refused and reported, and the results are exactly those
// of the honest shards (a single index over their pages).
func TestForgedShardStatisticsAreRejected(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	var docs []*index.Document
	for i := 0; i < 240; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	place := func(i int) int { return (i % 17) % 3 }
	const forger = "m2"
	coords, trs, ref := networkRef(t, 3, docs, place, func(i int) bool { return place(i) != 2 })
	forgerURLs := map[string]bool{}
	for i, d := range docs {
		if place(i) == 2 {
			forgerURLs[d.URL] = true
		}
	}
	inflateTF := func(r *ShardResult) {
		for i := range r.Candidates {
			for term, tf := range r.Candidates[i].TF {
				for f := range tf {
					tf[f] = tf[f]*1000 + 50
				}
				r.Candidates[i].TF[term] = tf
			}
		}
	}
	tests := []struct {
		name  string
		forge func(*ShardResult)
	}{
		{"tf beyond the field length", inflateTF},
		{"tiny field lengths", func(r *ShardResult) {
			for i := range r.Candidates {
				r.Candidates[i].FieldLen = [index.NumFields]uint32{1, 1, 1, 1}
			}
		}},
		{"df beyond the document count", func(r *ShardResult) {
			for term := range r.Stats.DF {
				r.Stats.DF[term] = r.Stats.Docs*10 + 100
			}
		}},
		{"negative field length sum", func(r *ShardResult) { r.Stats.FieldLenSum[2] = -1 }},
		{"absurd field length", func(r *ShardResult) {
			for i := range r.Candidates {
				r.Candidates[i].FieldLen[2] = 1 << 31
			}
		}},
		{"absurd document count", func(r *ShardResult) { r.Stats.Docs = 1 << 62 }},
		{"more candidates than asked", func(r *ShardResult) {
			for len(r.Candidates) <= 10+DefaultCoordinatorConfig().ShardK {
				c := r.Candidates[0]
				c.URL = fmt.Sprintf("%s?copy=%d", c.URL, len(r.Candidates))
				r.Candidates = append(r.Candidates, c)
			}
		}},
		{"statistics for terms not asked", func(r *ShardResult) {
			for i := range r.Candidates {
				r.Candidates[i].TF["zzz-not-asked"] = [index.NumFields]uint32{1, 0, 0, 0}
			}
		}},
		{"more candidates with the term than its df", func(r *ShardResult) {
			for term := range r.Stats.DF {
				r.Stats.DF[term] = 0
			}
		}},
		{"total beyond the document count", func(r *ShardResult) { r.Total = r.Stats.Docs * 100 }},
		{"negative static rank", func(r *ShardResult) { r.Candidates[0].StaticRank = -1e9 }},
		{"host that is not the URL's", func(r *ShardResult) { r.Candidates[0].Host = "elsewhere.test" }},
		// The last candidate's place, so that the answer has no more
		// candidates than asked.
		{"same URL twice", func(r *ShardResult) { r.Candidates[len(r.Candidates)-1] = r.Candidates[0] }},
		{"javascript: URL", func(r *ShardResult) { r.Candidates[0].URL = "javascript://" + r.Candidates[0].Host + "/%0Aalert(1)" }},
		{"URL with a space", func(r *ShardResult) { r.Candidates[0].URL = "http://" + r.Candidates[0].Host + "/a b" }},
		{"proximity beyond the occurrences", func(r *ShardResult) {
			for i := range r.Candidates {
				r.Candidates[i].Prox = []uint32{1 << 20}
			}
		}},
		{"proximity for pairs the query has not", func(r *ShardResult) { r.Candidates[0].Prox = []uint32{0, 0, 1} }},
		{"a snippet not asked for", func(r *ShardResult) { r.Candidates[0].Snippet, r.Candidates[0].NoSnippet = "forged", false }},
	}
	ctx := context.Background()
	const query = "search engine"
	pq, err := ParseQuery(query, index.SharedAnalyzer())
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Search(ctx, pq, 10, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The wire's decoder refuses what the wire's bounds exclude,
	// validateShardResult the rest.
	refusedByDecoder := map[string]bool{"more candidates than asked": true, "statistics for terms not asked": true, "proximity for pairs the query has not": true}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			coords[0].Invalidate()
			trs[0].forge[forger] = tc.forge
			defer delete(trs[0].forge, forger)
			resp, err := coords[0].Search(ctx, Request{Query: query, N: 10, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			cov := resp.Coverage
			if cov.Complete || cov.Answered != 2 || cov.Failed != 1 {
				t.Fatalf("coverage %+v, want the forger failed", cov)
			}
			refusal := "implausible"
			if refusedByDecoder[tc.name] {
				refusal = "decode shard response"
			}
			for _, s := range cov.Shards {
				if s.Member == forger && (s.State != "failed" || !strings.Contains(s.Error, refusal)) {
					t.Fatalf("forger's status %+v, want failed as %s", s, refusal)
				}
			}
			for _, r := range resp.Results {
				if forgerURLs[r.URL] {
					t.Fatalf("forged page %s merged", r.URL)
				}
			}
			sameAsReference(t, resp.Results, want.Candidates)
			if again, _ := coords[0].Search(ctx, Request{Query: query, N: 10, Timeout: 5 * time.Second}); again == nil || again.Cached {
				t.Fatal("an answer with a refused shard was cached")
			}
		})
	}
}

// The score a shard sends is ignored: a shard that claims a huge score for
// its pages with true statistics changes nothing.
func TestForgedScoreIsIgnored(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	var docs []*index.Document
	for i := 0; i < 120; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, trs, ref := network(t, 3, docs, func(i int) int { return (i % 17) % 3 })
	trs[0].forge["m2"] = func(r *ShardResult) {
		for i := range r.Candidates {
			r.Candidates[i].Score = 1e300
		}
	}
	pq, _ := ParseQuery("crawler", index.SharedAnalyzer())
	want, err := ref.Search(context.Background(), pq, 10, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := coords[0].Search(context.Background(), Request{Query: "crawler", N: 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Coverage.Complete {
		t.Fatalf("coverage %+v", resp.Coverage)
	}
	sameAsReference(t, resp.Results, want.Candidates)
}

// A shard injects results for hosts another member holds (its own pages
// relabelled, with plausible statistics). They are dropped and counted;
// the rest of its answer counts, and every result is the reference's.
func TestResultsForHostsAShardDoesNotHoldAreDropped(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	var docs []*index.Document
	for i := 0; i < 240; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	place := func(i int) int { return (i % 17) % 3 }
	coords, trs, ref := network(t, 3, docs, place)
	holders := map[string]string{}
	forgerURLs := map[string]bool{}
	for i, d := range docs {
		holders[d.Host] = fmt.Sprintf("m%d", place(i))
		if place(i) == 2 {
			forgerURLs[d.URL] = true
		}
	}
	trs[0].holders = holders
	// Every second candidate of m2 moves to host h0.sim.test, held by m0.
	injected := 0
	trs[0].forge["m2"] = func(r *ShardResult) {
		injected = 0
		for i := range r.Candidates {
			if i%2 == 0 {
				c := &r.Candidates[i]
				c.URL = strings.Replace(c.URL, c.Host, "h0.sim.test", 1)
				c.Host = "h0.sim.test"
				injected++
			}
		}
	}
	const query = "index"
	pq, _ := ParseQuery(query, index.SharedAnalyzer())
	all, err := ref.Search(context.Background(), pq, 1000, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := coords[0].Search(context.Background(), Request{Query: query, N: 10, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cov := resp.Coverage
	if cov.Answered != 3 || injected == 0 || cov.Dropped != injected {
		t.Fatalf("coverage %+v, %d injected", cov, injected)
	}
	// The reference without the pages m2 relabelled (every second of its
	// candidates, in its own rank order) and without anything it injected.
	var m2Rank []string
	for _, c := range all.Candidates {
		if forgerURLs[c.URL] {
			m2Rank = append(m2Rank, c.URL)
		}
	}
	relabelled := map[string]bool{}
	for i, u := range m2Rank {
		if i%2 == 0 && i < 10+DefaultCoordinatorConfig().ShardK {
			relabelled[u] = true
		}
	}
	var want []Candidate
	for _, c := range all.Candidates {
		if !relabelled[c.URL] && len(want) < 10 {
			want = append(want, c)
		}
	}
	for _, r := range resp.Results {
		if holders[r.Host] != r.Shard {
			t.Fatalf("%s answered by %s, held by %s", r.URL, r.Shard, holders[r.Host])
		}
	}
	sameAsReference(t, resp.Results, want)
}

// A shard that answers only after the deadline (ignoring it) is never
// merged, even when its answer and the deadline arrive together.
func TestLateAnswerAfterDeadlineIsIgnored(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	var docs []*index.Document
	for i := 0; i < 60; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	place := func(i int) int { return i % 3 }
	coords, trs, _ := network(t, 3, docs, place)
	lateURLs := map[string]bool{}
	for i, d := range docs {
		if place(i) == 1 {
			lateURLs[d.URL] = true
		}
	}
	trs[0].late["m1"] = true
	for round := 0; round < 20; round++ {
		coords[0].Invalidate()
		resp, err := coords[0].Search(context.Background(), Request{Query: "search", N: 10, Timeout: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range resp.Coverage.Shards {
			if s.Member == "m1" && s.State != "timeout" {
				t.Fatalf("round %d: late shard's status %+v", round, s)
			}
		}
		for _, r := range resp.Results {
			if lateURLs[r.URL] {
				t.Fatalf("round %d: late answer merged (%s)", round, r.URL)
			}
		}
	}
}

// Two nodes whose analyzers differ (one from before script folding) never
// merge each other's statistics or candidates: each coordinator reports
// the other as failed with both versions and ranks exactly as a single
// index over its own pages; the other shard does not even search.
func TestAnalyzerMismatchIsNotMerged(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	var docs []*index.Document
	for i := 0; i < 120; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	place := func(i int) int { return i % 2 }
	shared := index.SharedAnalyzer()
	older := shared.WithoutScriptFolding()
	if older.Version() == shared.Version() {
		t.Fatalf("both analyzers are version %q", shared.Version())
	}
	coords, trs, ref := networkWith(t, []*index.Analyzer{nil, older}, docs, place, func(i int) bool { return place(i) == 0 })
	ctx := context.Background()
	const query = "search engine"
	pq, err := ParseQuery(query, shared)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Search(ctx, pq, 10, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ci, c := range coords {
		self, other := trs[ci].self, trs[1-ci].self
		before := coords[1-ci].local.ix.Stats()
		resp, err := c.Search(ctx, Request{Query: query, N: 10, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		cov := resp.Coverage
		if cov.Complete || cov.Answered != 1 || cov.Failed != 1 {
			t.Fatalf("coordinator %s: coverage %+v, want %s failed", self, cov, other)
		}
		wantErr := fmt.Sprintf("analyzer version %q, want %q", coords[1-ci].analyzer.Version(), c.analyzer.Version())
		for _, s := range cov.Shards {
			if s.Member == other && (s.State != "failed" || s.Error != wantErr) {
				t.Errorf("coordinator %s: status of %s %+v, want failed with %q", self, other, s, wantErr)
			}
		}
		if len(resp.Results) == 0 {
			t.Fatalf("coordinator %s: no results", self)
		}
		for _, r := range resp.Results {
			if r.Shard != self {
				t.Errorf("coordinator %s: result %s from %s merged", self, r.URL, r.Shard)
			}
		}
		if ci == 0 {
			sameAsReference(t, resp.Results, want.Candidates)
		}
		if again, _ := c.Search(ctx, Request{Query: query, N: 10, Timeout: 5 * time.Second}); again == nil || again.Cached {
			t.Errorf("coordinator %s: an answer without %s was cached", self, other)
		}
		if after := coords[1-ci].local.ix.Stats(); after != before {
			t.Errorf("shard %s changed while refusing", other)
		}
	}
	// The refusal is the shard's own: asked by another version, it answers
	// with its version and no result, for candidates and for snippets.
	for _, u := range [][]string{nil, {docs[0].URL}} {
		var places [][]int8
		if u != nil {
			places = [][]int8{{termInBody, termInBody}}
		}
		req := EncodeShardRequest(ShardRequest{Analyzer: older.Version(), Query: query, K: 10, SnippetURLs: u, TermPlaces: places})
		b, err := coords[0].HandleShardRequest(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		r, err := responseBody(b, 1<<10, "answer", shared.Version())
		if err != nil || len(r.b) != 0 {
			t.Errorf("answer to another analyzer version: %v %x, want the version alone", err, b)
		}
	}
}

// TestDeepShardRequestsOneAtATime: a shard runs one request for more
// candidates than a first page needs at a time and refuses others while it
// runs (ErrDeepBusy); first-page requests are never held back by it.
func TestDeepShardRequestsOneAtATime(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var docs []*index.Document
	for i := 0; i < 60; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, _, _ := network(t, 2, docs, func(i int) int { return i % 2 })
	ctx := context.Background()
	shard := coords[1]
	ask := func(k int) error {
		wire := EncodeShardRequest(ShardRequest{Analyzer: index.SharedAnalyzer().Version(), Query: "search", K: k})
		_, err := shard.HandleShardRequest(ctx, wire)
		return err
	}
	tests := []struct {
		name      string
		k         int
		deepBusy  bool
		wantError error
	}{
		{"first page, nothing deep running", maxShallowK, false, nil},
		{"deep page, nothing deep running", maxShallowK + 1, false, nil},
		{"first page while a deep page runs", maxShallowK, true, nil},
		{"deepest page while a deep page runs", MaxPage*MaxResultsPerPage + 40, true, ErrDeepBusy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.deepBusy {
				shard.deep <- struct{}{} // a deep request in flight
				defer func() { <-shard.deep }()
			}
			if err := ask(tc.k); !errors.Is(err, tc.wantError) {
				t.Fatalf("k=%d: %v, want %v", tc.k, err, tc.wantError)
			}
		})
	}
	if len(shard.deep) != 0 {
		t.Fatal("a finished deep request kept its slot")
	}
}

// A query in Latin letters tells no script, so of a help page's English,
// Simplified and Traditional copies (the same English text, each with its
// language's navigation) the reader's comes first when the request names
// the reader's script; without it the shortest, the English, does. The
// shards choose their candidates with the reader's script too (a shard
// asked for one candidate returns the reader's copy), and a cached answer
// for one reader is not served to another.
func TestReaderScriptPrefersTheReadersCopy(t *testing.T) {
	text := "The Calc service gives access to spreadsheets. Calc service methods: SetFormula, GetValue."
	docs := []*index.Document{
		{URL: "http://help.test/en-US/sf_calc.html", Host: "help.test", Title: "Calc service", Body: text},
		{URL: "http://help.test/zh-CN/sf_calc.html", Host: "help.test", Title: "Calc service", Body: "帮助内容 搜索这些说明 " + text + " 这个页面的评论"},
		{URL: "http://help.test/zh-TW/sf_calc.html", Host: "help.test", Title: "Calc service", Body: "說明內容 搜尋這些說明 " + text + " 這個頁面的評論"},
	}
	for _, d := range docs {
		d.Status, d.ContentType = 200, "text/html"
	}
	// The English and Simplified copies on one shard, the Traditional on
	// the other.
	coords, _, _ := network(t, 2, docs, func(i int) int { return i / 2 })
	ctx := context.Background()
	for _, tc := range []struct {
		script index.Script
		first  string
	}{
		{index.ScriptUnknown, docs[0].URL},
		{index.ScriptSimplified, docs[1].URL},
		{index.ScriptTraditional, docs[2].URL},
		{index.ScriptSimplified, docs[1].URL}, // again: may come from the cache
	} {
		var scores []float64
		for i, c := range coords {
			resp, err := c.Search(ctx, Request{Query: "calc service", N: 3, Script: tc.script})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Results) != 3 || resp.Results[0].URL != tc.first {
				t.Fatalf("reader's script %d, coordinator %d: %v, want %s first", tc.script, i, resp.Results, tc.first)
			}
			var s []float64
			for _, r := range resp.Results {
				s = append(s, r.Score)
			}
			if scores != nil && !slices.Equal(s, scores) {
				t.Errorf("reader's script %d: coordinator %d scores %v, coordinator 0 %v", tc.script, i, s, scores)
			}
			scores = s
		}
	}
	for _, tc := range []struct {
		script index.Script
		want   string
	}{{index.ScriptUnknown, docs[0].URL}, {index.ScriptSimplified, docs[1].URL}} {
		req := EncodeShardRequest(ShardRequest{Analyzer: index.SharedAnalyzer().Version(), Query: "calc service", Script: tc.script, K: 1})
		b, err := coords[0].HandleShardRequest(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParseQuery("calc service", index.SharedAnalyzer())
		if err != nil {
			t.Fatal(err)
		}
		res, err := DecodeShardResponse(b, index.SharedAnalyzer().Version(), q.Terms(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Candidates) != 1 || res.Candidates[0].URL != tc.want {
			t.Errorf("shard asked for one candidate for a reader of script %d: %v, want %s", tc.script, urls(res), tc.want)
		}
	}
	if _, err := coords[0].Search(ctx, Request{Query: "calc service", N: 3, Script: index.ScriptTraditional + 1}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("unknown reader's script: %v, want ErrBadRequest", err)
	}
}

// Of near-duplicate copies that score alike, the canonical one (the
// crawl's rule: the shorter URL) is shown, not the first in byte order,
// which put a mirror's host (help-gbk.) before the original's (help.).
func TestTiedNearDuplicatesShowTheCanonicalCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	orig := coordDoc(rng, 1)
	orig.URL, orig.Host = "http://help.sim.test/p1.html", "help.sim.test"
	orig.Title, orig.Body = "zebra title", "zebra crossing and more zebra text"
	mirror := *orig
	mirror.URL, mirror.Host = "http://help-gbk.sim.test/p1.html", "help-gbk.sim.test"
	mirror.ContentHash[5] ^= 1          // not the same text
	mirror.SimHash = orig.SimHash ^ 0b1 // but nearly
	if mirror.URL > orig.URL || !canonicalBefore(orig.URL, mirror.URL) {
		t.Fatal("test setup: the mirror must come first in byte order, the original be canonical")
	}
	coords, _, _ := network(t, 2, []*index.Document{&mirror, orig}, func(i int) int { return i })
	resp, err := coords[0].Search(context.Background(), Request{Query: "zebra", N: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 1 || resp.Results[0].URL != orig.URL || !slices.Equal(resp.Results[0].Duplicates, []string{mirror.URL}) {
		t.Fatalf("results %+v, want %s with the mirror as its duplicate", resp.Results, orig.URL)
	}
}

// A complete answer cached before a member joined is not served once it
// has: the answer is only as complete as the members it asked, and the
// coordinator may learn of the join (Invalidate) after its first search
// with the new member.
func TestResultCacheNamesMembers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var docs []*index.Document
	for i := 0; i < 40; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, trs, _ := network(t, 2, docs, func(i int) int { return i % 2 })
	ctx := context.Background()
	trs[0].members = []string{"m0"}
	req := Request{Query: "crawler", N: 5, Timeout: 50 * time.Millisecond}
	alone, err := coords[0].Search(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !alone.Coverage.Complete || alone.Cached {
		t.Fatalf("alone: coverage %+v, cached %v", alone.Coverage, alone.Cached)
	}
	if again, err := coords[0].Search(ctx, req); err != nil || !again.Cached {
		t.Fatalf("the same members: cached %v, err %v", again != nil && again.Cached, err)
	}
	trs[0].members = []string{"m1", "m0"}
	trs[0].silent["m1"] = true
	joined, err := coords[0].Search(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if joined.Cached || joined.Coverage.Complete || joined.Coverage.Asked != 2 || joined.Coverage.TimedOut != 1 {
		t.Fatalf("after a join: cached %v, coverage %+v; want asked 2, 1 timed out", joined.Cached, joined.Coverage)
	}
}
