package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sou/testnet"
)

// newTestnetSimCmd is `sou testnet sim`, the WAN simulator (issue 8).
func newTestnetSimCmd() *cobra.Command {
	var cfg testnet.SimConfig
	var asJSON bool
	var latency, loss, bandwidth, misbehave, reportDir, cpuProfile, pprofAddr string
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate a WAN network in one process: N real nodes on emulated links (latency, bandwidth, loss, churn), crawl, query phase, report",
		Long: `sim runs many real sou nodes in this process on go-libp2p mocknet links with
per-link latency and bandwidth (loss emulated as retransmission delay), each
with an in-memory store and its own loopback source address, crawling the
simulated web, which delays each response by a per-(node, host) latency.
It prints the report of "sou testnet run" plus a sim section (crawl speed,
resource use, coordination traffic per page, owner-lookup hops, query
fan-out cost and latency) and exits 1 when the report is not ok.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			usage := func(err error) error { return &exitError{code: 2, err: err} }
			if cfg.LatencyMin, cfg.LatencyMax, err = testnet.ParseLatencyRange(latency); err != nil {
				return usage(err)
			}
			if cfg.Loss, err = testnet.ParseLossPercent(loss); err != nil {
				return usage(err)
			}
			if cfg.Bandwidth, err = testnet.ParseBandwidth(bandwidth); err != nil {
				return usage(err)
			}
			if misbehave != "" {
				cfg.Misbehave = strings.Split(misbehave, ",")
			}
			if err := cfg.Validate(); err != nil {
				return usage(err)
			}
			cfg.Progress = cmd.ErrOrStderr()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return usage(fmt.Errorf("--cpuprofile: %w", err))
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			if pprofAddr != "" {
				stop, err := servePprof(cmd.Context(), pprofAddr)
				if err != nil {
					return usage(fmt.Errorf("--pprof-addr: %w", err))
				}
				defer stop()
			}
			rep, err := testnet.Sim(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if reportDir != "" {
				if err := testnet.WriteSimReportDir(reportDir, rep); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := writeReportJSON(out, rep); err != nil {
					return err
				}
			} else {
				testnet.PrintSummary(out, rep.Report)
				testnet.PrintSimSummary(out, rep.Sim)
			}
			if !rep.OK {
				return &exitError{code: 1, err: fmt.Errorf("simulation report not ok: %s", strings.Join(rep.Failures, "; "))}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 32, "simulated nodes")
	f.IntVar(&cfg.Hosts, "hosts", 400, "synthetic hosts")
	f.IntVar(&cfg.Pages, "pages", 8000, "synthetic pages in total")
	f.Int64Var(&cfg.Seed, "seed", 1, "seed of the synthetic web, the latency matrix and the scenario")
	f.StringVar(&latency, "latency", "20ms..200ms", "one-way latency range of node links and of each (node, host) pair, MIN..MAX")
	f.StringVar(&loss, "loss", "0%", "packet loss on node links, in percent")
	f.StringVar(&bandwidth, "bandwidth", "10Mbit", "bandwidth of each node link (10Mbit, 512kbit, 2MB; 0 = unlimited)")
	f.Float64Var(&cfg.Churn, "churn", 0, "nodes joining and nodes leaving per minute during the crawl (each)")
	f.IntVar(&cfg.Queries, "queries", 50, "queries in the query phase (0 = none)")
	f.IntVar(&cfg.QueryNodes, "query-nodes", 5, "nodes each query is asked at")
	f.IntVar(&cfg.Workers, "workers", 8, "crawl workers per node")
	f.StringVar(&misbehave, "misbehave", "none", "misbehaviour classes of the simulated web: all, none, or a comma list")
	f.DurationVar(&cfg.Timeout, "timeout", 15*time.Minute, "give up when the crawl has not finished by then")
	f.StringVar(&reportDir, "report-dir", "", "also write report.json, report.md and SVG plots into this directory")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole simulation to this file")
	_ = f.MarkHidden("cpuprofile")
	f.StringVar(&pprofAddr, "pprof-addr", "", "serve net/http/pprof on this loopback address while the simulation runs (goroutine and heap profiles of all nodes)")
	_ = f.MarkHidden("pprof-addr")
	return cmd
}
