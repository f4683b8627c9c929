package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sou/eval"
	"sou/index"
	"sou/search"
)

// TestQualityNodes scores judgment sets on the shards of a kept 4-node
// corpus run (NodeShards: the crawl's pages, anchor text and static rank,
// searched through the coordinator and the shard wire in this process),
// once per ranking: sou's default, each signal removed in turn, or the
// rankings SOU_QUALITY_VARIANTS lists. It is how ranking changes are
// tuned without crawling again:
//
//	sou testnet run --nodes 4 --hosts 0 --pages 0 --sites /var/lib/sou-corpus/sites.tsv \
//	  --keep --dir RUN ...
//	cp -a RUN COPY    # an analyzer change re-indexes the copy when it is opened
//	SOU_BENCH=1 SOU_QUALITY_NODES=COPY SOU_QUALITY_QRELS=a.tsv,b.tsv [SOU_QUALITY_SPLIT=dev]
//	  [SOU_QUALITY_VARIANTS='[{"name":"no static","params":{"StaticWeight":0}}]']
//	  [SOU_QUALITY_OUT=signals.md] [SOU_QUALITY_MISSES=misses.tsv] [SOU_QUALITY_UNSTEMMED=1]
//	  [SOU_QUALITY_DIAGNOSE=why.tsv] [SOU_QUALITY_RANKS=ranks.tsv]
//	  go test -run TestQualityNodes -v -timeout 2h ./bench/
//
// A variant's params are JSON merged over search.DefaultParams();
// bench/quality-variants.json lists each signal removed and main's former
// parameters (QUALITY.md's signal table). Tune on the dev parts (the
// default split); the test parts are for reporting.
func TestQualityNodes(t *testing.T) {
	if os.Getenv("SOU_BENCH") != "1" {
		t.Skip("set SOU_BENCH=1 to score a kept testnet run's shards")
	}
	dir := os.Getenv("SOU_QUALITY_NODES")
	files := strings.Split(os.Getenv("SOU_QUALITY_QRELS"), ",")
	if dir == "" || files[0] == "" {
		t.Skip("set SOU_QUALITY_NODES (a kept run's --dir) and SOU_QUALITY_QRELS")
	}
	split := eval.Dev
	if s := os.Getenv("SOU_QUALITY_SPLIT"); s != "" {
		var err error
		if split, err = eval.ParseSplit(s); err != nil {
			t.Fatal(err)
		}
	}
	var sets []eval.Set
	for _, f := range files {
		s, err := eval.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	variants, err := qualityVariants(os.Getenv("SOU_QUALITY_VARIANTS"))
	if err != nil {
		t.Fatal(err)
	}
	var an *index.Analyzer
	if os.Getenv("SOU_QUALITY_UNSTEMMED") == "1" {
		if an, err = index.LoadAnalyzer(); err != nil {
			t.Fatal(err)
		}
		an = an.WithoutStemming()
	}
	opened := time.Now()
	shards, err := OpenNodeShards(dir, an)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { must(t, shards.Close()) }()
	t.Logf("opened %d shards (%v documents) in %.1f s", len(shards.Docs()), shards.Docs(), time.Since(opened).Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()

	var misses, diagnosis, ranks strings.Builder
	misses.WriteString(eval.MissesHeader + "\n")
	diagnosis.WriteString("# set\tqid\tquery\twhy\trank in top 1000\tterms the answer lacks\n")
	var rows []signalRow
	for _, s := range sets {
		var base eval.Score
		var baseCPU float64
		for i, v := range variants {
			search := shards.Searcher(v.Params)
			// One untimed pass warms the shards' caches (Badger blocks, DF
			// cache) so that every variant's latency is measured alike.
			if _, err := eval.Run(ctx, s, split, search, 1); err != nil {
				t.Fatal(err)
			}
			cpu := processCPU(t)
			outs, err := eval.Run(ctx, s, split, search, 1)
			if err != nil {
				t.Fatal(err)
			}
			cpuMS := float64((processCPU(t) - cpu).Microseconds()) / 1000 / float64(max(1, len(outs)))
			sc := eval.Summarize(s.Name, split, outs)
			if i == 0 {
				base = sc
				must(t, eval.WriteMisses(&misses, s.Name, outs))
				for _, o := range outs {
					fmt.Fprintf(&ranks, "%s\t%s\t%s\t%d\n", s.Name, o.ID, o.Query, o.Rank)
				}
				if os.Getenv("SOU_QUALITY_DIAGNOSE") != "" {
					diagnoseMisses(ctx, t, shards, v.Params, s.Name, outs, &diagnosis)
				}
			}
			if i == 0 {
				baseCPU = cpuMS
			}
			rows = append(rows, signalRow{signal: v.Name, full: base, without: sc, fullCPU: baseCPU, cpuMS: cpuMS})
			t.Logf("%-18s %-28s MRR@10 %.3f  S@1 %.3f  S@10 %.3f  nDCG@10 %.3f  p50 %.2f ms  p95 %.2f ms  CPU %.2f ms/query",
				s.Name, v.Name, sc.MRR10, sc.S1, sc.S10, sc.NDCG10, sc.P50MS, sc.P95MS, cpuMS)
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "Shards of %s (%v documents), %s part; machine: %s, shared with other work.\n\n", dir, shards.Docs(), split, machineLine())
	writeSignalTable(&out, rows)
	t.Log("\n" + out.String())
	if p := os.Getenv("SOU_QUALITY_OUT"); p != "" {
		must(t, os.WriteFile(p, []byte(out.String()), 0o644))
	}
	if p := os.Getenv("SOU_QUALITY_RANKS"); p != "" {
		must(t, os.WriteFile(p, []byte(ranks.String()), 0o644))
	}
	if p := os.Getenv("SOU_QUALITY_DIAGNOSE"); p != "" {
		must(t, os.WriteFile(p, []byte(diagnosis.String()), 0o644))
	}
	if p := os.Getenv("SOU_QUALITY_MISSES"); p != "" {
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(misses.String()), 0o644))
	}
}

// diagnoseMisses writes, for every answered search of outs without a
// relevant result in its top 10, why (Diagnose): its answer was not
// crawled, lacks query terms (so an AND query cannot find it), or ranks
// below 10 (and lacks query terms, which a relaxed query forgives); and
// logs the count of each.
func diagnoseMisses(ctx context.Context, t *testing.T, shards *NodeShards, p search.Params, set string, outs []eval.Outcome, w *strings.Builder) {
	counts := map[string]int{}
	for _, o := range outs {
		if o.Status != eval.Answered || o.Rank > 0 {
			continue
		}
		d, err := shards.Diagnose(ctx, p, o.Judgment)
		if err != nil {
			t.Fatal(err)
		}
		why := "ranked below 1000"
		switch {
		case !d.Held:
			why = "not crawled"
		case d.Rank > 0 && d.Rank <= 20:
			why = "ranked 11-20"
		case d.Rank > 0 && d.Rank <= 100:
			why = "ranked 21-100"
		case d.Rank > 0:
			why = "ranked 101-1000"
		case len(d.Missing) > 0:
			why = "lacks query terms"
		}
		if d.Held && len(d.Missing) > 0 && d.Rank > 0 {
			why += ", lacks terms"
		}
		counts[why]++
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", set, o.ID, o.Query, why, d.Rank, strings.Join(d.Missing, " "))
	}
	t.Logf("%s misses: %v", set, counts)
}

// qualityVariant is one ranking to score.
type qualityVariant struct {
	Name   string
	Params search.Params
}

// qualityVariants reads SOU_QUALITY_VARIANTS (a JSON list of {"name",
// "params"}, params merged over the defaults); without it, the default
// ranking and each signal removed in turn. The first variant is the one
// the others are compared with.
func qualityVariants(spec string) ([]qualityVariant, error) {
	if spec == "" {
		out := []qualityVariant{{"all signals", search.DefaultParams()}}
		for _, s := range souSignals(true) {
			out = append(out, qualityVariant{s.name, s.params})
		}
		return out, nil
	}
	var raw []struct {
		Name   string          `json:"name"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal([]byte(spec), &raw); err != nil {
		return nil, fmt.Errorf("SOU_QUALITY_VARIANTS: %w", err)
	}
	var out []qualityVariant
	for _, r := range raw {
		p := search.DefaultParams()
		if len(r.Params) > 0 {
			if err := json.Unmarshal(r.Params, &p); err != nil {
				return nil, fmt.Errorf("SOU_QUALITY_VARIANTS %q: %w", r.Name, err)
			}
		}
		out = append(out, qualityVariant{r.Name, p})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("SOU_QUALITY_VARIANTS lists no ranking")
	}
	return out, nil
}

// TestQualityTune searches sou's ranking parameters on the dev parts of
// the judgment sets, over a kept run's shards (as TestQualityNodes):
// coordinate descent from SOU_QUALITY_START (JSON over the defaults), one
// parameter at a time over a few values around its current one, keeping a
// change that raises the mean MRR@10 of the sets by at least 0.002. It
// prints every evaluation and the best parameters as JSON. It never reads
// the test parts.
//
//	SOU_BENCH=1 SOU_QUALITY_TUNE=1 SOU_QUALITY_NODES=COPY SOU_QUALITY_QRELS=a.tsv,b.tsv
//	  [SOU_QUALITY_START='{"Relax":true}'] go test -run TestQualityTune -v -timeout 6h ./bench/
func TestQualityTune(t *testing.T) {
	if os.Getenv("SOU_BENCH") != "1" || os.Getenv("SOU_QUALITY_TUNE") != "1" {
		t.Skip("set SOU_BENCH=1 SOU_QUALITY_TUNE=1 to tune the ranking on a kept run's shards")
	}
	dir := os.Getenv("SOU_QUALITY_NODES")
	files := strings.Split(os.Getenv("SOU_QUALITY_QRELS"), ",")
	if dir == "" || files[0] == "" {
		t.Skip("set SOU_QUALITY_NODES (a kept run's --dir) and SOU_QUALITY_QRELS")
	}
	var sets []eval.Set
	for _, f := range files {
		s, err := eval.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s.Part(eval.Dev))
	}
	p := search.DefaultParams()
	if s := os.Getenv("SOU_QUALITY_START"); s != "" {
		if err := json.Unmarshal([]byte(s), &p); err != nil {
			t.Fatal(err)
		}
	}
	shards, err := OpenNodeShards(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { must(t, shards.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Hour)
	defer cancel()
	objective := func(p search.Params) (float64, string) {
		sum := 0.0
		var parts []string
		for _, s := range sets {
			outs, err := eval.Run(ctx, s, eval.Dev, shards.Searcher(p), 2)
			if err != nil {
				t.Fatal(err)
			}
			sc := eval.Summarize(s.Name, eval.Dev, outs)
			sum += sc.MRR10
			parts = append(parts, fmt.Sprintf("%s %.3f/%.3f", s.Name, sc.MRR10, sc.S10))
		}
		return sum / float64(len(sets)), strings.Join(parts, "  ")
	}
	best, detail := objective(p)
	t.Logf("start %.4f  %s", best, detail)
	type knob struct {
		name   string
		get    func(*search.Params) float64
		set    func(*search.Params, float64)
		values func(v float64) []float64
	}
	scale := func(v float64) []float64 {
		if v == 0 {
			return []float64{0.25, 0.5, 1}
		}
		return []float64{v * 0.5, v * 0.75, v * 1.33, v * 2}
	}
	unit := func(v float64) []float64 {
		var out []float64
		for _, d := range []float64{-0.3, -0.15, 0.15, 0.3} {
			if x := v + d; x >= 0 && x <= 1 {
				out = append(out, x)
			}
		}
		return out
	}
	fields := []string{"title", "anchor", "body", "url", "heading"}
	var knobs []knob
	for f, name := range fields {
		if f != 2 { // the body's weight is the unit the others are in
			knobs = append(knobs, knob{"Weight." + name, func(p *search.Params) float64 { return p.Weight[f] },
				func(p *search.Params, v float64) { p.Weight[f] = v }, scale})
		}
		knobs = append(knobs, knob{"B." + name, func(p *search.Params) float64 { return p.B[f] },
			func(p *search.Params, v float64) { p.B[f] = v }, unit})
	}
	knobs = append(knobs,
		knob{"K1", func(p *search.Params) float64 { return p.K1 }, func(p *search.Params, v float64) { p.K1 = v }, scale},
		knob{"StaticWeight", func(p *search.Params) float64 { return p.StaticWeight }, func(p *search.Params, v float64) { p.StaticWeight = v }, scale},
		knob{"Prox", func(p *search.Params) float64 { return p.Prox }, func(p *search.Params, v float64) { p.Prox = v }, scale},
		knob{"ProxK", func(p *search.Params) float64 { return p.ProxK }, func(p *search.Params, v float64) { p.ProxK = v }, scale},
		knob{"SameScript", func(p *search.Params) float64 { return p.SameScript }, func(p *search.Params, v float64) { p.SameScript = v }, scale},
		knob{"Miss", func(p *search.Params) float64 { return p.Miss }, func(p *search.Params, v float64) { p.Miss = v }, scale},
	)
	for round := 1; round <= 3; round++ {
		improved := false
		for _, k := range knobs {
			cur := k.get(&p)
			for _, v := range k.values(cur) {
				if v == cur {
					continue
				}
				q := p
				k.set(&q, v)
				score, detail := objective(q)
				t.Logf("round %d %s=%.3g: %.4f  %s", round, k.name, v, score, detail)
				if score >= best+0.002 {
					best, p, improved = score, q, true
					t.Logf("round %d keep %s=%.3g: %.4f", round, k.name, v, best)
				}
			}
		}
		b, _ := json.Marshal(p)
		t.Logf("after round %d: %.4f %s", round, best, b)
		if !improved {
			break
		}
	}
}
