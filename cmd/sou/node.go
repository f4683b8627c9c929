package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sou/node"
)

func newNodeCmd() *cobra.Command {
	cfg := node.DefaultConfig()
	var configPath, logLevel string
	minFreeMB := cfg.MinFreeDisk >> 20
	memLimitMB := uint64(defaultMemoryLimitMB)
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a sou node: crawler, index shard and search coordinator",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnvAndConfig(cmd.Flags(), configPath); err != nil {
				return err
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			if minFreeMB > 1<<30 {
				return fmt.Errorf("--min-free-disk-mb %d: more than a petabyte", minFreeMB)
			}
			cfg.MinFreeDisk = minFreeMB << 20
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			if err := setMemoryLimit(memLimitMB, log); err != nil {
				return err
			}
			ctx := cmd.Context()
			n, err := node.New(ctx, cfg, log)
			if err != nil {
				return err
			}
			printBanner(cmd, n, cfg)
			return n.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "config file of `flag = value` lines (flags and SOU_* environment variables win)")
	f.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data directory (Badger database and identity key)")
	f.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "address of the HTTP API and web UI")
	f.StringVar(&cfg.HTTPToken, "http-token", "", "token for the API (Authorization: Bearer) and the web UI (log in at /login); required to bind --http beyond loopback")
	f.BoolVar(&cfg.PublicSearch, "public-search", false, "serve search and cached pages to anyone (other routes still need the token)")
	f.StringSliceVar(&cfg.HTTPHosts, "http-host", nil, "a name browsers reach the API by (repeatable); without --http-token only localhost, IP addresses and these are answered")
	f.IntVar(&cfg.SearchConcurrency, "http-max-searches", node.DefaultSearchConcurrency, "searches and cached-page views served at once; more are answered 429")
	f.IntVar(&cfg.SearchConcurrencyPerClient, "http-max-searches-per-client", node.DefaultSearchConcurrencyPerClient, "searches and cached-page views served at once to one client address")
	f.StringVar(&cfg.DNS, "dns", "", "DNS server for the crawler, ip:port (default: the system's)")
	f.StringSliceVar(&cfg.Seeds, "seed", nil, "seed URLs to crawl (repeatable)")
	f.StringVar(&cfg.Network, "network", cfg.Network, "network name; nodes of different networks never mix")
	f.StringSliceVar(&cfg.Listen, "listen", cfg.Listen, "libp2p listen multiaddrs")
	f.StringSliceVar(&cfg.Bootstrap, "bootstrap", nil, "bootstrap peer multiaddrs (with /p2p/ID)")
	f.StringVar(&cfg.PSKFile, "psk", "", "file with a 32-byte pre-shared key in hex: a private network")
	f.BoolVar(&cfg.MDNS, "mdns", cfg.MDNS, "discover peers on the LAN with mDNS")
	f.BoolVar(&cfg.WAN, "wan", false, "use WAN membership timeouts")
	f.BoolVar(&cfg.Fast, "fast", false, "testnet crawling: no politeness delay (still one request per host at a time)")
	f.BoolVar(&cfg.AllowLoopback, "allow-loopback", false, "let the crawler fetch from loopback addresses (testnets)")
	f.BoolVar(&cfg.AllowPrivate, "allow-private", false, "let the crawler fetch from private and link-local addresses")
	f.IntVar(&cfg.Workers, "workers", 0, "concurrent fetches (0 = default)")
	f.StringVar(&cfg.SourceIP, "source-ip", "", "local address of the crawler's connections (default: the system's choice)")
	f.DurationVar(&cfg.MinDelay, "min-delay", 0, "minimum delay between requests to one host (0 = default)")
	f.IntVar(&cfg.MaxPagesPerHost, "max-pages-per-host", 0, "page budget per host (0 = unlimited)")
	f.Uint64Var(&minFreeMB, "min-free-disk-mb", minFreeMB, "stop crawling and taking in data while the data directory's disk has less free space than this (0 = never)")
	f.Uint64Var(&memLimitMB, "memory-limit-mb", memLimitMB, "soft limit of the Go heap and runtime, in MiB: the garbage collector works harder near it (0 = none; the GOMEMLIMIT environment variable wins)")
	f.StringVar(&cfg.Sync, "sync", cfg.Sync, "what is flushed to disk before it counts as stored: acked (what peers delivered, before it is acknowledged), always (every write) or none")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// defaultMemoryLimitMB keeps a node near the 300 MB RSS target on a
// volunteer's machine: a node's live heap is bounded (memtables, caches,
// buffered postings), but at GOGC=100 the heap grows to twice the live
// data before a collection, and transient buffers (Badger's table builds,
// flush encoding) push the peak further. The soft limit makes the
// collector run sooner near it; the runtime caps the collector's CPU at
// half the process, so a node whose live data outgrows the limit slows
// down rather than dying. The C heap (gojieba's dictionary, ~51 MB) is
// outside the limit. A higher limit costs the collector less CPU but
// takes a node's memory past its target (BENCHMARKS.md, "Analyse once, a
// smaller dictionary"). The node sizes its Badger memtables from the
// limit (node.BadgerOptions), so it is set before the node opens.
const defaultMemoryLimitMB = 224

// setMemoryLimit applies --memory-limit-mb unless GOMEMLIMIT is set.
func setMemoryLimit(mb uint64, log *slog.Logger) error {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info("memory limit from GOMEMLIMIT", "limit", os.Getenv("GOMEMLIMIT"))
		return nil
	}
	if mb == 0 {
		return nil
	}
	if mb > 1<<30 {
		return fmt.Errorf("--memory-limit-mb %d: more than a petabyte", mb)
	}
	debug.SetMemoryLimit(int64(mb) << 20)
	return nil
}

func printBanner(cmd *cobra.Command, n *node.Node, cfg node.Config) {
	w := cmd.OutOrStdout()
	st := n.Status(cmd.Context())
	fmt.Fprintf(w, "sou node %s\n", time.Now().Format(time.RFC3339))
	fmt.Fprintf(w, "  peer ID   %s\n", st.PeerID)
	fmt.Fprintf(w, "  network   %s\n", cfg.Network)
	fmt.Fprintf(w, "  addresses %s\n", strings.Join(st.Addrs, "\n            "))
	fmt.Fprintf(w, "  web UI    http://%s/\n", cfg.HTTPAddr)
	fmt.Fprintf(w, "  data      %s\n", cfg.DataDir)
}
