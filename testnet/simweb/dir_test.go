package simweb

import (
	"os"
	"path/filepath"
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
