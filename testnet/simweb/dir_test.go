package simweb

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
)

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDirectoryMode(t *testing.T) {
	dir := t.TempDir()
	main, mirror := filepath.Join(dir, "main"), filepath.Join(dir, "mirror")
	gbk, err := simplifiedchinese.GBK.NewEncoder().String(`<html><head><meta charset="gbk"><title>中文页面</title></head>` +
		`<body><a href="../index.html">首页</a> <a href="sub/b.html#x">乙</a></body></html>`)
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, main, map[string]string{
		"index.html": `<html><head><title>Home  首页</title></head><body>
<a href="a.html">a</a> <a href="sub/">sub</a> <a href="/sub">sub again</a> <a href="notes.txt">notes</a>
<a href="img.png">img</a> <a href="missing.html">gone</a> <a href="http://elsewhere.example/">out</a>
<a rel="nofollow" href="secret.html">secret</a> <a href="mailto:a@b.c">mail</a>
<!-- <a href="commented.html">x</a> --></body></html>`,
		"a.html":            gbk,
		"sub/index.html":    `<html><head><base href="/sub/deeper/"><title>Sub</title></head><body><a href="c.html">c</a></body></html>`,
		"sub/b.html":        `<html><head><meta name="robots" content="nofollow"><title>B</title></head><body><a href="zzz.html">z</a></body></html>`,
		"sub/deeper/c.html": `<title>C</title>`,
		"secret.html":       `<title>Secret</title>`,
		"commented.html":    `<title>Commented</title>`,
		"notes.txt":         "plain notes\n",
		"img.png":           "\x89PNG\r\n\x1a\n",
	})
	writeTree(t, mirror, map[string]string{"index.html": `<title>Mirror</title><a href="b.html">b</a>`, "b.html": "<title>B</title>"})
	writeTree(t, main, map[string]string{"sub/index.html": `<html><head><base href="/sub/deeper/"><title>Sub</title></head><body><a href="c.html">c</a></body></html>`})
	tsv := filepath.Join(dir, "sites.tsv")
	os.WriteFile(tsv, []byte("Dir.test\t"+main+"\t/\tmain\nmirror.test\t"+mirror+"\tindex.html\tmirror\n"), 0o644)

	w := startWeb(t, Config{Sites: tsv})
	tr := w.Truth()
	base := "http://dir.test" + w.portSuffix
	type want struct {
		status   int
		required bool
		excluded string
		title    string
	}
	wants := map[string]want{
		base + "/":                  {200, true, "", "Home 首页"},
		base + "/index.html":        {200, true, "", "Home 首页"},
		base + "/a.html":            {200, true, "", "中文页面"},
		base + "/sub/":              {200, true, "", "Sub"},
		base + "/sub":               {301, false, ExclRedirect, ""},
		base + "/sub/b.html":        {200, true, "", "B"},
		base + "/sub/deeper/c.html": {200, true, "", "C"},
		base + "/notes.txt":         {200, true, "", ""},
		base + "/img.png":           {200, false, ExclNotHTML, ""},
		base + "/missing.html":      {404, false, ExclNotFound, ""},
		"http://mirror.test" + w.portSuffix + "/index.html": {200, true, "", "Mirror"},
		"http://mirror.test" + w.portSuffix + "/b.html":     {200, true, "", "B"},
	}
	if len(tr.Pages) != len(wants) {
		for _, p := range tr.Pages {
			t.Logf("truth: %s %d %q", p.URL, p.Status, p.Excluded)
		}
		t.Fatalf("truth has %d pages, want %d", len(tr.Pages), len(wants))
	}
	for u, wt := range wants {
		p, ok := tr.Page(u)
		if !ok {
			t.Errorf("truth lacks %s", u)
			continue
		}
		if p.Status != wt.status || p.Required != wt.required || p.Excluded != wt.excluded || p.Title != wt.title {
			t.Errorf("%s: truth %d %v %q %q; want %+v", u, p.Status, p.Required, p.Excluded, p.Title, wt)
		}
	}
	if p, _ := tr.Page(base + "/a.html"); p.Charset != "gbk" {
		t.Errorf("a.html charset %q", p.Charset)
	}
	if h, ok := tr.Host("mirror.test"); !ok || h.Role != "mirror" || h.Mode != "directory" || h.MirrorOf != "dir.test" {
		t.Errorf("mirror host truth %+v", h)
	}
	// The mirror's pages live under /sub/ on the main site.
	if p, _ := tr.Page("http://mirror.test" + w.portSuffix + "/b.html"); p.MirrorOf != base+"/sub/b.html" {
		t.Errorf("mirror page mirror_of %q, want %s", p.MirrorOf, base+"/sub/b.html")
	}
	// Serving, through the web's DNS.
	c := dnsClient(w, 30*time.Second)
	cases := []struct {
		path, ctype string
		status      int
		body        string
	}{
		{"/", "text/html", 200, "Home  首页"},
		{"/a.html", "text/html", 200, ""},
		{"/sub", "", 301, ""},
		{"/sub/", "text/html", 200, "Sub"},
		{"/notes.txt", "text/plain", 200, "plain notes"},
		{"/missing.html", "", 404, ""},
		{"/../../etc/passwd", "", 404, ""},
		{"/a.html?DbPAR=x", "text/html", 200, ""},
	}
	for _, cs := range cases {
		f, err := get(c, base+cs.path)
		if err != nil {
			t.Fatalf("%s: %v", cs.path, err)
		}
		if f.status != cs.status || (cs.ctype != "" && f.header.Get("Content-Type") != cs.ctype) || !strings.Contains(string(f.body), cs.body) {
			t.Errorf("%s: %d %q, want %d %q containing %q", cs.path, f.status, f.header.Get("Content-Type"), cs.status, cs.ctype, cs.body)
		}
		if cs.status == 301 && f.header.Get("Location") != "/sub/" {
			t.Errorf("%s: Location %q", cs.path, f.header.Get("Location"))
		}
	}
	if f, _ := get(c, base+"/a.html"); string(f.body) != gbk {
		t.Error("a.html not served byte for byte")
	}
}

// TestDirectoryAndSynthetic runs both modes in one web.
func TestDirectoryAndSynthetic(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"index.html": `<title>Only</title>`})
	tsv := filepath.Join(dir, "sites.tsv")
	os.WriteFile(tsv, []byte("only.test\t"+dir+"\t\n"), 0o644)
	w := startWeb(t, Config{Seed: 1, Hosts: 5, Pages: 60, Sites: tsv})
	tr := w.Truth()
	if _, ok := tr.Page("http://only.test" + w.portSuffix + "/"); !ok {
		t.Error("directory seed missing from truth")
	}
	if _, ok := tr.Page("http://portal-0.sim.test" + w.portSuffix + "/"); !ok {
		t.Error("synthetic seed missing from truth")
	}
}

// TestCorpus serves the real corpus when install.sh has put it in place.
func TestCorpus(t *testing.T) {
	const sites = "/var/lib/sou-corpus/sites.tsv"
	if _, err := os.Stat(sites); err != nil {
		t.Skipf("corpus not installed (%s missing); run ../shared/corpus/install.sh", sites)
	}
	w := startWeb(t, Config{Sites: sites})
	c := dnsClient(w, 10*time.Second)
	hosts := map[string]bool{}
	for _, s := range w.Seeds() {
		h := hostOf(s)
		if hosts[h] {
			continue
		}
		hosts[h] = true
		f, err := get(c, s)
		if err != nil || f.status != 200 || len(f.body) == 0 {
			t.Errorf("seed %s: %v %d", s, err, f.status)
		}
	}
	if len(hosts) < 20 {
		t.Errorf("only %d corpus hosts", len(hosts))
	}
}

// TestDirectoryScripts: the truth walk reads the same-host external
// scripts a page includes, once, for the pages they name, resolved
// against the including page's base.
func TestDirectoryScripts(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "site")
	writeTree(t, root, map[string]string{
		"docs/guide/p1.html": `<html><head><base href="../../"><title>P1</title>
<script src="js/menu.js"></script>
<script src="http://other.test/js/x.js"></script>
<script type="application/json" src="js/data.json"></script>
<script src="js/missing.js"></script>
<script src="js/data.php"></script>
<script src="js"></script>
</head><body><a href="docs/guide/p2.html">p2</a></body></html>`,
		// Includes menu.js too, with another base: the first includer's counts.
		"docs/guide/p2.html": `<html><head><title>P2</title><script src="/js/menu.js"></script></head><body></body></html>`,
		"js/menu.js": `// "docs/comment.html"
var m = [{url:"docs/only.html", t:"a"}, {url:"docs/q.html?x=1#f"}, "docs/esc\x2fnot.html", 'a b.html', "style.css"];
var r = /"docs\/inregex.html"/; document.write('<a href="docs/written.html">');`,
		"js/data.json":      `{"u": "docs/json.html"}`,
		"js/data.php":       `x = "docs/php.html"`,
		"js/index.html":     `<title>JS dir</title>`,
		"docs/only.html":    `<title>Only</title>`,
		"docs/q.html":       `<title>Q</title>`,
		"docs/json.html":    `<title>J</title>`,
		"js/docs/only.html": `<title>Wrong base</title>`,
	})
	tsv := filepath.Join(dir, "sites.tsv")
	os.WriteFile(tsv, []byte("s.test\t"+root+"\tdocs/guide/p1.html\tmain\n"), 0o644)
	w := startWeb(t, Config{Sites: tsv})
	tr := w.Truth()
	base := "http://s.test" + w.portSuffix
	type want struct {
		status   int
		required bool
		excluded string
	}
	wants := map[string]want{
		base + "/docs/guide/p1.html": {200, true, ""},
		base + "/docs/guide/p2.html": {200, true, ""},
		base + "/js/menu.js":         {200, false, ExclScript},
		base + "/js/missing.js":      {404, false, ExclNotFound},
		base + "/js/data.php":        {200, false, ExclNotHTML},
		base + "/js":                 {301, false, ExclRedirect},
		base + "/js/":                {200, false, ExclNotHTML}, // a directory's index.html, served as HTML
		base + "/docs/only.html":     {200, true, ""},
		base + "/docs/q.html?x=1":    {200, true, ""},
	}
	for _, p := range tr.Pages {
		wt, ok := wants[p.URL]
		if !ok {
			t.Errorf("truth lists %s (%d %q)", p.URL, p.Status, p.Excluded)
			continue
		}
		if p.Status != wt.status || p.Required != wt.required || p.Excluded != wt.excluded {
			t.Errorf("%s: truth %d %v %q; want %+v", p.URL, p.Status, p.Required, p.Excluded, wt)
		}
		delete(wants, p.URL)
	}
	for u := range wants {
		t.Errorf("truth lacks %s", u)
	}
}

func TestScriptLiterals(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"strings", `a("x.html"); b('y/z.htm'); c(` + "`w.html`" + `)`, []string{"x.html", "y/z.htm", "w.html"}},
		{"comments", "// \"a.html\"\n/* 'b.html' */ <!-- 'c.html'\n--> 'd.html'\n'e.html'", []string{"e.html"}},
		{"escapes and substitutions", `"a\/b.html"; ` + "`${x}.html`", nil},
		{"unterminated", "\"a.html\n'b.html'", []string{"b.html"}},
		{"regex", `x = /"q.html"/g; y = a / "b.html".length / 2; return /'r.html'/`, []string{"b.html"}},
	}
	for _, tt := range tests {
		if got := jsLiterals([]byte(tt.src)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: literals %q, want %q", tt.name, got, tt.want)
		}
	}
	pages := []struct {
		lit  string
		page bool
	}{
		{"a.html", true}, {"en-US/text/a.html?DbPAR=W#bm", true}, {"/a/b.HTM", true}, {"./a.html", true}, {"../a.html", true},
		{"http://h.test/a.html", true}, {"http://h.test:8080/a.html", true},
		{"//h.test/a.html", false}, {"http://user@h.test/a.html", false}, {"http://h/a.html", false},
		{"a.php", false}, {"/a/", false}, {".html", false}, {".a.html", false}, {"-a.html", false},
		{"a b.html", false}, {"<a.html", false}, {"a.html?x=", false}, {"a.html?t=1:2", false}, {"mailto:a.html", false},
		{"a%zz.html", false}, {"a%20b.html", true}, {"中.html", false}, {"#sec.html", false}, {"?q=a.html", false},
	}
	for _, p := range pages {
		if got := namesPage(p.lit); got != p.page {
			t.Errorf("namesPage(%q) = %v, want %v", p.lit, got, p.page)
		}
	}
}
