package search

import (
	"math"

	"sou/index"
)

// CollectionStats are the statistics a shard contributes; the coordinator
// sums them (global IDF and average field lengths).
type CollectionStats struct {
	Docs        int64
	DF          map[string]int64
	FieldLenSum [index.NumFields]int64
}

// Add sums o into s.
func (s *CollectionStats) Add(o *CollectionStats) {
	if o == nil {
		return
	}
	s.Docs += o.Docs
	for f := range s.FieldLenSum {
		s.FieldLenSum[f] += o.FieldLenSum[f]
	}
	if len(o.DF) > 0 && s.DF == nil {
		s.DF = make(map[string]int64, len(o.DF))
	}
	for t, n := range o.DF {
		s.DF[t] += n
	}
}

// Candidate is one hit with everything needed to rescore it exactly.
type Candidate struct {
	URL, Host, Title, Snippet string
	ContentHash               [16]byte
	SimHash                   uint64
	StaticRank                float64
	TF                        map[string][index.NumFields]uint32 // per query term, per field
	FieldLen                  [index.NumFields]uint32
	// Prox counts, per pair of neighbouring query terms (Query.Terms
	// order), how close the pair occurs (proxCount); nil when no pair does.
	Prox []uint32 `json:",omitempty"`
	// Script is the Chinese script the page is written in.
	Script index.Script `json:",omitempty"`
	Score  float64
	// NoSnippet says the shard left Snippet out (Local.SearchSnippets).
	NoSnippet bool `json:",omitempty"`
}

// Params are the BM25F parameters.
type Params struct {
	K1           float64
	B, Weight    [index.NumFields]float64
	StaticWeight float64
	// Prox weighs term proximity and ProxK saturates it (proxScore).
	Prox, ProxK float64
	// SameScript is added for a page written in the script of a query
	// in Chinese (sameScript).
	SameScript float64
	// Relax lets a relaxable query (Query.Relaxable) match documents
	// that lack some of its terms, each missing term costing Miss times
	// its idf (missPenalty).
	Relax bool
	Miss  float64
}

// DefaultParams are the ranking a node serves, tuned on the development
// parts of the judgment sets (QUALITY.md has the figures and how to rerun
// them). Order of fields: title, anchor, body, URL, headings. A title or
// anchor text that holds the query's words names the page's subject, so
// they weigh far more than body; anchor text is barely length-normalised
// (a page many links name is not less about their words). A query of
// several words is relaxed: a page lacking one of them pays half that
// word's idf rather than disappearing, since known-item queries often use
// a word the page does not (a synonym, another inflection). Neighbouring
// query words found close together earn a proximity bonus, and a page in
// the script of a Chinese query is preferred to its copy in the other.
func DefaultParams() Params {
	return Params{
		K1:           1.6,
		B:            [index.NumFields]float64{0.5, 0.1, 0.75, 0.3, 0.5},
		Weight:       [index.NumFields]float64{12, 8, 1, 1.5, 1},
		StaticWeight: 0.5,
		Prox:         1,
		ProxK:        1,
		SameScript:   4,
		Relax:        true,
		Miss:         0.5,
	}
}

// sanitized clamps parameters to the ranges where BM25F is monotone (which
// the pruning bounds rely on): K1 > 0, 0 <= B <= 1, weights >= 0.
func (p Params) sanitized() Params {
	if !(p.K1 > 0) || math.IsInf(p.K1, 0) {
		p.K1 = 1.2
	}
	for f := range index.NumFields {
		if !(p.B[f] >= 0) {
			p.B[f] = 0
		}
		p.B[f] = min(p.B[f], 1)
		if !(p.Weight[f] >= 0) || math.IsInf(p.Weight[f], 0) {
			p.Weight[f] = 0
		}
	}
	if !(p.StaticWeight >= 0) || math.IsInf(p.StaticWeight, 0) {
		p.StaticWeight = 0
	}
	if !(p.Prox >= 0) || math.IsInf(p.Prox, 0) {
		p.Prox = 0
	}
	if !(p.ProxK > 0) || math.IsInf(p.ProxK, 0) {
		p.ProxK = 1
	}
	if !(p.Miss >= 0) || math.IsInf(p.Miss, 0) {
		p.Miss = 0
	}
	if !(p.SameScript >= 0) || math.IsInf(p.SameScript, 0) {
		p.SameScript = 0
	}
	return p
}

// idf is BM25's (always positive) inverse document frequency.
func idf(n, df int64) float64 {
	if df < 0 {
		df = 0
	}
	if n < df {
		n = df
	}
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// avgLens are the average field lengths of a collection (0: unknown).
func avgLens(s *CollectionStats) [index.NumFields]float64 {
	var a [index.NumFields]float64
	if s == nil || s.Docs <= 0 {
		return a
	}
	for f := range a {
		a[f] = float64(s.FieldLenSum[f]) / float64(s.Docs)
	}
	return a
}

// termWeight is one term's BM25F contribution:
//
//	tf' = sum_f W_f * tf_f / (1 - B_f + B_f * len_f / avg_f)
//	w   = idf * tf' * (K1 + 1) / (K1 + tf')
//
// It is non-decreasing in every tf_f and non-increasing in every len_f,
// which is what makes block-max bounds (max TF, min length) valid.
func termWeight(p *Params, idfv float64, avg *[index.NumFields]float64, tf, lens *[index.NumFields]uint32) float64 {
	var t float64
	for f := range index.NumFields {
		if tf[f] == 0 {
			continue
		}
		norm := 1.0
		if avg[f] > 0 {
			norm = 1 - p.B[f] + p.B[f]*float64(lens[f])/avg[f]
		}
		if norm <= 0 {
			norm = 1
		}
		t += p.Weight[f] * float64(tf[f]) / norm
	}
	if t == 0 {
		return 0
	}
	return idfv * t * (p.K1 + 1) / (p.K1 + t)
}

// staticScore is the query-independent part: StaticWeight * r/(1+r), which
// maps any non-negative static rank into [0, StaticWeight).
func staticScore(p *Params, rank float64) float64 {
	if !(rank > 0) || math.IsInf(rank, 0) {
		return 0
	}
	return p.StaticWeight * rank / (1 + rank)
}

// Score computes the exact score of a candidate from global statistics:
// BM25F over its terms, less the penalty of the terms it lacks (a relaxed
// query), plus proximity and static rank. Pure function; the
// coordinator's rescoring and the local engine run the same arithmetic in
// the same order (scoreParts), so scores are identical bit for bit.
func Score(p Params, global *CollectionStats, q *Query, c *Candidate) float64 {
	p = p.sanitized()
	avg := avgLens(global)
	var n int64
	var dfs map[string]int64
	if global != nil {
		n, dfs = global.Docs, global.DF
	}
	terms := q.Terms()
	idfs := make([]float64, len(terms))
	tfs := make([][index.NumFields]uint32, len(terms))
	has := make([]bool, len(terms))
	for i, t := range terms {
		idfs[i] = idf(n, dfs[t])
		tfs[i], has[i] = c.TF[t]
	}
	s := textScore(&p, idfs, &avg, tfs, has, &c.FieldLen)
	if p.Relax && q.Relaxable() {
		s -= missPenalty(&p, idfs, has)
	}
	s += proxScore(&p, idfs, c.Prox)
	s += sameScript(&p, q, c.Script)
	return s + staticScore(&p, c.StaticRank)
}

// sameScript is what a page written in the query's script gets: a query
// in Simplified (Traditional) characters finds pages of both scripts
// (index folds them), and prefers those its reader writes. A query that
// does not tell (English, or 巨集) prefers none.
func sameScript(p *Params, q *Query, page index.Script) float64 {
	if q.script == index.ScriptUnknown || page != q.script {
		return 0
	}
	return p.SameScript
}

// textScore is the BM25F part: the sum of the present terms' weights, in
// query order.
func textScore(p *Params, idfs []float64, avg *[index.NumFields]float64, tfs [][index.NumFields]uint32, has []bool, lens *[index.NumFields]uint32) float64 {
	s := 0.0
	for i := range idfs {
		if has[i] {
			s += termWeight(p, idfs[i], avg, &tfs[i], lens)
		}
	}
	return s
}

// missPenalty is what a document pays for the query terms it lacks:
// Miss·idf each, so that lacking a rare term costs more than lacking a
// common one, on the scale of what the term would have added.
func missPenalty(p *Params, idfs []float64, has []bool) float64 {
	s := 0.0
	for i := range idfs {
		if !has[i] {
			s += p.Miss * idfs[i]
		}
	}
	return s
}

// proxScore is the proximity part: for each pair of neighbouring query
// terms (i, i+1) with count x = prox[i] (proxCount),
//
//	Prox * min(idf_i, idf_i+1) * x / (ProxK + x)
//
// which is below Prox * min(idf_i, idf_i+1) whatever x (the bound pruning
// uses). A prox of the wrong length scores nothing (validate refuses it
// from a peer).
func proxScore(p *Params, idfs []float64, prox []uint32) float64 {
	if p.Prox == 0 || len(prox) != len(idfs)-1 {
		return 0
	}
	s := 0.0
	for i, x := range prox {
		if x == 0 {
			continue
		}
		s += p.Prox * min(idfs[i], idfs[i+1]) * float64(x) / (p.ProxK + float64(x))
	}
	return s
}

// proxBound bounds proxScore for any counts.
func proxBound(p *Params, idfs []float64) float64 {
	if p.Prox == 0 {
		return 0
	}
	s := 0.0
	for i := 0; i+1 < len(idfs); i++ {
		s += p.Prox * min(idfs[i], idfs[i+1])
	}
	return s
}

// proxWindow is how many positions apart two terms may be to count as
// close (proxCount): a protocol constant, not a parameter, since shards
// count and coordinators score, and a page must score alike everywhere.
// It is below the gap between fields (and anchors), so a pair never
// spans two of them.
const proxWindow = 4

// proxCount is how close two terms occur in a document, given their
// positions (ascending; every field in one position space): the
// occurrences of a with an occurrence of b at most window positions away,
// or those of b with one of a, whichever are fewer. It is at most the
// number of occurrences of either term, which is what a coordinator can
// check.
func proxCount(a, b []uint32, window int) uint32 {
	return min(near(a, b, window), near(b, a, window))
}

// near counts the elements of a with an element of b within window.
func near(a, b []uint32, window int) uint32 {
	n := uint32(0)
	j := 0
	w := int64(window)
	for _, x := range a {
		for j < len(b) && int64(b[j]) < int64(x)-w {
			j++
		}
		if j < len(b) && int64(b[j]) <= int64(x)+w {
			n++
		}
	}
	return n
}
