package search

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	xhtml "golang.org/x/net/html"

	"sou/index"
)

// corpusSites is the real corpus's site list (/work/shared/corpus/install.sh).
const corpusSites = "/var/lib/sou-corpus/sites.tsv"

// libreOfficePairs returns the LibreOffice help pages present in both
// zh-CN and zh-TW under dir (text/shared/01: the menus' help), at most n,
// as paths relative to the language directory.
func libreOfficePairs(t *testing.T, n int) (docroot string, pages []string) {
	t.Helper()
	f, err := os.Open(corpusSites)
	if err != nil {
		t.Skipf("real corpus not installed (%v)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if fields := strings.Split(sc.Text(), "\t"); len(fields) >= 2 && fields[0] == "help.libreoffice.test" {
			docroot = fields[1]
		}
	}
	if docroot == "" {
		t.Skip("help.libreoffice.test not in the corpus")
	}
	cn, err := filepath.Glob(filepath.Join(docroot, "zh-CN/text/shared/01/*.html"))
	if err != nil || len(cn) == 0 {
		t.Skipf("no zh-CN LibreOffice help under %s", docroot)
	}
	slices.Sort(cn)
	for _, p := range cn {
		rel, _ := filepath.Rel(filepath.Join(docroot, "zh-CN"), p)
		if _, err := os.Stat(filepath.Join(docroot, "zh-TW", rel)); err == nil {
			pages = append(pages, rel)
		}
		if len(pages) == n {
			break
		}
	}
	return docroot, pages
}

// helpPage reads a LibreOffice help page: its title and visible text.
func helpPage(t *testing.T, path string) (title, body string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := xhtml.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b strings.Builder
	var walk func(n *xhtml.Node)
	walk = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode {
			switch n.Data {
			case "script", "style", "head":
				if n.Data == "head" {
					for c := n.FirstChild; c != nil; c = c.NextSibling {
						if c.Type == xhtml.ElementNode && c.Data == "title" && c.FirstChild != nil {
							title = strings.TrimSpace(c.FirstChild.Data)
						}
					}
				}
				return
			}
		}
		if n.Type == xhtml.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return title, strings.Join(strings.Fields(b.String()), " ")
}

// crossScriptIndex indexes the pairs with an analyzer; it returns the
// engine and each page's title and body by URL.
func crossScriptIndex(t *testing.T, an *index.Analyzer, docroot string, pages []string) (*Local, map[string][2]string) {
	t.Helper()
	ix := openCoordShardWith(t, an)
	ctx := context.Background()
	text := map[string][2]string{}
	for _, rel := range pages {
		for _, lang := range []string{"zh-CN", "zh-TW"} {
			title, body := helpPage(t, filepath.Join(docroot, lang, rel))
			d := &index.Document{URL: helpURL(lang, rel), Host: "help.libreoffice.test", Title: title, Body: body, Status: 200, ContentType: "text/html"}
			if err := ix.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
			text[d.URL] = [2]string{title, body}
		}
	}
	if err := ix.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return NewLocal(ix, DefaultParams()), text
}

func helpURL(lang, rel string) string { return "http://help.libreoffice.test/" + lang + "/" + rel }

func searchURLs(t *testing.T, l *Local, query string, k int) []string {
	t.Helper()
	q, err := ParseQuery(query, l.ix.Analyzer())
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Search(context.Background(), q, k, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return urls(res)
}

// crossScriptHits counts, for each script, the pages whose title, as a
// query, finds the other script's copy of the page in the top 10.
func crossScriptHits(t *testing.T, l *Local, text map[string][2]string, pages []string) (cnFindsTW, twFindsCN int) {
	t.Helper()
	for _, rel := range pages {
		cn, tw := helpURL("zh-CN", rel), helpURL("zh-TW", rel)
		if slices.Contains(searchURLs(t, l, text[cn][0], 10), tw) {
			cnFindsTW++
		}
		if slices.Contains(searchURLs(t, l, text[tw][0], 10), cn) {
			twFindsCN++
		}
	}
	return cnFindsTW, twFindsCN
}

// A Simplified query finds the Traditional copy of the same help page,
// and the reverse: over LibreOffice's help in both scripts, the title of
// a page in one script, searched for, has the page in the other script in
// its top 10 — far more often than without script folding, where only
// titles written with characters common to both scripts could. And a
// mainland word finds Taiwan pages that use Taiwan's word for it.
func TestCrossScriptLibreOfficeHelp(t *testing.T) {
	docroot, pages := libreOfficePairs(t, 150)
	if len(pages) < 100 {
		t.Skipf("%d zh-CN/zh-TW page pairs, want 100", len(pages))
	}
	shared := index.SharedAnalyzer()
	folded, text := crossScriptIndex(t, shared, docroot, pages)
	unfolded, _ := crossScriptIndex(t, shared.WithoutScriptFolding(), docroot, pages)
	cnTW, twCN := crossScriptHits(t, folded, text, pages)
	oldCNTW, oldTWCN := crossScriptHits(t, unfolded, text, pages)
	n := len(pages)
	t.Logf("%d pairs; Simplified title finds the Traditional page: %d folded, %d unfolded; Traditional title finds the Simplified page: %d folded, %d unfolded",
		n, cnTW, oldCNTW, twCN, oldTWCN)
	// The two translations often word a title differently (新建 / 新增,
	// 模板 / 範本), so not every title can find its twin; folding must
	// find most, and far more than the unfolded analyzer.
	for _, c := range []struct {
		what      string
		got, base int
	}{
		{"Simplified title finds the Traditional page", cnTW, oldCNTW},
		{"Traditional title finds the Simplified page", twCN, oldTWCN},
	} {
		if c.got < n/2 || c.got < c.base+n/4 {
			t.Errorf("%s for %d of %d pairs (unfolded analyzer: %d)", c.what, c.got, n, c.base)
		}
	}
	for _, w := range []struct{ mainland, taiwan string }{{"文件", "檔案"}, {"设置", "設定"}, {"宏", "巨集"}} {
		found := 0
		for _, u := range searchURLs(t, folded, w.mainland, 1000) {
			body := text[u][1]
			if strings.Contains(u, "/zh-TW/") && strings.Contains(body, w.taiwan) && !strings.Contains(body, w.mainland) {
				found++
			}
		}
		if found == 0 {
			t.Errorf("%s finds no Taiwan page that writes %s", w.mainland, w.taiwan)
		}
		t.Logf("%s finds %d Taiwan pages that write only %s", w.mainland, found, w.taiwan)
	}
}
