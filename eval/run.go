package eval

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Answer is what one search returned.
type Answer struct {
	URLs    []string // best first
	Partial bool     // not every peer answered
}

// Searcher runs one query. An error is that search's failure, recorded in
// its Outcome; it does not stop the run.
type Searcher func(ctx context.Context, query string) (Answer, error)

// Run searches every judgment of s in part sp, concurrency searches at a
// time, and returns the outcomes in the set's order. It stops early only
// when ctx ends, returning ctx's error.
func Run(ctx context.Context, s Set, sp Split, search Searcher, concurrency int) ([]Outcome, error) {
	js := s.Part(sp).Judgments
	outs := make([]Outcome, len(js))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, concurrency) {
		wg.Go(func() {
			for i := range next {
				outs[i] = runOne(ctx, js[i], search)
			}
		})
	}
feed:
	for i := range js {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluate %s: %w", s.Name, err)
	}
	return outs, nil
}

func runOne(ctx context.Context, j Judgment, search Searcher) Outcome {
	o := Outcome{Judgment: j, Part: PartOf(j.ID)}
	start := time.Now()
	a, err := search(ctx, j.Query)
	o.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	switch {
	case err != nil:
		o.Status, o.Err = Failed, err.Error()
		return o
	case a.Partial:
		o.Status = Partial
	default:
		o.Status = Answered
	}
	o.Results = a.URLs[:min(Cutoff, len(a.URLs))]
	o.Rank, o.NDCG = Judge(j, o.Results)
	return o
}

// MissesHeader is the first line of a misses file.
const MissesHeader = "# set\tpart\tqid\tstatus\tquery\texpected\treturned (top 10, best first; the error when failed)"

// WriteMisses writes one tab-separated line for every outcome that is not
// an answered search with a relevant result in its top 10: misses, partial
// and failed searches. URL lists are separated by spaces. Write
// MissesHeader first, once per file.
func WriteMisses(w io.Writer, set string, outs []Outcome) error {
	for _, o := range outs {
		status := string(o.Status)
		if o.Status == Answered {
			if o.Rank > 0 {
				continue
			}
			status = "miss"
		}
		returned := strings.Join(o.Results, " ")
		if o.Status == Failed {
			returned = oneLine(o.Err)
		}
		_, err := fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", set, o.Part, o.ID, status, oneLine(o.Query),
			strings.Join(o.Relevant, " "), returned)
		if err != nil {
			return fmt.Errorf("write misses: %w", err)
		}
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// WriteTable prints scores as an aligned table for a person.
func WriteTable(w io.Writer, scores []Score) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "set\tpart\tqueries\tanswered\tpartial\tfailed\tMRR@10\tS@1\tS@10\tnDCG@10\tp50 ms\tp95 ms")
	for _, s := range scores {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.1f\t%.1f\n", s.Set, s.Part, s.Queries, s.Answered,
			s.Partial, s.Failed, s.MRR10, s.S1, s.S10, s.NDCG10, s.P50MS, s.P95MS)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// WriteMarkdown prints scores as a Markdown table.
func WriteMarkdown(w io.Writer, scores []Score) error {
	var b strings.Builder
	b.WriteString("| set | part | queries | answered | partial | failed | MRR@10 | S@1 | S@10 | nDCG@10 | p50 ms | p95 ms |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range scores {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f |\n", s.Set, s.Part, s.Queries,
			s.Answered, s.Partial, s.Failed, s.MRR10, s.S1, s.S10, s.NDCG10, s.P50MS, s.P95MS)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}
