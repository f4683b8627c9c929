package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"sou/testnet"
)

func newTestnetUpCmd() *cobra.Command {
	var cfg testnet.UpConfig
	var misbehave string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a live LAN testnet: simulated web and N node processes, with live progress until Ctrl-C",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			cfg.Binary = bin
			if misbehave != "" {
				cfg.Misbehave = strings.Split(misbehave, ",")
			}
			cfg.Out = cmd.OutOrStdout()
			if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				cfg.Interactive = true
			}
			return testnet.Up(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Nodes, "nodes", 4, "number of sou node processes")
	f.IntVar(&cfg.NodeProcs, "node-procs", 0, "GOMAXPROCS of every node process (0 = the machine's cores shared among the nodes, at least one each)")
	f.IntVar(&cfg.Hosts, "hosts", 100, "synthetic hosts (0 with --sites for the real corpus only)")
	f.IntVar(&cfg.Pages, "pages", 5000, "synthetic pages in total")
	f.Int64Var(&cfg.Seed, "seed", 1, "seed of the synthetic web")
	f.StringVar(&cfg.Sites, "sites", "", "sites.tsv of real sites to serve as well (../shared/corpus)")
	f.StringVar(&misbehave, "misbehave", "all", "misbehaviour classes: all, none, or a comma list")
	f.StringVar(&cfg.Dir, "dir", "", "directory for node data (default a temporary one)")
	f.BoolVar(&cfg.Keep, "keep", false, "keep the node data directories")
	return cmd
}
