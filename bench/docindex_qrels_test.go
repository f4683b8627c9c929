package bench

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sou/eval"
)

// TestDocIndexQrels runs docindex_qrels.py on small index pages written
// the way Sphinx (python) and DocBook (postgresql) write them.
func TestDocIndexQrels(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	const sphinx = `<html><body><table class="indextable genindextable"><tr><td><ul>
<li><a href="library/re.html#re.A">A (in module re)</a></li>
<li><a href="library/binascii.html#binascii.a2b_hex">a2b_hex() (in module binascii)</a></li>
<li>
    abc
  <ul><li><a href="library/abc.html#module-abc">module</a></li></ul></li>
<li><a href="c-api/sys.html#index-1">abort()</a>
  <ul><li><a href="library/os.html#os.abort">(in module os)</a></li>
      <li><a href="library/asyncio-sync.html#asyncio.Barrier.abort">(asyncio.Barrier method)</a></li></ul></li>
<li><a href="library/functions.html#abs">abs() (built-in function)</a>, <a href="library/stdtypes.html#x">[1]</a></li>
<li><a href="library/math.html#fabs">ABS</a></li>
<li>operator<ul><li><a href="library/stdtypes.html#index-1">/</a></li></ul></li>
<li><a href="library/missing.html">nowhere_entry</a></li>
<li><a href="library/a1.html">everywhere</a>, <a href="library/a2.html">[1]</a>, <a href="library/a3.html">[2]</a>,
    <a href="library/a4.html">[3]</a>, <a href="library/a5.html">[4]</a>, <a href="library/a6.html">[5]</a></li>
<li>PyPI<ul><li><a href="distributing/index.html#index-1">(see Python Package Index (PyPI))</a></li></ul></li>
</ul></td></tr></table></body></html>`
	const docbook = `<html><body><div class="index"><dl>
<dt id="a">%, <a class="indexterm" href="functions-math.html">Math</a></dt>
<dt id="b">abs, <a class="indexterm" href="functions-math.html#X">Math</a></dt>
<dt id="c">alias</dt><dd><dl><dt>for table name in query, <a class="indexterm" href="tutorial-join.html">Joins</a></dt></dl></dd>
<dt id="d">ALTER TABLE, <a class="indexterm" href="sql-altertable.html">ALTER TABLE</a></dt>
</dl></div></body></html>`
	py, pg := t.TempDir(), t.TempDir()
	write := func(root string, files ...string) {
		for _, f := range files {
			p := filepath.Join(root, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("<title>x</title>"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(py, "library/re.html", "library/binascii.html", "library/abc.html", "c-api/sys.html", "library/os.html",
		"library/asyncio-sync.html", "library/functions.html", "library/stdtypes.html", "library/math.html",
		"library/a1.html", "library/a2.html", "library/a3.html", "library/a4.html", "library/a5.html", "library/a6.html",
		"distributing/index.html")
	write(pg, "functions-math.html", "tutorial-join.html", "sql-altertable.html")
	if err := os.WriteFile(filepath.Join(py, "genindex-all.html"), []byte(sphinx), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pg, "bookindex.html"), []byte(docbook), 0o644); err != nil {
		t.Fatal(err)
	}
	qid := func(prefix, query string) string {
		h := sha1.Sum([]byte(query))
		return prefix + "-" + hex.EncodeToString(h[:])[:8]
	}
	const pyHost, pgHost = "http://python-docs.test/", "http://postgresql-docs.test/"
	tests := []struct {
		site, root string
		want       map[string][]string // query -> relevant URLs
	}{
		{"python", py, map[string][]string{
			"binascii a2b_hex":      {pyHost + "library/binascii.html"},
			"abc module":            {pyHost + "library/abc.html"},
			"abort":                 {pyHost + "c-api/sys.html"},
			"os abort":              {pyHost + "library/os.html"},
			"asyncio.Barrier abort": {pyHost + "library/asyncio-sync.html"},
			// "abs() (built-in function)" and "ABS" are one query.
			"abs":  {pyHost + "library/functions.html", pyHost + "library/math.html", pyHost + "library/stdtypes.html"},
			"PyPI": {pyHost + "distributing/index.html"},
		}},
		{"postgresql", pg, map[string][]string{
			"abs":                           {pgHost + "functions-math.html"},
			"alias for table name in query": {pgHost + "tutorial-join.html"},
			"ALTER TABLE":                   {pgHost + "sql-altertable.html"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.site, func(t *testing.T) {
			cmd := exec.Command("python3", "docindex_qrels.py", tc.site, "--root", tc.root, "--n", "0")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, stderr.String())
			}
			set, err := eval.Parse(bytes.NewReader(out), tc.site)
			if err != nil {
				t.Fatalf("output is not a judgment file: %v\n%s", err, out)
			}
			got := map[string][]string{}
			for _, j := range set.Judgments {
				got[j.Query] = j.Relevant
				prefix := map[string]string{"python": "py", "postgresql": "pg"}[tc.site]
				if j.ID != qid(prefix, j.Query) {
					t.Errorf("QID of %q = %s, want %s", j.Query, j.ID, qid(prefix, j.Query))
				}
			}
			for q, urls := range tc.want {
				if !slices.Equal(got[q], urls) {
					t.Errorf("query %q: relevant %v, want %v", q, got[q], urls)
				}
			}
			if len(got) != len(tc.want) {
				var extra []string
				for q := range got {
					if _, ok := tc.want[q]; !ok {
						extra = append(extra, q)
					}
				}
				t.Errorf("%d queries, want %d; unexpected: %s", len(got), len(tc.want), strings.Join(extra, " | "))
			}
			for i := 1; i < len(set.Judgments); i++ {
				if set.Judgments[i-1].ID >= set.Judgments[i].ID {
					t.Errorf("QIDs out of order: %s before %s", set.Judgments[i-1].ID, set.Judgments[i].ID)
				}
			}
		})
	}
	// --n keeps the smallest QIDs, so a smaller sample is a prefix.
	out, err := exec.Command("python3", "docindex_qrels.py", "python", "--root", py, "--n", "2").Output()
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 2 {
		t.Errorf("--n 2 printed %d lines", len(lines))
	}
	if err := exec.Command("python3", "docindex_qrels.py", "python", "--root", filepath.Join(py, "nope")).Run(); err == nil {
		t.Error("a missing docroot: exit 0")
	}
}
