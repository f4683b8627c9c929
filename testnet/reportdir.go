package testnet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"sou/testnet/simweb"
)

// Files written by WriteReportDir.
const (
	reportJSONFile   = "report.json"
	reportMDFile     = "report.md"
	plotPagesFile    = "pages-over-time.svg"
	plotRateFile     = "fetch-rate.svg"
	plotLatencyFile  = "query-latency.svg"
	missesFile       = "misses.tsv"
	pagesFetchedFile = "pages-fetched.txt"
	maxPlottedNodes  = 10
	latencyHistoBins = 30
)

// WriteReportDir writes what `--report-dir` promises: the JSON report, a
// Markdown summary, and three plots drawn from the simulated web's request
// log (pages over time per node, fetch rate) and from the query phase
// (latency distribution). A node is its client IP: every node of a testnet
// fetches from its own loopback address. With judged queries it adds their
// misses (misses.tsv, sou/eval's format); on a web of directory sites, the
// URLs fetched with a complete 200 answer (pages-fetched.txt, sorted), which
// is the page list the Bleve baseline in bench indexes to compare on the
// same pages.
func WriteReportDir(dir string, rep *Report, reqs []simweb.Request) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--report-dir: %w", err)
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	fetches := fetchesFrom(reqs)
	files := map[string][]byte{
		reportJSONFile:  append(js, '\n'),
		plotPagesFile:   []byte(pagesChart(fetches).SVG()),
		plotRateFile:    []byte(rateChart(fetches).SVG()),
		plotLatencyFile: []byte(latencyChart(rep.Search).SVG()),
		reportMDFile:    reportMarkdown(rep),
	}
	if rep.Search != nil && len(rep.Search.qrelsRuns) > 0 {
		var b bytes.Buffer
		if err := rep.Search.writeMisses(&b); err != nil {
			return err
		}
		files[missesFile] = b.Bytes()
	}
	if rep.Crawl.CorpusHTML != nil {
		files[pagesFetchedFile] = pagesFetched(fetches)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("--report-dir: %w", err)
		}
	}
	return nil
}

// timeBase returns the first request's start and a bucket width giving
// about 100 points over the run (at least 100 ms).
func timeBase(fetches []fetch) (time.Time, time.Duration, int) {
	if len(fetches) == 0 {
		return time.Time{}, time.Second, 0
	}
	start, end := fetches[0].Start, fetches[0].Start
	for _, f := range fetches {
		if f.Start.Before(start) {
			start = f.Start
		}
		end = maxTime(end, f.Start, f.End)
	}
	width := max(end.Sub(start)/100, 100*time.Millisecond)
	return start, width, int(end.Sub(start)/width) + 1
}

func maxTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.After(m) {
			m = t
		}
	}
	return m
}

// bucket is the time bucket of a fetch: when it ended, or when it started
// if it never did.
func bucket(f fetch, start time.Time, width time.Duration) int {
	return int(maxTime(f.Start, f.End).Sub(start) / width)
}

// pagesChart: cumulative pages fetched (final answers) per node over time;
// beyond maxPlottedNodes nodes, the total and the per-node mean.
func pagesChart(fetches []fetch) chart {
	start, width, buckets := timeBase(fetches)
	perNode := map[string][]float64{}
	total := make([]float64, buckets)
	for _, f := range fetches {
		if !f.final() {
			continue
		}
		b := bucket(f, start, width)
		if perNode[f.Client] == nil {
			perNode[f.Client] = make([]float64, buckets)
		}
		perNode[f.Client][b]++
		total[b]++
	}
	xs := make([]float64, buckets)
	for i := range xs {
		xs[i] = (time.Duration(i+1) * width).Seconds()
	}
	cumulative := func(v []float64) []float64 {
		out := make([]float64, len(v))
		sum := 0.0
		for i, x := range v {
			sum += x
			out[i] = sum
		}
		return out
	}
	c := chart{Title: "Pages fetched over time", XLabel: "seconds since the first request", YLabel: "pages (cumulative)"}
	if len(perNode) > maxPlottedNodes {
		mean := make([]float64, buckets)
		for i, v := range total {
			mean[i] = v / float64(len(perNode))
		}
		c.Series = []series{
			{Name: "all nodes", X: xs, Y: cumulative(total)},
			{Name: fmt.Sprintf("mean of %d nodes", len(perNode)), X: xs, Y: cumulative(mean)},
		}
		return c
	}
	nodes := make([]string, 0, len(perNode))
	for n := range perNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		c.Series = append(c.Series, series{Name: n, X: xs, Y: cumulative(perNode[n])})
	}
	return c
}

// rateChart: requests per second over the run, all nodes together.
func rateChart(fetches []fetch) chart {
	start, width, buckets := timeBase(fetches)
	counts := make([]float64, buckets)
	for _, f := range fetches {
		counts[bucket(f, start, width)]++
	}
	xs := make([]float64, buckets)
	for i := range counts {
		xs[i] = (time.Duration(i) * width).Seconds()
		counts[i] /= width.Seconds()
	}
	return chart{Title: "Fetch rate", XLabel: "seconds since the first request", YLabel: "requests per second",
		Series: []series{{Name: "all nodes", X: xs, Y: counts}}}
}

// latencyChart: a histogram of the query phase's latencies.
func latencyChart(s *SearchReport) chart {
	c := chart{Title: "Query latency", XLabel: "milliseconds", YLabel: "queries", Bars: true, BarWidth: 1}
	if s == nil || len(s.LatenciesMS) == 0 {
		return c
	}
	lat := s.LatenciesMS
	hi := slicesMax(lat)
	width := math.Max(hi/latencyHistoBins, 0.1)
	counts := make([]float64, int(hi/width)+1)
	for _, v := range lat {
		counts[int(v/width)]++
	}
	xs := make([]float64, len(counts))
	for i := range xs {
		xs[i] = float64(i) * width
	}
	c.BarWidth = width
	c.Series = []series{{Name: fmt.Sprintf("%d queries", len(lat)), X: xs, Y: counts}}
	return c
}

func slicesMax(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

func reportMarkdown(rep *Report) []byte {
	var b bytes.Buffer
	status := "ok"
	if !rep.OK {
		status = "not ok"
	}
	fmt.Fprintf(&b, "# Testnet report: %s\n\n", status)
	for _, f := range rep.Failures {
		fmt.Fprintf(&b, "- failed: %s\n", f)
	}
	b.WriteString("\n```\n")
	PrintSummary(&b, rep)
	b.WriteString("```\n\n")
	fmt.Fprintf(&b, "Full report: [%s](%s)\n\n", reportJSONFile, reportJSONFile)
	fmt.Fprintf(&b, "![pages over time](%s)\n\n![fetch rate](%s)\n\n", plotPagesFile, plotRateFile)
	if rep.Search != nil {
		fmt.Fprintf(&b, "![query latency](%s)\n", plotLatencyFile)
	}
	return b.Bytes()
}

// pagesFetched lists, sorted and one a line, the URLs (robots.txt aside)
// answered 200 with a complete response.
func pagesFetched(fetches []fetch) []byte {
	seen := map[string]bool{}
	var urls []string
	for _, f := range fetches {
		if f.Complete && f.Status == 200 && f.URL != "" && f.Path != "/robots.txt" && !seen[f.URL] {
			seen[f.URL] = true
			urls = append(urls, f.URL)
		}
	}
	sort.Strings(urls)
	var b bytes.Buffer
	for _, u := range urls {
		b.WriteString(u)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
