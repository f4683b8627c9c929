package node

import (
	"net/url"
	"strings"
	"testing"

	"sou/index"
)

// hostileCachedPages are crawled pages that try to act when their cached
// copy is opened on the node's origin (issue 20, finding 9).
func hostileCachedPages(host string) (hostile, deep *index.Document) {
	hostile = &index.Document{
		URL: "http://" + host + "/hostile", Host: host, Title: "Hostile harbour", Body: "harbour text",
		ContentType: "text/html; charset=utf-8", Charset: "utf-8",
		Raw: []byte(`<html><head><meta http-equiv="refresh" content="0;url=http://evil.example/"><title>Hostile harbour</title></head><body>` +
			`<p id="para">harbour text</p>` +
			`<form id="evilform" action="/dashboard/seed" method="post"><input name="urls" value="http://evil.example/"><button id="evilsubmit" type="submit">Add</button></form>` +
			`<form action="/api/crawl" method="post" enctype="text/plain"><input name='{"urls":["http://evil.example/x"],"a":"' value='"}'><button id="evilsubmit2">Go</button></form>` +
			`<script>document.title="pwned"</script><a id="jslink" href="javascript:document.title='pwned'">x</a>` +
			`<img src="http://tracker.example/x.gif" onerror="document.title='pwned'"><iframe src="/dashboard"></iframe>` +
			`<svg><script>document.title="pwned"</script></svg></body></html>`),
	}
	deep = &index.Document{
		URL: "http://" + host + "/deep", Host: host, Title: "Deep <harbour>", Body: "deep harbour text <script>alert(1)</script>",
		ContentType: "text/html", Charset: "utf-8",
		Raw: []byte("<html><body>" + strings.Repeat("<div>", 2000) + `deep harbour text<script>document.title="pwned"</script>` +
			`<form action="/dashboard/seed" method="post"><button>go</button></form>` + strings.Repeat("</div>", 2000) + "</body></html>"),
	}
	return hostile, deep
}

// TestCachedPageIsInert: the cached copy of a hostile page is served in a
// sandbox that runs no script and posts no form, with its scripts and
// meta refresh removed; a page the HTML parser refuses (2,000 nested
// elements) is shown as escaped text, not a 500.
func TestCachedPageIsInert(t *testing.T) {
	n, srv := newHandlerNode(t, testConfig(t))
	hostile, deep := hostileCachedPages("docs.example")
	putPage(t, n, hostile)
	putPage(t, n, deep)
	tests := []struct {
		name    string
		url     string
		want    []string
		notWant []string
	}{
		{"hostile page", hostile.URL, []string{`<mark style="background:#ffff66;color:black">harbour</mark>`, `id="sou-cache-banner"`},
			[]string{"<script", `http-equiv="refresh"`, "javascript:", "<iframe", "onerror", "pwned"}},
		{"nested deeper than the parser's limit", deep.URL,
			[]string{`deep harbour text &lt;script&gt;alert(1)&lt;/script&gt;`, `Deep &lt;harbour&gt;`, "could not be shown as HTML", "This is sou's cached copy of"},
			[]string{"<script", "<form", "pwned"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, page := get(t, srv.URL+"/api/cache?q=harbour&url="+url.QueryEscape(tc.url))
			if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
				t.Fatalf("status %d, type %q\n%.2000s", status, hdr.Get("Content-Type"), page)
			}
			if hdr.Get("Content-Security-Policy") != cacheCSP {
				t.Errorf("Content-Security-Policy %q, want %q", hdr.Get("Content-Security-Policy"), cacheCSP)
			}
			for _, directive := range []string{"sandbox", "default-src 'none'", "form-action 'none'", "frame-ancestors 'none'"} {
				if !strings.Contains(cacheCSP, directive) {
					t.Errorf("cache policy lacks %s", directive)
				}
			}
			if strings.Contains(cacheCSP, "allow-") || strings.Contains(cacheCSP, "script-src") {
				t.Errorf("cache policy %q lets something run", cacheCSP)
			}
			if hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("headers %v", hdr)
			}
			mustContain(t, page, tc.want...)
			for _, nw := range tc.notWant {
				if strings.Contains(page, nw) {
					t.Errorf("cached copy holds %q", nw)
				}
			}
		})
	}
}
