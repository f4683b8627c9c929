package testnet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sou/eval"
	"sou/testnet/simweb"
)

// TestQrelsEndToEnd crawls a small web with one node and scores judged
// queries made of page titles (their page is the answer) and one query
// nothing answers, through the node's search API.
func TestQrelsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a testnet")
	}
	cfg := RunConfig{Nodes: 1, Hosts: 5, Pages: 300, Seed: 13, Queries: 5, Misbehave: []string{"none"}}
	// The same web Run will serve (it derives from the seed), for its titles.
	ctx, cancel := context.WithCancel(context.Background())
	web, err := simweb.Start(ctx, simweb.Config{Seed: cfg.Seed, Hosts: cfg.Hosts, Pages: cfg.Pages, Misbehave: cfg.Misbehave})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range web.Truth().Pages {
		if p.Required && p.Title != "" && !p.Noindex && p.MirrorOf == "" && p.NearDuplicateOf == "" && len(lines) < 8 && len(lines)*37 < len(web.Truth().Pages) {
			lines = append(lines, fmt.Sprintf("t-%d\t%s\t%s", len(lines), p.Title, p.URL))
		}
	}
	web.Close()
	cancel()
	const nowhere = "t-nowhere"
	lines = append(lines, nowhere+"\tqqqzzx xxyyqz\thttp://blog-1.sim.test/")
	dir := t.TempDir()
	file := filepath.Join(dir, "titles.tsv")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Qrels = []string{file}
	cfg.ReportDir = filepath.Join(dir, "report")
	rep := runReport(t, cfg)

	sr := rep.Search
	if sr == nil || len(sr.Qrels) != 1 {
		t.Fatalf("search section %+v: want one qrels entry", sr)
	}
	q := sr.Qrels[0]
	if q.File != "titles.tsv" || q.Set != "titles" || q.Part != eval.All || q.Queries != len(lines) || q.Answered != len(lines) || q.Failed+q.Partial != 0 {
		t.Fatalf("qrels entry %+v: want all %d queries answered", q, len(lines))
	}
	if q.S10 < 0.5 || q.Misses < 1 || q.MRR10 > q.S10 || q.S1 > q.S10 || q.NDCG10 == 0 {
		t.Errorf("qrels entry %+v: want most titles found, and the query nothing answers missed", q)
	}
	if sr.MRR10 != q.MRR10 || sr.S10 != q.S10 || sr.S1 != q.S1 || sr.NDCG10 != q.NDCG10 || sr.QrelsSplit != eval.All {
		t.Errorf("search keys mrr10 %v s10 %v s1 %v ndcg10 %v split %q are not the first file's %+v", sr.MRR10, sr.S10, sr.S1, sr.NDCG10, sr.QrelsSplit, q)
	}
	if len(q.Parts) != 2 || q.Parts[0].Part != eval.Dev || q.Parts[1].Part != eval.Test || q.Parts[0].Queries+q.Parts[1].Queries != q.Queries {
		t.Errorf("parts %+v: want dev and test adding up to %d", q.Parts, q.Queries)
	}
	misses, err := os.ReadFile(filepath.Join(cfg.ReportDir, missesFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(misses), eval.MissesHeader) || !strings.Contains(string(misses), "\t"+nowhere+"\tmiss\tqqqzzx xxyyqz\t") {
		t.Errorf("misses.tsv lacks the query nothing answers:\n%s", misses)
	}
	if n := strings.Count(string(misses), "\n") - 1; n != q.Misses {
		t.Errorf("misses.tsv has %d lines, the report %d misses", n, q.Misses)
	}
	md, err := os.ReadFile(filepath.Join(cfg.ReportDir, reportMDFile))
	if err != nil || !strings.Contains(string(md), "MRR@10") {
		t.Errorf("report.md has no quality table (%v):\n%s", err, md)
	}
}

func TestRunConfigValidationQrels(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.tsv")
	bad := filepath.Join(dir, "bad.tsv")
	if err := os.WriteFile(good, []byte("q1\tword\thttp://h.test/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("q1\tword\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := RunConfig{Nodes: 1, Hosts: 10, Pages: 100, Queries: 10}
	tests := []struct {
		name  string
		files []string
		split eval.Split
		langs []string
		want  string // "" = valid
	}{
		{"good", []string{good}, "", nil, ""},
		{"good, dev part", []string{good}, eval.Dev, nil, ""},
		{"bad line", []string{good, bad}, "", nil, "bad.tsv: line 1"},
		{"missing file", []string{filepath.Join(dir, "nope.tsv")}, "", nil, "nope.tsv"},
		{"bad split", []string{good}, "train", nil, "--qrels-split"},
		{"readers' language", []string{good}, "", []string{strings.TrimSuffix(filepath.Base(good), ".tsv") + "=zh-CN"}, ""},
		{"readers' language of no set", []string{good}, "", []string{"other=zh-CN"}, "--qrels-lang"},
		{"readers' language not a tag", []string{good}, "", []string{"x=not a tag"}, "--qrels-lang"},
	}
	for _, tc := range tests {
		cfg := base
		cfg.Qrels, cfg.QrelsSplit, cfg.QrelsLang = tc.files, tc.split, tc.langs
		err := cfg.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
	noQueries := base
	noQueries.Qrels, noQueries.Queries = []string{good}, 0
	if err := noQueries.Validate(); err == nil {
		t.Error("--qrels without a query phase accepted")
	}
}
