package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sou/eval"
	"sou/testnet"
)

// TestQualityTables checks the plumbing of TestQualityBaseline that runs
// without the corpus: the testnet report's scores, the fetched-pages
// filter and the ratio table with issue 23's target.
func TestQualityTables(t *testing.T) {
	dir := t.TempDir()
	dev := eval.Score{Set: "lo-zh-CN", Part: eval.Dev, Queries: 200, Answered: 200, MRR10: 0.6, S1: 0.5, S10: 0.7, NDCG10: 0.62}
	test := eval.Score{Set: "lo-zh-CN", Part: eval.Test, Queries: 100, Answered: 100, MRR10: 0.4, S10: 0.6}
	all := eval.Score{Set: "lo-zh-CN", Part: eval.All, Queries: 300, Answered: 300, MRR10: 0.533, S10: 0.667}
	rep := testnet.Report{Search: &testnet.SearchReport{Qrels: []testnet.QrelsScore{{File: "lo-zh-CN.tsv", Score: all, Parts: []eval.Score{dev, test}}}}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	reportPath := filepath.Join(dir, "report.json")
	must(t, os.WriteFile(reportPath, b, 0o644))
	network, err := readNetworkScores(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	if network["lo-zh-CN/dev"] != dev || network["lo-zh-CN/test"] != test || network["lo-zh-CN/all"] != all {
		t.Fatalf("readNetworkScores = %+v", network)
	}
	empty := filepath.Join(dir, "empty.json")
	must(t, os.WriteFile(empty, []byte(`{"nodes": 4, "ok": true}`), 0o644))
	if _, err := readNetworkScores(empty); err == nil {
		t.Error("a report without judged queries accepted")
	}

	pages := filepath.Join(dir, "pages-fetched.txt")
	must(t, os.WriteFile(pages, []byte("http://a.test/x.html\nhttp://a.test/y.html?DbPAR=1\n"), 0o644))
	docs := []Doc{{URL: "http://a.test/x.html"}, {URL: "http://a.test/y.html"}, {URL: "http://a.test/z.html"}}
	got, err := onlyFetched(docs, pages)
	if err != nil || len(got) != 2 || got[1].URL != "http://a.test/y.html" {
		t.Errorf("onlyFetched = %+v, %v; want x and y", got, err)
	}

	tests := []struct {
		name  string
		bleve eval.Score
		want  string
	}{
		{"met", eval.Score{Set: "lo-zh-CN", Part: eval.Dev, MRR10: 0.45, S10: 0.6}, "| 0.600 | 0.450 | 1.33× |"},
		{"under 1.25×", eval.Score{Set: "lo-zh-CN", Part: eval.Dev, MRR10: 0.5}, "**not met**"},
	}
	for _, tc := range tests {
		var w strings.Builder
		writeRatioTable(&w, network, []eval.Score{tc.bleve, {Set: "python-index", Part: eval.Dev, MRR10: 0.3}})
		if !strings.Contains(w.String(), tc.want) || !strings.Contains(w.String(), "| python-index | dev | 0 | not run |") {
			t.Errorf("%s: table lacks %q or the set the run did not score:\n%s", tc.name, tc.want, w.String())
		}
		if tc.name == "met" && !strings.Contains(w.String(), "| met (") {
			t.Errorf("met: the target column does not say met:\n%s", w.String())
		}
	}
}
