package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"sou/node"
	"sou/search"
)

// Exit codes of the client commands.
const (
	exitFailure     = 1 // the command failed
	exitUsage       = 2 // bad flags or arguments
	exitUnreachable = 3 // the node could not be reached
	exitPartial     = 4 // search answered, but not every peer did
)

// clientFlags are shared by every command that talks to a node's API.
type clientFlags struct {
	node    string
	token   string
	json    bool
	timeout time.Duration
}

func (c *clientFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.node, "node", envOr("SOU_NODE", "http://127.0.0.1:7070"), "the node's API base URL")
	f.StringVar(&c.token, "token", os.Getenv("SOU_HTTP_TOKEN"), "bearer token (the node's --http-token)")
	f.BoolVar(&c.json, "json", false, "print JSON for scripts")
	f.DurationVar(&c.timeout, "http-timeout", 30*time.Second, "HTTP timeout")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// call does one API request and decodes a JSON answer into out. API errors
// come back as {"error": "..."} and become Go errors.
func (c *clientFlags) call(ctx context.Context, method, path string, body, out any) error {
	base, err := url.Parse(c.node)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return &exitError{code: exitUsage, err: fmt.Errorf("--node %q: want a URL like http://127.0.0.1:7070", c.node)}
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.node, "/")+path, rd)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("node %s unreachable: %w", c.node, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("read answer: %w", err)}
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s (HTTP %d)", e.Error, resp.StatusCode)
		}
		return fmt.Errorf("HTTP %d from %s", resp.StatusCode, path)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer from %s: %w", path, err)
	}
	return nil
}

func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(w)
	return err
}

func newSearchCmd() *cobra.Command {
	var c clientFlags
	var page, n int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "search QUERY...",
		Short: "Search the network from a node",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := url.Values{"q": {strings.Join(args, " ")}, "page": {fmt.Sprint(page)}, "n": {fmt.Sprint(n)}}
			if timeout > 0 {
				v.Set("timeout", timeout.String())
			}
			var raw json.RawMessage
			if err := c.call(cmd.Context(), "GET", "/api/search?"+v.Encode(), nil, &raw); err != nil {
				return err
			}
			var resp search.Response
			if err := json.Unmarshal(raw, &resp); err != nil {
				return fmt.Errorf("decode search answer: %w", err)
			}
			w := cmd.OutOrStdout()
			if c.json {
				if err := printJSON(w, raw); err != nil {
					return err
				}
			} else {
				printResults(w, &resp, c.node)
			}
			if !resp.Coverage.Complete {
				return &exitError{code: exitPartial, err: fmt.Errorf("partial results: %d of %d peers answered", resp.Coverage.Answered, resp.Coverage.Asked)}
			}
			return nil
		},
	}
	c.register(cmd)
	cmd.Flags().IntVar(&page, "page", 1, "result page")
	cmd.Flags().IntVar(&n, "n", 10, "results per page")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "search deadline (0 = the node's default)")
	return cmd
}

func printResults(w io.Writer, r *search.Response, base string) {
	for i, res := range r.Results {
		title := res.Title
		if title == "" {
			title = res.URL
		}
		fmt.Fprintf(w, "%2d. %s\n    %s\n", (r.Page-1)*r.N+i+1, terminalText(title), terminalText(res.URL))
		if s := terminalSnippet(res.Snippet, res.Highlights); s != "" {
			fmt.Fprintf(w, "    %s\n", s)
		}
		fmt.Fprintf(w, "    cached: %s/api/cache?url=%s&q=%s\n", strings.TrimRight(base, "/"), url.QueryEscape(res.URL), url.QueryEscape(r.Query))
	}
	if len(r.Results) == 0 {
		fmt.Fprintln(w, "no results")
	}
	cached := ""
	if r.Cached {
		cached = ", from cache"
	}
	fmt.Fprintf(w, "\n%d results in %.1f ms%s; coverage: %d of %d peers answered", r.Total, r.ElapsedMS, cached, r.Coverage.Answered, r.Coverage.Asked)
	if r.Coverage.TimedOut+r.Coverage.Failed > 0 {
		fmt.Fprintf(w, " (%d timed out, %d failed)", r.Coverage.TimedOut, r.Coverage.Failed)
	}
	fmt.Fprintln(w)
}

// terminalSnippet prints a result's plain-text snippet with its
// highlights in bold.
func terminalSnippet(snippet string, highlights [][2]int) string {
	var b strings.Builder
	for _, p := range search.SnippetParts(snippet, highlights) {
		if p.Match {
			b.WriteString("\x1b[1m" + terminalText(p.Text) + "\x1b[0m")
		} else {
			b.WriteString(terminalText(p.Text))
		}
	}
	return b.String()
}

// terminalText is s with control characters (a terminal's escape
// sequences among them) as spaces: the node may be remote, and what it
// shows came from crawled pages and peers.
func terminalText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func newCrawlCmd() *cobra.Command {
	crawlCmd := &cobra.Command{Use: "crawl", Short: "Crawl commands"}
	var c clientFlags
	add := &cobra.Command{
		Use:   "add URL...",
		Short: "Submit seed URLs to the network through a node",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var raw json.RawMessage
			if err := c.call(cmd.Context(), "POST", "/api/crawl", map[string]any{"urls": args}, &raw); err != nil {
				return err
			}
			if c.json {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			var out struct {
				Accepted int      `json:"accepted"`
				Rejected []string `json:"rejected"`
			}
			_ = json.Unmarshal(raw, &out)
			fmt.Fprintf(cmd.OutOrStdout(), "accepted %d URL(s)\n", out.Accepted)
			for _, r := range out.Rejected {
				fmt.Fprintf(cmd.OutOrStdout(), "rejected %s\n", r)
			}
			if len(out.Rejected) > 0 {
				return &exitError{code: exitFailure, err: errors.New("some URLs were rejected")}
			}
			return nil
		},
	}
	c.register(add)
	crawlCmd.AddCommand(add)
	return crawlCmd
}

func newStatusCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show a node's state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var raw json.RawMessage
			if err := c.call(cmd.Context(), "GET", "/api/status", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			var s node.Status
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("decode status: %w", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "peer ID\t%s\n", s.PeerID)
			fmt.Fprintf(tw, "network\t%s\n", s.Network)
			fmt.Fprintf(tw, "members\t%d\n", s.Members)
			fmt.Fprintf(tw, "key prefix\t%s\n", s.KeyPrefix)
			fmt.Fprintf(tw, "hosts owned / known\t%d / %d\n", s.OwnedHosts, s.KnownHosts)
			fmt.Fprintf(tw, "frontier\t%d\n", s.Crawl.Frontier)
			fmt.Fprintf(tw, "fetched\t%d (%.1f pages/s)\n", s.Crawl.Fetched, s.Crawl.FetchRate)
			fmt.Fprintf(tw, "indexed documents\t%d\n", s.Index.Docs)
			fmt.Fprintf(tw, "outbox\t%d\n", s.Outbox)
			fmt.Fprintf(tw, "badger\t%.1f MB\n", float64(s.BadgerLSM+s.BadgerVLog)/1e6)
			fmt.Fprintf(tw, "idle\t%v\n", s.Idle)
			for _, e := range s.Errors {
				fmt.Fprintf(tw, "error\t%s %s: %s\n", e.At.Format(time.TimeOnly), e.Where, e.Error)
			}
			return tw.Flush()
		},
	}
	c.register(cmd)
	return cmd
}

func newPeersCmd() *cobra.Command {
	var c clientFlags
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List the members a node sees",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var raw json.RawMessage
			if err := c.call(cmd.Context(), "GET", "/api/peers", nil, &raw); err != nil {
				return err
			}
			if c.json {
				return printJSON(cmd.OutOrStdout(), raw)
			}
			var out struct {
				Peers []node.PeerInfo `json:"peers"`
			}
			if err := json.Unmarshal(raw, &out); err != nil {
				return fmt.Errorf("decode peers: %w", err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PEER\tKEY\tPAGES\tFRONTIER\tSEARCH MS\tADDRESS")
			for _, p := range out.Peers {
				self := ""
				if p.Self {
					self = " (self)"
				}
				addr := ""
				if len(p.Addrs) > 0 {
					addr = p.Addrs[0]
				}
				fmt.Fprintf(tw, "%s%s\t%s\t%d\t%d\t%.1f\t%s\n", p.ID, self, p.KeyPrefix, p.Load.Pages, p.Load.Frontier, p.LatencyMS, addr)
			}
			return tw.Flush()
		},
	}
	c.register(cmd)
	return cmd
}
