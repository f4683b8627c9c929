package node

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sou/index"
	"sou/search"
)

// indexPages stores count real pages on the node's own index (one host,
// which a lone node owns), each mentioning "harbour" and 港口.
func indexPages(t *testing.T, n *Node, count int) {
	t.Helper()
	ctx := context.Background()
	for i := range count {
		u := fmt.Sprintf("http://docs.example/page/%d", i)
		body := fmt.Sprintf("Page %d tells about the harbour lighthouse number %d and the 港口 of city %d. %s", i, i, i,
			strings.Repeat(fmt.Sprintf("filler%d words ", i), 5))
		raw := fmt.Sprintf("<html><head><title>Harbour guide %d</title></head><body><p>%s</p><script>alert(1)</script></body></html>", i, body)
		doc := &index.Document{
			URL: u, Host: "docs.example", Title: fmt.Sprintf("Harbour guide %d", i), Body: body, Lang: "en",
			Status: 200, FetchedAt: time.Now(), ContentType: "text/html; charset=utf-8", Charset: "utf-8",
			Raw: []byte(raw), StaticRank: 1, SimHash: uint64(i+1) * 0x9E3779B97F4A7C15,
		}
		copy(doc.ContentHash[:], fmt.Sprintf("%016d", i))
		if err := n.ix.Put(ctx, doc); err != nil {
			t.Fatalf("index page %d: %v", i, err)
		}
	}
	if err := n.ix.Flush(ctx); err != nil {
		t.Fatalf("flush index: %v", err)
	}
}

func get(t *testing.T, target string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func mustContain(t *testing.T, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("page:\n%s", page[:min(len(page), 4000)])
		t.FailNow()
	}
}

func TestSearchPage(t *testing.T) {
	n, srv := newHandlerNode(t, testConfig(t))
	indexPages(t, n, 25)

	tests := []struct {
		name    string
		target  string
		header  []string
		status  int
		want    []string
		notWant []string
		hits    int
	}{
		{name: "first page", target: "/?q=harbour", status: 200, hits: 10, want: []string{
			`25 results`, `1 of 1 peers answered`, `<b>harbour</b>`, `class="cached" href="/api/cache?q=harbour&amp;url=http%3A%2F%2Fdocs.example%2Fpage%2F`,
			`cached 快照`, `<ol class="hits" start="1">`, `<b class="cur">1</b>`, `<a class="num" href="/?page=3&amp;q=harbour">3</a>`,
			`<a class="next" href="/?page=2&amp;q=harbour" rel="next">`, `Harbour guide`, `<script src="/ui/sou.js" defer></script>`,
			`id="searching"`, `searching… 搜索中`,
		}, notWant: []string{`class="prev"`, `class="msg warn"`}},
		{name: "second page", target: "/?q=harbour&page=2", status: 200, hits: 10, want: []string{
			`<ol class="hits" start="11">`, `<a class="prev" href="/?q=harbour" rel="prev">`, `<b class="cur">2</b>`, `href="/?page=3&amp;q=harbour"`,
		}},
		{name: "last page", target: "/?q=harbour&page=3", status: 200, hits: 5, notWant: []string{`class="next"`}},
		{name: "chinese query", target: "/?q=" + url.QueryEscape("港口"), status: 200, hits: 10, want: []string{`<b>港口</b>`}},
		{name: "chinese by Accept-Language", target: "/?q=harbour", header: []string{"Accept-Language", "zh-CN,zh;q=0.9,en;q=0.5"},
			status: 200, hits: 10, want: []string{`<html lang="zh-CN">`, `找到 25 条结果`, `1 个节点中 1 个已响应`, `下一页 »`, `>搜索</button>`}},
		{name: "lang parameter wins", target: "/?q=harbour&lang=en", header: []string{"Accept-Language", "zh-CN"}, status: 200, hits: 10,
			want: []string{`<html lang="en">`, `25 results`, `name="lang" value="en"`, `href="/?lang=en&amp;page=2&amp;q=harbour"`}},
		{name: "no results", target: "/?q=zyzzyva", status: 200, want: []string{`0 results`, `No results for “zyzzyva”`}, notWant: []string{`class="pager"`}},
		{name: "no results zh", target: "/?q=zyzzyva&lang=zh", status: 200, want: []string{`没有找到与“zyzzyva”相关的网页`}},
		{name: "start page", target: "/", status: 200, want: []string{`autofocus`, `action="/" method="get"`, `Add seed URLs on the dashboard`}, notWant: []string{`class="stats"`}},
		{name: "hostile query is escaped", target: "/?q=" + url.QueryEscape(`"><script>alert(1)</script>`), status: 200,
			want: []string{`&lt;script&gt;alert(1)&lt;/script&gt;`}, notWant: []string{`<script>alert(1)`}},
		{name: "bad page is a clear error", target: "/?q=harbour&page=0", status: 400, want: []string{`class="msg err"`, fmt.Sprintf("page must be an integer between 1 and %d", search.MaxPage)}},
		{name: "past the last page", target: "/?q=harbour&page=9", status: 200, hits: 0, want: []string{`class="prev"`}},
	}
	hitRE := regexp.MustCompile(`<li class="hit">`)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, page := get(t, srv.URL+tc.target, tc.header...)
			if status != tc.status {
				t.Fatalf("status %d, want %d\n%s", status, tc.status, page)
			}
			if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			mustContain(t, page, tc.want...)
			for _, nw := range tc.notWant {
				if strings.Contains(page, nw) {
					t.Errorf("page contains %q", nw)
				}
			}
			if got := len(hitRE.FindAllString(page, -1)); got != tc.hits {
				t.Errorf("%d results shown, want %d", got, tc.hits)
			}
		})
	}

	t.Run("cached link opens a highlighted copy", func(t *testing.T) {
		_, _, page := get(t, srv.URL+"/?q="+url.QueryEscape("harbour lighthouse"))
		m := regexp.MustCompile(`class="cached" href="([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no cached link in\n%s", page)
		}
		link := html.UnescapeString(m[1])
		status, hdr, cached := get(t, srv.URL+link)
		if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
			t.Fatalf("cached copy %s: %d %s %s", link, status, hdr.Get("Content-Type"), cached)
		}
		// Each term has its own colour; scripts of the page are gone.
		mustContain(t, cached, `<mark style="background:#ffff66;color:black">`, `<mark style="background:#a0ffff;color:black">`)
		if strings.Contains(cached, "alert(1)") {
			t.Errorf("cached copy kept the page's script")
		}
	})
}

// TestPartialCoverageMessage renders a response in which peers are missing:
// the page must say so rather than look empty.
func TestPartialCoverageMessage(t *testing.T) {
	for _, lang := range []string{"en", "zh"} {
		p := searchPage{T: uiTexts[lang], Query: "harbour", Resp: &search.Response{
			Query: "harbour", Page: 1, N: 10, Total: 0,
			Coverage: search.Coverage{Asked: 3, Answered: 1, TimedOut: 1, Failed: 1, Shards: []search.ShardStatus{
				{Member: "12D3KooWAAAAAAAAAAAAAAAAself", State: "answered"},
				{Member: "12D3KooWBBBBBBBBBBBBBBBBslow", State: "timeout"},
				{Member: "12D3KooWCCCCCCCCCCCCCCCCgone", State: "failed", Error: "connection refused"},
			}},
		}}
		(&Node{}).fillSearchPage(&p, search.Request{Query: "harbour", Page: 1, N: 10}, "")
		var b bytes.Buffer
		if err := uiTemplates.ExecuteTemplate(&b, "search.html", p); err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{
			"en": {`class="msg warn"`, `2 of 3 peers did not answer in time`, `…BBBBslow timeout`, `…CCCCgone failed`, `1 of 3 peers answered`, `No results for`},
			"zh": {`部分结果：3 个节点中有 2 个未及时响应`, `3 个节点中 1 个已响应`},
		}[lang]
		mustContain(t, b.String(), want...)
	}
}

func TestDashboard(t *testing.T) {
	n, srv := newHandlerNode(t, testConfig(t))
	status, hdr, page := get(t, srv.URL+"/dashboard")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("dashboard: %d %s", status, hdr.Get("Content-Type"))
	}
	mustContain(t, page, n.PeerID(), `Members (<span id="member-count">1</span>)`, `(this node)`,
		`<noscript><meta http-equiv="refresh" content="5; url=/dashboard?lang=en"></noscript>`, `action="/dashboard/seed" method="post"`,
		`id="fetch-rate"`, `id="frontier"`, `id="docs"`, `id="outbox"`, `id="keyspace">key prefix `, `id="errors"`)
	_, _, zh := get(t, srv.URL+"/dashboard", "Accept-Language", "zh")
	mustContain(t, zh, `节点状态`, `添加种子网址`, `本节点`)

	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+"/dashboard/seed", "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name   string
		urls   string
		status int
		want   []string
	}{
		{"one seed", "http://seed-one.example/", 200, []string{`class="msg ok">accepted: 1<`, `content="30; url=/dashboard?lang=en"`}},
		{"several lines", "http://a.example/\r\nhttps://b.example/start\n  http://c.example/ ", 200, []string{`accepted: 3`}},
		{"some rejected", "http://d.example/\nftp://e.example/", 200, []string{`accepted: 1`, `rejected:`, `ftp://e.example/`}},
		{"all rejected", "javascript:alert(1)", 400, []string{`class="msg err"`, `javascript:alert(1)`}},
		{"nothing", "", 400, []string{`urls is required`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, page := post(url.Values{"urls": {tc.urls}}.Encode())
			if status != tc.status {
				t.Fatalf("status %d, want %d\n%s", status, tc.status, page)
			}
			mustContain(t, page, tc.want...)
		})
	}
	if s := n.Status(context.Background()); s.Crawl.Frontier < 1 && s.Outbox < 1 {
		t.Errorf("seeds from the form reached neither the frontier nor the outbox: %+v", s.Crawl)
	}
}

func TestUIAssets(t *testing.T) {
	_, srv := newHandlerNode(t, testConfig(t))
	for _, tc := range []struct{ path, ctype, want string }{
		{"/ui/sou.js", "javascript", "history.pushState"},
		{"/ui/sou.css", "text/css", ".spinner"},
	} {
		status, hdr, body := get(t, srv.URL+tc.path)
		if status != 200 || !strings.Contains(hdr.Get("Content-Type"), tc.ctype) || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q", tc.path, status, hdr.Get("Content-Type"))
		}
	}
}

func TestUILanguage(t *testing.T) {
	tests := []struct{ query, accept, want string }{
		{"", "", "en"},
		{"", "zh-CN,zh;q=0.9", "zh"},
		{"", "zh-TW", "zh"},
		{"", "en-US,en;q=0.9,zh;q=0.8", "en"},
		{"", "fr-FR", "en"},
		{"", "garbage;;;q=x", "en"},
		{"", strings.Repeat("zh,", 10000), "zh"},
		{"lang=en", "zh-CN", "en"},
		{"lang=zh", "en", "zh"},
		{"lang=xx", "zh", "zh"},
	}
	for _, tc := range tests {
		r, _ := http.NewRequest("GET", "/?"+tc.query, nil)
		r.Header.Set("Accept-Language", tc.accept)
		if got := uiLanguage(r).Code; got != tc.want {
			t.Errorf("lang=%q Accept-Language %.40q: %s, want %s", tc.query, tc.accept, got, tc.want)
		}
	}
}
