package simweb

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
)

// dirSite is one real site served from a directory (sites.tsv line).
type dirSite struct {
	name  string
	root  string
	seeds []string // paths
	role  string   // main | mirror
	ttl   uint32
	// For a mirror: the main site and the path prefix there under which
	// the same relative paths live (found by findMirrorSources).
	mirrorSrc    *dirSite
	mirrorPrefix string
}

// mirrorSample is how many pages of a mirror are matched against main sites.
const mirrorSample = 30

// findMirrorSources finds, for each mirror site, the main site and path
// prefix that hold the same relative paths (the corpus's legacy mirrors are
// re-encoded copies of a main site's directory or of one of its first-level
// subdirectories). A mirror without a prefix matching 80% of its sample
// keeps no source.
func findMirrorSources(sites []*dirSite) {
	for _, m := range sites {
		if m.role != "mirror" {
			continue
		}
		var sample []string
		_ = filepath.WalkDir(m.root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if !d.IsDir() && strings.HasSuffix(p, ".html") {
				if rel, err := filepath.Rel(m.root, p); err == nil {
					sample = append(sample, filepath.ToSlash(rel))
				}
			}
			if len(sample) >= mirrorSample {
				return fs.SkipAll
			}
			return nil
		})
		if len(sample) == 0 {
			continue
		}
		bestHits := 0
		for _, s := range sites {
			if s.role != "main" {
				continue
			}
			prefixes := []string{""}
			if entries, err := os.ReadDir(s.root); err == nil {
				for _, e := range entries {
					if e.IsDir() {
						prefixes = append(prefixes, e.Name()+"/")
					}
				}
			}
			for _, pre := range prefixes {
				hits := 0
				for _, rel := range sample {
					if _, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(pre+rel))); err == nil {
						hits++
					}
				}
				if hits > bestHits {
					bestHits, m.mirrorSrc, m.mirrorPrefix = hits, s, pre
				}
			}
		}
		if bestHits*5 < len(sample)*4 {
			m.mirrorSrc, m.mirrorPrefix = nil, ""
		}
	}
}

// maxSitesFile caps the sites.tsv read.
const maxSitesFile = 4 << 20

// loadSites reads a sites.tsv (HOST<TAB>DOCROOT<TAB>SEEDS<TAB>ROLE) and checks
// that every docroot is a readable directory.
func loadSites(file string) ([]*dirSite, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("sites file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSitesFile))
	if err != nil {
		return nil, fmt.Errorf("sites file %s: %w", file, err)
	}
	var out []*dirSite
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "\t")
		if len(fields) < 2 {
			return nil, fmt.Errorf("sites file %s line %d: want HOST<TAB>DOCROOT<TAB>SEEDS<TAB>ROLE", file, line)
		}
		host := strings.ToLower(strings.TrimSpace(fields[0]))
		if host == "" || strings.ContainsAny(host, " /:@") || !strings.Contains(host, ".") {
			return nil, fmt.Errorf("sites file %s line %d: bad host name %q", file, line, fields[0])
		}
		if seen[host] {
			return nil, fmt.Errorf("sites file %s line %d: host %s listed twice", file, line, host)
		}
		seen[host] = true
		root := strings.TrimSpace(fields[1])
		if err := checkDocroot(root); err != nil {
			return nil, fmt.Errorf("sites file %s line %d: %w", file, line, err)
		}
		d := &dirSite{name: host, root: root, role: "main", ttl: uint32(60 + hash64("ttl", host)%3540)}
		if len(fields) > 2 {
			for _, s := range strings.Split(fields[2], ",") {
				s = strings.TrimSpace(s)
				if s == "" {
					continue
				}
				if !strings.HasPrefix(s, "/") {
					s = "/" + s
				}
				d.seeds = append(d.seeds, s)
			}
		}
		if len(d.seeds) == 0 {
			d.seeds = []string{"/"}
		}
		if len(fields) > 3 && strings.TrimSpace(fields[3]) != "" {
			d.role = strings.TrimSpace(fields[3])
			if d.role != "main" && d.role != "mirror" {
				return nil, fmt.Errorf("sites file %s line %d: role %q is neither main nor mirror", file, line, d.role)
			}
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sites file %s: %w", file, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sites file %s lists no sites", file)
	}
	return out, nil
}

func checkDocroot(root string) error {
	if !filepath.IsAbs(root) {
		return fmt.Errorf("docroot %q is not an absolute path", root)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("docroot: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("docroot %s is not a directory", root)
	}
	f, err := os.Open(root)
	if err != nil {
		return fmt.Errorf("docroot: %w", err)
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil && err != io.EOF {
		return fmt.Errorf("docroot %s is not readable: %w", root, err)
	}
	return nil
}

// dirTypes overrides mime's table: its text/html carries "charset=utf-8",
// which would be a lie for the legacy-charset mirrors.
var dirTypes = map[string]string{
	".html": "text/html", ".htm": "text/html", ".txt": "text/plain", ".css": "text/css",
	".js": "text/javascript", ".xml": "text/xml", ".json": "application/json",
}

func dirContentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := dirTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// dirLookup maps a decoded URL path to a file. redirect is set when the path
// names a directory without its trailing slash.
func (d *dirSite) lookup(p string) (file string, redirect bool, err error) {
	if !strings.HasPrefix(p, "/") {
		return "", false, os.ErrNotExist
	}
	clean := path.Clean(p)
	full := filepath.Join(d.root, filepath.FromSlash(clean))
	fi, err := os.Stat(full)
	if err != nil {
		return "", false, err
	}
	if fi.IsDir() {
		if !strings.HasSuffix(p, "/") {
			return "", true, nil
		}
		full = filepath.Join(full, "index.html")
		fi, err = os.Stat(full)
		if err != nil {
			return "", false, err
		}
	}
	if !fi.Mode().IsRegular() {
		return "", false, os.ErrNotExist
	}
	return full, false, nil
}

func (w *Web) serveDir(rw http.ResponseWriter, r *http.Request, d *dirSite) {
	file, redirect, err := d.lookup(r.URL.Path)
	switch {
	case redirect:
		loc := r.URL.EscapedPath() + "/"
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		http.Redirect(rw, r, loc, http.StatusMovedPermanently)
		return
	case err != nil:
		http.Error(rw, "404 page not found", http.StatusNotFound)
		return
	}
	f, err := os.Open(file)
	if err != nil {
		http.Error(rw, "403 forbidden", http.StatusForbidden)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(rw, "500 stat failed", http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", dirContentType(file))
	http.ServeContent(rw, r, "", fi.ModTime(), f)
}

// maxDirPage caps how much of a real page the truth walk reads.
const maxDirPage = 10 << 20

// visitDir is the truth walk's view of one URL on a directory site.
func (w *Web) visitDir(d *dirSite, u string) outcome {
	pt := PageTruth{Host: d.name}
	p, _ := pathQueryOf(u)
	dp, err := url.PathUnescape(p)
	if err != nil {
		pt.Status, pt.Excluded = 404, ExclNotFound
		return outcome{page: pt}
	}
	file, redirect, err := d.lookup(dp)
	if redirect {
		q := ""
		if _, qq, ok := strings.Cut(u, "?"); ok {
			q = "?" + qq
		}
		to := strings.TrimSuffix(u, q)
		to += "/" + q
		pt.Status, pt.Excluded, pt.RedirectTo = 301, ExclRedirect, to
		return outcome{page: pt, links: []string{to}}
	}
	if err != nil {
		pt.Status, pt.Excluded = 404, ExclNotFound
		return outcome{page: pt}
	}
	ct := dirContentType(file)
	pt.ContentType = ct
	pt.Status = 200
	if ct != "text/html" && ct != "text/plain" {
		pt.Excluded = ExclNotHTML
		return outcome{page: pt}
	}
	fi, err := os.Stat(file)
	if err != nil {
		pt.Status, pt.Excluded = 404, ExclNotFound
		return outcome{page: pt}
	}
	if fi.Size() > maxDirPage {
		pt.Excluded = ExclOversize
		return outcome{page: pt}
	}
	pt.Required = true
	if d.mirrorSrc != nil {
		if _, _, err := d.mirrorSrc.lookup("/" + d.mirrorPrefix + strings.TrimPrefix(dp, "/")); err == nil {
			if m, err := Normalize("http://" + d.mirrorSrc.name + w.portSuffix + "/" + d.mirrorPrefix + strings.TrimPrefix(p, "/")); err == nil {
				pt.MirrorOf = m
			}
		}
	}
	if ct == "text/plain" {
		return outcome{page: pt}
	}
	body, err := os.ReadFile(file)
	if err != nil {
		pt.Required, pt.Status, pt.Excluded = false, 403, ExclUnreadable
		return outcome{page: pt}
	}
	info := parseHTML(body, u)
	pt.Title, pt.Charset, pt.Noindex, pt.Nofollow = info.title, info.charset, info.noindex, info.nofollow
	pt.Canonical = info.canonical
	var links []string
	var scripts []scriptRef
	if !info.nofollow {
		for _, l := range info.links {
			if w.knownHost(hostOf(l)) {
				links = append(links, l)
			}
		}
		for _, src := range info.scripts {
			if hostOf(src) == hostOf(u) {
				scripts = append(scripts, scriptRef{url: src, base: info.base, charset: info.charset})
			}
		}
	}
	return outcome{page: pt, links: links, scripts: scripts}
}

// visitScript is the truth walk's view of an external script of a
// directory site, included first by a page with base URL ref.base: served
// with a type a crawler reads, it is read for the links it names (see
// script.go), decoded as the including page is (as browsers decode a
// script without a charset of its own).
func (w *Web) visitScript(d *dirSite, u string, ref scriptRef) outcome {
	pt := PageTruth{Host: d.name}
	p, _ := pathQueryOf(u)
	dp, err := url.PathUnescape(p)
	if err != nil {
		pt.Status, pt.Excluded = 404, ExclNotFound
		return outcome{page: pt}
	}
	file, redirect, err := d.lookup(dp)
	switch {
	case redirect:
		to := u + "/"
		if q := strings.IndexByte(u, '?'); q >= 0 {
			to = u[:q] + "/" + u[q:]
		}
		pt.Status, pt.Excluded, pt.RedirectTo = 301, ExclRedirect, to
		ref.url = to
		return outcome{page: pt, scripts: []scriptRef{ref}}
	case err != nil:
		pt.Status, pt.Excluded = 404, ExclNotFound
		return outcome{page: pt}
	}
	pt.Status, pt.ContentType = 200, dirContentType(file)
	if !readsScript(pt.ContentType) {
		pt.Excluded = ExclNotHTML
		return outcome{page: pt}
	}
	pt.Excluded = ExclScript
	f, err := os.Open(file)
	if err != nil {
		pt.Status, pt.Excluded = 403, ExclUnreadable
		return outcome{page: pt}
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxScriptBytes))
	if err != nil {
		pt.Status, pt.Excluded = 403, ExclUnreadable
		return outcome{page: pt}
	}
	if enc, _ := charset.Lookup(ref.charset); enc != nil {
		if dec, err := enc.NewDecoder().Bytes(body); err == nil {
			body = dec
		}
	}
	base, err := url.Parse(ref.base)
	if err != nil {
		return outcome{page: pt}
	}
	var links []string
	for _, l := range scriptLinks(body, base) {
		if w.knownHost(hostOf(l)) {
			links = append(links, l)
		}
	}
	return outcome{page: pt, links: links}
}

// pageInfo is what a careful parser extracts from a page.
type pageInfo struct {
	title     string
	charset   string
	noindex   bool
	nofollow  bool
	canonical string
	links     []string // normalised, followable (rel=nofollow dropped)
	nofollows []string // normalised rel=nofollow links
	// scripts are the normalised <script src> URLs of scripts a browser
	// runs (at most maxScriptsPerPage), base the document's base URL.
	scripts []string
	base    string
}

// parseHTML decodes a page (HTTP header absent: BOM, meta, then sniffing)
// and extracts what the truth needs. pageURL must be absolute.
func parseHTML(body []byte, pageURL string) pageInfo {
	return parseHTMLWithType(body, pageURL, "text/html")
}

func parseHTMLWithType(body []byte, pageURL, contentType string) pageInfo {
	var info pageInfo
	enc, name, _ := charset.DetermineEncoding(body, contentType)
	info.charset = name
	if dec, err := enc.NewDecoder().Bytes(body); err == nil {
		body = dec
	}
	base, err := url.Parse(pageURL)
	if err != nil {
		return info
	}
	z := html.NewTokenizer(bytes.NewReader(body))
	inTitle, haveTitle, haveBase := false, false, false
	var title strings.Builder
	var srcs []string
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		switch tt {
		case html.TextToken:
			if inTitle {
				title.Write(z.Text())
			}
		case html.EndTagToken:
			if n, _ := z.TagName(); string(n) == "title" && inTitle {
				inTitle, haveTitle = false, true
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			n, hasAttr := z.TagName()
			attrs := map[string]string{}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if _, dup := attrs[string(k)]; !dup {
					attrs[string(k)] = string(v)
				}
			}
			switch string(n) {
			case "title":
				if !haveTitle && tt == html.StartTagToken {
					inTitle = true
				}
			case "base":
				if h, ok := attrs["href"]; ok && !haveBase {
					if b, err := base.Parse(strings.TrimSpace(h)); err == nil {
						base, haveBase = b, true
					}
				}
			case "meta":
				if strings.EqualFold(attrs["name"], "robots") {
					for _, v := range strings.Split(strings.ToLower(attrs["content"]), ",") {
						switch strings.TrimSpace(v) {
						case "noindex":
							info.noindex = true
						case "nofollow":
							info.nofollow = true
						case "none":
							info.noindex, info.nofollow = true, true
						}
					}
				}
			case "link":
				if hasToken(attrs["rel"], "canonical") {
					if u, err := resolveHref(base, attrs["href"]); err == nil {
						info.canonical = u
					}
				}
			case "script":
				if src := strings.TrimSpace(attrs["src"]); src != "" && runsScript(attrs["type"]) && len(srcs) < maxScriptsPerPage {
					srcs = append(srcs, src)
				}
			case "a", "area":
				h, ok := attrs["href"]
				if !ok {
					continue
				}
				u, err := resolveHref(base, h)
				if err != nil {
					continue
				}
				if hasToken(attrs["rel"], "nofollow") {
					info.nofollows = append(info.nofollows, u)
				} else {
					info.links = append(info.links, u)
				}
			}
		}
	}
	info.title = strings.Join(strings.Fields(html.UnescapeString(title.String())), " ")
	// A script's URL and the links it writes resolve against the
	// document's base, wherever the <base> element is.
	if b, err := normalizeURL(base); err == nil {
		info.base = b
	}
	for _, src := range srcs {
		if u, err := resolveHref(base, src); err == nil && !slices.Contains(info.scripts, u) {
			info.scripts = append(info.scripts, u)
		}
	}
	return info
}

func hasToken(list, tok string) bool {
	for _, f := range strings.Fields(strings.ToLower(list)) {
		if f == tok {
			return true
		}
	}
	return false
}

func resolveHref(base *url.URL, href string) (string, error) {
	href = strings.TrimSpace(href)
	ref, err := url.Parse(href)
	if err != nil {
		return "", err
	}
	abs := base.ResolveReference(ref)
	return normalizeURL(abs)
}
