package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"sou/eval"
	"sou/node"
	"sou/search"
)

// evalReport is what `sou eval --json` prints.
type evalReport struct {
	Node    string       `json:"node"`
	Members int          `json:"members"`
	Docs    int64        `json:"node_docs"`
	Split   eval.Split   `json:"split"`
	At      time.Time    `json:"at"`
	Scores  []eval.Score `json:"scores"`
	Misses  string       `json:"misses_file,omitempty"`
}

// maxEvalConcurrency bounds --concurrency: more searches at once only
// measure the node's queueing.
const maxEvalConcurrency = 64

func newEvalCmd() *cobra.Command {
	var c clientFlags
	var files, langs []string
	var missesPath, splitFlag string
	var concurrency int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "eval --qrels FILE[,FILE...]",
		Short: "Score a node's search on known-item judgments: MRR@10, Success@1/10, nDCG@10 per set",
		Long: `Runs every judged query of each file (QID<TAB>QUERY<TAB>URL[,URL...], as
../shared/corpus/qrels.py and bench/docindex_qrels.py print them) at a node
and prints, per set and part, the queries, how many were answered by every
peer, MRR@10, Success@1, Success@10, nDCG@10 and the searches' p50/p95
latency. Searches that fail or come back without every peer are counted
apart and not scored. Exit codes: 0 all answered, 1 some searches failed,
3 node unreachable, 4 some answers were partial.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			usage := func(err error) error { return &exitError{code: exitUsage, err: err} }
			if len(files) == 0 {
				return usage(errors.New("--qrels FILE[,FILE...] is required"))
			}
			split, err := eval.ParseSplit(splitFlag)
			if err != nil {
				return usage(fmt.Errorf("--split: %w", err))
			}
			if concurrency < 1 || concurrency > maxEvalConcurrency {
				return usage(fmt.Errorf("--concurrency %d: want 1 to %d", concurrency, maxEvalConcurrency))
			}
			if timeout < 0 {
				return usage(fmt.Errorf("--timeout %v: want a positive search deadline, or 0 for the node's default", timeout))
			}
			readers, err := eval.ParseReaders(langs)
			if err != nil {
				return usage(fmt.Errorf("--qrels-lang: %w", err))
			}
			sets := make([]eval.Set, 0, len(files))
			for _, f := range files {
				s, err := eval.ReadFile(f)
				if err != nil {
					return usage(fmt.Errorf("--qrels: %w", err))
				}
				sets = append(sets, s)
			}
			for name := range readers {
				if !slices.ContainsFunc(sets, func(s eval.Set) bool { return s.Name == name }) {
					return usage(fmt.Errorf("--qrels-lang: no --qrels file is set %s", name))
				}
			}
			o := evalOptions{readers: readers, concurrency: concurrency, timeout: timeout, out: cmd.OutOrStdout(), progress: cmd.ErrOrStderr()}
			if missesPath == "" {
				return runEval(cmd.Context(), &c, sets, split, o)
			}
			// Created before the searches: a bad path fails at once.
			f, err := os.Create(missesPath)
			if err != nil {
				return usage(fmt.Errorf("--misses: %w", err))
			}
			o.misses, o.missesPath = f, absPath(missesPath)
			err = runEval(cmd.Context(), &c, sets, split, o)
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("--misses: %w", cerr)
			}
			return err
		},
	}
	c.register(cmd)
	f := cmd.Flags()
	f.StringSliceVar(&files, "qrels", nil, "judgment files, comma-separated or repeated")
	f.StringSliceVar(&langs, "qrels-lang", nil, "language of a set's readers, SET=LANGUAGE (lo-zh-CN=zh-CN; SET is the file's name without extension), sent with its queries as a browser sends Accept-Language")
	f.StringVar(&missesPath, "misses", "", "write every miss, partial and failed search here (tab-separated, with the top 10 returned)")
	f.StringVar(&splitFlag, "split", string(eval.All), "part of each set to run: dev (tune on it), test (held out) or all (both, printed apart)")
	f.IntVar(&concurrency, "concurrency", 1, "searches in flight at once (above 1, latency includes queueing at the node)")
	f.DurationVar(&timeout, "timeout", 2*time.Second, "search deadline the node keeps (0 = the node's default)")
	return cmd
}

type evalOptions struct {
	readers     map[string]string // a set's readers' language (eval.ParseReaders)
	concurrency int
	timeout     time.Duration
	misses      io.Writer // nil: no misses file
	missesPath  string
	out         io.Writer
	progress    io.Writer
}

// runEval scores sets at the node of c and prints the table or JSON.
func runEval(ctx context.Context, c *clientFlags, sets []eval.Set, split eval.Split, o evalOptions) error {
	var st node.Status
	if err := c.call(ctx, "GET", "/api/status", nil, &st); err != nil {
		return err
	}
	searcher := func(lang string) eval.Searcher {
		return func(ctx context.Context, q string) (eval.Answer, error) {
			v := url.Values{"q": {q}, "n": {fmt.Sprint(eval.Cutoff)}}
			if o.timeout > 0 {
				v.Set("timeout", o.timeout.String())
			}
			if lang != "" {
				v.Set("lang", lang)
			}
			var resp search.Response
			if err := c.call(ctx, "GET", "/api/search?"+v.Encode(), nil, &resp); err != nil {
				return eval.Answer{}, err
			}
			a := eval.Answer{Partial: !resp.Coverage.Complete}
			for _, r := range resp.Results {
				a.URLs = append(a.URLs, r.URL)
			}
			return a, nil
		}
	}
	rep := evalReport{Node: c.node, Members: st.Members, Docs: st.Index.Docs, Split: split, At: time.Now().UTC()}
	if o.misses != nil {
		rep.Misses = o.missesPath
		if _, err := fmt.Fprintln(o.misses, eval.MissesHeader); err != nil {
			return fmt.Errorf("--misses: %w", err)
		}
	}
	for _, s := range sets {
		fmt.Fprintf(o.progress, "%s: %d judged queries (%s)\n", s.Name, len(s.Part(split).Judgments), split)
		outs, err := eval.Run(ctx, s, split, searcher(o.readers[s.Name]), o.concurrency)
		if err != nil {
			return err
		}
		rep.Scores = append(rep.Scores, eval.Scores(s.Name, split, outs)...)
		if o.misses != nil {
			if err := eval.WriteMisses(o.misses, s.Name, outs); err != nil {
				return err
			}
		}
	}
	if c.json {
		if err := writeReportJSON(o.out, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.out, "node %s: %d members, %d documents here; split %s; %s\n", c.node, rep.Members, rep.Docs, split, rep.At.Format(time.RFC3339))
		if err := eval.WriteTable(o.out, rep.Scores); err != nil {
			return err
		}
		if rep.Misses != "" {
			fmt.Fprintf(o.out, "misses: %s\n", rep.Misses)
		}
	}
	return evalExit(rep.Scores, split)
}

// evalExit turns failed and partial searches into the client exit codes.
// Under split all the all rows alone are counted (the dev and test rows
// repeat them).
func evalExit(scores []eval.Score, split eval.Split) error {
	failed, partial := 0, 0
	for _, s := range scores {
		if s.Part == split {
			failed += s.Failed
			partial += s.Partial
		}
	}
	switch {
	case failed > 0:
		return &exitError{code: exitFailure, err: fmt.Errorf("%d searches failed (and %d were partial); their metrics leave them out", failed, partial)}
	case partial > 0:
		return &exitError{code: exitPartial, err: fmt.Errorf("%d searches answered without every peer; their metrics leave them out", partial)}
	}
	return nil
}

// absPath is p made absolute for the report, or p when that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
