package crawl

import (
	"bufio"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
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
// often a script link is a real page rather than a 404. It also compares
// the two bases an external script's links could resolve against (see
// compareScriptBases).
func TestCorpusScriptLinkPrecision(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("parses the whole corpus, on one goroutine")
	}
	sites := loadCorpus(t)
	var exist, missing, foreign, pages int
	var bases scriptBases
	for _, s := range sites {
		urls := map[string]bool{}                 // same-host script link -> exists
		includers := map[string]map[string]bool{} // external script -> bases of its includers
		var siteForeign, sitePages int
		err := filepath.WalkDir(s.root, func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !isHTMLFile(name) {
				return err
			}
			sitePages++
			for _, l := range s.parse(t, name).Links {
				if l.Base != "" {
					if includers[l.URL] == nil {
						includers[l.URL] = map[string]bool{}
					}
					includers[l.URL][l.Base] = true
				}
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
		bases.compare(t, s, includers)
	}
	t.Logf("corpus: %d pages, %d distinct same-host script URLs, %d exist (%.1f%%), %d missing; %d links to other hosts",
		pages, exist+missing, exist, 100*float64(exist)/float64(max(exist+missing, 1)), missing, foreign)
	t.Logf("external scripts: %d on their includers' hosts; by the includer's base %d URLs, %d exist; by the script's URL %d URLs, %d exist; %d scripts whose links depend on the includer",
		bases.scripts, bases.byIncluder, bases.existIncluder, bases.byScript, bases.existScript, bases.differ)
	if bases.existIncluder <= bases.existScript {
		t.Errorf("the includer's base names %d existing pages, the script's URL %d", bases.existIncluder, bases.existScript)
	}
	if exist == 0 {
		t.Fatal("no script link found in the corpus")
	}
	if precision := float64(exist) / float64(exist+missing); precision < 0.9 {
		t.Errorf("precision %.3f: script links name missing files too often", precision)
	}
}

// corpusWalk is what a walk of a site from its seeds reached.
type corpusWalk struct {
	reached     map[string]bool // docroot HTML files
	urls        map[string]bool // the distinct URLs that reached them
	scripts     int             // external scripts read
	scriptBytes int64           // their bytes, as the crawler reads them (cut at its cap)
	// scriptURLs: the distinct URLs of the site that the scripts read name,
	// and whether the docroot serves a file for each.
	scriptURLs map[string]bool
	foreign    int   // script links to other hosts
	htmlBytes  int64 // of the files reached
}

// walkCorpusSite walks a site from its seeds as the crawler does: HTML
// and inline-script links, refresh targets and, with external, the
// same-host external scripts the parser reports (Link.Base), read once
// each with the crawler's size cap and scanned by ScriptLinks against the
// base of the page that included them first.
func walkCorpusSite(t *testing.T, s corpusSite, external bool) corpusWalk {
	t.Helper()
	w := corpusWalk{reached: map[string]bool{}, urls: map[string]bool{}, scriptURLs: map[string]bool{}}
	scriptsSeen := map[string]bool{}
	maxScript := DefaultFetcherConfig().MaxScriptBytes
	var queue []string
	enqueue := func(raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		f := s.file(u)
		if f == "" || !isHTMLFile(f) {
			return
		}
		w.urls[raw] = true
		if !w.reached[f] {
			w.reached[f] = true
			if st, err := os.Stat(f); err == nil {
				w.htmlBytes += st.Size()
			}
			queue = append(queue, f)
		}
	}
	for _, seed := range s.seeds {
		enqueue("http://" + s.host + "/" + seed)
	}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		p := s.parse(t, f)
		for _, l := range p.Links {
			switch {
			case l.NoFollow:
			case l.Base == "":
				enqueue(l.URL)
			case external && !scriptsSeen[l.URL]:
				scriptsSeen[l.URL] = true
				for _, sl := range w.readScript(t, s, l, maxScript) {
					enqueue(sl.URL)
				}
			}
		}
		if p.RefreshURL != "" {
			enqueue(p.RefreshURL)
		}
	}
	return w
}

// readScript reads an external script as the simulated web serves it (a
// .js file of the docroot; other names are not JavaScript there) and
// returns its links.
func (w *corpusWalk) readScript(t *testing.T, s corpusSite, l Link, maxBytes int64) []Link {
	t.Helper()
	u, err := url.Parse(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	f := s.file(u)
	if f == "" || !strings.EqualFold(filepath.Ext(f), ".js") {
		return nil
	}
	body, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	body = body[:min(int64(len(body)), maxBytes)]
	w.scripts++
	w.scriptBytes += int64(len(body))
	base, err := url.Parse(l.Base)
	if err != nil {
		t.Fatal(err)
	}
	links := ScriptLinks(body, "text/javascript", base)
	for _, sl := range links {
		su, err := url.Parse(sl.URL)
		if err != nil {
			t.Fatal(err)
		}
		if su.Host != s.host {
			w.foreign++
			continue
		}
		w.scriptURLs[sl.URL] = s.file(su) != ""
	}
	return links
}

func htmlFilesOf(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && isHTMLFile(name) {
			files = append(files, name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// scriptBases compares the two bases an external script's links could
// resolve against, the including page's base and the script's own URL, over
// every same-host script of every page (reached or not): the distinct URLs
// each names on the script's host and how many exist, and the scripts whose
// links differ from one includer to another (for which the base of the
// first includer, the crawler's choice, matters).
type scriptBases struct {
	scripts, differ                                  int
	byIncluder, existIncluder, byScript, existScript int
}

func (b *scriptBases) compare(t *testing.T, s corpusSite, includers map[string]map[string]bool) {
	t.Helper()
	named := func(links []Link, into map[string]bool) string {
		var set []string
		for _, l := range links {
			if u, err := url.Parse(l.URL); err == nil && u.Host == s.host {
				into[l.URL] = s.file(u) != ""
				set = append(set, l.URL)
			}
		}
		sort.Strings(set)
		return strings.Join(set, " ")
	}
	inc, own := map[string]bool{}, map[string]bool{}
	for src, bases := range includers {
		u, _ := url.Parse(src)
		f := s.file(u)
		if f == "" || !strings.EqualFold(filepath.Ext(f), ".js") {
			continue
		}
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		body = body[:min(int64(len(body)), DefaultFetcherConfig().MaxScriptBytes)]
		b.scripts++
		sets := map[string]bool{}
		for base := range bases {
			bu, _ := url.Parse(base)
			sets[named(ScriptLinks(body, "text/javascript", bu), inc)] = true
		}
		if len(sets) > 1 {
			b.differ++
			t.Logf("%s: %d includer bases give %d link sets", src, len(bases), len(sets))
		}
		named(ScriptLinks(body, "text/javascript", u), own)
	}
	count := func(m map[string]bool) (n int) {
		for _, ok := range m {
			if ok {
				n++
			}
		}
		return n
	}
	if len(inc)+len(own) > 0 {
		t.Logf("%-26s external scripts: by the includer's base %5d URLs, %5d exist; by the script's URL %5d URLs, %5d exist",
			s.host, len(inc), count(inc), len(own), count(own))
	}
	b.byIncluder, b.existIncluder = b.byIncluder+len(inc), b.existIncluder+count(inc)
	b.byScript, b.existScript = b.byScript+len(own), b.existScript+count(own)
}

// TestCorpusLibreOfficeScriptOnlyPages walks the LibreOffice help from its
// seeds without and with external scripts. Its pages carry no link in
// inline scripts or event handlers: the Index is built by <lang>/bookmarks.js
// (<script src>), whose url literals are relative to the document base
// (<base href> is the docroot), not to the script. The test checks that
// the external scripts reach the pages they name that no link reaches.
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
	before := walkCorpusSite(t, *lo, false)
	after := walkCorpusSite(t, *lo, true)
	files := htmlFilesOf(t, lo.root)
	var unreached, nowReached, lost int
	for _, f := range files {
		switch {
		case !before.reached[f] && after.reached[f]:
			unreached++
			nowReached++
		case !before.reached[f]:
			unreached++
		case !after.reached[f]:
			lost++
		}
	}
	exist := 0
	for _, ok := range after.scriptURLs {
		if ok {
			exist++
		}
	}
	t.Logf("%d HTML files; without external scripts %d reached, %d not; with them %d reached: %d of the %d",
		len(files), len(before.reached), unreached, len(after.reached), nowReached, unreached)
	t.Logf("%d external scripts read, %d bytes; they name %d distinct URLs of the host, %d exist, %d missing; %d links to other hosts",
		after.scripts, after.scriptBytes, len(after.scriptURLs), exist, len(after.scriptURLs)-exist, after.foreign)
	if lost > 0 {
		t.Errorf("%d pages reached without external scripts are not reached with them", lost)
	}
	if before.scripts != 0 {
		t.Errorf("the walk without external scripts read %d", before.scripts)
	}
	// 355 pages are named only by the url literals of bookmarks.js.
	if nowReached < 355 {
		t.Errorf("external scripts reach %d of the %d pages no link reaches, want at least 355", nowReached, unreached)
	}
}

// TestCorpusExternalScriptPrecision walks every site of the corpus from
// its seeds with external scripts and checks that the URLs of a site the
// scripts read name mostly exist.
func TestCorpusExternalScriptPrecision(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("walks the whole corpus, on one goroutine")
	}
	var exist, missing, foreign, scripts, pages, gained int
	var bytes, htmlBytes int64
	for _, s := range loadCorpus(t) {
		w := walkCorpusSite(t, s, true)
		gain := 0
		if len(w.scriptURLs) > 0 { // else the walk without scripts reaches the same
			before := walkCorpusSite(t, s, false)
			for f := range w.reached {
				if !before.reached[f] {
					gain++
				}
			}
		}
		var e, m int
		var missed []string
		for u, ok := range w.scriptURLs {
			if ok {
				e++
			} else {
				m++
				missed = append(missed, u)
			}
		}
		sort.Strings(missed)
		if w.scripts > 0 {
			t.Logf("%-26s %5d pages reached (+%d), %3d scripts, %7d bytes: %4d URLs named, %4d exist, %d missing %q; %d links to other hosts",
				s.host, len(w.reached), gain, w.scripts, w.scriptBytes, e+m, e, m, missed[:min(len(missed), 4)], w.foreign)
		}
		exist, missing, foreign, gained = exist+e, missing+m, foreign+w.foreign, gained+gain
		scripts, bytes, pages, htmlBytes = scripts+w.scripts, bytes+w.scriptBytes, pages+len(w.reached), htmlBytes+w.htmlBytes
	}
	t.Logf("corpus: %d pages reached (%d bytes), %d only through external scripts; %d external scripts read (%d bytes); %d distinct same-host URLs named, %d exist (%.1f%%), %d missing; %d links to other hosts",
		pages, htmlBytes, gained, scripts, bytes, exist+missing, exist, 100*float64(exist)/float64(max(exist+missing, 1)), missing, foreign)
	if exist == 0 {
		t.Fatal("no external script names a page of the corpus")
	}
	if precision := float64(exist) / float64(exist+missing); precision < 0.9 {
		t.Errorf("precision %.3f: external scripts name missing files too often", precision)
	}
}
