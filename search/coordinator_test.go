package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"sou/index"
)

// openShard opens a real index on a Badger in a temp directory.
func openCoordShard(t testing.TB) *index.Index {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(db, index.DefaultOptions(), nil)
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
	// forge rewrites a member's answer on the wire (a hostile shard).
	forge map[string]func(*ShardResult)
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
	if err != nil || t.forge[m] == nil {
		return b, err
	}
	res, err := decodeShardResponse(b)
	if err != nil {
		return nil, err
	}
	t.forge[m](res)
	return encodeShardResponse(res)
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
	ref := openCoordShard(t)
	ixs := make([]*index.Index, shards)
	for i := range ixs {
		ixs[i] = openCoordShard(t)
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
			late: map[string]bool{}, forge: map[string]func(*ShardResult){}}
		coords[i] = NewCoordinator(NewLocal(ixs[i], cfg.Params), trs[i], cfg, nil)
		peers[names[i]] = coords[i]
	}
	return coords, trs, NewLocal(ref, cfg.Params)
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
				for i, r := range got.Results {
					w := want.Candidates[i]
					if math.Abs(r.Score-w.Score) > 1e-9*math.Max(1, math.Abs(w.Score)) {
						t.Errorf("coordinator %d rank %d: score %.12f (%s), reference %.12f (%s)", ci, i, r.Score, r.URL, w.Score, w.URL)
					}
				}
				if got.Total != want.Total && want.TotalExact {
					t.Logf("total %d vs reference %d (pruned shards report lower bounds)", got.Total, want.Total)
				}
			}
		})
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
	}
	if trs[0].calls.Load() != calls+1 {
		t.Errorf("remote calls %d, want %d (only the uncached page asks the peer)", trs[0].calls.Load(), calls+1)
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

func TestShardWireRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("{"), []byte(`{"v":2,"q":"x","k":10}`), []byte(`{"v":1,"q":"x","k":-1}`), make([]byte, MaxQueryBytes+1000)} {
		if _, _, err := decodeShardRequest(b); err == nil {
			t.Errorf("decodeShardRequest(%.20q) accepted garbage", b)
		}
	}
	for _, b := range [][]byte{nil, []byte("[]"), []byte(`{"v":1}`), []byte(`{"v":1,"r":{"Stats":{"Docs":-5}}}`)} {
		if _, err := decodeShardResponse(b); err == nil {
			t.Errorf("decodeShardResponse(%.20q) accepted garbage", b)
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

func FuzzShardWire(f *testing.F) {
	f.Add([]byte(`{"v":1,"q":"search engine","k":50}`))
	f.Add([]byte(`{"v":1,"r":{"Stats":{"Docs":3,"DF":{"a":1}},"Candidates":[{"URL":"http://a/","TF":{"a":[1,0,2,0]}}],"Total":1}}`))
	f.Add([]byte(`{"v":1,"r":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if q, k, err := decodeShardRequest(b); err == nil && (k < 1 || len(q) > MaxQueryBytes+256) {
			t.Fatalf("accepted k=%d len(q)=%d", k, len(q))
		}
		if r, err := decodeShardResponse(b); err == nil && (r == nil || r.Stats.Docs < 0) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
