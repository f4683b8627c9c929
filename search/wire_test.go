package search

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sou/index"
)

// fuzzQuery is the query the fuzzed answers answer; its terms number the
// TFs and DFs on the wire.
var fuzzQuery = func() *Query {
	q, err := ParseQuery("a search engine", index.SharedAnalyzer())
	if err != nil {
		panic(err)
	}
	return q
}()

const fuzzK = 50

var fuzzAsked = []string{"http://a.test/", "http://b.test/x", "https://c.test/"}

func randString(rng *rand.Rand, maxLen int) string {
	b := make([]byte, rng.IntN(maxLen+1))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return string(b)
}

func randUint32(rng *rand.Rand) uint32 {
	switch rng.IntN(3) {
	case 0:
		return uint32(rng.IntN(4))
	case 1:
		return uint32(rng.IntN(1000))
	default:
		return rng.Uint32()
	}
}

func randInt64(rng *rand.Rand) int64 {
	switch rng.IntN(3) {
	case 0:
		return int64(rng.IntN(100))
	case 1:
		return -rng.Int64N(1 << 40)
	default:
		return rng.Int64()
	}
}

func randFloat(rng *rand.Rand) float64 {
	switch rng.IntN(4) {
	case 0:
		return rng.Float64()
	case 1:
		return math.Float64frombits(rng.Uint64()) // NaNs and infinities too
	case 2:
		return -rng.NormFloat64() * 1e6
	default:
		return 0
	}
}

// randShardResult is an answer to fuzzQuery with random values, valid or
// not, that the wire can carry: TFs and DFs for query terms only.
func randShardResult(rng *rand.Rand, terms []string, k int) *ShardResult {
	r := &ShardResult{Total: randInt64(rng), TotalExact: rng.IntN(2) == 0}
	r.Stats.Docs = max(0, randInt64(rng))
	r.Total = max(0, r.Total)
	for f := range r.Stats.FieldLenSum {
		r.Stats.FieldLenSum[f] = randInt64(rng)
	}
	for _, t := range terms {
		if rng.IntN(4) > 0 {
			if r.Stats.DF == nil {
				r.Stats.DF = map[string]int64{}
			}
			r.Stats.DF[t] = randInt64(rng)
		}
	}
	n := rng.IntN(k + 1)
	for range n {
		c := Candidate{
			URL: "http://" + randString(rng, 40), Host: randString(rng, 20), Title: randString(rng, 60),
			SimHash: rng.Uint64(), StaticRank: randFloat(rng), Script: index.Script(rng.IntN(256)), Score: randFloat(rng),
			NoSnippet: rng.IntN(2) == 0,
		}
		if rng.IntN(5) == 0 {
			c.Snippet = randString(rng, 100)
		}
		for i := range c.ContentHash {
			c.ContentHash[i] = byte(rng.IntN(256))
		}
		for f := range c.FieldLen {
			c.FieldLen[f] = randUint32(rng)
		}
		for _, t := range terms {
			if rng.IntN(3) > 0 {
				var tf [index.NumFields]uint32
				for f := range tf {
					tf[f] = randUint32(rng)
				}
				if c.TF == nil {
					c.TF = map[string][index.NumFields]uint32{}
				}
				c.TF[t] = tf
			}
		}
		for range rng.IntN(len(terms) + 1) {
			c.Prox = append(c.Prox, randUint32(rng))
		}
		r.Candidates = append(r.Candidates, c)
	}
	return r
}

// TestShardWireRoundTrip: every message decodes to exactly what was
// encoded, over random values.
func TestShardWireRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	terms := fuzzQuery.Terms()
	for i := range 500 {
		k := 1 + rng.IntN(60)
		want := randShardResult(rng, terms, k)
		b, err := EncodeShardResponse("v1", terms, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeShardResponse(b, "v1", terms, k)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !sameResult(got, want) {
			t.Fatalf("%d: decoded %+v, encoded %+v", i, got, want)
		}

		req := ShardRequest{Analyzer: randString(rng, 10) + "v", Query: randString(rng, 100), Script: index.Script(rng.IntN(3)), K: 1 + rng.IntN(maxShardK)}
		for range rng.IntN(4) {
			req.SnippetURLs = append(req.SnippetURLs, "h"+randString(rng, 30))
			p := make([]int8, 1+rng.IntN(MaxQueryTerms))
			for j := range p {
				p[j] = int8(rng.IntN(3))
			}
			req.TermPlaces = append(req.TermPlaces, p)
		}
		gotReq, err := DecodeShardRequest(EncodeShardRequest(req))
		if err != nil || !reflect.DeepEqual(gotReq, req) {
			t.Fatalf("%d: request %+v decoded as %+v, %v", i, req, gotReq, err)
		}

		snips := map[string]string{}
		for _, u := range fuzzAsked {
			if rng.IntN(2) == 0 {
				snips[u] = randString(rng, 200)
			}
		}
		b, err = EncodeSnippetResponse("v1", fuzzAsked, snips)
		if err != nil {
			t.Fatal(err)
		}
		gotSnips, err := DecodeSnippetResponse(b, "v1", fuzzAsked)
		if err != nil || !reflect.DeepEqual(gotSnips, snips) {
			t.Fatalf("%d: snippets %q decoded as %q, %v", i, snips, gotSnips, err)
		}
	}
}

// sameResult is reflect.DeepEqual, except that a float is compared by its
// bits (a NaN is not DeepEqual to itself).
func sameResult(a, b *ShardResult) bool {
	withoutFloats := func(r *ShardResult) *ShardResult {
		c := *r
		c.Candidates = slices.Clone(r.Candidates)
		for i := range c.Candidates {
			c.Candidates[i].StaticRank, c.Candidates[i].Score = 0, 0
		}
		return &c
	}
	if len(a.Candidates) != len(b.Candidates) {
		return false
	}
	for i := range a.Candidates {
		x, y := &a.Candidates[i], &b.Candidates[i]
		if math.Float64bits(x.StaticRank) != math.Float64bits(y.StaticRank) || math.Float64bits(x.Score) != math.Float64bits(y.Score) {
			return false
		}
	}
	return reflect.DeepEqual(withoutFloats(a), withoutFloats(b))
}

// TestShardWireEncodeRefusesWhatItCannotName: a TF or DF of a term the
// query lacks, or a snippet of a page not asked for, has no index on the
// wire.
func TestShardWireEncodeRefusesWhatItCannotName(t *testing.T) {
	terms := []string{"search", "engine"}
	for name, r := range map[string]*ShardResult{
		"df":  {Stats: CollectionStats{DF: map[string]int64{"search": 1, "other": 1}}},
		"tf":  {Candidates: []Candidate{{URL: "http://a/", TF: map[string][index.NumFields]uint32{"other": {1}}}}},
		"mix": {Candidates: []Candidate{{URL: "http://a/", TF: map[string][index.NumFields]uint32{"search": {1}, "other": {1}}}}},
	} {
		if _, err := EncodeShardResponse("v1", terms, r); err == nil {
			t.Errorf("%s: encoded a statistic for a term the query lacks", name)
		}
	}
	if _, err := EncodeSnippetResponse("v1", fuzzAsked, map[string]string{"http://other.test/": "x"}); err == nil {
		t.Error("encoded a snippet of a page not asked for")
	}
}

// goodShardResponse is a valid answer to fuzzQuery for fuzzK candidates.
func goodShardResponse(t testing.TB) []byte {
	terms := fuzzQuery.Terms()
	r := &ShardResult{
		Stats: CollectionStats{Docs: 10, DF: map[string]int64{terms[0]: 3, terms[len(terms)-1]: 1}, FieldLenSum: [index.NumFields]int64{40, 0, 900, 30, 5}},
		Candidates: []Candidate{{
			URL: "http://a.test/p", Host: "a.test", Title: "A search engine", SimHash: 7, StaticRank: 0.5, Score: 3.25, NoSnippet: true,
			FieldLen: [index.NumFields]uint32{3, 0, 90, 3, 1},
			TF:       map[string][index.NumFields]uint32{terms[0]: {1, 0, 4, 1, 0}},
			Prox:     make([]uint32, len(terms)-1),
		}},
		Total: 1, TotalExact: true,
	}
	b, err := EncodeShardResponse("x", terms, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func goodShardRequest() []byte {
	return EncodeShardRequest(ShardRequest{Analyzer: "x", Query: "search engine", Script: index.ScriptSimplified, K: fuzzK,
		SnippetURLs: []string{"http://a.test/"}, TermPlaces: [][]int8{{termInBody, termHeading}}})
}

func goodSnippetResponse(t testing.TB) []byte {
	b, err := EncodeSnippetResponse("x", fuzzAsked, map[string]string{fuzzAsked[1]: "a <b>hit</b>"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// msg builds a message from parts: a uint64 is a uvarint, a string is
// length-prefixed, a []byte goes as it is.
func msg(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case int:
			b = binary.AppendUvarint(b, uint64(p))
		case string:
			b = appendString(b, p)
		case []byte:
			b = append(b, p...)
		default:
			panic(fmt.Sprintf("msg part %T", p))
		}
	}
	return b
}

func TestShardWireRejectsGarbage(t *testing.T) {
	oneByte := func(v byte) []byte { return []byte{v} }
	good := goodShardRequest()
	requests := map[string][]byte{
		"empty":                  nil,
		"JSON of version 4":      []byte(`{"v":4,"a":"x","q":"x","k":10}`),
		"version 4":              msg(4, "x", "x", oneByte(0), 10, 0),
		"no analyzer version":    msg(5, "", "x", oneByte(0), 10, 0),
		"long analyzer version":  msg(5, strings.Repeat("x", maxAnalyzerVersionBytes+1), "x", oneByte(0), 10, 0),
		"long query":             msg(5, "x", strings.Repeat("x", MaxQueryBytes+1), oneByte(0), 10, 0),
		"no such script":         msg(5, "x", "x", oneByte(3), 10, 0),
		"k=0":                    msg(5, "x", "x", oneByte(0), 0, 0),
		"k too large":            msg(5, "x", "x", oneByte(0), maxShardK+1, 0),
		"too many pages":         msg(5, "x", "x", oneByte(0), 1, MaxResultsPerPage+1),
		"empty page URL":         msg(5, "x", "x", oneByte(0), 1, 1, "", 1, oneByte(1)),
		"long page URL":          msg(5, "x", "x", oneByte(0), 1, 1, strings.Repeat("x", maxCandidateURLBytes+1), 1, oneByte(1)),
		"too many term places":   msg(5, "x", "x", oneByte(0), 1, 1, "http://a.test/", MaxQueryTerms+1),
		"term place 3":           msg(5, "x", "x", oneByte(0), 1, 1, "http://a.test/", 1, oneByte(3)),
		"term place -1":          msg(5, "x", "x", oneByte(0), 1, 1, "http://a.test/", 1, oneByte(0xff)),
		"pages missing":          msg(5, "x", "x", oneByte(0), 1, 2, "http://a.test/", 1, oneByte(1)),
		"trailing byte":          append(slices.Clone(good), 0),
		"truncated":              good[:len(good)-1],
		"overlong varint k":      msg(5, "x", "x", oneByte(0), []byte{0x8a, 0x00}, 0),
		"oversized":              make([]byte, maxShardRequestBytes+1),
		"varint beyond 64 bits":  msg(5, "x", "x", oneByte(0), bytes.Repeat([]byte{0xff}, 11)),
		"string beyond the end":  msg(5, "x", 1000, "x"),
		"huge length, few bytes": msg(5, "x", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}),
	}
	for name, b := range requests {
		if r, err := DecodeShardRequest(b); err == nil {
			t.Errorf("request %s: accepted %+v", name, r)
		}
	}
	if _, err := DecodeShardRequest(good); err != nil {
		t.Errorf("refused a good request: %v", err)
	}

	terms := fuzzQuery.Terms()
	good = goodShardResponse(t)
	// body is a response to fuzzQuery from analyzer "x" with these fields
	// after the header and the statistics (no DFs, total 0, exact).
	stats := msg(20, 0, 0, 0, 0, 0)
	body := func(parts ...any) []byte { return msg(append([]any{5, "x", stats}, parts...)...) }
	cand := func(tfs ...any) []byte {
		return msg(append([]any{"http://a.test/", "a.test", "", "", make([]byte, 16+8+8), 1, 1, 1, 1, 1}, tfs...)...)
	}
	tail := msg(0, oneByte(0), make([]byte, 8), oneByte(1)) // no prox, script, score, no snippet
	responses := map[string][]byte{
		"empty":                     nil,
		"JSON of version 4":         []byte(`{"v":4,"a":"x","r":{"Stats":{"Docs":5}}}`),
		"version 4":                 msg(4, "x", stats, 0, 0, oneByte(1), 0),
		"other analyzer":            msg(5, "y", stats, 0, 0, oneByte(1), 0),
		"long analyzer":             msg(5, strings.Repeat("x", maxAnalyzerVersionBytes+1), stats, 0, 0, oneByte(1), 0),
		"no result":                 msg(5, "x"),
		"negative docs":             msg(5, "x", 9, 0, 0, 0, 0, 0, 0, 0, oneByte(1), 0),
		"negative total":            body(0, 1, oneByte(1), 0),
		"bool 2":                    body(0, 0, oneByte(2), 0),
		"more DFs than terms":       body(len(terms) + 1),
		"DF term beyond the query":  body(1, len(terms), 2, 0, oneByte(1), 0),
		"DF terms out of order":     body(2, 1, 2, 0, 2, 0, oneByte(1), 0),
		"DF term twice":             body(2, 0, 2, 0, 2, 0, oneByte(1), 0),
		"more candidates than k":    body(0, 0, oneByte(1), fuzzK+1, bytes.Repeat(cand(0, tail), fuzzK+1)),
		"candidates beyond the end": body(0, 0, oneByte(1), 5, cand(0, tail)),
		"TF term beyond the query":  body(0, 0, oneByte(1), 1, cand(1, len(terms), 1, 0, 0, 0, 0, tail)),
		"TF terms out of order":     body(0, 0, oneByte(1), 1, cand(2, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, tail)),
		"more TFs than terms":       body(0, 0, oneByte(1), 1, cand(len(terms)+1)),
		"TF beyond 32 bits":         body(0, 0, oneByte(1), 1, cand(1, 0, 1<<32, 0, 0, 0, 0, tail)),
		"more prox than terms":      body(0, 0, oneByte(1), 1, cand(0, len(terms)+1)),
		"long URL":                  body(0, 0, oneByte(1), 1, strings.Repeat("x", maxCandidateURLBytes+1)),
		"long title":                body(0, 0, oneByte(1), 1, "http://a.test/", "a.test", strings.Repeat("x", maxTitleBytes+1)),
		"long snippet":              body(0, 0, oneByte(1), 1, "http://a.test/", "a.test", "", strings.Repeat("x", maxSnippetBytes+1)),
		"trailing byte":             append(slices.Clone(good), 0),
		"truncated":                 good[:len(good)-1],
		"oversized":                 append(slices.Clone(good), make([]byte, MaxShardResponseBytes)...),
	}
	for name, b := range responses {
		if r, err := DecodeShardResponse(b, "x", terms, fuzzK); err == nil {
			t.Errorf("response %s: accepted %+v", name, r)
		}
	}
	for name, b := range map[string][]byte{"good": good, "no candidates": body(0, 0, oneByte(1), 0), "a bare candidate": body(0, 0, oneByte(1), 1, cand(0, tail))} {
		if _, err := DecodeShardResponse(b, "x", terms, fuzzK); err != nil {
			t.Errorf("refused a good response (%s): %v", name, err)
		}
	}
	if _, err := DecodeShardResponse(msg(5, "y", stats), "x", terms, fuzzK); err == nil || !strings.Contains(err.Error(), errAnalyzerMismatch.Error()) {
		t.Errorf("answer of another analyzer: %v, want %v", err, errAnalyzerMismatch)
	}

	good = goodSnippetResponse(t)
	snippets := map[string][]byte{
		"empty":                   nil,
		"JSON of version 4":       []byte(`{"v":4,"a":"x","sn":{}}`),
		"no snippets":             msg(5, "x"),
		"version 4":               msg(4, "x", 0),
		"other analyzer":          msg(5, "y", 0),
		"unasked page":            msg(5, "x", 1, len(fuzzAsked), "x"),
		"more pages than asked":   msg(5, "x", len(fuzzAsked)+1),
		"pages out of order":      msg(5, "x", 2, 1, "x", 0, "y"),
		"page twice":              msg(5, "x", 2, 1, "x", 1, "y"),
		"oversized snippet":       msg(5, "x", 1, 0, strings.Repeat("x", maxSnippetBytes+1)),
		"trailing byte":           append(slices.Clone(good), 0),
		"truncated":               good[:len(good)-1],
		"oversized":               make([]byte, maxSnippetResponseBytes+1),
		"snippet beyond the end":  msg(5, "x", 1, 0, 100, "x"),
		"count beyond the end":    msg(5, "x", 2, 0, "x"),
		"overlong varint in page": msg(5, "x", 1, []byte{0x80, 0x00}, "x"),
	}
	for name, b := range snippets {
		if sn, err := DecodeSnippetResponse(b, "x", fuzzAsked); err == nil {
			t.Errorf("snippet response %s: accepted %q", name, sn)
		}
	}
	if sn, err := DecodeSnippetResponse(good, "x", fuzzAsked); err != nil || !reflect.DeepEqual(sn, map[string]string{fuzzAsked[1]: "a <b>hit</b>"}) {
		t.Errorf("refused a good snippet response: %q %v", sn, err)
	}
	if sn, err := DecodeSnippetResponse(msg(5, "x", 0), "x", fuzzAsked); err != nil || sn == nil || len(sn) != 0 {
		t.Errorf("refused an answer with no snippet found: %q %v", sn, err)
	}
}

// shardResponseJSON and shardResultFromJSON are wire version 4's shard
// answer (JSON), kept to compare the binary wire with it.
func shardResponseJSON(analyzer string, r *ShardResult) ([]byte, error) {
	return json.Marshal(struct {
		V int          `json:"v"`
		A string       `json:"a"`
		R *ShardResult `json:"r"`
	}{4, analyzer, r})
}

func shardResultFromJSON(b []byte) (*ShardResult, error) {
	var w struct {
		V int          `json:"v"`
		A string       `json:"a"`
		R *ShardResult `json:"r"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	return w.R, nil
}

// TestShardWireSameAsJSON: real shards' answers decode from the binary wire
// to exactly what they decoded to from version 4's JSON.
func TestShardWireSameAsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(53, 54))
	var docs []*index.Document
	for i := 0; i < 300; i++ {
		docs = append(docs, coordDoc(rng, i))
	}
	coords, _, _ := network(t, 2, docs, func(i int) int { return i % 2 })
	ctx := context.Background()
	version := index.SharedAnalyzer().Version()
	for _, query := range []string{"search engine", "crawler", "搜索", "peer replica", "网络 爬虫", "index -shard", `"search engine" OR crawler`, "nothing-matches-this"} {
		q, err := ParseQuery(query, index.SharedAnalyzer())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 50} {
			res, err := coords[1].localShard(ctx, q, k)
			if err != nil {
				t.Fatal(err)
			}
			j, err := shardResponseJSON(version, res)
			if err != nil {
				t.Fatal(err)
			}
			want, err := shardResultFromJSON(j)
			if err != nil {
				t.Fatal(err)
			}
			b, err := coords[1].HandleShardRequest(ctx, EncodeShardRequest(ShardRequest{Analyzer: version, Query: query, K: k}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeShardResponse(b, version, q.Terms(), k)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q k=%d: binary wire %+v, JSON %+v", query, k, got, want)
			}
			if query != "nothing-matches-this" && len(got.Candidates) == 0 {
				t.Errorf("%q: no candidates; the comparison needs some", query)
			}
			if len(b) >= len(j) {
				t.Errorf("%q k=%d: binary answer of %d bytes, JSON %d", query, k, len(b), len(j))
			}
		}
	}
}

// fuzzAllocs fails when decode allocates more than a bound linear in the
// input: every count is checked against its limit and the bytes left
// before anything is allocated for it. The constant allows for what the
// fuzzing engine's own goroutines allocate meanwhile (MemStats counts the
// process) and for the error's text.
func fuzzAllocs(t *testing.T, in []byte, decode func()) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	decode()
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(64<<10+32*len(in)); got > limit {
		t.Fatalf("decoding %d bytes allocated %d, at most %d", len(in), got, limit)
	}
}

func FuzzShardRequest(f *testing.F) {
	f.Add(goodShardRequest())
	f.Add(EncodeShardRequest(ShardRequest{Analyzer: "x", Query: "search engine", K: 50}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r ShardRequest
		var err error
		fuzzAllocs(t, b, func() { r, err = DecodeShardRequest(b) })
		if err != nil {
			return
		}
		if r.K < 1 || r.K > maxShardK || r.Analyzer == "" || len(r.Analyzer) > maxAnalyzerVersionBytes || len(r.Query) > MaxQueryBytes ||
			len(r.SnippetURLs) > MaxResultsPerPage || len(r.TermPlaces) != len(r.SnippetURLs) || r.Script > index.ScriptTraditional {
			t.Fatalf("accepted %+v", r)
		}
		again := EncodeShardRequest(r)
		if !bytes.Equal(again, b) {
			t.Fatalf("%x decoded to %+v, encoded as %x", b, r, again)
		}
		if r2, err := DecodeShardRequest(again); err != nil || !reflect.DeepEqual(r2, r) {
			t.Fatalf("%+v decoded again as %+v, %v", r, r2, err)
		}
	})
}

func FuzzShardResponse(f *testing.F) {
	f.Add(goodShardResponse(f))
	b, err := EncodeShardResponse("x", nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	b, err = EncodeShardResponse("x", fuzzQuery.Terms(), randShardResult(rand.New(rand.NewPCG(1, 2)), fuzzQuery.Terms(), 3))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	terms := fuzzQuery.Terms()
	f.Fuzz(func(t *testing.T, b []byte) {
		var r *ShardResult
		var err error
		fuzzAllocs(t, b, func() { r, err = DecodeShardResponse(b, "x", terms, fuzzK) })
		if err != nil {
			return
		}
		if r == nil || r.Stats.Docs < 0 || r.Total < 0 || len(r.Candidates) > fuzzK || len(r.Stats.DF) > len(terms) {
			t.Fatalf("accepted %+v", r)
		}
		again, err := EncodeShardResponse("x", terms, r)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%x decoded to %+v, encoded as %x, %v", b, r, again, err)
		}
		if r2, err := DecodeShardResponse(again, "x", terms, fuzzK); err != nil || !sameResult(r2, r) {
			t.Fatalf("%+v decoded again as %+v, %v", r, r2, err)
		}
		// Whatever decodes goes through the plausibility checks without
		// panicking, and what they pass rescores to a finite score.
		if validateShardResult(r, fuzzQuery, fuzzK) == nil {
			global := &CollectionStats{DF: map[string]int64{}}
			global.Add(&r.Stats)
			for i := range r.Candidates {
				if s := Score(DefaultParams(), global, fuzzQuery, &r.Candidates[i]); math.IsNaN(s) || math.IsInf(s, 0) {
					t.Fatalf("plausible candidate scores %v: %+v", s, r.Candidates[i])
				}
			}
		}
	})
}

func FuzzSnippetResponse(f *testing.F) {
	f.Add(goodSnippetResponse(f))
	b, err := EncodeSnippetResponse("x", fuzzAsked, map[string]string{fuzzAsked[0]: "one", fuzzAsked[2]: "two"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var sn map[string]string
		var err error
		fuzzAllocs(t, b, func() { sn, err = DecodeSnippetResponse(b, "x", fuzzAsked) })
		if err != nil {
			return
		}
		if sn == nil || len(sn) > len(fuzzAsked) {
			t.Fatalf("accepted %q", sn)
		}
		for u, s := range sn {
			if !slices.Contains(fuzzAsked, u) || len(s) > maxSnippetBytes {
				t.Fatalf("accepted %q", sn)
			}
		}
		again, err := EncodeSnippetResponse("x", fuzzAsked, sn)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%x decoded to %q, encoded as %x, %v", b, sn, again, err)
		}
		if sn2, err := DecodeSnippetResponse(again, "x", fuzzAsked); err != nil || !reflect.DeepEqual(sn2, sn) {
			t.Fatalf("%q decoded again as %q, %v", sn, sn2, err)
		}
	})
}

// benchShardResult is a realistic answer to a 3-term query: 50 candidates
// with TFs for most terms, proximity counts and no snippets.
func benchShardResult(terms []string) *ShardResult {
	rng := rand.New(rand.NewPCG(61, 62))
	r := &ShardResult{Stats: CollectionStats{Docs: 48_213, DF: map[string]int64{}, FieldLenSum: [index.NumFields]int64{310_000, 95_000, 21_400_000, 402_000, 1_250_000}}, Total: 1_873}
	for i, t := range terms {
		r.Stats.DF[t] = int64(900 + 700*i)
	}
	for i := range 50 {
		host := fmt.Sprintf("www.site-%d.example.org", rng.IntN(30))
		c := Candidate{
			URL: fmt.Sprintf("https://%s/docs/section-%d/page-%d.html", host, rng.IntN(20), i), Host: host,
			Title:   fmt.Sprintf("Search engine architecture, part %d: crawling and indexing", i),
			SimHash: rng.Uint64(), StaticRank: rng.Float64() * 3, Score: 10 + rng.Float64()*5, NoSnippet: true,
			FieldLen: [index.NumFields]uint32{uint32(6 + rng.IntN(8)), uint32(rng.IntN(40)), uint32(200 + rng.IntN(3000)), uint32(4 + rng.IntN(6)), uint32(rng.IntN(60))},
			TF:       map[string][index.NumFields]uint32{},
			Prox:     []uint32{uint32(rng.IntN(4)), uint32(rng.IntN(3))},
		}
		for j := range c.ContentHash {
			c.ContentHash[j] = byte(rng.IntN(256))
		}
		for j, t := range terms {
			if j == 0 || rng.IntN(4) > 0 {
				c.TF[t] = [index.NumFields]uint32{uint32(rng.IntN(2)), uint32(rng.IntN(3)), uint32(1 + rng.IntN(20)), uint32(rng.IntN(2)), uint32(rng.IntN(3))}
			}
		}
		r.Candidates = append(r.Candidates, c)
	}
	return r
}

// BenchmarkShardWire encodes and decodes a shard's answer of 50 candidates
// to a 3-term query, with encoding/json and with the binary wire, so that
// the two can be compared (benchstat -col /codec).
func BenchmarkShardWire(b *testing.B) {
	q, err := ParseQuery("distributed search engine", index.SharedAnalyzer())
	if err != nil {
		b.Fatal(err)
	}
	terms := q.Terms()
	if len(terms) != 3 {
		b.Fatalf("terms %q, want 3", terms)
	}
	res := benchShardResult(terms)
	b.Run("codec=json", func(b *testing.B) {
		b.ReportAllocs()
		var w []byte
		for b.Loop() {
			if w, err = shardResponseJSON("v1", res); err != nil {
				b.Fatal(err)
			}
			if _, err := shardResultFromJSON(w); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(w)), "wire-B")
	})
	b.Run("codec=binary", func(b *testing.B) {
		b.ReportAllocs()
		var w []byte
		for b.Loop() {
			if w, err = EncodeShardResponse("v1", terms, res); err != nil {
				b.Fatal(err)
			}
			if _, err := DecodeShardResponse(w, "v1", terms, 50); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(w)), "wire-B")
	})
}
