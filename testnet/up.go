package testnet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"sou/testnet/simweb"
)

// UpConfig describes a live testnet (`sou testnet up`).
type UpConfig struct {
	Nodes     int
	Hosts     int
	Pages     int
	Seed      int64
	Sites     string
	Misbehave []string
	// NodeProcs is as in RunConfig.
	NodeProcs int
	Binary    string
	Dir       string
	Keep      bool
	// Out receives the live progress; Interactive redraws it in place.
	Out         io.Writer
	Interactive bool
	Log         *slog.Logger
}

// Up starts the simulated web and the nodes, seeds the crawl and shows
// progress until ctx ends (Ctrl-C), then tears everything down.
func Up(ctx context.Context, cfg UpConfig) error {
	rc := RunConfig{Nodes: cfg.Nodes, Hosts: cfg.Hosts, Pages: cfg.Pages, Sites: cfg.Sites, NodeProcs: cfg.NodeProcs}
	if err := rc.Validate(); err != nil {
		return err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir := cfg.Dir
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("--dir: %w", err)
		}
	} else {
		d, err := os.MkdirTemp("", "sou-testnet-")
		if err != nil {
			return fmt.Errorf("testnet directory: %w", err)
		}
		dir = d
	}
	if !cfg.Keep {
		defer os.RemoveAll(dir)
	}
	web, err := simweb.Start(ctx, simweb.Config{
		Seed: cfg.Seed, Hosts: cfg.Hosts, Pages: cfg.Pages, Sites: cfg.Sites, Misbehave: cfg.Misbehave, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("simulated web: %w", err)
	}
	defer web.Close()
	truth := web.Truth()
	out := cfg.Out
	fmt.Fprintf(out, "simulated web: http %s, dns %s, control %s\n", web.HTTPAddr(), web.DNSAddr(), web.ControlURL())
	fmt.Fprintf(out, "               %d hosts, %d required pages\n", len(truth.Hosts), truth.Required)

	l := newLauncher(cfg.Binary, dir, web.DNSAddr(), rc.nodeProcs())
	defer func() {
		fmt.Fprintln(out, "stopping nodes…")
		l.stopAll()
		if cfg.Keep {
			fmt.Fprintf(out, "data directories kept in %s\n", dir)
		}
	}()
	for i := 0; i < cfg.Nodes; i++ {
		p, err := l.start(ctx, i, l.bootstrapAddrs())
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "node %d: http://%s/  peer %s\n", i, p.HTTP, p.PeerID)
	}
	if err := waitMembers(ctx, l, cfg.Nodes, 30*time.Second); err != nil {
		return err
	}
	if err := l.all()[0].postJSON(ctx, "/api/crawl", map[string]any{"urls": web.Seeds()}); err != nil {
		return fmt.Errorf("seed the crawl: %w", err)
	}
	fmt.Fprintf(out, "crawl seeded with %d URLs; search from any node's UI above. Ctrl-C stops the testnet.\n\n", len(web.Seeds()))

	prog := newProgress(truth, nodeBodyCap())
	start := time.Now()
	lines := 0
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		reqs, fetched := prog.update(web)
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "node\thosts\tfetched\tpages/s\tfrontier\toutbox\tindexed\tmembers\t")
		for _, p := range l.all() {
			st, err := p.status(ctx)
			if err != nil {
				fmt.Fprintf(tw, "%d\t-\t-\t-\t-\t-\t-\tdown\t\n", p.Index)
				continue
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%.0f\t%d\t%d\t%d\t%d\t\n", p.Index, st.OwnedHosts, st.Crawl.Fetched,
				st.Crawl.FetchRate, st.Crawl.Frontier, st.Outbox, st.Index.Docs, st.Members)
		}
		tw.Flush()
		frac := float64(fetched) / float64(max(1, truth.Required))
		fmt.Fprintf(&b, "%s %5.1f%%  %d/%d required pages, %d requests, %s\n", bar(frac, 40), 100*frac, fetched,
			truth.Required, reqs, time.Since(start).Truncate(time.Second))
		text := b.String()
		if cfg.Interactive && lines > 0 {
			fmt.Fprintf(out, "\x1b[%dA\x1b[J", lines)
		}
		fmt.Fprint(out, text)
		lines = strings.Count(text, "\n")
	}
}

func bar(frac float64, width int) string {
	n := int(frac * float64(width))
	n = max(0, min(n, width))
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}
