package eval

import (
	"math"
	"slices"
)

// Cutoff is the depth every metric looks at.
const Cutoff = 10

// Status says how a search ended.
type Status string

// The statuses of a search: only Answered searches are scored.
const (
	Answered Status = "answered" // every peer answered
	Partial  Status = "partial"  // answered without every peer
	Failed   Status = "failed"   // no answer (an error, a timeout)
)

// Outcome is one judged query's search and its score.
type Outcome struct {
	Judgment
	Part      Split    // Dev or Test
	Status    Status   //
	Err       string   // why it failed
	Results   []string // result URLs, best first (at most Cutoff are scored)
	LatencyMS float64
	// Rank is the 1-based rank of the first relevant result within the
	// cutoff, 0 when none is there.
	Rank int
	NDCG float64
}

// Judge scores one ranked result list against a judgment: the rank of the
// first relevant result within the cutoff (0 = none) and nDCG@10 with
// binary relevance, whose ideal ranking has all of the judgment's
// distinct relevant pages first (up to the cutoff).
func Judge(j Judgment, results []string) (rank int, ndcg float64) {
	relevant := map[string]bool{}
	for _, u := range j.Relevant {
		relevant[MatchKey(u)] = true
	}
	if len(relevant) == 0 {
		return 0, 0
	}
	found := map[string]bool{}
	dcg := 0.0
	for i, u := range results[:min(Cutoff, len(results))] {
		k := MatchKey(u)
		if !relevant[k] || found[k] {
			continue
		}
		found[k] = true
		if rank == 0 {
			rank = i + 1
		}
		dcg += 1 / math.Log2(float64(i+2))
	}
	ideal := 0.0
	for i := range min(Cutoff, len(relevant)) {
		ideal += 1 / math.Log2(float64(i+2))
	}
	return rank, dcg / ideal
}

// Score is the quality of one part of one set.
type Score struct {
	Set      string `json:"set"`
	Part     Split  `json:"part"`
	Queries  int    `json:"queries"`
	Answered int    `json:"answered"`
	Partial  int    `json:"partial"`
	Failed   int    `json:"failed"`
	// The metrics average over the answered searches.
	MRR10  float64 `json:"mrr10"`
	S1     float64 `json:"s1"`
	S10    float64 `json:"s10"`
	NDCG10 float64 `json:"ndcg10"`
	// Latency of the searches that returned (answered or partial).
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	// Misses counts answered searches with no relevant result in the top 10.
	Misses int `json:"misses"`
}

// Summarize scores the outcomes of part (every outcome for All) under the
// set name given.
func Summarize(set string, part Split, outs []Outcome) Score {
	s := Score{Set: set, Part: part}
	var lat []float64
	for _, o := range outs {
		if part != All && o.Part != part {
			continue
		}
		s.Queries++
		switch o.Status {
		case Failed:
			s.Failed++
			continue
		case Partial:
			s.Partial++
			lat = append(lat, o.LatencyMS)
			continue
		}
		s.Answered++
		lat = append(lat, o.LatencyMS)
		if o.Rank > 0 {
			s.MRR10 += 1 / float64(o.Rank)
			s.S10++
			if o.Rank == 1 {
				s.S1++
			}
		} else {
			s.Misses++
		}
		s.NDCG10 += o.NDCG
	}
	if s.Answered > 0 {
		n := float64(s.Answered)
		s.MRR10, s.S1, s.S10, s.NDCG10 = round3(s.MRR10/n), round3(s.S1/n), round3(s.S10/n), round3(s.NDCG10/n)
	}
	slices.Sort(lat)
	s.P50MS, s.P95MS = Percentile(lat, 0.50), Percentile(lat, 0.95)
	return s
}

// Scores are the rows a run over split sp prints for one set: the part
// itself, or for All the dev part, the test part and both together.
func Scores(set string, sp Split, outs []Outcome) []Score {
	if sp != All {
		return []Score{Summarize(set, sp, outs)}
	}
	return []Score{Summarize(set, Dev, outs), Summarize(set, Test, outs), Summarize(set, All, outs)}
}

// Percentile is the nearest-rank percentile of sorted values, rounded to
// microseconds when they are milliseconds; 0 for none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return round3(sorted[max(0, min(i, len(sorted)-1))])
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
