package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sou/eval"
	"sou/testnet"
	"sou/testnet/attack"
)

func newTestnetRunCmd() *cobra.Command {
	var cfg testnet.RunConfig
	var asJSON bool
	var misbehave string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a testnet to completion: simulated web, N node processes, crawl, query phase, report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the sou binary: %w", err)
			}
			cfg.Binary = bin
			if misbehave != "" {
				cfg.Misbehave = strings.Split(misbehave, ",")
			}
			cfg.Progress = cmd.ErrOrStderr()
			rep, err := testnet.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeReportJSON(out, rep); err != nil {
					return err
				}
			} else {
				testnet.PrintSummary(out, rep)
			}
			if !rep.OK {
				return &exitError{code: 1, err: fmt.Errorf("testnet report not ok: %s", strings.Join(rep.Failures, "; "))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 1, "number of sou node processes")
	f.IntVar(&cfg.Hosts, "hosts", 100, "synthetic hosts")
	f.IntVar(&cfg.NodeProcs, "node-procs", 0, "GOMAXPROCS of every node process (0 = the machine's cores shared among the nodes, at least one each; all of them with --hostile)")
	f.IntVar(&cfg.Pages, "pages", 5000, "synthetic pages in total")
	f.Int64Var(&cfg.Seed, "seed", 1, "seed of the synthetic web and the scenario")
	f.StringVar(&cfg.Sites, "sites", "", "sites.tsv of real sites to serve as well (../shared/corpus)")
	f.StringVar(&misbehave, "misbehave", "all", "misbehaviour classes of the simulated web: all, none, or a comma list")
	f.StringVar(&cfg.Dir, "dir", "", "directory for node data (default a temporary one)")
	f.BoolVar(&cfg.Keep, "keep", false, "keep the node data directories")
	f.DurationVar(&cfg.Timeout, "timeout", 15*time.Minute, "give up when the crawl has not finished by then")
	f.IntVar(&cfg.Crashes, "crashes", 0, "SIGKILL a random node this many times during the crawl, restarting it each time")
	f.StringVar(&cfg.JoinAt, "join-at", "", "add a node at this crawl fraction (30%) or time (20s)")
	f.StringVar(&cfg.KillAt, "kill-at", "", "SIGKILL a node (not restarted) at this crawl fraction or time")
	f.StringVar(&cfg.RestartAt, "restart-at", "", "SIGKILL a node at this crawl fraction or time and restart it once the others have seen it leave")
	f.StringVar(&cfg.ReportDir, "report-dir", "", "write report.json, report.md and SVG plots (pages over time per node, fetch rate, query latency) to this directory")
	f.IntVar(&cfg.Queries, "queries", 200, "queries in the query phase (0 = none)")
	f.StringSliceVar(&cfg.Qrels, "qrels", nil, "known-item judgment files (QID<TAB>QUERY<TAB>URL[,URL...], see `sou eval`) to score as MRR@10, Success@1/10 and nDCG@10; --report-dir gets their misses")
	f.StringSliceVar(&cfg.QrelsLang, "qrels-lang", nil, "language of a --qrels set's readers, SET=LANGUAGE (lo-zh-CN=zh-CN; SET is the file's name without extension), sent with its queries as a browser sends Accept-Language")
	f.StringVar((*string)(&cfg.QrelsSplit), "qrels-split", string(eval.All), "part of each --qrels set to score: dev, test or all (both, reported apart)")
	f.BoolVar(&cfg.KillAfterCrawl, "kill-after-crawl", false, "after the query phase, SIGKILL a node and check search coverage and the top 10 after the takeover")
	f.IntVar(&cfg.Hostile, "hostile", 0, "start this many attackers (every attack class) once the network has formed; the report gains a hostile section")
	f.StringSliceVar(&cfg.HostileClasses, "hostile-classes", nil, "the attackers' classes (default all): "+strings.Join(attack.Classes, ", "))
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// writeReportJSON prints a testnet report as indented JSON, URLs as they
// are (no HTML escaping).
func writeReportJSON(w io.Writer, rep any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}
