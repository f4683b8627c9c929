package crawl

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// The real corpus (/work/shared/corpus/install.sh): sites.tsv lists
// HOST<TAB>DOCROOT<TAB>SEEDS<TAB>ROLE, each docroot served at http://HOST/.
const corpusSites = "/var/lib/sou-corpus/sites.tsv"

type corpusSite struct {
	host, root string
	seeds      []string
}

func loadCorpus(t *testing.T) []corpusSite {
	t.Helper()
	f, err := os.Open(corpusSites)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("corpus not installed (%s)", corpusSites)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sites []corpusSite
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 3 {
			continue
		}
		sites = append(sites, corpusSite{host: fields[0], root: fields[1], seeds: strings.Split(fields[2], ",")})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sites
}

// file maps a URL of the site to the docroot file the simulated web serves
// for it ("" if none): query ignored, a directory serves its index.html.
func (s corpusSite) file(u *url.URL) string {
	if u.Host != s.host {
		return ""
	}
	name := filepath.Join(s.root, filepath.FromSlash(path.Clean("/"+u.Path)))
	st, err := os.Stat(name)
	if err == nil && st.IsDir() {
		name = filepath.Join(name, "index.html")
		st, err = os.Stat(name)
	}
	if err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return name
}

func (s corpusSite) parse(t *testing.T, file string) *Parsed {
	t.Helper()
	rel, err := filepath.Rel(s.root, file)
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseHTML(body, "text/html", nil, &url.URL{Scheme: "http", Host: s.host, Path: "/" + filepath.ToSlash(rel)})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return p
}

func isHTMLFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".html", ".htm", ".xhtml":
		return true
	}
	return false
}

// TestCorpusScriptLinkPrecision parses every page of the corpus and checks
// that the script links on the page's own host name files that exist: how
// often a script link is a real page rather than a 404.
func TestCorpusScriptLinkPrecision(t *testing.T) {
	if testing.Short() {
		t.Skip("parses the whole corpus")
	}
	sites := loadCorpus(t)
	var exist, missing, foreign, pages int
	for _, s := range sites {
		urls := map[string]bool{} // same-host script link -> exists
		var siteForeign, sitePages int
		err := filepath.WalkDir(s.root, func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !isHTMLFile(name) {
				return err
			}
			sitePages++
			for _, l := range s.parse(t, name).Links {
				if !l.Script {
					continue
				}
				u, err := url.Parse(l.URL)
				if err != nil {
					t.Fatalf("%s: script link %q: %v", name, l.URL, err)
				}
				if u.Host != s.host {
					siteForeign++
					continue
				}
				if _, seen := urls[l.URL]; !seen {
					urls[l.URL] = s.file(u) != ""
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var e, m int
		var missed []string
		for u, ok := range urls {
			if ok {
				e++
			} else {
				m++
				missed = append(missed, u)
			}
		}
		sort.Strings(missed)
		if e+m+siteForeign > 0 {
			t.Logf("%-28s %5d pages: %4d same-host script URLs, %4d exist, %4d missing %q; %d links to other hosts",
				s.host, sitePages, e+m, e, m, missed[:min(len(missed), 5)], siteForeign)
		}
		exist, missing, foreign, pages = exist+e, missing+m, foreign+siteForeign, pages+sitePages
	}
	t.Logf("corpus: %d pages, %d distinct same-host script URLs, %d exist (%.1f%%), %d missing; %d links to other hosts",
		pages, exist+missing, exist, 100*float64(exist)/float64(max(exist+missing, 1)), missing, foreign)
	if exist == 0 {
		t.Fatal("no script link found in the corpus")
	}
	if precision := float64(exist) / float64(exist+missing); precision < 0.9 {
		t.Errorf("precision %.3f: script links name missing files too often", precision)
	}
}

// TestCorpusLibreOfficeScriptOnlyPages walks the LibreOffice help from its
// seeds as the crawler does (HTML and script links, same host) and looks
// for the pages no link reaches. Its pages carry no link in inline scripts
// or event handlers: the Contents tree and the Index are built by the
// external scripts contents.js and bookmarks.js (<script src>, not
// fetched). The test scans those files with the same scanner, against the
// including page's base, and checks that they name the pages the walk
// misses: the pages a crawler reaches only by fetching external scripts.
func TestCorpusLibreOfficeScriptOnlyPages(t *testing.T) {
	var lo *corpusSite
	for _, s := range loadCorpus(t) {
		if s.host == "help.libreoffice.test" {
			lo = &s
			break
		}
	}
	if lo == nil {
		t.Skip("help.libreoffice.test not in the corpus")
	}
	reached := map[string]bool{}     // docroot file -> reached
	scripts := map[string]*url.URL{} // same-host <script src> URL -> base of a page that includes it
	var queue []string
	var viaScript int // pages first reached through a script link
	enqueue := func(raw string, script bool) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if f := lo.file(u); f != "" && isHTMLFile(f) && !reached[f] {
			reached[f] = true
			queue = append(queue, f)
			if script {
				viaScript++
			}
		}
	}
	for _, seed := range lo.seeds {
		enqueue("http://"+lo.host+"/"+seed, false)
	}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		p := lo.parse(t, f)
		for _, l := range p.Links {
			if !l.NoFollow {
				enqueue(l.URL, l.Script)
			}
		}
		if p.RefreshURL != "" {
			enqueue(p.RefreshURL, false)
		}
		externalScripts(t, *lo, f, scripts)
	}
	var unreached []string
	err := filepath.WalkDir(lo.root, func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && isHTMLFile(name) && !reached[name] {
			unreached = append(unreached, name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The pages the external scripts name.
	named := map[string]bool{}
	for src, base := range scripts {
		u, _ := url.Parse(src)
		js, err := os.ReadFile(lo.file(u))
		if err != nil {
			t.Fatal(err)
		}
		lr := newLinkResolver(base)
		scanScript(js, func(link string) bool {
			if s, ok := lr.resolve(link); ok {
				if su, err := url.Parse(s); err == nil {
					if f := lo.file(su); f != "" {
						named[f] = true
					}
				}
			}
			return true
		})
	}
	var onlyExternal []string
	for _, f := range unreached {
		if named[f] {
			onlyExternal = append(onlyExternal, f)
		}
	}
	t.Logf("%d pages reached (%d first through an inline script link), %d not reached; %d external scripts name %d of those",
		len(reached), viaScript, len(unreached), len(scripts), len(onlyExternal))
	if len(onlyExternal) < 300 {
		t.Errorf("external scripts name only %d of the %d pages no link reaches", len(onlyExternal), len(unreached))
	}
}

// externalScripts records the same-host <script src> of a page with the
// page's base URL (its <base href>), against which a script's strings
// resolve.
func externalScripts(t *testing.T, s corpusSite, file string, into map[string]*url.URL) {
	t.Helper()
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(s.root, file)
	page := &url.URL{Scheme: "http", Host: s.host, Path: "/" + filepath.ToSlash(rel)}
	base := page
	var srcs []string
	z := html.NewTokenizer(bytes.NewReader(body))
	for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		for hasAttr {
			var k, v []byte
			k, v, hasAttr = z.TagAttr()
			switch {
			case string(name) == "base" && string(k) == "href" && base == page:
				if b, err := page.Parse(string(v)); err == nil {
					base = b
				}
			case string(name) == "script" && string(k) == "src":
				srcs = append(srcs, string(v))
			}
		}
	}
	for _, src := range srcs {
		u, err := base.Parse(src)
		if err != nil || u.Host != s.host || s.file(u) == "" {
			continue
		}
		if _, ok := into[u.String()]; !ok {
			into[u.String()] = base
		}
	}
}
