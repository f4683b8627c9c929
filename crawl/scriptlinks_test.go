package crawl

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

// scriptLinksOf parses doc as a page of http://example.com/dir/page.html
// and returns the URLs of its script links, sorted, and its HTML links.
func scriptLinksOf(t *testing.T, doc string) (script []string, html []Link) {
	t.Helper()
	p, err := ParseHTML([]byte(doc), "text/html; charset=utf-8", nil, mustURL(t, "http://example.com/dir/page.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range p.Links {
		if l.Script {
			if l.Anchor != "" {
				t.Errorf("script link %s has anchor text %q", l.URL, l.Anchor)
			}
			script = append(script, l.URL)
		} else {
			html = append(html, l)
		}
	}
	sort.Strings(script)
	return script, html
}

func TestScriptLinks(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // script links, sorted
	}{
		{"string array", `<script>var pages = ["intro.html", "guide/setup.htm", '/about/', "https://other.org/news.php?id=3", "Intro", "Setup"];</script>`,
			[]string{"http://example.com/about/", "http://example.com/dir/guide/setup.htm", "http://example.com/dir/intro.html", "https://other.org/news.php?id=3"}},
		{"location.href", `<script>function next() { location.href = "../chapter2.html#top"; }</script>`,
			[]string{"http://example.com/chapter2.html"}},
		{"window.open in onclick", `<a href="#" onclick="window.open('popup.html', 'help', 'width=300,height=200'); return false">Help</a>`,
			[]string{"http://example.com/dir/popup.html"}},
		{"onclick on a button, upper case", `<button ONCLICK="document.location='/search/advanced.aspx?lang=zh'">Search</button>`,
			[]string{"http://example.com/search/advanced.aspx?lang=zh"}},
		{"body onload", `<body onload="if (top == self) location.replace('./frames.html')"><p>x</p></body>`,
			[]string{"http://example.com/dir/frames.html"}},
		{"javascript: href", `<a href="javascript:openPage('detail.jsp?id=42')">Detail</a><a href="JavaScript:go(%22more.php%22)">More</a>`,
			[]string{"http://example.com/dir/detail.jsp?id=42", "http://example.com/dir/more.php"}},
		{"JSON-LD with escaped slashes", `<script type="application/ld+json">{"@context": "https://schema.org", "url": "https:\/\/example.com\/dir\/page.html", "author": {"url": "/people/ann"}, "name": "Ann"}</script>`,
			[]string{"http://example.com/people/ann", "https://example.com/dir/page.html", "https://schema.org/"}},
		{"escapes and template literals", "<script>a = \"\\x2Fdocs\\u002Findex.html\"; b = `./list.html`; c = `/u/${id}.html`; d = '\\u{2F}faq/';</script>",
			[]string{"http://example.com/dir/list.html", "http://example.com/docs/index.html", "http://example.com/faq/"}},
		{"protocol relative", `<script>var mirror = "//mirror.example.org/pub/"; var ga = "//www.google-analytics.com/analytics.js";</script>`,
			[]string{"http://mirror.example.org/pub/"}},
		{"comments are not strings", `<script>// see "old.html" for the story
/* 'gone.html' was removed */ var kept = "kept.html"; <!-- "legacy.html"
  --> "old-too.html"
</script>`,
			[]string{"http://example.com/dir/kept.html"}},
		{"regular expressions are not strings", `<script>var re = /["'](x)\.html/g, n = a / b / c; var ok = "real.html"; if (/'/.test(s)) t = 'also.html';</script>`,
			[]string{"http://example.com/dir/also.html", "http://example.com/dir/real.html"}},
		{"words and values that are not links", `<script>
var t = "text/javascript", m = 'application/json', c = "#fff", r = "rgba(0,0,0,.5)", w = "hello", x = "Microsoft.XMLHTTP";
var cfg = ["user.options", "c/language/type", ".nav a", "section.c-content", "1.5", "2024/01/02", "en-US"];
var s = "/", d = "./", u = "../", p = "/p?id=", q = "index.html?", h = "http://", sl = "//", cm = "// comment";
var ml = "mailto:a@b.html", dt = "data:text/html,x.html", sp = "a b.html", pct = "%s.html", gl = "/path/*.html";
var tpl = "{{url}}.html", rx = "$1.html", html = '<a href="/x.html">x</a>', css = "style.css", js = "/app.js", img = "logo.png";
var feed = "tweets.xml", json = "_static/glossary.json", ns = "urn:x.html", ver = "jquery-3.5.1", host = "http://intranet/";
</script>`,
			nil},
		{"script with src is not scanned", `<script src="app.js">var x = "nope.html";</script><script>var y = "yes.html";</script>`,
			[]string{"http://example.com/dir/yes.html"}},
		{"templates are not scanned", `<script type="text/template"><a href="tpl.html">x</a></script><script type="module">import("./mod.html")</script>`,
			[]string{"http://example.com/dir/mod.html"}},
		{"unterminated string ends at the line", "<script>var a = \"oops;\nvar b = 'fine.html';</script>",
			[]string{"http://example.com/dir/fine.html"}},
		{"script in head", `<html><head><script>var home = "/index.html";</script></head><body></body></html>`,
			[]string{"http://example.com/index.html"}},
		{"no event handler, no scan", `<p title="click on 'x.html'" data-url="y.html">z</p>`,
			nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := scriptLinksOf(t, tc.doc)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("script links\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestScriptLinksBehindHTMLLinks: an HTML link to the same URL wins (not
// Script, keeps its anchor); script links never crowd HTML links out of the
// cap; a nofollow page marks them NoFollow; the scan stops after
// maxScriptScanBytes.
func TestScriptLinksBehindHTMLLinks(t *testing.T) {
	t.Run("HTML link wins", func(t *testing.T) {
		script, html := scriptLinksOf(t, `<script>var a = "same.html", b = "only.html";</script><a href="same.html">Same</a>`)
		if !reflect.DeepEqual(script, []string{"http://example.com/dir/only.html"}) {
			t.Errorf("script links %q", script)
		}
		if want := []Link{{URL: "http://example.com/dir/same.html", Anchor: "Same"}}; !reflect.DeepEqual(html, want) {
			t.Errorf("html links %+v", html)
		}
	})
	t.Run("cap", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("<script>var all = [")
		for i := 0; i < MaxLinksPerPage+10; i++ {
			b.WriteString(`"p` + itoa(i) + `.html",`)
		}
		b.WriteString(`];</script><a href="/last.html">Last</a>`)
		script, html := scriptLinksOf(t, b.String())
		if len(html) != 1 || html[0].URL != "http://example.com/last.html" {
			t.Errorf("HTML link lost: %+v", html)
		}
		if len(script)+len(html) != MaxLinksPerPage {
			t.Errorf("%d script + %d HTML links, want %d in all", len(script), len(html), MaxLinksPerPage)
		}
	})
	t.Run("nofollow page", func(t *testing.T) {
		p, err := ParseHTML([]byte(`<meta name="robots" content="nofollow"><script>go("next.html")</script>`), "text/html", nil, mustURL(t, "http://example.com/"))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Links) != 1 || !p.Links[0].NoFollow || !p.Links[0].Script {
			t.Errorf("links %+v", p.Links)
		}
	})
	t.Run("scan budget", func(t *testing.T) {
		doc := "<script>var early = 'early.html';/*" + strings.Repeat("x", maxScriptScanBytes) + "*/</script><script>var late = 'late.html';</script>"
		script, _ := scriptLinksOf(t, doc)
		if !reflect.DeepEqual(script, []string{"http://example.com/dir/early.html"}) {
			t.Errorf("script links %q", script)
		}
	})
}

func TestScriptURLCandidate(t *testing.T) {
	tests := []struct {
		lit  string
		want bool
	}{
		{"page.html", true},
		{"sub/Page.HTM", true},
		{"list.php?cat=2&page=3", true},
		{"index.html#section", true},
		{"/about", true},
		{"/docs/v2.0", true},
		{"/search/", true},
		{"./here", true},
		{"../up.aspx", true},
		{"http://example.org", true},
		{"HTTPS://Example.org/a/b", true},
		{"http://localhost:8080/admin/", true},
		{"//cdn.example.org/page/", true},
		{"/文档/索引.html", true},
		{"/a%20b.html", true},
		{"page", false},
		{"readme.txt", false},
		{"/app.js", false},
		{"/img/logo.PNG", false},
		{"http://example.org/feed.xml", false},
		{"//host/p", false},
		{"http://", false},
		{"http://exa mple.org/", false},
		{"http://example.org/?q=", false},
		{"/", false},
		{"../", false},
		{"/-/", false},
		{"#top", false},
		{"a", false},
		{"javascript:void(0).html", false},
		{"-x.html", false},
		{"a\tb.html", false},
		{"/100%.html", false},
		{"/a\\b.html", false},
		{"/" + strings.Repeat("a", maxScriptLiteralBytes) + ".html", false},
	}
	for _, tc := range tests {
		if _, got := scriptURLCandidate(tc.lit); got != tc.want {
			t.Errorf("scriptURLCandidate(%q) = %v, want %v", tc.lit, got, tc.want)
		}
	}
}

// TestOutLinksScriptWeight: a script link gets half an HTML link's share of
// the page's cash, and the shares still add up to the cash.
func TestOutLinksScriptWeight(t *testing.T) {
	p := &Parsed{Links: []Link{
		{URL: "http://a.test/1", Anchor: "one"},
		{URL: "http://a.test/2"},
		{URL: "http://a.test/s", Script: true},
		{URL: "http://a.test/nf", NoFollow: true},
	}}
	links := (&Crawler{}).outLinks(&procEntry{URL: "http://a.test/", Host: "a.test", Cash: 5, Depth: 1}, p)
	got := map[string]float64{}
	for _, l := range links {
		got[l.URL] = l.Cash
	}
	want := map[string]float64{"http://a.test/1": 2, "http://a.test/2": 2, "http://a.test/s": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cash shares %v, want %v", got, want)
	}
}
