package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"sou/crawl"
	"sou/testnet/simweb"
)

// Doc is one parsed document, the unit both engines index.
type Doc struct {
	URL      string // absolute, normalised (simweb.Normalize form)
	Host     string // crawl.HostKey form
	Title    string
	Headings []string
	Body     string
	Lang     string
}

// maxPageBytes caps one page read from the simulated web or the corpus.
const maxPageBytes = 8 << 20

// SimClient returns an HTTP client that sends every request, whatever its
// host, to the simulated web's HTTP listener (the Host header still selects
// the virtual host).
func SimClient(web *simweb.Web, conns int) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	addr := web.HTTPAddr()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// RequiredPages returns the URLs the simulated web's truth marks required
// (status 200 HTML or text pages a correct crawler must fetch).
func RequiredPages(web *simweb.Web) ([]simweb.PageTruth, error) {
	t := web.Truth()
	if t == nil {
		return nil, errors.New("simulated web closed before its truth was ready")
	}
	var out []simweb.PageTruth
	for _, p := range t.Pages {
		if p.Required {
			out = append(out, p)
		}
	}
	return out, nil
}

// SyntheticDocs fetches every required page of the simulated web with a
// plain HTTP client and parses it with crawl's parser. Fetching runs on a
// few goroutines; the order of the result is the truth's (sorted by URL).
func SyntheticDocs(ctx context.Context, web *simweb.Web) ([]Doc, error) {
	pages, err := RequiredPages(web)
	if err != nil {
		return nil, err
	}
	client := SimClient(web, 16)
	defer client.CloseIdleConnections()
	docs := make([]Doc, len(pages))
	ok := make([]bool, len(pages))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan int)
	workers := max(4, 2*runtime.GOMAXPROCS(0))
	for range workers {
		wg.Go(func() {
			for i := range next {
				d, err := fetchDoc(ctx, client, pages[i].URL)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				if d != nil {
					docs[i], ok[i] = *d, true
				}
			}
		})
	}
	for i := range pages {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if firstErr != nil {
		return nil, firstErr
	}
	out := docs[:0]
	for i := range docs {
		if ok[i] {
			out = append(out, docs[i])
		}
	}
	return out, nil
}

// fetchDoc GETs one page and parses it; nil, nil for a page with nothing
// to index (noindex, not HTML or text).
func fetchDoc(ctx context.Context, client *http.Client, raw string) (*Doc, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", raw, err)
	}
	req.Header.Set("User-Agent", "sou-bench")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", raw, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", raw, err)
	}
	if resp.StatusCode != http.StatusOK {
		// Transient 429/503 answers are part of some misbehaviour classes;
		// one retry after the advertised pause is enough for them.
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			select {
			case <-time.After(1100 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return fetchDoc(ctx, client, raw)
		}
		return nil, fmt.Errorf("fetch %s: status %d", raw, resp.StatusCode)
	}
	return ParseDoc(raw, body, resp.Header.Get("Content-Type"), resp.Header)
}

// ParseDoc parses one page with sou's parser; nil, nil when the page asks
// not to be indexed or is neither HTML nor text.
func ParseDoc(raw string, body []byte, contentType string, header http.Header) (*Doc, error) {
	u, err := crawl.NormalizeURL(raw, nil)
	if err != nil {
		return nil, fmt.Errorf("url %s: %w", raw, err)
	}
	var p *crawl.Parsed
	switch {
	case strings.HasPrefix(contentType, "text/plain"):
		p, err = crawl.ParseText(body, contentType, u)
	case contentType == "" || strings.Contains(contentType, "html"):
		p, err = crawl.ParseHTML(body, contentType, header, u)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", raw, err)
	}
	if p.NoIndex {
		return nil, nil
	}
	return &Doc{URL: u.String(), Host: crawl.HostKey(u), Title: p.Title, Headings: p.Headings, Body: p.Text, Lang: p.Lang}, nil
}

// DefaultSitesTSV is where ../shared/corpus/install.sh writes the corpus.
const DefaultSitesTSV = "/var/lib/sou-corpus/sites.tsv"

// Site is one line of sites.tsv.
type Site struct {
	Host, Docroot string
	Seeds         []string
	Role          string // main | mirror
}

// ReadSites parses a sites.tsv (HOST<TAB>DOCROOT<TAB>SEEDS<TAB>ROLE).
func ReadSites(path string) ([]Site, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open sites list: %w", err)
	}
	defer f.Close()
	var sites []Site
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) < 4 {
			return nil, fmt.Errorf("%s:%d: want 4 tab-separated columns, got %d", path, n, len(cols))
		}
		sites = append(sites, Site{Host: cols[0], Docroot: cols[1], Seeds: strings.Split(cols[2], ","), Role: cols[3]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return sites, nil
}

// CorpusDocs walks the docroot of every main site (mirrors are re-encoded
// copies and would only duplicate documents) and parses each *.html file
// as the page http://HOST/relative/path. Symlinked duplicates are read
// once per path, as a web server would serve them.
func CorpusDocs(ctx context.Context, sitesTSV string) ([]Doc, error) {
	sites, err := ReadSites(sitesTSV)
	if err != nil {
		return nil, err
	}
	type job struct{ host, root, path string }
	var jobs []job
	for _, s := range sites {
		if s.Role != "main" {
			continue
		}
		err := filepath.WalkDir(s.Docroot, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable entries are skipped, as a server would 404 them
			}
			if !d.IsDir() && strings.HasSuffix(strings.ToLower(d.Name()), ".html") {
				jobs = append(jobs, job{s.Host, s.Docroot, p})
			}
			return ctx.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", s.Docroot, err)
		}
	}
	docs := make([]*Doc, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				rel, err := filepath.Rel(j.root, j.path)
				if err != nil {
					continue
				}
				body, err := os.ReadFile(j.path)
				if err != nil || len(body) > maxPageBytes {
					continue
				}
				u := (&url.URL{Scheme: "http", Host: j.host, Path: "/" + filepath.ToSlash(rel)}).String()
				d, err := ParseDoc(u, body, "text/html", nil)
				if err == nil && d != nil {
					docs[i] = d
				}
			}
		})
	}
	for i := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]Doc, 0, len(docs))
	seen := map[string]bool{}
	for _, d := range docs {
		if d != nil && !seen[d.URL] {
			seen[d.URL] = true
			out = append(out, *d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, nil
}
