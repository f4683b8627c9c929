package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sou/testnet/simweb"
)

func newTestnetWebCmd() *cobra.Command {
	var (
		cfg         simweb.Config
		misbehave   string
		truthOut    string
		requestsOut string
		verbose     bool
	)
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Run the simulated web: virtual hosts over HTTP and an authoritative DNS server",
		Long: `Run the simulated web until interrupted.

Synthetic mode (--hosts N --pages M) generates N hosts named like news-17.sim.test
deterministically from --seed; --sites serves real sites from a sites.tsv
(HOST<TAB>DOCROOT<TAB>SEEDS<TAB>ROLE). Both can run together.

Misbehaviour classes (--misbehave all|none|a,b,...):
  ` + strings.Join(simweb.AllClasses, ", ") + `

The control address serves /truth and /requests?since=N as JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Hosts < 0 {
				return fmt.Errorf("--hosts must be >= 0, got %d", cfg.Hosts)
			}
			if cfg.Pages < 0 {
				return fmt.Errorf("--pages must be >= 0, got %d", cfg.Pages)
			}
			if cfg.Hosts == 0 && cfg.Sites == "" {
				return errors.New("nothing to serve: give --hosts N or --sites FILE")
			}
			cfg.Misbehave = nil
			if misbehave != "" {
				cfg.Misbehave = strings.Split(misbehave, ",")
			}
			if _, err := simweb.ParseClasses(cfg.Misbehave); err != nil {
				return err
			}
			for _, f := range []string{truthOut, requestsOut} {
				if f == "" {
					continue
				}
				if fi, err := os.Stat(filepath.Dir(f)); err != nil || !fi.IsDir() {
					return fmt.Errorf("output file %s: directory does not exist", f)
				}
			}
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx := cmd.Context()
			began := time.Now()
			w, err := simweb.Start(ctx, cfg)
			if err != nil {
				return err
			}
			defer w.Close()
			out := cmd.OutOrStdout()
			webPrintAddrs(out, w, time.Since(began))
			if truthOut != "" {
				if cfg.Sites != "" {
					fmt.Fprintln(out, "truth:   walking the directory sites (reads every reachable page)...")
				}
				if err := webWriteFile(truthOut, w.WriteTruth); err != nil {
					return err
				}
				t := w.Truth()
				fmt.Fprintf(out, "truth:   %s (%d URLs, %d required)\n", truthOut, len(t.Pages), t.Required)
			} else if cfg.Sites == "" {
				t := w.Truth()
				fmt.Fprintf(out, "truth:   %d URLs, %d required (GET %s/truth)\n", len(t.Pages), t.Required, w.ControlURL())
			}
			fmt.Fprintln(out, "serving; press Ctrl-C to stop")
			<-ctx.Done()
			fmt.Fprintln(out, "stopping")
			if requestsOut != "" {
				if err := webWriteFile(requestsOut, w.WriteRequests); err != nil {
					return err
				}
				fmt.Fprintf(out, "requests: %s (%d entries)\n", requestsOut, len(w.Requests(0)))
			}
			return w.Close()
		},
	}
	f := cmd.Flags()
	f.Int64Var(&cfg.Seed, "seed", 1, "seed of the synthetic web")
	f.IntVar(&cfg.Hosts, "hosts", 0, "number of synthetic hosts (0 = none)")
	f.IntVar(&cfg.Pages, "pages", 0, "synthetic pages in total (default 100 per host)")
	f.StringVar(&cfg.Sites, "sites", "", "sites.tsv of real sites to serve (directory mode)")
	f.StringVar(&misbehave, "misbehave", "all", "misbehaviour classes: all, none, or a comma-separated list")
	f.StringVar(&cfg.BindIP, "ip", "", "IPv4 loopback address to bind (default a random 127.x.y.z)")
	f.IntVar(&cfg.Port, "port", 0, "HTTP port (default 80 if it can be bound, else a random high port)")
	f.StringVar(&cfg.ControlAddr, "control", "", "control address for /truth and /requests (default 127.0.0.1:random)")
	f.StringVar(&truthOut, "truth-out", "", "write the truth listing as JSON to this file once ready")
	f.StringVar(&requestsOut, "requests-out", "", "write the request log as JSON to this file on exit")
	f.BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	return cmd
}

func webPrintAddrs(out io.Writer, w *simweb.Web, took time.Duration) {
	fmt.Fprintf(out, "simulated web up in %s\n", took.Round(time.Millisecond))
	fmt.Fprintf(out, "http:    %s\n", w.HTTPAddr())
	if w.HTTP6Addr() != "" {
		fmt.Fprintf(out, "http6:   %s\n", w.HTTP6Addr())
	} else {
		fmt.Fprintln(out, "http6:   (unavailable)")
	}
	fmt.Fprintf(out, "dns:     %s (udp+tcp)\n", w.DNSAddr())
	fmt.Fprintf(out, "control: %s  (/truth, /requests?since=N, /seeds)\n", w.ControlURL())
	seeds := w.Seeds()
	fmt.Fprintf(out, "seeds:   %d\n", len(seeds))
	for i, s := range seeds {
		if i == 20 {
			fmt.Fprintf(out, "  ... and %d more (GET %s/seeds)\n", len(seeds)-20, w.ControlURL())
			break
		}
		fmt.Fprintf(out, "  %s\n", s)
	}
	host, port := webHostPort(w.DNSAddr())
	example := webExampleHost(w)
	if example != "" {
		fmt.Fprintf(out, "try:\n  dig @%s -p %s %s\n", host, port, example)
		hhost, hport := webHostPort(w.HTTPAddr())
		portPart := ""
		if hport != "80" {
			portPart = ":" + hport
		}
		fmt.Fprintf(out, "  curl --resolve %s:%s:%s http://%s%s/\n", example, hport, hhost, example, portPart)
	}
}

func webHostPort(addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return addr, ""
	}
	return strings.Trim(addr[:i], "[]"), addr[i+1:]
}

// webExampleHost picks a host for the dig/curl example, preferring news-17.
func webExampleHost(w *simweb.Web) string {
	hosts := w.HostNames()
	if len(hosts) == 0 {
		return ""
	}
	best := hosts[0]
	for _, h := range hosts {
		if h == "news-17.sim.test" {
			return h
		}
		if strings.HasPrefix(best, "portal-") && strings.HasPrefix(h, "news-") {
			best = h
		}
	}
	return best
}

func webWriteFile(name string, write func(io.Writer) error) error {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := write(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
