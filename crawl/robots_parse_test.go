package crawl

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseRobots(t *testing.T) {
	const file = `# comment
User-agent: *
Disallow: /private/
Allow: /private/public.html
Crawl-delay: 2

User-agent: sou
Disallow: /nosou/
Disallow: /*.php$
Allow: /nosou/ok
Crawl-delay: 1.5

User-agent: otherbot
Disallow: /

Sitemap: http://Example.com/sitemap.xml
Sitemap: not a url
`
	tests := []struct {
		name    string
		status  int
		body    string
		agent   string
		allowed map[string]bool
		delay   time.Duration
		errIs   error
	}{
		{"our group wins", 200, file, "sou", map[string]bool{
			"/":              true,
			"/private/x":     true, // the "*" group does not apply to us
			"/nosou/x":       false,
			"/nosou/ok":      true,
			"/a.php":         false,
			"/a.php?x=1":     true, // $ anchors the end
			"/robots.txt":    true,
			"/nosou/x?y=1#f": false,
		}, 1500 * time.Millisecond, nil},
		{"full user agent string", 200, file, DefaultUserAgent, map[string]bool{"/nosou/x": false, "/private/x": true}, 1500 * time.Millisecond, nil},
		{"star group", 200, file, "someoneelse", map[string]bool{"/private/x": false, "/private/public.html": true, "/nosou/x": true}, 2 * time.Second, nil},
		{"empty file", 200, "", "sou", map[string]bool{"/": true, "/x": true}, 0, nil},
		{"4xx allows all", 404, "User-agent: *\nDisallow: /", "sou", map[string]bool{"/": true, "/x": true}, 0, nil},
		{"403 allows all", 403, "", "sou", map[string]bool{"/x": true}, 0, nil},
		{"5xx unavailable", 503, "", "sou", nil, 0, ErrRobotsUnavailable},
		{"500 unavailable", 500, "", "sou", nil, 0, ErrRobotsUnavailable},
		{"no status", 0, "", "sou", nil, 0, ErrRobotsUnavailable},
		{"malformed lenient", 200, "Disallow: /before-agent\nUser-agent: *\nCrawl-delay: soon\nDisallow: /secret\nthis line is garbage\n", "sou",
			map[string]bool{"/secret/x": false, "/before-agent": true, "/": true}, 0, nil},
		{"disallow all for us", 200, "User-agent: sou\nDisallow: /\n", "sou", map[string]bool{"/": false, "/a": false, "/robots.txt": true}, 0, nil},
		{"html instead of robots", 200, "<html><body>Not found</body></html>", "sou", map[string]bool{"/": true}, 0, nil},
		{"binary garbage", 200, "\x00\xff\xfe\x01User-agent\x00: *", "sou", map[string]bool{"/": true}, 0, nil},
		{"BOM and CRLF", 200, "\xef\xbb\xbfUser-agent: *\r\nDisallow: /x\r\n", "sou", map[string]bool{"/x": false, "/y": true}, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRobots(tc.status, []byte(tc.body), tc.agent)
			if tc.errIs != nil {
				if !errors.Is(err, tc.errIs) || ErrorClass(err) != "robots_5xx" {
					t.Fatalf("err %v, want %v", err, tc.errIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range tc.allowed {
				if got := r.Allowed(mustURL(t, "http://example.com"+path)); got != want {
					t.Errorf("Allowed(%s) = %v, want %v", path, got, want)
				}
			}
			if got := r.CrawlDelay(); got != tc.delay {
				t.Errorf("CrawlDelay %v, want %v", got, tc.delay)
			}
		})
	}
	r, _ := ParseRobots(200, []byte(file), "sou")
	if got := r.Sitemaps(); len(got) != 1 || got[0] != "http://example.com/sitemap.xml" {
		t.Errorf("sitemaps %q", got)
	}
	var nilRobots *Robots
	if !nilRobots.Allowed(mustURL(t, "http://a/")) || nilRobots.CrawlDelay() != 0 || nilRobots.Sitemaps() != nil {
		t.Error("nil Robots must allow everything")
	}
}

func TestParseRobotsHugeFile(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\nDisallow: /early\n")
	for b.Len() < 600<<10 {
		b.WriteString("Disallow: /filler/path/that/goes/on\n")
	}
	b.WriteString("Disallow: /late\n")
	r, err := ParseRobots(200, []byte(b.String()), "sou")
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed(mustURL(t, "http://e.com/early")) || !r.Allowed(mustURL(t, "http://e.com/late")) {
		t.Error("robots beyond 500 KiB must be ignored, before kept")
	}
}

func TestParseSitemap(t *testing.T) {
	base := mustURL(t, "http://example.com/sitemap.xml")
	urlset := `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>http://Example.com/a?b=2&amp;a=1</loc><lastmod>2024-01-01</lastmod></url>
  <url><loc>
     http://example.com/b
  </loc></url>
  <url><loc>/relative</loc></url>
  <url><loc>javascript:alert(1)</loc></url>
  <url><loc>http://example.com/b</loc></url>
</urlset>`
	index := `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>http://example.com/s1.xml.gz</loc></sitemap>
<sitemap><loc>http://example.com/s2.xml</loc></sitemap>
</sitemapindex>`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(urlset))
	_ = zw.Close()
	var many strings.Builder
	many.WriteString("<urlset>")
	for i := 0; i < maxSitemapEntries+100; i++ {
		many.WriteString("<url><loc>http://example.com/p" + itoa(i) + "</loc></url>")
	}
	many.WriteString("</urlset>")

	wantURLs := []string{"http://example.com/a?a=1&b=2", "http://example.com/b", "http://example.com/relative"}
	tests := []struct {
		name      string
		body      []byte
		urls      []string
		sitemaps  []string
		wantCount int
		wantErr   bool
	}{
		{"urlset", []byte(urlset), wantURLs, nil, 0, false},
		{"gzip urlset", gz.Bytes(), wantURLs, nil, 0, false},
		{"index", []byte(index), nil, []string{"http://example.com/s1.xml.gz", "http://example.com/s2.xml"}, 0, false},
		{"plain text", []byte("http://example.com/t1\n\n# comment\nnot a url\r\nhttps://example.com/t2\r\n"), []string{"http://example.com/t1", "https://example.com/t2"}, nil, 0, false},
		{"rss", []byte(`<rss><channel><link>http://example.com/</link><item><link>http://example.com/post</link></item></channel></rss>`), []string{"http://example.com/post"}, nil, 0, false},
		{"atom", []byte(`<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="/entry1"/></entry></feed>`), []string{"http://example.com/entry1"}, nil, 0, false},
		{"truncated xml keeps what was read", []byte(urlset[:strings.Index(urlset, "<url><loc>/relative")]), []string{"http://example.com/a?a=1&b=2", "http://example.com/b"}, nil, 0, false},
		{"broken xml", []byte("<urlset><url><loc>&#xZZ;"), nil, nil, 0, true},
		{"bad gzip", []byte{0x1f, 0x8b, 0, 0}, nil, nil, 0, true},
		{"empty", nil, nil, nil, 0, false},
		{"count cap", []byte(many.String()), nil, nil, maxSitemapEntries, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			urls, sitemaps, err := ParseSitemap(tc.body, base)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want error, got %v %v", urls, sitemaps)
				}
				if c := ErrorClass(err); c != "parse" && c != "bad_encoding" {
					t.Fatalf("class %q", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCount > 0 {
				if len(urls) != tc.wantCount {
					t.Fatalf("%d urls", len(urls))
				}
				return
			}
			if strings.Join(urls, " ") != strings.Join(tc.urls, " ") || strings.Join(sitemaps, " ") != strings.Join(tc.sitemaps, " ") {
				t.Fatalf("urls %q sitemaps %q", urls, sitemaps)
			}
		})
	}
}
