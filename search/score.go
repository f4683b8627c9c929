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
	Score                     float64
	// NoSnippet says the shard left Snippet out (Local.SearchSnippets).
	NoSnippet bool `json:",omitempty"`
}

// Params are the BM25F parameters.
type Params struct {
	K1           float64
	B, Weight    [index.NumFields]float64
	StaticWeight float64
}

// DefaultParams: title and anchor text weigh more than body; URL words a
// little more than body. Order of fields: title, anchor, body, URL.
func DefaultParams() Params {
	return Params{
		K1:           1.2,
		B:            [index.NumFields]float64{0.5, 0.4, 0.75, 0.3},
		Weight:       [index.NumFields]float64{3, 2, 1, 1.5},
		StaticWeight: 0.5,
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

// Score computes the exact BM25F+static score of a candidate from global
// statistics. Pure function; the coordinator's rescoring and the local
// engine call the same arithmetic in the same order, so scores are
// identical bit for bit.
func Score(p Params, global *CollectionStats, q *Query, c *Candidate) float64 {
	p = p.sanitized()
	avg := avgLens(global)
	var n int64
	var dfs map[string]int64
	if global != nil {
		n, dfs = global.Docs, global.DF
	}
	s := 0.0
	for _, t := range q.Terms() {
		tf, ok := c.TF[t]
		if !ok {
			continue
		}
		s += termWeight(&p, idf(n, dfs[t]), &avg, &tf, &c.FieldLen)
	}
	return s + staticScore(&p, c.StaticRank)
}
