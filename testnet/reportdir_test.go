package testnet

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sou/testnet/simweb"
)

// wellFormed reports whether b parses as XML from start to end.
func wellFormed(b []byte) error {
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		if _, err := d.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func TestWriteReportDir(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	var reqs []simweb.Request
	for i := 0; i < 300; i++ {
		client := []string{"127.1.2.10:40000", "127.1.2.11:40001", "127.1.2.12:40002"}[i%3]
		start := t0.Add(time.Duration(i) * 37 * time.Millisecond)
		reqs = append(reqs, simweb.Request{Start: start, End: start.Add(5 * time.Millisecond), Client: client,
			VHost: "a.sim.test", URL: "http://a.sim.test/p", Status: 200, Completed: i%10 != 0})
	}
	// A request that never completed has no end time.
	reqs = append(reqs, simweb.Request{Start: t0.Add(time.Second), Client: "127.1.2.10:40000", Status: 0})

	cases := []struct {
		name string
		rep  *Report
	}{
		{"with search", &Report{Nodes: 3, OK: true, Search: &SearchReport{Queries: 4, LatenciesMS: []float64{1.5, 2, 2.5, 40}}}},
		{"without search, not ok", &Report{Nodes: 3, Failures: []string{"coverage 0.5 < 1"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if err := WriteReportDir(dir, c.rep, reqs); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{plotPagesFile, plotRateFile, plotLatencyFile} {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if err := wellFormed(b); err != nil {
					t.Fatalf("%s is not well-formed SVG: %v", name, err)
				}
			}
			pages, _ := os.ReadFile(filepath.Join(dir, plotPagesFile))
			for _, node := range []string{"127.1.2.10", "127.1.2.11", "127.1.2.12"} {
				if !strings.Contains(string(pages), node) {
					t.Errorf("pages plot has no line for %s", node)
				}
			}
			var back Report
			b, _ := os.ReadFile(filepath.Join(dir, reportJSONFile))
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("report.json: %v", err)
			}
			md, _ := os.ReadFile(filepath.Join(dir, reportMDFile))
			if !strings.Contains(string(md), plotPagesFile) || (len(c.rep.Failures) > 0) != strings.Contains(string(md), "not ok") {
				t.Errorf("report.md does not match the report:\n%s", md)
			}
		})
	}
}

func TestPagesChartManyNodes(t *testing.T) {
	var fs []fetch
	t0 := time.Now()
	for i := 0; i < 40; i++ {
		fs = append(fs, fetch{Client: "127.0.0." + string(rune('a'+i)), Start: t0, End: t0.Add(time.Duration(i) * time.Second), Status: 200, Complete: true})
	}
	c := pagesChart(fs)
	if len(c.Series) != 2 {
		t.Fatalf("beyond %d nodes the plot shows the total and the mean, got %d series", maxPlottedNodes, len(c.Series))
	}
	last := c.Series[0].Y[len(c.Series[0].Y)-1]
	if last != 40 {
		t.Fatalf("total pages %v, want 40", last)
	}
}

func TestQuietDetector(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	q := newQuietDetector()
	steps := []struct {
		idle bool
		reqs int
		at   time.Duration
		want bool
	}{
		{true, 10, 0, false},                       // first sight of the count
		{true, 10, time.Second, false},             // quiet, not long enough
		{true, 11, 2 * time.Second, false},         // a request: start over
		{false, 11, 3 * time.Second, false},        // a node busy: start over
		{true, 11, 4 * time.Second, false},         // quiet from here
		{true, 11, 4*time.Second + quietFor, true}, // long enough
	}
	for i, s := range steps {
		if got := q.done(s.idle, s.reqs, t0.Add(s.at)); got != s.want {
			t.Fatalf("step %d: done %v, want %v", i, got, s.want)
		}
	}
}
