package simweb

import (
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"io"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temoto/robotstxt"
)

// observation is what a careful crawler sees at one URL.
type observation struct {
	status     int
	excluded   string
	redirectTo string
	title      string
	required   bool
	links      []string
}

// TestTruthMatchesCrawl crawls the web over real DNS and HTTP, obeying
// robots.txt (parsed by temoto/robotstxt, not by this package), and checks
// that what it meets is exactly the truth listing: the same URLs, each with
// the same status, reason, redirect target and title, every followable link
// of a truth page in the truth and every truth page reached.
func TestTruthMatchesCrawl(t *testing.T) {
	w := startWeb(t, Config{Seed: 7, Hosts: 30, Pages: 900})
	tr := w.Truth()
	c := dnsClient(w, 30*time.Second)

	var robotsMu sync.Mutex
	robots := map[string]*robotstxt.RobotsData{}
	robotsFor := func(host string) *robotstxt.RobotsData {
		robotsMu.Lock()
		defer robotsMu.Unlock()
		if r, ok := robots[host]; ok {
			return r
		}
		f, err := getRetry(c, "http://"+host+w.portSuffix+"/robots.txt")
		var r *robotstxt.RobotsData
		if err == nil {
			r, err = robotstxt.FromStatusAndBytes(f.status, f.body)
		}
		if err != nil {
			t.Errorf("robots.txt of %s: %v", host, err)
			r, _ = robotstxt.FromStatusAndBytes(404, nil)
		}
		robots[host] = r
		return r
	}

	observe := func(u string) observation {
		pu, _ := url.Parse(u)
		host := pu.Hostname()
		if !w.knownHost(pu.Host) {
			return observation{excluded: ExclNXDomain}
		}
		cls := hostClasses(tr, host)
		switch {
		case cls[ClassBlackhole]:
			return observation{excluded: ExclNeverAnswers}
		case cls[ClassDrip]:
			return observation{excluded: ExclDrip, status: 200}
		}
		if !robotsFor(host).TestAgent(pu.RequestURI(), "sou") {
			return observation{excluded: ExclRobots}
		}
		if h, _ := tr.Host(host); len(h.TrapPrefixes) > 0 && strings.HasPrefix(pu.Path, h.TrapPrefixes[0]) {
			return observation{excluded: ExclTrap, status: 200}
		}
		f, err := getRetry(c, u)
		if err != nil {
			t.Errorf("fetch %s: %v", u, err)
			return observation{}
		}
		o := observation{status: f.status}
		ct := f.header.Get("Content-Type")
		switch {
		case f.status >= 300 && f.status < 400:
			o.excluded = ExclRedirect
			loc, err := pu.Parse(f.header.Get("Location"))
			if err == nil {
				o.redirectTo, _ = normalizeURL(loc)
				o.links = []string{o.redirectTo}
			}
		case f.status == 404:
			o.excluded = ExclNotFound
		case f.status == 410:
			o.excluded = ExclGone
		case f.status == 500:
			o.excluded = ExclServerError
		case f.status != 200:
			t.Errorf("%s: unexpected status %d", u, f.status)
		case f.header.Get("Content-Encoding") == "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(f.body))
			if err != nil {
				t.Errorf("%s: bad gzip: %v", u, err)
				break
			}
			n, _ := io.Copy(io.Discard, io.LimitReader(zr, 101<<20))
			if n > 100<<20 {
				o.excluded = ExclGzipBomb
			}
		case len(f.body) > 10<<20:
			o.excluded = ExclOversize
		case !strings.HasPrefix(ct, "text/html") && !strings.HasPrefix(ct, "text/plain"):
			o.excluded = ExclNotHTML
		default:
			o.required = true
			pt, ok := tr.Page(u)
			if !ok || !strings.HasPrefix(ct, "text/html") {
				break
			}
			// Decode with the charset the truth claims the bytes are in.
			body := f.body
			if enc, ok := charsets[pt.Charset]; ok {
				if d, err := enc.NewDecoder().Bytes(body); err == nil {
					body = d
				}
			}
			info := parseHTMLWithType(body, u, "text/html; charset=utf-8")
			o.title = info.title
			if !info.nofollow {
				o.links = info.links
			}
		}
		return o
	}

	seen := map[string]observation{}
	level := append([]string(nil), w.Seeds()...)
	for _, s := range level {
		seen[s] = observation{}
	}
	for depth := 0; len(level) > 0; depth++ {
		if depth > 60 {
			t.Fatal("crawl does not end")
		}
		obs := make([]observation, len(level))
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i, u := range level {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				obs[i] = observe(u)
			}()
		}
		wg.Wait()
		var next []string
		for i, u := range level {
			seen[u] = obs[i]
			for _, l := range obs[i].links {
				if _, ok := seen[l]; !ok {
					seen[l] = observation{}
					next = append(next, l)
				}
			}
		}
		level = next
	}

	if len(seen) != len(tr.Pages) {
		t.Errorf("crawl met %d URLs, truth lists %d", len(seen), len(tr.Pages))
	}
	for u := range seen {
		if _, ok := tr.Page(u); !ok {
			t.Errorf("crawl met %s, truth does not list it", u)
		}
	}
	required := 0
	for _, p := range tr.Pages {
		o, ok := seen[p.URL]
		if !ok {
			t.Errorf("truth lists %s (%s), crawl never met it", p.URL, p.Excluded)
			continue
		}
		if p.Required {
			required++
			if p.Excluded != "" {
				t.Errorf("%s: required and excluded %q", p.URL, p.Excluded)
			}
		} else if p.Excluded == "" {
			t.Errorf("%s: neither required nor excluded", p.URL)
		}
		want := p.Excluded
		if want == ExclRedirectLoop {
			want = ExclRedirect
		}
		if o.excluded != want || o.required != p.Required {
			t.Errorf("%s: crawl saw excluded=%q required=%v, truth says %q %v", p.URL, o.excluded, o.required, p.Excluded, p.Required)
		}
		if p.Status != 0 && o.status != 0 && o.status != p.Status {
			t.Errorf("%s: status %d, truth %d", p.URL, o.status, p.Status)
		}
		if o.redirectTo != p.RedirectTo {
			t.Errorf("%s: redirect to %q, truth %q", p.URL, o.redirectTo, p.RedirectTo)
		}
		if p.Required && p.ContentType == "text/html" && o.title != p.Title {
			t.Errorf("%s: title %q, truth %q", p.URL, o.title, p.Title)
		}
		if p.MirrorOf != "" {
			if src, ok := tr.Page(p.MirrorOf); !ok || src.Title != p.Title {
				t.Errorf("%s: mirror of %s, which is missing or titled differently", p.URL, p.MirrorOf)
			}
		}
	}
	if required != tr.Required || required < 500 {
		t.Errorf("required pages: counted %d, truth says %d (want >= 500)", required, tr.Required)
	}
	// Every class must have left a mark on the truth.
	reasons := map[string]int{}
	for _, p := range tr.Pages {
		reasons[p.Excluded]++
	}
	for _, r := range []string{ExclRedirect, ExclRedirectLoop, ExclNotFound, ExclGone, ExclServerError, ExclRobots,
		ExclTrap, ExclNeverAnswers, ExclDrip, ExclOversize, ExclGzipBomb, ExclNotHTML, ExclNXDomain} {
		if reasons[r] == 0 {
			t.Errorf("no truth entry excluded as %s", r)
		}
	}
}

func TestRobotsAndSitemaps(t *testing.T) {
	w := startWeb(t, Config{Seed: 3, Hosts: 60, Pages: 1500})
	tr := w.Truth()
	c := dnsClient(w, 30*time.Second)
	checked := map[string]int{}
	for _, h := range tr.Hosts {
		cls := map[string]bool{}
		for _, x := range h.Classes {
			cls[x] = true
		}
		if cls[ClassBlackhole] || cls[ClassDrip] {
			continue
		}
		base := "http://" + h.Host + w.portSuffix
		// The first answers of a robots-5xx host are 503s.
		var f fetched
		var err error
		statuses := []int{}
		for i := 0; i < 4; i++ {
			f, err = get(c, base+"/robots.txt")
			if err != nil {
				t.Fatalf("robots.txt of %s: %v", h.Host, err)
			}
			statuses = append(statuses, f.status)
			if f.status != 503 {
				break
			}
			if f.header.Get("Retry-After") != "1" {
				t.Errorf("%s: 503 robots.txt without Retry-After: 1", h.Host)
			}
		}
		if len(statuses)-1 != h.RobotsFirst5x || f.status != h.RobotsStatus {
			t.Errorf("%s: robots.txt statuses %v, truth says %d x 503 then %d", h.Host, statuses, h.RobotsFirst5x, h.RobotsStatus)
		}
		rd, err := robotstxt.FromStatusAndBytes(f.status, f.body)
		if err != nil {
			t.Fatalf("%s: parse robots.txt: %v", h.Host, err)
		}
		grp := rd.FindGroup("sou")
		if d := grp.CrawlDelay.Seconds(); d != h.CrawlDelay {
			t.Errorf("%s: crawl delay %v, truth %v", h.Host, d, h.CrawlDelay)
		}
		for _, p := range []string{"/members/x.html", "/members/public/x.html", "/private/x.html", "/secret/x.html", "/Secret/x.html", "/secretive/x.html", "/"} {
			if got, want := grp.Test(p), h.Allows(p); got != want {
				t.Errorf("%s: robotstxt says %s allowed=%v, truth rules say %v", h.Host, p, got, want)
			}
		}
		if !equalStrings(rd.Sitemaps, h.Sitemaps) {
			t.Errorf("%s: robots.txt sitemaps %v, truth %v", h.Host, rd.Sitemaps, h.Sitemaps)
		}
		var want []string
		for _, p := range tr.Pages {
			if p.Host == h.Host && p.InSitemap {
				want = append(want, p.URL)
			}
		}
		for _, sm := range h.Sitemaps {
			var got []string
			switch {
			case strings.HasSuffix(sm, ".xml.gz"):
				checked["index"]++
				f, err := get(c, sm)
				if err != nil || f.status != 200 {
					t.Fatalf("%s: %v %d", sm, err, f.status)
				}
				var idx struct {
					Sitemaps []struct {
						Loc string `xml:"loc"`
					} `xml:"sitemap"`
				}
				if err := xml.Unmarshal(gunzip(t, f.body), &idx); err != nil {
					t.Fatalf("%s: %v", sm, err)
				}
				for _, part := range idx.Sitemaps {
					pf, err := get(c, part.Loc)
					if err != nil || pf.status != 200 {
						t.Fatalf("%s: %v %d", part.Loc, err, pf.status)
					}
					got = append(got, sitemapLocs(t, gunzip(t, pf.body))...)
				}
			default:
				checked["plain"]++
				f, err := get(c, sm)
				if err != nil || f.status != 200 {
					t.Fatalf("%s: %v %d", sm, err, f.status)
				}
				got = sitemapLocs(t, f.body)
			}
			sort.Strings(got)
			if !equalStrings(got, want) || len(got) == 0 {
				t.Errorf("%s lists %d URLs, truth has %d in_sitemap", sm, len(got), len(want))
			}
		}
		checked["hosts"]++
	}
	if checked["index"] == 0 || checked["plain"] == 0 {
		t.Errorf("sitemaps checked: %v; want both kinds", checked)
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return out
}

func sitemapLocs(t *testing.T, b []byte) []string {
	t.Helper()
	var set struct {
		URLs []struct {
			Loc string `xml:"loc"`
		} `xml:"url"`
	}
	if err := xml.Unmarshal(b, &set); err != nil {
		t.Fatalf("sitemap: %v", err)
	}
	var out []string
	for _, u := range set.URLs {
		out = append(out, u.Loc)
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
