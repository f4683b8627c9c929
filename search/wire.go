package search

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"sou/index"
)

// Wire format of the search protocol, version 5: binary, written and read
// field by field with encoding/binary, so that a peer's bytes are never
// handed to a reflective decoder and every count and length is checked
// against a limit before anything is allocated for it.
//
// Integers are varints: uvarint for counts, lengths and uint32 values,
// zigzag varint (binary.AppendVarint) for int64 statistics; an overlong
// varint is refused, so each message has one encoding. A string is its
// byte length (uvarint) and its bytes. A float64 is its IEEE 754 bits, 8
// bytes little-endian, as are SimHash; a bool is one byte, 0 or 1; a
// script or a term place is one byte. Nothing may follow a message's last
// field. Every message starts with the wire version and the sender's
// index.Analyzer version:
//
//	request:  version, analyzer, query, script (S), k,
//	          n pages, per page: URL, n places, places (one byte each)
//	response: version, analyzer, then, when the analyzer is the asker's:
//	  shard:   docs, field length sums (index.NumFields), n DFs,
//	           per DF: term index, df; total, total exact,
//	           n candidates, per candidate: URL, host, title, snippet,
//	           content hash (16 bytes), SimHash, static rank,
//	           field lengths (index.NumFields), n TFs, per TF: term index,
//	           TF per field (index.NumFields); n prox, prox counts,
//	           script, score, no snippet
//	  snippet: n snippets, per snippet: page index, snippet
//
// The query travels as its raw string and each shard parses it with the
// same deterministic analyzer, which keeps the wire independent of the
// query's internal form; so both sides know Query.Terms, and a DF or TF
// names its term by its index in that list, in increasing order. A
// snippet names its page by its index in the request's pages (U), also in
// increasing order. A shard answers a request of another analyzer version
// with the version and analyzer alone, and a coordinator refuses an answer
// of another version (a failed shard in Coverage, "analyzer version X, want
// Y"), so that statistics and scores of two analyzers are never merged;
// an answer of the right version that stops there is refused too. A
// request carries the reader's script (S, Request.Script), ScriptUnknown
// when the search has none; a shard that ignores it still answers, and the
// coordinator rescores its candidates with it. A candidate carries what
// Score reads: per query term its TF in each field, its field lengths,
// static rank and proximity counts, and no snippet: snippets are asked for
// by URL, for the results shown (U), with per page where it has each
// query term (0 nowhere the snippet looks, 1 in its body, 2 in its
// headings only). An empty list or map decodes as nil.
//
// WireVersion is that version.
const WireVersion = 5

// maxAnalyzerVersionBytes bounds the analyzer version on the wire.
const maxAnalyzerVersionBytes = 64

// errAnalyzerMismatch marks an answer from a shard whose analyzer differs.
var errAnalyzerMismatch = errors.New("analyzer version")

// MaxShardResponseBytes caps what a shard may send back.
const MaxShardResponseBytes = 4 << 20

// maxShardK bounds the candidates a shard may be asked for (MaxPage full
// pages and a generous ShardK).
const maxShardK = MaxPage*MaxResultsPerPage + 1000

// maxShardRequestBytes bounds a request: a query and a snippet request's
// pages, each with its URL and a place per query term.
const maxShardRequestBytes = MaxQueryBytes + 256 + MaxResultsPerPage*(maxCandidateURLBytes+8+MaxQueryTerms)

// maxSnippetResponseBytes bounds a snippet answer: a snippet per page.
const maxSnippetResponseBytes = 128 + MaxResultsPerPage*(maxSnippetBytes+8)

// minCandidateBytes is the smallest a candidate is on the wire (empty
// strings, one-byte varints), which bounds how many a message can hold.
const minCandidateBytes = 4 + 16 + 8 + 8 + index.NumFields + 2 + 1 + 8 + 1

// ShardRequest is a shard request: for candidates, or, when SnippetURLs is
// set, for the snippets of those pages (K is then 1).
type ShardRequest struct {
	Analyzer string // the asker's index.Analyzer version
	Query    string // raw, as the user typed it
	// Script is the reader's script (Request.Script), for a query whose
	// own characters do not tell one.
	Script      index.Script
	K           int
	SnippetURLs []string
	// TermPlaces says per page of SnippetURLs where it has each query term
	// (Query.Terms order): 0 nowhere the snippet looks, 1 in its body, 2
	// in its headings only.
	TermPlaces [][]int8
}

// EncodeShardRequest encodes r as version 5 of the wire. It does not check
// r: the shard does.
func EncodeShardRequest(r ShardRequest) []byte {
	size := 16 + len(r.Analyzer) + len(r.Query)
	for _, u := range r.SnippetURLs {
		size += 4 + len(u) + MaxQueryTerms
	}
	b := binary.AppendUvarint(make([]byte, 0, size), WireVersion)
	b = appendString(b, r.Analyzer)
	b = appendString(b, r.Query)
	b = append(b, byte(r.Script))
	b = binary.AppendUvarint(b, uint64(r.K))
	b = binary.AppendUvarint(b, uint64(len(r.SnippetURLs)))
	for i, u := range r.SnippetURLs {
		b = appendString(b, u)
		var places []int8
		if i < len(r.TermPlaces) {
			places = r.TermPlaces[i]
		}
		b = binary.AppendUvarint(b, uint64(len(places)))
		for _, p := range places {
			b = append(b, byte(p))
		}
	}
	return b
}

// DecodeShardRequest decodes and checks a request from a peer.
func DecodeShardRequest(b []byte) (ShardRequest, error) {
	if len(b) > maxShardRequestBytes {
		return ShardRequest{}, fmt.Errorf("shard request of %d bytes is too large", len(b))
	}
	r := wireReader{b: b}
	if err := r.version("shard request"); err != nil {
		return ShardRequest{}, err
	}
	var req ShardRequest
	req.Analyzer = r.str(maxAnalyzerVersionBytes, "analyzer version")
	req.Query = r.str(MaxQueryBytes, "query")
	req.Script = index.Script(r.byte())
	k := r.uvarint()
	pages := r.items(MaxResultsPerPage, 2, "snippet pages")
	if r.err == nil && pages > 0 {
		req.SnippetURLs = make([]string, pages)
		req.TermPlaces = make([][]int8, pages)
	}
	for i := 0; i < pages && r.err == nil; i++ {
		req.SnippetURLs[i] = r.str(maxCandidateURLBytes, "snippet page URL")
		n := r.count(MaxQueryTerms, "term places")
		p := r.next(n)
		if n > 0 && p != nil {
			req.TermPlaces[i] = make([]int8, n)
			for j, v := range p {
				req.TermPlaces[i][j] = int8(v)
			}
		}
	}
	if err := r.end("shard request"); err != nil {
		return ShardRequest{}, err
	}
	switch {
	case req.Analyzer == "":
		return ShardRequest{}, errors.New("shard request without an analyzer version")
	case k < 1 || k > maxShardK:
		return ShardRequest{}, fmt.Errorf("shard request k=%d out of range", k)
	case req.Script > index.ScriptTraditional:
		return ShardRequest{}, fmt.Errorf("shard request script %d", req.Script)
	}
	req.K = int(k)
	for i, u := range req.SnippetURLs {
		if u == "" {
			return ShardRequest{}, errors.New("snippet request with an empty URL")
		}
		for _, v := range req.TermPlaces[i] {
			if v < termAbsent || v > termHeading {
				return ShardRequest{}, fmt.Errorf("snippet request with term place %d", v)
			}
		}
	}
	return req, nil
}

// EncodeShardResponse encodes a shard's answer to a query over terms
// (Query.Terms). A nil r is the answer to a request of another analyzer
// version. It fails when r names a term that terms lacks.
func EncodeShardResponse(analyzer string, terms []string, r *ShardResult) ([]byte, error) {
	size := 8 + len(analyzer)
	if r != nil {
		size += 16 + 10*index.NumFields + 12*len(r.Stats.DF)
		for i := range r.Candidates {
			c := &r.Candidates[i]
			size += minCandidateBytes + 8 + len(c.URL) + len(c.Host) + len(c.Title) + len(c.Snippet) + 4*index.NumFields + len(c.TF)*(1+4*index.NumFields) + 4*len(c.Prox)
		}
	}
	b := appendHeader(make([]byte, 0, size), analyzer)
	if r == nil {
		return b, nil
	}
	st := &r.Stats
	b = binary.AppendVarint(b, st.Docs)
	for _, sum := range st.FieldLenSum {
		b = binary.AppendVarint(b, sum)
	}
	if n := countPresent(terms, st.DF); n != len(st.DF) {
		return nil, errors.New("encode shard response: a document frequency for a term the query lacks")
	}
	b = binary.AppendUvarint(b, uint64(len(st.DF)))
	for i, t := range terms {
		if df, ok := st.DF[t]; ok {
			b = binary.AppendUvarint(b, uint64(i))
			b = binary.AppendVarint(b, df)
		}
	}
	b = binary.AppendVarint(b, r.Total)
	b = appendBool(b, r.TotalExact)
	b = binary.AppendUvarint(b, uint64(len(r.Candidates)))
	for i := range r.Candidates {
		c := &r.Candidates[i]
		b = appendString(b, c.URL)
		b = appendString(b, c.Host)
		b = appendString(b, c.Title)
		b = appendString(b, c.Snippet)
		b = append(b, c.ContentHash[:]...)
		b = binary.LittleEndian.AppendUint64(b, c.SimHash)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.StaticRank))
		for _, l := range c.FieldLen {
			b = binary.AppendUvarint(b, uint64(l))
		}
		if n := countPresent(terms, c.TF); n != len(c.TF) {
			return nil, fmt.Errorf("encode shard response: a term frequency of %s for a term the query lacks", c.URL)
		}
		b = binary.AppendUvarint(b, uint64(len(c.TF)))
		for j, t := range terms {
			tf, ok := c.TF[t]
			if !ok {
				continue
			}
			b = binary.AppendUvarint(b, uint64(j))
			for _, v := range tf {
				b = binary.AppendUvarint(b, uint64(v))
			}
		}
		b = binary.AppendUvarint(b, uint64(len(c.Prox)))
		for _, x := range c.Prox {
			b = binary.AppendUvarint(b, uint64(x))
		}
		b = append(b, byte(c.Script))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.Score))
		b = appendBool(b, c.NoSnippet)
	}
	return b, nil
}

// DecodeShardResponse accepts the answer of a shard of analyzer version
// analyzer to a request for k candidates of a query over terms
// (Query.Terms: no term twice). What it returns still needs validateShardResult: this
// checks the encoding, that the plausibility of what it says.
func DecodeShardResponse(b []byte, analyzer string, terms []string, k int) (*ShardResult, error) {
	r, err := responseBody(b, MaxShardResponseBytes, "shard response", analyzer)
	if err != nil {
		return nil, err
	}
	if len(r.b) == 0 {
		return nil, errors.New("shard response without a result")
	}
	res := &ShardResult{}
	st := &res.Stats
	st.Docs = r.varint()
	for f := range st.FieldLenSum {
		st.FieldLenSum[f] = r.varint()
	}
	if n := r.items(len(terms), 2, "document frequencies"); n > 0 {
		st.DF = make(map[string]int64, n)
		last := -1
		for range n {
			t := r.indexed(terms, &last)
			df := r.varint()
			if r.err != nil {
				break
			}
			st.DF[t] = df
		}
	}
	res.Total = r.varint()
	res.TotalExact = r.bool()
	n := r.items(k, minCandidateBytes, "candidates")
	if n > 0 {
		res.Candidates = make([]Candidate, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		r.candidate(&res.Candidates[i], terms)
	}
	if err := r.end("shard response"); err != nil {
		return nil, err
	}
	if st.Docs < 0 || res.Total < 0 {
		return nil, errors.New("shard response with negative statistics")
	}
	return res, nil
}

func (r *wireReader) candidate(c *Candidate, terms []string) {
	c.URL = r.str(maxCandidateURLBytes, "candidate URL")
	c.Host = r.str(maxCandidateURLBytes, "candidate host")
	c.Title = r.str(maxTitleBytes, "candidate title")
	c.Snippet = r.str(maxSnippetBytes, "candidate snippet")
	copy(c.ContentHash[:], r.next(len(c.ContentHash)))
	c.SimHash = r.uint64()
	c.StaticRank = math.Float64frombits(r.uint64())
	for f := range c.FieldLen {
		c.FieldLen[f] = r.uint32()
	}
	if n := r.items(len(terms), 1+index.NumFields, "term frequencies"); n > 0 {
		c.TF = make(map[string][index.NumFields]uint32, n)
		last := -1
		for range n {
			t := r.indexed(terms, &last)
			var tf [index.NumFields]uint32
			for f := range tf {
				tf[f] = r.uint32()
			}
			if r.err != nil {
				return
			}
			c.TF[t] = tf
		}
	}
	if n := r.items(len(terms), 1, "proximity counts"); n > 0 {
		c.Prox = make([]uint32, n)
		for i := range c.Prox {
			c.Prox[i] = r.uint32()
		}
	}
	c.Script = index.Script(r.byte())
	c.Score = math.Float64frombits(r.uint64())
	c.NoSnippet = r.bool()
}

// EncodeSnippetResponse encodes a shard's snippets of the pages asked for.
// A nil snips is the answer to a request of another analyzer version. It
// fails when snips holds a page not asked for.
func EncodeSnippetResponse(analyzer string, asked []string, snips map[string]string) ([]byte, error) {
	size := 16 + len(analyzer)
	for _, s := range snips {
		size += 6 + len(s)
	}
	b := appendHeader(make([]byte, 0, size), analyzer)
	if snips == nil {
		return b, nil
	}
	seen := make(map[string]bool, len(asked))
	var pages []int
	for i, u := range asked {
		if _, ok := snips[u]; ok && !seen[u] {
			seen[u] = true
			pages = append(pages, i)
		}
	}
	if len(pages) != len(snips) {
		return nil, errors.New("encode snippet response: a snippet of a page not asked for")
	}
	b = binary.AppendUvarint(b, uint64(len(pages)))
	for _, i := range pages {
		b = binary.AppendUvarint(b, uint64(i))
		b = appendString(b, snips[asked[i]])
	}
	return b, nil
}

// DecodeSnippetResponse accepts snippets only from a shard of analyzer
// version analyzer, and only for the pages asked for.
func DecodeSnippetResponse(b []byte, analyzer string, asked []string) (map[string]string, error) {
	r, err := responseBody(b, maxSnippetResponseBytes, "snippet response", analyzer)
	if err != nil {
		return nil, err
	}
	if len(r.b) == 0 {
		return nil, errors.New("snippet response without snippets")
	}
	n := r.items(len(asked), 2, "snippets")
	snips := make(map[string]string, n)
	last := -1
	for i := 0; i < n && r.err == nil; i++ {
		u := r.indexed(asked, &last)
		s := r.str(maxSnippetBytes, "snippet")
		if _, dup := snips[u]; dup && r.err == nil {
			r.fail("page %.100q twice", u)
		}
		snips[u] = s
	}
	if err := r.end("snippet response"); err != nil {
		return nil, err
	}
	return snips, nil
}

// responseBody checks an answer's size, wire version and analyzer version
// and returns a reader at its body.
func responseBody(b []byte, maxBytes int, what, analyzer string) (*wireReader, error) {
	if len(b) > maxBytes {
		return nil, fmt.Errorf("%s of %d bytes is too large", what, len(b))
	}
	r := &wireReader{b: b}
	if err := r.version(what); err != nil {
		return nil, err
	}
	a := r.str(maxAnalyzerVersionBytes, "analyzer version")
	if r.err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, r.err)
	}
	if a != analyzer {
		return nil, fmt.Errorf("%w %.64q, want %q", errAnalyzerMismatch, a, analyzer)
	}
	return r, nil
}

func appendHeader(b []byte, analyzer string) []byte {
	return appendString(binary.AppendUvarint(b, WireVersion), analyzer)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// countPresent is how many of terms are keys of m.
func countPresent[V any](terms []string, m map[string]V) int {
	n := 0
	for _, t := range terms {
		if _, ok := m[t]; ok {
			n++
		}
	}
	return n
}

// wireReader reads a message field by field. The first error sticks: every
// later read returns a zero value, so a decoder checks r.err once a loop's
// or a message's end, and a truncated or malformed message is an error,
// never a panic.
type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// version reads the wire version and refuses any but WireVersion.
func (r *wireReader) version(what string) error {
	if len(r.b) > 0 && r.b[0] == '{' {
		return fmt.Errorf("%s in JSON (wire version 4 or older), want version %d", what, WireVersion)
	}
	v := r.uvarint()
	if r.err != nil {
		return fmt.Errorf("decode %s: %w", what, r.err)
	}
	if v != WireVersion {
		return fmt.Errorf("%s version %d, want %d", what, v, WireVersion)
	}
	return nil
}

// end is the decoding error of a message, if any, or an error if bytes
// follow its last field.
func (r *wireReader) end(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the message", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("decode %s: %w", what, r.err)
	}
	return nil
}

func (r *wireReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("truncated or overflowing varint")
		return 0
	}
	if n > 1 && r.b[n-1] == 0 {
		r.fail("overlong varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads a zigzag varint (binary.AppendVarint).
func (r *wireReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *wireReader) uint32() uint32 {
	v := r.uvarint()
	if v > math.MaxUint32 {
		r.fail("value %d above 32 bits", v)
		return 0
	}
	return uint32(v)
}

// count reads a count or a length of at most limit.
func (r *wireReader) count(limit int, what string) int {
	v := r.uvarint()
	if v > uint64(limit) {
		r.fail("%d %s, at most %d", v, what, limit)
		return 0
	}
	return int(v)
}

// items reads a count of at most limit items of at least minBytes each:
// what is allocated for them is bounded by the bytes that are left.
func (r *wireReader) items(limit, minBytes int, what string) int {
	n := r.count(limit, what)
	if n > len(r.b)/minBytes {
		r.fail("truncated: %d %s in %d bytes", n, what, len(r.b))
		return 0
	}
	return n
}

// next returns the next n bytes, or nil when fewer are left.
func (r *wireReader) next(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.fail("truncated: %d bytes wanted, %d left", n, len(r.b))
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *wireReader) str(limit int, what string) string {
	n := r.count(limit, what+" bytes")
	return string(r.next(n))
}

func (r *wireReader) byte() byte {
	if p := r.next(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *wireReader) bool() bool {
	switch v := r.byte(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("bool %d", v)
		return false
	}
}

func (r *wireReader) uint64() uint64 {
	if p := r.next(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// indexed reads an index into list, greater than *last, and returns the
// element: an element of a list without repeats is named once at most.
func (r *wireReader) indexed(list []string, last *int) string {
	v := r.uvarint()
	if r.err != nil {
		return ""
	}
	if v >= uint64(len(list)) || int(v) <= *last {
		r.fail("index %d out of order or beyond %d", v, len(list))
		return ""
	}
	*last = int(v)
	return list[v]
}
