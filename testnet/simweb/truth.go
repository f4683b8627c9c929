package simweb

import (
	"net/url"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Truth is the ground truth of the web; see the package comment for the
// JSON shape and the meaning of each field.
type Truth struct {
	Seed          int64       `json:"seed"`
	HTTPAddr      string      `json:"http_addr"`
	HTTP6Addr     string      `json:"http6_addr,omitempty"`
	DNSAddr       string      `json:"dns_addr"`
	UserAgent     string      `json:"user_agent"`
	SessionParams []string    `json:"session_params"`
	Classes       []string    `json:"classes"`
	Seeds         []string    `json:"seeds"`
	Required      int         `json:"required"`
	Hosts         []HostTruth `json:"hosts"`
	Pages         []PageTruth `json:"pages"`
}

// HostTruth describes one virtual host.
type HostTruth struct {
	Host          string   `json:"host"`
	Mode          string   `json:"mode"` // synthetic | directory
	Role          string   `json:"role"` // portal | main | mirror
	Kind          string   `json:"kind,omitempty"`
	Classes       []string `json:"classes"`
	MirrorOf      string   `json:"mirror_of,omitempty"`
	Docroot       string   `json:"docroot,omitempty"`
	TTL           uint32   `json:"ttl"`
	Charset       string   `json:"charset,omitempty"`
	DeclaredHTTP  string   `json:"declared_http,omitempty"`
	DeclaredMeta  string   `json:"declared_meta,omitempty"`
	Lang          string   `json:"lang,omitempty"`
	RobotsStatus  int      `json:"robots_status"`
	RobotsFirst5x int      `json:"robots_first_5xx"`
	CrawlDelay    float64  `json:"crawl_delay"`
	Disallow      []string `json:"disallow"`
	Allow         []string `json:"allow"`
	Sitemaps      []string `json:"sitemaps"`
	TrapPrefixes  []string `json:"trap_prefixes"`
	LatencyMS     int      `json:"latency_ms"`
	BandwidthBps  int      `json:"bandwidth_bps"`
	PagesTotal    int      `json:"pages_total"`
	PagesRequired int      `json:"pages_required"`
}

// PageTruth is one URL a crawler following the rules meets.
type PageTruth struct {
	URL             string `json:"url"`
	Host            string `json:"host"`
	Status          int    `json:"status"`
	ContentType     string `json:"content_type,omitempty"`
	Required        bool   `json:"required"`
	Excluded        string `json:"excluded,omitempty"`
	RedirectTo      string `json:"redirect_to,omitempty"`
	TransientStatus int    `json:"transient_status,omitempty"`
	Title           string `json:"title,omitempty"`
	Charset         string `json:"charset,omitempty"`
	Noindex         bool   `json:"noindex,omitempty"`
	Nofollow        bool   `json:"nofollow,omitempty"`
	Canonical       string `json:"canonical,omitempty"`
	MirrorOf        string `json:"mirror_of,omitempty"`
	NearDuplicateOf string `json:"near_duplicate_of,omitempty"`
	InSitemap       bool   `json:"in_sitemap,omitempty"`
	Seed            bool   `json:"seed,omitempty"`
	Depth           int    `json:"depth"`
}

// Excluded reasons.
const (
	ExclRedirect     = "redirect"
	ExclRedirectLoop = "redirect_loop"
	ExclNotFound     = "not_found"
	ExclGone         = "gone"
	ExclServerError  = "server_error"
	ExclRobots       = "robots"
	ExclTrap         = "trap"
	ExclNeverAnswers = "never_answers"
	ExclDrip         = "drip"
	ExclOversize     = "oversize"
	ExclGzipBomb     = "gzip_bomb"
	ExclNotHTML      = "not_html"
	ExclNXDomain     = "nxdomain"
	ExclUnreadable   = "unreadable"
	// ExclScript: an external script, read for the links it names only.
	ExclScript = "script"
)

// Allows reports whether robots.txt lets user agent sou fetch pathQuery (the
// path and query of a URL as requested): the longest matching Allow or
// Disallow prefix wins, Allow on a tie. It does not know about the 5xx
// phase of a robots-5xx host (see RobotsFirst5x).
func (h HostTruth) Allows(pathQuery string) bool {
	return robotsFacts{disallow: h.Disallow, allow: h.Allow}.allows(pathQuery)
}

// Page returns the truth entry for a normalised URL.
func (t *Truth) Page(u string) (PageTruth, bool) {
	i := sort.Search(len(t.Pages), func(i int) bool { return t.Pages[i].URL >= u })
	if i < len(t.Pages) && t.Pages[i].URL == u {
		return t.Pages[i], true
	}
	return PageTruth{}, false
}

// Host returns the truth entry of a host name.
func (t *Truth) Host(name string) (HostTruth, bool) {
	for _, h := range t.Hosts {
		if h.Host == name {
			return h, true
		}
	}
	return HostTruth{}, false
}

// outcome is what one URL does, as the truth walk sees it.
type outcome struct {
	page    PageTruth
	links   []string    // normalised followable links
	scripts []scriptRef // external scripts to read for their links
}

// scriptRef is an external script met on a page: its normalised URL, and
// the base URL and charset of the page, which its links resolve against
// and its bytes are decoded from.
type scriptRef struct {
	url, base, charset string
}

// walk does a breadth-first walk from the seeds, asking visit about each
// normalised URL (with the script reference when it was met as an
// external script). A URL is visited once, as what it was first met as.
// Each level is visited in parallel (visit must be safe for concurrent
// use); the result does not depend on the scheduling.
func walk(seeds []string, visit func(u string, script *scriptRef) outcome, stop <-chan struct{}) []PageTruth {
	seen := map[string]bool{}
	seedSet := map[string]bool{}
	type entry struct {
		url    string
		script *scriptRef
	}
	var level []entry
	for _, s := range seeds {
		seedSet[s] = true
		if !seen[s] {
			seen[s] = true
			level = append(level, entry{url: s})
		}
	}
	workers := max(1, runtime.GOMAXPROCS(0))
	var pages []PageTruth
	for depth := 0; len(level) > 0; depth++ {
		outs := make([]outcome, len(level))
		var next atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					j := int(next.Add(1) - 1)
					if j >= len(level) {
						return
					}
					select {
					case <-stop:
						return
					default:
					}
					outs[j] = visit(level[j].url, level[j].script)
				}
			}()
		}
		wg.Wait()
		select {
		case <-stop:
			return pages
		default:
		}
		var following []entry
		for j, e := range level {
			u, o := e.url, outs[j]
			o.page.URL, o.page.Depth, o.page.Seed = u, depth, seedSet[u]
			if o.page.Host == "" {
				if pu, err := url.Parse(u); err == nil {
					o.page.Host = pu.Hostname()
				}
			}
			pages = append(pages, o.page)
			for _, l := range o.links {
				if !seen[l] {
					seen[l] = true
					following = append(following, entry{url: l})
				}
			}
			for _, sr := range o.scripts {
				if !seen[sr.url] {
					seen[sr.url] = true
					following = append(following, entry{url: sr.url, script: &sr})
				}
			}
		}
		level = following
	}
	sort.Slice(pages, func(i, j int) bool { return pages[i].URL < pages[j].URL })
	return pages
}

// hostOf returns the lowercase host (with port) of a normalised URL.
func hostOf(u string) string {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		return ""
	}
	h, _, _ := strings.Cut(rest, "/")
	return h
}

// pathQueryOf returns the path and query of a normalised URL.
func pathQueryOf(u string) (string, string) {
	rest := strings.TrimPrefix(u, "http://")
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return "/", ""
	}
	p, q, _ := strings.Cut(rest[i:], "?")
	return p, q
}
