package eval

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-4 }

func TestJudge(t *testing.T) {
	const a, b = "http://h.test/a.html", "http://h.test/b.html"
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("http://h.test/%d.html", i)
	}
	tests := []struct {
		name     string
		relevant []string
		results  []string
		rank     int
		ndcg     float64
	}{
		{"second", []string{a}, []string{"http://h.test/x", a, "http://h.test/y"}, 2, 0.63093}, // 1/log2(3)
		{"two relevant, first and third", []string{a, b}, []string{a, "http://h.test/x", b}, 1, 0.91972},
		// (1 + 1/log2(4)) / (1 + 1/log2(3))
		{"query and fragment ignored, a page twice counts once", []string{a},
			[]string{"http://H.test:80/a.html?DbPAR=WRITER#bm", a}, 1, 1},
		{"eleventh is outside the cutoff", []string{a},
			append(many[:10:10], a), 0, 0},
		{"ideal capped at ten", many, many[:10], 1, 1},
		{"no results", []string{a}, nil, 0, 0},
		{"relevant listed twice", []string{a, a + "#x"}, []string{a}, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rank, ndcg := Judge(Judgment{ID: "q", Query: "q", Relevant: tc.relevant}, tc.results)
			if rank != tc.rank || !near(ndcg, tc.ndcg) {
				t.Errorf("Judge = rank %d, nDCG %.5f; want %d, %.5f", rank, ndcg, tc.rank, tc.ndcg)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	outs := []Outcome{
		{Part: Dev, Status: Answered, Rank: 1, NDCG: 1, LatencyMS: 10},
		{Part: Dev, Status: Answered, Rank: 2, NDCG: 0.5, LatencyMS: 20},
		{Part: Dev, Status: Answered, Rank: 0, NDCG: 0, LatencyMS: 30},
		{Part: Dev, Status: Partial, Rank: 1, NDCG: 1, LatencyMS: 40}, // not scored
		{Part: Dev, Status: Failed},
		{Part: Test, Status: Answered, Rank: 4, NDCG: 0.25, LatencyMS: 100},
	}
	tests := []struct {
		part Split
		want Score
	}{
		{Dev, Score{Set: "s", Part: Dev, Queries: 5, Answered: 3, Partial: 1, Failed: 1,
			MRR10: 0.5, S1: 0.333, S10: 0.667, NDCG10: 0.5, P50MS: 20, P95MS: 40, Misses: 1}},
		{Test, Score{Set: "s", Part: Test, Queries: 1, Answered: 1,
			MRR10: 0.25, S1: 0, S10: 1, NDCG10: 0.25, P50MS: 100, P95MS: 100}},
		{All, Score{Set: "s", Part: All, Queries: 6, Answered: 4, Partial: 1, Failed: 1,
			MRR10: 0.438, S1: 0.25, S10: 0.75, NDCG10: 0.438, P50MS: 30, P95MS: 100, Misses: 1}},
	}
	for _, tc := range tests {
		if got := Summarize("s", tc.part, outs); got != tc.want {
			t.Errorf("Summarize(%s) =\n %+v, want\n %+v", tc.part, got, tc.want)
		}
	}
	if got := Scores("s", All, outs); len(got) != 3 || got[0].Part != Dev || got[1].Part != Test || got[2].Part != All {
		t.Errorf("Scores(all) = %+v, want dev, test, all rows", got)
	}
}

func TestPartOf(t *testing.T) {
	// FNV-1a-32 mod 10, computed independently (Python).
	tests := map[string]Split{
		"lo-zh-CN-0000": Dev, "lo-zh-CN-0003": Dev, "lo-zh-CN-0004": Test,
		"lo-zh-CN-0015": Test, "a": Test, "b": Dev,
	}
	for qid, want := range tests {
		if got := PartOf(qid); got != want {
			t.Errorf("PartOf(%q) = %s, want %s", qid, got, want)
		}
	}
	var s Set
	for i := range 300 {
		s.Judgments = append(s.Judgments, Judgment{ID: fmt.Sprintf("lo-zh-CN-%04d", i)})
	}
	dev, test := s.Part(Dev), s.Part(Test)
	if len(test.Judgments) != 83 || len(dev.Judgments) != 217 || len(s.Part(All).Judgments) != 300 {
		t.Errorf("split of 300: dev %d, test %d; want 217, 83", len(dev.Judgments), len(test.Judgments))
	}
}

func TestParseSplit(t *testing.T) {
	for _, s := range []string{"dev", "test", "all"} {
		if sp, err := ParseSplit(s); err != nil || string(sp) != s {
			t.Errorf("ParseSplit(%q) = %q, %v", s, sp, err)
		}
	}
	for _, s := range []string{"", "Dev", "train"} {
		if _, err := ParseSplit(s); err == nil {
			t.Errorf("ParseSplit(%q) accepted", s)
		}
	}
}

func TestMatchKey(t *testing.T) {
	tests := []struct{ a, b string }{
		{"http://Help.LibreOffice.test/zh-CN/a.html?DbPAR=WRITER#x", "http://help.libreoffice.test/zh-CN/a.html"},
		{"http://h.test/a%20b.html", "http://h.test/a b.html?x=1"},
		{"http://h.test/%7Euser/", "http://h.test/~user/"},
		{"http://h.test:80", "http://H.test/"},
		{"https://h.test:443/x", "https://h.test/x"},
	}
	for _, tc := range tests {
		if MatchKey(tc.a) != MatchKey(tc.b) {
			t.Errorf("MatchKey(%q) = %q, MatchKey(%q) = %q", tc.a, MatchKey(tc.a), tc.b, MatchKey(tc.b))
		}
	}
	for _, pair := range [][2]string{{"http://h.test/a", "http://g.test/a"}, {"http://h.test/a", "http://h.test/A"}, {"http://h.test:8080/a", "http://h.test/a"}} {
		if MatchKey(pair[0]) == MatchKey(pair[1]) {
			t.Errorf("MatchKey(%q) == MatchKey(%q)", pair[0], pair[1])
		}
	}
}

func TestParse(t *testing.T) {
	good := "# a comment\nlo-1\t文件 打开\thttp://help.libreoffice.test/zh-CN/a.html\n\nlo-2\tcharts\thttp://h.test/a.html,http://h.test/b.html\r\n"
	s, err := Parse(strings.NewReader(good), "zh")
	if err != nil || s.Name != "zh" || len(s.Judgments) != 2 || len(s.Judgments[1].Relevant) != 2 || s.Judgments[0].Query != "文件 打开" ||
		s.Judgments[1].Relevant[1] != "http://h.test/b.html" {
		t.Fatalf("Parse = %+v, %v", s, err)
	}
	bad := []struct{ name, body, want string }{
		{"two columns", "a\tb\n", "line 1: want QID"},
		{"four columns", "a\tb\thttp://h.test/\tx\n", "got 4 column(s)"},
		{"empty query", "a\t \thttp://h.test/\n", "empty query"},
		{"empty qid", "\tq\thttp://h.test/\n", "empty QID"},
		{"relative url", "a\tq\t/a.html\n", "not an absolute"},
		{"empty url", "a\tq\thttp://h.test/,\n", "not an absolute"},
		{"duplicate qid", "a\tq\thttp://h.test/\n\na\tr\thttp://h.test/\n", "line 3: QID \"a\" already on line 1"},
		{"nothing", "\n# only a comment\n", "no judgments"},
	}
	for _, tc := range bad {
		_, err := Parse(strings.NewReader(tc.body), "x")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "lo-zh-CN.tsv")
	if err := os.WriteFile(p, []byte("q1\tx\thttp://h.test/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadFile(p); err != nil || s.Name != "lo-zh-CN" {
		t.Errorf("ReadFile = %+v, %v", s, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.tsv")); err == nil {
		t.Error("missing file accepted")
	}
	bad := filepath.Join(dir, "bad.tsv")
	if err := os.WriteFile(bad, []byte("q1\tx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(bad); err == nil || !strings.Contains(err.Error(), bad+": line 1") {
		t.Errorf("ReadFile(bad) = %v, want the path and line", err)
	}
}

func TestRun(t *testing.T) {
	s := Set{Name: "s", Judgments: []Judgment{
		{ID: "a", Query: "first", Relevant: []string{"http://h.test/1"}}, // test part
		{ID: "b", Query: "second", Relevant: []string{"http://h.test/2"}},
		{ID: "c", Query: "broken", Relevant: []string{"http://h.test/3"}},
		{ID: "lo-zh-CN-0000", Query: "partial", Relevant: []string{"http://h.test/4"}},
		{ID: "lo-zh-CN-0001", Query: "nothing", Relevant: []string{"http://h.test/5"}},
	}}
	var inFlight, most atomic.Int32
	search := func(_ context.Context, q string) (Answer, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		switch q {
		case "first":
			return Answer{URLs: []string{"http://h.test/1"}}, nil
		case "second":
			return Answer{URLs: []string{"http://h.test/x", "http://h.test/2#frag"}}, nil
		case "broken":
			return Answer{}, errors.New("HTTP 500\nfrom node")
		case "partial":
			return Answer{URLs: []string{"http://h.test/4"}, Partial: true}, nil
		}
		return Answer{URLs: []string{"http://h.test/9"}}, nil
	}
	outs, err := Run(context.Background(), s, All, search, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		status Status
		rank   int
		part   Split
	}{{Answered, 1, Test}, {Answered, 2, Dev}, {Failed, 0, Dev}, {Partial, 1, Dev}, {Answered, 0, Dev}}
	for i, w := range want {
		if o := outs[i]; o.Status != w.status || o.Rank != w.rank || o.Part != w.part || o.ID != s.Judgments[i].ID {
			t.Errorf("outcome %d = %s %s rank %d part %s, want %s rank %d part %s", i, o.ID, o.Status, o.Rank, o.Part, w.status, w.rank, w.part)
		}
	}
	if most.Load() > 3 {
		t.Errorf("%d searches at once, concurrency was 3", most.Load())
	}
	dev, err := Run(context.Background(), s, Dev, search, 1)
	if err != nil || len(dev) != 4 || dev[0].ID != "b" {
		t.Errorf("Run(dev) = %d outcomes, %v; want the 4 dev judgments", len(dev), err)
	}

	var b bytes.Buffer
	if err := WriteMisses(&b, "s", outs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	wantLines := []string{
		"s\tdev\tc\tfailed\tbroken\thttp://h.test/3\tHTTP 500 from node",
		"s\tdev\tlo-zh-CN-0000\tpartial\tpartial\thttp://h.test/4\thttp://h.test/4",
		"s\tdev\tlo-zh-CN-0001\tmiss\tnothing\thttp://h.test/5\thttp://h.test/9",
	}
	if strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("misses:\n%s\nwant:\n%s", b.String(), strings.Join(wantLines, "\n"))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, s, All, search, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel = %v, want context.Canceled", err)
	}
}

func TestWriteTable(t *testing.T) {
	scores := []Score{{Set: "lo-zh-CN", Part: Dev, Queries: 217, Answered: 210, Partial: 5, Failed: 2, MRR10: 0.5, S1: 0.4, S10: 0.7, NDCG10: 0.55, P50MS: 8.25, P95MS: 40}}
	var text, md bytes.Buffer
	if err := WriteTable(&text, scores); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, scores); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lo-zh-CN", "dev", "217", "210", "0.500", "0.400", "0.700", "0.550", "8.2", "40.0"} {
		if !strings.Contains(text.String(), want) || !strings.Contains(md.String(), want) {
			t.Errorf("tables lack %q:\n%s\n%s", want, text.String(), md.String())
		}
	}
}

func TestParseReaders(t *testing.T) {
	got, err := ParseReaders([]string{"lo-zh-CN=zh-CN", " lo-zh-TW=zh-tw", "python=en"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"lo-zh-CN": "zh-CN", "lo-zh-TW": "zh-TW", "python": "en"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseReaders = %v, want %v", got, want)
	}
	for _, bad := range [][]string{{"zh-CN"}, {"=zh-CN"}, {"a=not a tag"}, {"a="}, {"a=zh", "a=en"}} {
		if r, err := ParseReaders(bad); err == nil {
			t.Errorf("ParseReaders(%q) = %v, want an error", bad, r)
		}
	}
}
