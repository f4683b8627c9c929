package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sou/eval"
	"sou/search"
	"sou/testnet"
)

// TestQualityBaseline scores judgment sets on the real corpus with the
// Bleve + gojieba baseline and with sou's own index in this process (one
// shard, no network, no anchor text or link rank: the corpus pages are
// parsed from disk), each signal of sou's ranking removed in turn; given
// the report of a testnet run on the same corpus, it puts the network's
// figures beside them with the ratio issue 23 asks for. bench/quality.sh
// runs everything in one go; alone:
//
//	SOU_BENCH=1 SOU_QUALITY_QRELS=a.tsv,b.tsv [SOU_QUALITY_REPORT=run/report.json]
//	  [SOU_QUALITY_PAGES=run/pages-fetched.txt] [SOU_QUALITY_OUT=quality.md]
//	  go test -run TestQualityBaseline -v -timeout 2h ./bench/
//
// SOU_QUALITY_PAGES restricts both engines to the pages the run fetched,
// so that they rank the same pages the network did.
func TestQualityBaseline(t *testing.T) {
	if os.Getenv("SOU_BENCH") != "1" {
		t.Skip("set SOU_BENCH=1 to run the quality baseline on the real corpus (minutes)")
	}
	sites := os.Getenv("SOU_BENCH_CORPUS")
	if sites == "" {
		sites = DefaultSitesTSV
	}
	if _, err := os.Stat(sites); err != nil {
		t.Skipf("real corpus not installed (%v); install it with ../shared/corpus/install.sh", err)
	}
	files := strings.Split(os.Getenv("SOU_QUALITY_QRELS"), ",")
	if files[0] == "" {
		t.Skip("set SOU_QUALITY_QRELS to the judgment files (bench/quality.sh builds them)")
	}
	var sets []eval.Set
	for _, f := range files {
		s, err := eval.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	var network map[string]eval.Score
	if p := os.Getenv("SOU_QUALITY_REPORT"); p != "" {
		var err error
		if network, err = readNetworkScores(p); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	started := time.Now().UTC()
	docs, err := CorpusDocs(ctx, sites)
	if err != nil {
		t.Fatal(err)
	}
	all := len(docs)
	if p := os.Getenv("SOU_QUALITY_PAGES"); p != "" {
		if docs, err = onlyFetched(docs, p); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s indexing %d of the corpus's %d main-site pages with sou and Bleve", time.Now().UTC().Format("15:04:05"), len(docs), all)
	f, e, err := indexBoth(ctx, docs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	bleveSearch := func(ctx context.Context, q string) (eval.Answer, error) {
		urls, err := e.bleve.Search(ctx, q, eval.Cutoff, false)
		return eval.Answer{URLs: urls}, err
	}
	souSearch := func(s *SouEngine) eval.Searcher {
		return func(ctx context.Context, q string) (eval.Answer, error) {
			urls, err := s.Search(ctx, q, eval.Cutoff)
			return eval.Answer{URLs: urls}, err
		}
	}
	var bleveScores, souScores []eval.Score
	var signalRows []signalRow
	var bleveMisses strings.Builder
	bleveMisses.WriteString(eval.MissesHeader + "\n")
	for _, s := range sets {
		t.Logf("%s %s: %d judged queries", time.Now().UTC().Format("15:04:05"), s.Name, len(s.Judgments))
		bo, err := eval.Run(ctx, s, eval.All, bleveSearch, 1)
		if err != nil {
			t.Fatal(err)
		}
		bleveScores = append(bleveScores, eval.Scores(s.Name, eval.All, bo)...)
		if err := eval.WriteMisses(&bleveMisses, s.Name, bo); err != nil {
			t.Fatal(err)
		}
		so, err := eval.Run(ctx, s, eval.All, souSearch(e.sou), 1)
		if err != nil {
			t.Fatal(err)
		}
		souScores = append(souScores, eval.Scores(s.Name, eval.All, so)...)
		full := eval.Summarize(s.Name, eval.Dev, so)
		for _, sig := range souSignals(false) {
			o, err := eval.Run(ctx, s, eval.Dev, souSearch(e.sou.WithParams(sig.params)), 1)
			if err != nil {
				t.Fatal(err)
			}
			signalRows = append(signalRows, signalRow{signal: sig.name, full: full, without: eval.Summarize(s.Name, eval.Dev, o)})
		}
	}

	var out strings.Builder
	fmt.Fprintf(&out, "# Search quality on the real corpus, %s\n\n", started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&out, "Machine: %s, shared with other work. Command: `%s`.\n\n", machineLine(), qualityCommand())
	fmt.Fprintf(&out, "%d pages: the main sites of %s", len(docs), sites)
	if p := os.Getenv("SOU_QUALITY_PAGES"); p != "" {
		fmt.Fprintf(&out, " that the testnet run fetched (%s; %d of %d)", p, len(docs), all)
	}
	fmt.Fprintf(&out, ", indexed by sou in %.1f s and by Bleve in %.1f s.\n\n", f.SouTime.Seconds(), f.BleveTime.Seconds())
	if network != nil {
		fmt.Fprintf(&out, "## sou (the testnet run, %s) against Bleve + gojieba\n\n", os.Getenv("SOU_QUALITY_REPORT"))
		writeRatioTable(&out, network, bleveScores)
	} else {
		out.WriteString("## sou (one local index in this process) against Bleve + gojieba\n\nNo testnet report given (SOU_QUALITY_REPORT): the sou column is the local index.\n\n")
		local := map[string]eval.Score{}
		for _, s := range souScores {
			local[s.Set+"/"+string(s.Part)] = s
		}
		writeRatioTable(&out, local, bleveScores)
	}
	out.WriteString("## Bleve + gojieba (BM25, title boost 2, OR of the query words; hits only)\n\n")
	must(t, eval.WriteMarkdown(&out, bleveScores))
	out.WriteString("\n## sou, one local index in this process (the default ranking; no network, so no anchor text and no link rank)\n\n")
	must(t, eval.WriteMarkdown(&out, souScores))
	out.WriteString("\n## What each signal of sou's ranking adds (local index, dev parts)\n\n")
	out.WriteString("Each row removes one signal (its weight set to 0) and reruns the dev part. In this process the pages carry no anchor text and no link rank (they are parsed from disk, not crawled), so those signals are measured on a testnet run only.\n\n")
	writeSignalTable(&out, signalRows)

	t.Log("\n" + out.String())
	path := os.Getenv("SOU_QUALITY_OUT")
	if path == "" {
		if err := os.MkdirAll("results", 0o755); err != nil {
			t.Fatal(err)
		}
		path = filepath.Join("results", "quality-"+started.Format("20060102-150405")+".md")
	}
	must(t, os.WriteFile(path, []byte(out.String()), 0o644))
	misses := filepath.Join(filepath.Dir(path), "bleve-misses.tsv")
	must(t, os.WriteFile(misses, []byte(bleveMisses.String()), 0o644))
	t.Logf("figures written to %s, Bleve's misses to %s", path, misses)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// qualityCommand is how this run was started, for the results file.
func qualityCommand() string {
	var env []string
	for _, k := range []string{"SOU_QUALITY_QRELS", "SOU_QUALITY_REPORT", "SOU_QUALITY_PAGES", "SOU_QUALITY_OUT"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return "SOU_BENCH=1 " + strings.Join(env, " ") + " go test -run TestQualityBaseline -v -timeout 2h ./bench/"
}

// readNetworkScores reads the qrels scores of a `sou testnet run --json`
// report, by "set/part".
func readNetworkScores(path string) (map[string]eval.Score, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("testnet report: %w", err)
	}
	var rep testnet.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("testnet report %s: %w", path, err)
	}
	if rep.Search == nil || len(rep.Search.Qrels) == 0 {
		return nil, fmt.Errorf("testnet report %s has no judged queries (run it with --qrels)", path)
	}
	out := map[string]eval.Score{}
	for _, q := range rep.Search.Qrels {
		for _, s := range append([]eval.Score{q.Score}, q.Parts...) {
			out[s.Set+"/"+string(s.Part)] = s
		}
	}
	return out, nil
}

// onlyFetched keeps the docs whose URL is listed in pages (one URL a line).
func onlyFetched(docs []Doc, pages string) ([]Doc, error) {
	b, err := os.ReadFile(pages)
	if err != nil {
		return nil, fmt.Errorf("fetched pages: %w", err)
	}
	fetched := map[string]bool{}
	for _, u := range strings.Fields(string(b)) {
		fetched[eval.MatchKey(u)] = true
	}
	var out []Doc
	for _, d := range docs {
		if fetched[eval.MatchKey(d.URL)] {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none of the corpus pages is listed in %s", pages)
	}
	return out, nil
}

// souSignal is sou's ranking with one signal removed.
type souSignal struct {
	name   string
	params search.Params
}

// souSignals lists sou's ranking with each signal removed in turn;
// crawled says the pages were crawled (anchor text and static rank exist).
func souSignals(crawled bool) []souSignal {
	var out []souSignal
	without := func(name string, change func(*search.Params)) {
		p := search.DefaultParams()
		change(&p)
		out = append(out, souSignal{"without " + name, p})
	}
	for f, name := range []string{"title", "anchor text", "body", "URL words", "headings"} {
		if name == "anchor text" && !crawled {
			continue // none in this process
		}
		without(name, func(p *search.Params) { p.Weight[f] = 0 })
	}
	if crawled {
		without("static rank", func(p *search.Params) { p.StaticWeight = 0 })
	}
	without("proximity", func(p *search.Params) { p.Prox = 0 })
	without("relaxed matching", func(p *search.Params) { p.Relax = false })
	without("same-script preference", func(p *search.Params) { p.SameScript = 0 })
	return out
}

type signalRow struct {
	signal        string
	full, without eval.Score
	// fullCPU and cpuMS are the process CPU time per query of the full
	// ranking and of this one (0: not measured).
	fullCPU, cpuMS float64
}

// writeSignalTable prints each ranking against the first of its set; a
// row named like the first ranking is not repeated.
func writeSignalTable(w io.Writer, rows []signalRow) {
	fmt.Fprintln(w, "| ranking | set (dev) | MRR@10 | Δ MRR@10 from all signals | S@10 | nDCG@10 | p50 ms | p95 ms | Δ p50 ms | CPU ms/query |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	last := ""
	cpu := func(ms float64) string {
		if ms == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f", ms)
	}
	for _, r := range rows {
		if r.full.Set != last {
			last = r.full.Set
			fmt.Fprintf(w, "| all signals | %s | %.3f | | %.3f | %.3f | %.2f | %.2f | | %s |\n", r.full.Set, r.full.MRR10, r.full.S10, r.full.NDCG10,
				r.full.P50MS, r.full.P95MS, cpu(r.fullCPU))
		}
		x := r.without
		if x == r.full && r.signal == "all signals" {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %.3f | %+.3f | %.3f | %.3f | %.2f | %.2f | %+.2f | %s |\n", r.signal, x.Set, x.MRR10, x.MRR10-r.full.MRR10,
			x.S10, x.NDCG10, x.P50MS, x.P95MS, x.P50MS-r.full.P50MS, cpu(r.cpuMS))
	}
	fmt.Fprintln(w)
}

// writeRatioTable prints sou against Bleve per set and part, with issue
// 23's check on the LibreOffice development parts: MRR@10 at least 1.25×
// Bleve's and 0.50, Success@10 at least 0.65.
func writeRatioTable(w io.Writer, sou map[string]eval.Score, bleve []eval.Score) {
	fmt.Fprintln(w, "| set | part | queries | sou MRR@10 | Bleve MRR@10 | sou / Bleve | sou S@1 | Bleve S@1 | sou S@10 | Bleve S@10 | sou nDCG@10 | Bleve nDCG@10 | issue 23 target |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, b := range bleve {
		s, ok := sou[b.Set+"/"+string(b.Part)]
		if !ok {
			fmt.Fprintf(w, "| %s | %s | %d | not run | %.3f | | | %.3f | | %.3f | | %.3f | |\n", b.Set, b.Part, b.Queries, b.MRR10, b.S1, b.S10, b.NDCG10)
			continue
		}
		target := ""
		if b.Part == eval.Dev && strings.HasPrefix(b.Set, "lo-") {
			met := s.MRR10 >= 1.25*b.MRR10 && s.MRR10 >= 0.5 && s.S10 >= 0.65
			target = map[bool]string{true: "met", false: "**not met**"}[met] + " (MRR ≥ 1.25× and ≥ 0.50, S@10 ≥ 0.65)"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.3f | %.3f | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", b.Set, b.Part, s.Queries,
			s.MRR10, b.MRR10, ratio(s.MRR10, b.MRR10), s.S1, b.S1, s.S10, b.S10, s.NDCG10, b.NDCG10, target)
	}
	fmt.Fprintln(w)
}
