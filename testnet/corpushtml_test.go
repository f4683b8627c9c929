package testnet

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sou/testnet/simweb"
)

// TestReportCorpusHTMLCoverage serves two small directory sites and counts
// which of their HTML files a client fetched.
func TestReportCorpusHTMLCoverage(t *testing.T) {
	dir := t.TempDir()
	docs, other := filepath.Join(dir, "docs"), filepath.Join(dir, "other")
	files := map[string]string{
		"docs/index.html":     `<title>Home</title><a href="a.html">a</a> <a href="sub/">sub</a>`,
		"docs/a.html":         `<title>A</title>`,
		"docs/sub/index.html": `<title>Sub</title><script>location = "b.htm"</script>`,
		"docs/sub/b.htm":      `<title>B, named by a script only</title>`,
		"docs/UPPER.HTML":     `<title>Upper</title>`,
		"docs/notes.txt":      "not HTML\n",
		"docs/img.png":        "\x89PNG\r\n\x1a\n",
		"other/index.html":    `<title>Other</title>`,
		"other/x.html":        `<title>X</title>`,
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"alias.html": "a.html", // its own URL: counted
		"gone.html":  "nowhere.html",
		"linked":     "sub", // a directory symlink: not walked
	} {
		if err := os.Symlink(target, filepath.Join(docs, link)); err != nil {
			t.Fatal(err)
		}
	}
	sites := filepath.Join(dir, "sites.tsv")
	if err := os.WriteFile(sites, []byte("docs.test\t"+docs+"\tindex.html\tmain\nother.test\t"+other+"\tindex.html\tmain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	web, err := simweb.Start(ctx, simweb.Config{Sites: sites})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, web.HTTPAddr())
	}}}
	for _, u := range []string{"/", "/a.html?x=1", "/a.html", "/sub/", "/UPPER.HTML", "/missing.html", "/sub"} {
		resp, err := client.Get("http://docs.test" + u)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	got, err := corpusHTML(web.Truth().Hosts, fetchesFrom(web.Requests(0)), 5<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := &CorpusHTML{Files: 8, Fetched: 4, Coverage: 0.5, BySite: map[string]SiteHTML{
		"docs.test":  {Files: 6, Fetched: 4, Coverage: 0.666667, Unfetched: []string{"/alias.html", "/sub/b.htm"}},
		"other.test": {Files: 2, Fetched: 0, Coverage: 0, Unfetched: []string{"/index.html", "/x.html"}},
	}}
	if got.Files != want.Files || got.Fetched != want.Fetched || got.Coverage != want.Coverage || len(got.BySite) != 2 {
		t.Fatalf("corpusHTML = %+v, want %+v", got, want)
	}
	for host, w := range want.BySite {
		g := got.BySite[host]
		if g.Files != w.Files || g.Fetched != w.Fetched || g.Coverage != w.Coverage || !slices.Equal(g.Unfetched, w.Unfetched) {
			t.Errorf("%s: %+v, want %+v", host, g, w)
		}
	}

	// The keys sit in the crawl section, and only when there are
	// directory sites.
	for _, c := range []struct {
		html *CorpusHTML
		keys bool
	}{{got, true}, {nil, false}} {
		b, err := json.Marshal(CrawlReport{CorpusHTML: c.html})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{`"corpus_html_files":8`, `"corpus_html_fetched":4`, `"corpus_html_coverage":0.5`, `"corpus_html_by_site":{`} {
			if strings.Contains(string(b), k) != c.keys {
				t.Errorf("crawl section %s: key %s present = %v, want %v", b, k, !c.keys, c.keys)
			}
		}
	}
	if h, err := corpusHTML([]simweb.HostTruth{{Host: "blog-1.sim.test", Mode: "synthetic"}}, nil, 5<<20); h != nil || err != nil {
		t.Errorf("a synthetic web: corpusHTML = %+v, %v; want nil", h, err)
	}
	if _, err := corpusHTML([]simweb.HostTruth{{Host: "x.test", Mode: "directory", Docroot: filepath.Join(dir, "vanished")}}, nil, 5<<20); err == nil {
		t.Error("a docroot that vanished: no error")
	}
}
