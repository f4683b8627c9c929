package testnet

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"sou/testnet/simweb"
)

// CorpusHTML is the crawl section's coverage of the HTML files of the
// directory sites (a sites.tsv): of every .html and .htm file under the
// docroots the web serves, how many were fetched. Unlike coverage, whose
// denominator is what a crawler following links reaches, it also counts
// the pages no link leads to, such as those only scripts name. The keys
// appear only when the web served directory sites.
type CorpusHTML struct {
	Files    int     `json:"corpus_html_files"`
	Fetched  int     `json:"corpus_html_fetched"`
	Coverage float64 `json:"corpus_html_coverage"`
	// BySite has one entry per directory site, by host name.
	BySite map[string]SiteHTML `json:"corpus_html_by_site"`
}

// SiteHTML is one directory site's share of CorpusHTML.
type SiteHTML struct {
	Files    int     `json:"files"`
	Fetched  int     `json:"fetched"`
	Coverage float64 `json:"coverage"`
	// Unfetched are up to five files nobody fetched, as URL paths.
	Unfetched []string `json:"unfetched,omitempty"`
}

// unfetchedKept is how many unfetched files a site lists.
const unfetchedKept = 5

// corpusHTML counts the HTML files of every directory host and the ones
// fetched. A file is a path under the docroot whose name ends in .html or
// .htm (any case); a symlink is its own path, as the web serves it under
// its own URL, and directories reached through a symlink are not walked.
// It is fetched when a 200 answer delivered it (fetch.delivered: whole,
// or up to the crawler's body cap maxBody) for its URL, or for its
// directory's URL when it is that directory's index.html. nil when there
// is no directory host.
func corpusHTML(hosts []simweb.HostTruth, fetches []fetch, maxBody int64) (*CorpusHTML, error) {
	files := map[string]map[string]bool{} // host -> URL path -> fetched
	for _, h := range hosts {
		if h.Mode != "directory" {
			continue
		}
		paths, err := htmlFiles(h.Docroot)
		if err != nil {
			return nil, fmt.Errorf("corpus HTML of %s: %w", h.Host, err)
		}
		files[h.Host] = paths
	}
	if len(files) == 0 {
		return nil, nil
	}
	for _, f := range fetches {
		site, ok := files[f.Host]
		if !ok || !f.delivered(maxBody) || f.Status != 200 {
			continue
		}
		u, err := url.Parse(f.URL)
		if err != nil {
			continue
		}
		p := u.Path
		if strings.HasSuffix(p, "/") {
			p += "index.html"
		}
		if _, known := site[p]; known {
			site[p] = true
		}
	}
	c := &CorpusHTML{BySite: map[string]SiteHTML{}}
	for host, site := range files {
		s := SiteHTML{Files: len(site)}
		var unfetched []string
		for p, got := range site {
			if got {
				s.Fetched++
			} else {
				unfetched = append(unfetched, p)
			}
		}
		s.Unfetched = firstSorted(unfetched, unfetchedKept)
		if s.Files > 0 {
			s.Coverage = round6(float64(s.Fetched) / float64(s.Files))
		}
		c.Files += s.Files
		c.Fetched += s.Fetched
		c.BySite[host] = s
	}
	if c.Files > 0 {
		c.Coverage = round6(float64(c.Fetched) / float64(c.Files))
	}
	return c, nil
}

// htmlFiles lists the URL paths ("/a/b.html") of the HTML files under root,
// each marked not fetched. Entries the walk cannot read are skipped: the
// web cannot serve them either.
func htmlFiles(root string) (map[string]bool, error) {
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("docroot: %w", err)
	}
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		ext := strings.ToLower(filepath.Ext(d.Name()))
		if ext != ".html" && ext != ".htm" {
			return nil
		}
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return nil // a dangling symlink, or one to something else
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		out[path.Clean("/"+filepath.ToSlash(rel))] = false
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	return out, nil
}

// sortedHosts returns the keys of m in order.
func sortedHosts(m map[string]SiteHTML) []string {
	hosts := make([]string, 0, len(m))
	for h := range m {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}
