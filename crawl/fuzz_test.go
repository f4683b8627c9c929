package crawl

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseHTML checks that no input makes the parser panic, produce invalid
// UTF-8, exceed its caps, or emit links that are not normalised absolute
// http(s) URLs.
func FuzzParseHTML(f *testing.F) {
	f.Add([]byte(`<html><head><title>t</title><base href="/b/"></head><body><a href="x">y</a></body></html>`), "text/html")
	f.Add([]byte("<meta charset=gbk><title>\xcb\xd1\xcb\xf7</title>"), "")
	f.Add([]byte("\xef\xbb\xbf<p>bom</p>"), "text/html; charset=big5")
	f.Add([]byte("\xff\xfe<\x00p\x00>\x00"), "text/html")
	f.Add([]byte(`<a href="javascript:x"><img alt="a"></a><area href=//h/p><meta http-equiv=refresh content="0;url=/r">`), "text/html; charset=shift_jis")
	f.Add([]byte("<script><!--</script><style>x</style><noscript>n</noscript><template>t"), "text/html; charset=\"utf-8\";;")
	f.Add([]byte("<script>var a = ['x.html', \"/y/\", `./z.php`], r = /'/g; location.href = '\\u002Fp.html'; // 'c.html'\n</script>"+
		"<a href=\"javascript:open('w.html')\" onclick=\"go('../v.aspx?a=1')\">j</a><script type=application/ld+json>{\"u\":\"https:\\/\\/h.test\\/\"}</script>"), "text/html")
	f.Add([]byte(`<base href="../x/"><script src="js/m.js"></script><script type=module src="//example.com/a.js"></script>`+
		`<script src="http://other.test/b.js"></script><a href="js/m.js">m</a>`), "text/html")
	base, _ := url.Parse("http://example.com/dir/page.html")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		h := http.Header{}
		h.Set("X-Robots-Tag", contentType)
		p, err := ParseHTML(body, contentType, h, base)
		if err != nil {
			t.Fatalf("ParseHTML error: %v", err)
		}
		if !utf8.ValidString(p.Text) || !utf8.ValidString(p.Title) {
			t.Fatalf("invalid UTF-8 in output")
		}
		if len(p.Text) > maxTextBytes || len(p.Title) > maxTitleBytes || len(p.Links) > MaxLinksPerPage {
			t.Fatalf("caps exceeded")
		}
		for _, l := range p.Links {
			if !strings.HasPrefix(l.URL, "http://") && !strings.HasPrefix(l.URL, "https://") {
				t.Fatalf("bad link %q", l.URL)
			}
			if len(l.Anchor) > maxAnchorBytes*2 || !utf8.ValidString(l.Anchor) {
				t.Fatalf("bad anchor %q", l.Anchor)
			}
			if l.Base != "" {
				if u, err := url.Parse(l.URL); err != nil || HostKey(u) != HostKey(base) || !validBase(l.Base) {
					t.Fatalf("external script %q (base %q) off the page's host or with a bad base", l.URL, l.Base)
				}
			}
		}
		if _, err := ParseText(body, contentType, base); err != nil {
			t.Fatalf("ParseText error: %v", err)
		}
	})
}

// FuzzNormalizeURL checks that normalisation never panics, only produces
// http(s) URLs within the length cap, and is idempotent.
func FuzzNormalizeURL(f *testing.F) {
	for _, s := range []string{
		"http://Example.COM:80/a/./b/../c?b=2&a=1#f", "../x", "//h/p", "?q", "#f", "HTTPS://[::1]:443/%7e",
		"http://xn--bcher-kva.example/", "http://Bücher.example/ä?ö=ü", "mailto:a@b", "http://a/%zz%", "\\\\h\\p",
		"http://a/;jsessionid=1?PHPSESSID=2&x", "http://a:0/", "http://a./", "http://1.2.3.4/", "http://[fe80::1%25e]/",
		"rel/page.html", "/abs/p(1)!.html?id=7", "x?a=b=c", "a/b?c", "/p?sid=1", "/a/./b", "..", "/x?q=1&r=2",
		"http:foo", "https:example.com/a", "///h/p", ":x", "http://0x7f.1/", "http://192.168.257/", "http://a.b/?b=1&a=2&",
		"http://a.b:8080/p?a=1&b=2#f", "http://foo.09../", "http://u:p@h/", "http://1.2.3.4/?q='x'", "HTTP://A.B/",
	} {
		f.Add(s)
	}
	base, _ := url.Parse("http://example.com/dir/page.html?x=1")
	resolvers := []*linkResolver{{}, newLinkResolver(base)}
	f.Fuzz(func(t *testing.T, raw string) {
		// The easy path agrees with the parser, with and without a base.
		for _, lr := range resolvers {
			easy, ok := lr.easyURL(raw)
			if !ok {
				continue
			}
			parsed, err := lr.parse(raw)
			if err != nil || parsed.String() != easy.String() {
				t.Fatalf("easy path %v != parser %v, %v (input %q, base %v)", easy, parsed, err, raw, lr.base)
			}
			if s, _ := lr.resolve(raw); s != easy.String() {
				t.Fatalf("resolve %q != %v", s, easy)
			}
		}
		for _, b := range []*url.URL{nil, base} {
			u, err := NormalizeURL(raw, b)
			if err != nil {
				continue
			}
			s := u.String()
			if u.Scheme != "http" && u.Scheme != "https" {
				t.Fatalf("scheme %q from %q", u.Scheme, raw)
			}
			if len(s) > maxNormalizedURLLength+16 {
				t.Fatalf("too long: %d", len(s))
			}
			again, err := NormalizeURL(s, nil)
			if err != nil {
				t.Fatalf("normalised %q (from %q) does not re-normalise: %v", s, raw, err)
			}
			if again.String() != s {
				t.Fatalf("not idempotent: %q -> %q -> %q", raw, s, again.String())
			}
			if HostKey(u) == "" {
				t.Fatalf("empty host key for %q", s)
			}
		}
	})
}

// FuzzScanScript checks that the script scanner never panics and emits
// only literals that pass its own candidate check.
func FuzzScanScript(f *testing.F) {
	for _, s := range []string{
		`var a = ["x.html", '/y/', ` + "`./z${q}.html`" + `]; // "c.html"`,
		`if (/["']/.test(s)) location = "a.php?x=1"; x = a / b / "c.htm";`,
		"s = '\\x2Fa\\u{2F}b.html\\\n'; t = \"unterminated\nu = 'ok.html'",
		"<!-- \"h.html\"\n--> \"i.html\"\n/* 'j.html' */ 'k.html'",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		scanScript(src, func(link string) bool {
			if _, ok := scriptURLCandidate(link); !ok || !utf8.ValidString(link) {
				t.Fatalf("emitted %q, which is no candidate", link)
			}
			return true
		})
	})
}

func FuzzParseRobots(f *testing.F) {
	for _, s := range []string{
		"User-agent: *\nDisallow: /private/\nCrawl-delay: 5\nSitemap: http://a.test/s.xml\n",
		"User-agent: sou\nAllow: /members/public/\nDisallow: /members/\n",
		"\xef\xbb\xbfUSER-AGENT: *\r\nDISALLOW: /secret/\r\n<html>junk</html>",
		"Crawl-delay: -1\nCrawl-delay: 1e309\nDisallow: *$\n",
	} {
		f.Add(200, []byte(s))
	}
	f.Add(503, []byte{})
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r, err := ParseRobots(status, body, "sou")
		if err != nil {
			return
		}
		u, _ := url.Parse("http://a.test/members/public/x?y=1")
		_ = r.Allowed(u)
		if d := r.CrawlDelay(); d < 0 {
			t.Fatalf("negative crawl delay %v", d)
		}
		_ = r.Sitemaps()
	})
}

func FuzzParseSitemap(f *testing.F) {
	f.Add([]byte(`<?xml version="1.0"?><urlset><url><loc>http://a.test/1</loc></url></urlset>`))
	f.Add([]byte(`<sitemapindex><sitemap><loc>http://a.test/s1.xml.gz</loc></sitemap></sitemapindex>`))
	f.Add([]byte("http://a.test/1\nhttp://a.test/2\n"))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	base, _ := url.Parse("http://a.test/sitemap.xml")
	f.Fuzz(func(t *testing.T, body []byte) {
		urls, subs, _ := ParseSitemap(body, base)
		for _, u := range append(urls, subs...) {
			if _, err := url.Parse(u); err != nil {
				t.Fatalf("sitemap gave an unparsable URL %q", u)
			}
		}
	})
}
