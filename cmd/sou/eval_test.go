package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sou/eval"
	"sou/node"
	"sou/search"
	"sou/testnet/simweb"
)

// crawledNode starts a simulated web and one real node in this process,
// lets it crawl the web to the end and returns the node's API URL and the
// web's truth.
func crawledNode(t *testing.T) (string, *simweb.Truth) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	web, err := simweb.Start(ctx, simweb.Config{Seed: 21, Hosts: 3, Pages: 90, Misbehave: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.DataDir, cfg.HTTPAddr, cfg.DNS = t.TempDir(), "127.0.0.1:0", web.DNSAddr()
	cfg.Network = fmt.Sprintf("eval-test-%d", time.Now().UnixNano())
	cfg.Listen, cfg.MDNS, cfg.Fast, cfg.AllowLoopback = []string{"/ip4/127.0.0.1/tcp/0"}, false, true, true
	cfg.MinFreeDisk = 0
	cfg.Seeds = web.Seeds()
	n, err := node.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
		web.Close()
	})
	truth := web.Truth()
	deadline := time.Now().Add(90 * time.Second)
	for n.HTTPAddr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the node's API never came up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	api := "http://" + n.HTTPAddr()
	// Crawled and searchable: every required page stored and the first
	// title found (postings are flushed in batches).
	probe := firstTitle(truth)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the node did not crawl %d pages and answer %q within 90 s", truth.Required, probe.Title)
		}
		st := n.Status(ctx)
		if st.Idle && st.Crawl.Fetched >= int64(truth.Required) && searchFinds(api, probe) {
			return api, truth
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func firstTitle(truth *simweb.Truth) simweb.PageTruth {
	for _, p := range truth.Pages {
		if p.Required && p.Title != "" && !p.Noindex && p.ContentType == "text/html" {
			return p
		}
	}
	return simweb.PageTruth{}
}

func searchFinds(api string, p simweb.PageTruth) bool {
	resp, err := http.Get(api + "/api/search?" + url.Values{"q": {p.Title}}.Encode())
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var r search.Response
	if json.NewDecoder(resp.Body).Decode(&r) != nil {
		return false
	}
	for _, res := range r.Results {
		if eval.MatchKey(res.URL) == eval.MatchKey(p.URL) {
			return true
		}
	}
	return false
}

// runCLI runs the sou command line and returns its output and exit code.
func runCLI(args ...string) (stdout, stderr string, code int) {
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	var ee *exitError
	switch {
	case err == nil:
		code = 0
	case errors.As(err, &ee):
		code = ee.code
	default:
		code = 1
	}
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return out.String(), errOut.String(), code
}

func TestEvalCommand(t *testing.T) {
	api, truth := crawledNode(t)
	dir := t.TempDir()
	var lines []string
	for _, p := range truth.Pages {
		if p.Required && p.Title != "" && !p.Noindex && p.ContentType == "text/html" && len(lines) < 12 {
			lines = append(lines, fmt.Sprintf("t-%02d\t%s\t%s", len(lines), p.Title, p.URL))
		}
	}
	lines = append(lines, "t-nowhere\tqqqzzx xxyyqz\thttp://blog-1.sim.test/")
	good := filepath.Join(dir, "titles.tsv")
	if err := os.WriteFile(good, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "failing.tsv")
	// The node refuses a search with no word in it (HTTP 400).
	if err := os.WriteFile(failing, []byte(lines[0]+"\nt-empty\t!!! ...\thttp://blog-1.sim.test/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	misses := filepath.Join(dir, "misses.tsv")
	devParts := len(eval.Set{Judgments: mustRead(t, good).Judgments}.Part(eval.Dev).Judgments)

	tests := []struct {
		name  string
		args  []string
		code  int
		check func(t *testing.T, out string)
	}{
		{"table and misses", []string{"--qrels", good, "--misses", misses, "--concurrency", "3"}, 0, func(t *testing.T, out string) {
			for _, want := range []string{"MRR@10", "nDCG@10", "titles  dev", "titles  test", "titles  all", "split all", "misses: " + misses} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			b, err := os.ReadFile(misses)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), eval.MissesHeader) || !strings.Contains(string(b), "\tt-nowhere\tmiss\tqqqzzx xxyyqz\thttp://blog-1.sim.test/\t") {
				t.Errorf("misses file lacks the query nothing answers:\n%s", b)
			}
		}},
		{"json, dev part", []string{"--qrels", good, "--split", "dev", "--json"}, 0, func(t *testing.T, out string) {
			var rep evalReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if rep.Split != eval.Dev || len(rep.Scores) != 1 || rep.Members != 1 || rep.Docs == 0 {
				t.Fatalf("report %+v: want one dev row from a one-member network", rep)
			}
			s := rep.Scores[0]
			if s.Part != eval.Dev || s.Queries != devParts || s.Answered != devParts || s.S10 < 0.5 || s.P50MS <= 0 {
				t.Errorf("dev row %+v: want %d queries answered, most titles found", s, devParts)
			}
		}},
		{"a failed search is counted, not scored", []string{"--qrels", failing, "--json"}, exitFailure, func(t *testing.T, out string) {
			var rep evalReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			all := rep.Scores[len(rep.Scores)-1]
			if all.Part != eval.All || all.Queries != 2 || all.Failed != 1 || all.Answered != 1 || all.S10 != 1 {
				t.Errorf("all row %+v: want 1 failed and 1 answered and found", all)
			}
		}},
		{"readers' language", []string{"--qrels", good, "--qrels-lang", "titles=zh-CN", "--json"}, 0, func(t *testing.T, out string) {
			var rep evalReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			if all := rep.Scores[len(rep.Scores)-1]; all.Answered != len(lines) || all.S10 < 0.5 {
				t.Errorf("all row %+v: want every query answered, most titles found", all)
			}
		}},
		{"readers' language of no set", []string{"--qrels", good, "--qrels-lang", "other=zh-CN"}, exitUsage, nil},
		{"readers' language not a tag", []string{"--qrels", good, "--qrels-lang", "titles=not a tag"}, exitUsage, nil},
		{"unreachable node", []string{"--qrels", good, "--node", "http://127.0.0.1:1"}, exitUnreachable, nil},
		{"no qrels", nil, exitUsage, nil},
		{"bad split", []string{"--qrels", good, "--split", "train"}, exitUsage, nil},
		{"bad file", []string{"--qrels", failing + ",/nonexistent.tsv"}, exitUsage, nil},
		{"bad concurrency", []string{"--qrels", good, "--concurrency", "0"}, exitUsage, nil},
		{"misses in a missing directory", []string{"--qrels", good, "--misses", filepath.Join(dir, "no", "m.tsv")}, exitUsage, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"eval", "--node", api}, tc.args...)
			out, errOut, code := runCLI(args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			if tc.check != nil {
				tc.check(t, out)
			}
		})
	}
}

func mustRead(t *testing.T, path string) eval.Set {
	t.Helper()
	s, err := eval.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
