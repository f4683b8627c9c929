package testnet

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"time"

	"sou/eval"
	"sou/search"
)

// QrelsScore is the known-item quality on one judgment file, over the part
// the run scored (its part key); when that is all, Parts has the dev and
// the test part apart.
type QrelsScore struct {
	File string `json:"file"`
	eval.Score
	Parts []eval.Score `json:"parts,omitempty"`
}

// qrelsRun is one judgment file's outcomes, kept for the misses file.
type qrelsRun struct {
	set  string
	outs []eval.Outcome
}

// qrelsDeadline is the search deadline of the judged queries: long enough
// that a shard on a loaded two-core machine still answers, so that
// coverage stays complete and every query is scored.
const qrelsDeadline = 2 * time.Second

// scoreQrels runs the judged queries of each file (the part split) at node
// p, one at a time so that the latencies are the searches' own, and fills
// the search section's quality keys: mrr10, s10, s1 and ndcg10 of the first
// file, and one qrels entry per file. A set named in readers sends its
// readers' language with each query.
func scoreQrels(ctx context.Context, p *nodeProc, files []string, readers map[string]string, split eval.Split, sr *SearchReport, logf func(string, ...any)) error {
	searcher := func(lang string) eval.Searcher {
		return func(ctx context.Context, q string) (eval.Answer, error) {
			v := url.Values{"q": {q}, "n": {"10"}, "timeout": {qrelsDeadline.String()}}
			if lang != "" {
				v.Set("lang", lang)
			}
			var resp search.Response
			if err := p.getJSON(ctx, "/api/search?"+v.Encode(), &resp); err != nil {
				return eval.Answer{}, err
			}
			a := eval.Answer{Partial: !resp.Coverage.Complete}
			for _, r := range resp.Results {
				a.URLs = append(a.URLs, r.URL)
			}
			return a, nil
		}
	}
	sr.QrelsSplit = split
	for i, path := range files {
		set, err := eval.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--qrels: %w", err)
		}
		outs, err := eval.Run(ctx, set, split, searcher(readers[set.Name]), 1)
		if err != nil {
			return err
		}
		scores := eval.Scores(set.Name, split, outs)
		q := QrelsScore{File: filepath.Base(path), Score: scores[len(scores)-1]}
		if split == eval.All {
			q.Parts = scores[:2]
		}
		if i == 0 {
			sr.MRR10, sr.S10, sr.S1, sr.NDCG10 = q.MRR10, q.S10, q.S1, q.NDCG10
		}
		sr.Qrels = append(sr.Qrels, q)
		sr.qrelsRuns = append(sr.qrelsRuns, qrelsRun{set: set.Name, outs: outs})
		logf("qrels %s (%s%s): %d queries, %d answered, %d partial, %d failed; MRR@10 %.3f, S@1 %.3f, S@10 %.3f, nDCG@10 %.3f",
			path, split, readerNote(readers[set.Name]), q.Queries, q.Answered, q.Partial, q.Failed, q.MRR10, q.S1, q.S10, q.NDCG10)
	}
	return nil
}

// readerNote names the readers' language of a set in the log, if any.
func readerNote(lang string) string {
	if lang == "" {
		return ""
	}
	return ", readers " + lang
}

// writeMisses writes the misses file of the judged queries (eval.WriteMisses).
func (sr *SearchReport) writeMisses(w io.Writer) error {
	if _, err := fmt.Fprintln(w, eval.MissesHeader); err != nil {
		return fmt.Errorf("write misses: %w", err)
	}
	for _, r := range sr.qrelsRuns {
		if err := eval.WriteMisses(w, r.set, r.outs); err != nil {
			return err
		}
	}
	return nil
}
