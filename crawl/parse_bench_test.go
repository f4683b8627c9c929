package crawl

import (
	"context"
	"encoding/binary"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// benchPage builds a realistic page of about size bytes: a head with
// scripts and styles, a navigation bar, paragraphs of text and links.
func benchPage(size int, sentences []string, lang string) []byte {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="` + lang + `"><head><meta charset="utf-8"><title>` + sentences[0] + `</title>
<link rel="canonical" href="/article/2024/index.html"><meta name="description" content="desc">
<style>body{font-family:sans-serif}.nav a{color:#333}</style>
<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}</script></head><body>
<div class="nav"><ul>`)
	for i := 0; i < 30; i++ {
		b.WriteString(`<li><a href="/section/` + itoa(i) + `/">` + sentences[i%len(sentences)][:min(12, len(sentences[i%len(sentences)]))] + `</a></li>`)
	}
	b.WriteString("</ul></div><h1>" + sentences[1] + "</h1>\n")
	for i := 0; b.Len() < size; i++ {
		s := sentences[i%len(sentences)]
		b.WriteString("<p>" + s + " <a href=\"/article/" + itoa(i) + ".html\">" + sentences[(i+3)%len(sentences)] + "</a> " + s + "</p>\n")
		if i%7 == 0 {
			b.WriteString("<h2>" + sentences[(i+1)%len(sentences)] + "</h2>\n")
		}
	}
	b.WriteString(`<div class="footer">&copy; 2024 <a href="http://other.example.com/about">About</a></div></body></html>`)
	return []byte(b.String())
}

var (
	zhSentences = []string{
		"搜索引擎是一种在互联网上查找信息的工具", "网络爬虫负责抓取网页并且发现新的链接", "索引程序为每个词建立倒排索引",
		"用户输入查询词以后系统返回相关的结果", "中文分词是处理中文网页的关键步骤", "分布式系统把网站分配给不同的节点",
		"每个节点既是爬虫也是索引分片", "礼貌的爬虫遵守网站的访问频率限制", "重复网页通过内容指纹识别出来",
	}
	enSentences = []string{
		"A search engine is a tool for finding information on the web", "The crawler fetches pages and discovers new links",
		"The indexer builds an inverted index with positions for every term", "Users type a query and the system returns ranked results",
		"Every node is both a crawler and an index shard", "A polite crawler keeps one request in flight per host",
		"Duplicate pages are recognised by their content fingerprints", "Hosts are owned by the closest peer in the keyspace",
	}
)

func benchParse(b *testing.B, page []byte, contentType string) {
	u, _ := url.Parse("http://www.example.com/article/2024/index.html")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := ParseHTML(page, contentType, nil, u)
		if err != nil || len(p.Links) == 0 {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseHTMLChinese(b *testing.B) {
	benchParse(b, benchPage(20<<10, zhSentences, "zh-CN"), "text/html; charset=utf-8")
}

func BenchmarkParseHTMLChineseGBK(b *testing.B) {
	page := benchPage(20<<10, zhSentences, "zh-CN")
	gbk, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(strings.Replace(string(page), `charset="utf-8"`, `charset="gbk"`, 1)))
	if err != nil {
		b.Fatal(err)
	}
	benchParse(b, gbk, "text/html")
}

func BenchmarkParseHTMLEnglish(b *testing.B) {
	benchParse(b, benchPage(20<<10, enSentences, "en"), "text/html; charset=utf-8")
}

// BenchmarkParseHTMLScripts: the English page with 30 KB of inline script
// of the kinds real pages carry (a JSON configuration, an array of page
// names, handlers) and an onclick on every list item.
func BenchmarkParseHTMLScripts(b *testing.B) {
	page := string(benchPage(20<<10, enSentences, "en"))
	var js strings.Builder
	js.WriteString(`<script>var config = {"wgPageName": "Main_Page", "wgNamespaceIds": {"media": -2, "special": -1, "talk": 1}, "skin": "vector", "modules": [`)
	for i := 0; js.Len() < 20<<10; i++ {
		js.WriteString(`"ext.module` + itoa(i) + `", `)
	}
	js.WriteString(`"site"]};
// Navigation built in the page: some pages are linked only from here.
var pages = [`)
	for i := 0; js.Len() < 30<<10; i++ {
		js.WriteString(`{title: "Chapter ` + itoa(i) + `", url: "chapter/` + itoa(i) + `.html"}, `)
	}
	js.WriteString(`];
function go(i) { if (/^\d+$/.test(i)) { window.location.href = pages[i].url; } return false; }
</script>`)
	page = strings.Replace(page, "</head>", js.String()+"</head>", 1)
	page = strings.ReplaceAll(page, "<li><a ", `<li onclick="go(0)"><a `)
	benchParse(b, []byte(page), "text/html; charset=utf-8")
}

// BenchmarkParseHTMLMixedLinks: 200 links in the forms that need the URL
// parser (dot segments, escapes, several query parameters, absolute links
// to other hosts with upper case, ports or escapes) beside simple ones.
func BenchmarkParseHTMLMixedLinks(b *testing.B) {
	var page strings.Builder
	page.WriteString(`<html><head><title>Links</title></head><body><ul>`)
	forms := []string{
		"../up/%d.html", "./same/%d.html", "/a/b/../c/%d.html", "/search?q=x%d&lang=en&page=2", "/list.php?page=%d&cat=3",
		"https://Example.ORG/Path/%d", "http://other.example.com:8080/p/%d?b=2&a=1", "/wiki/%E4%B8%AD%d", "simple/%d.html",
		"http://other.example.com/about/%d", "https://www.example.com/article/%d.html#comments", "?page=%d",
	}
	for i := 0; i < 200; i++ {
		href := strings.Replace(forms[i%len(forms)], "%d", itoa(i), 1)
		page.WriteString(`<li><a href="` + href + `">link ` + itoa(i) + `</a></li>`)
	}
	page.WriteString(`</ul></body></html>`)
	benchParse(b, []byte(page.String()), "text/html; charset=utf-8")
}

func BenchmarkNormalizeURL(b *testing.B) {
	base, _ := url.Parse("http://www.example.com/dir/page.html")
	inputs := []string{"../other/page.html?b=2&a=1#frag", "http://Example.COM:80/a/./b/%7euser", "/section/12/", "https://www.example.org/search?q=%e6%90%9c&sid=1"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := NormalizeURL(inputs[i%len(inputs)], base); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSimHashChinese(b *testing.B) {
	p, _ := ParseHTML(benchPage(20<<10, zhSentences, "zh-CN"), "text/html", nil, nil)
	b.SetBytes(int64(len(p.Text)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		SimHash(p.Text)
	}
}

func BenchmarkSimHashEnglish(b *testing.B) {
	p, _ := ParseHTML(benchPage(20<<10, enSentences, "en"), "text/html", nil, nil)
	b.SetBytes(int64(len(p.Text)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		SimHash(p.Text)
	}
}

func BenchmarkContentHash(b *testing.B) {
	p, _ := ParseHTML(benchPage(20<<10, enSentences, "en"), "text/html", nil, nil)
	b.SetBytes(int64(len(p.Text)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ContentHash(p.Text)
	}
}

// BenchmarkNearDupClaim claims new pages into a Badger laid out as a
// node's: the node's settings (small memtables, so the tree has L0 tables
// and levels under the memtables), 30,000 pages already claimed, and ten
// keys of the frontier and the index per page around them. One claim in
// ten is a near duplicate of a stored page.
func BenchmarkNearDupClaim(b *testing.B) {
	opts := badger.DefaultOptions(b.TempDir()).
		WithLogger(nil).
		WithMemTableSize(4 << 20).
		WithNumMemtables(3).
		WithBlockCacheSize(0).
		WithIndexCacheSize(8 << 20).
		WithValueThreshold(256).
		WithCompression(options.None).
		WithDetectConflicts(false)
	db, err := badger.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const stored = 30000
	fingerprint := func(i int) (url string, exact [16]byte, sim uint64) {
		h := mix64(uint64(i))
		binary.BigEndian.PutUint64(exact[:], h)
		return "http://h" + itoa(i%500) + ".example/p" + itoa(i), exact, mix64(h)
	}
	wb := db.NewWriteBatch()
	seenValue := make([]byte, 120)
	postings := make([]byte, 300)
	for i := 0; i < stored; i++ {
		url, exact, sim := fingerprint(i)
		for band := 0; band < 4; band++ {
			if err := wb.Set(nearKey(sim, band, url), nil); err != nil {
				b.Fatal(err)
			}
		}
		rev := binary.BigEndian.AppendUint64(append([]byte{}, exact[:]...), sim)
		if err := wb.Set(nearURLKey(url), rev); err != nil {
			b.Fatal(err)
		}
		if err := wb.Set(exactKey(exact), []byte(url)); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < 10; j++ {
			h := mix64(uint64(i*10 + j))
			var k, v []byte
			switch {
			case j < 6: // seen records of the page's links
				k = binary.BigEndian.AppendUint64(append([]byte(pfxSeen+"h"+itoa(int(h%500))+".example/"), exact[:8]...), h)
				v = seenValue
			case j < 8: // queued links
				k = binary.BigEndian.AppendUint64([]byte(pfxQueue+"h"+itoa(int(h%500))+".example/"), h)
				v = []byte(url)
			default: // postings blocks
				k = binary.BigEndian.AppendUint64([]byte("i:p/term"+itoa(int(h%20000))+"/"), h)
				v = postings
			}
			if err := wb.Set(k, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	idx, err := NewNearDupIndex(db, 3)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		url, exact, sim := fingerprint(stored + i)
		if i%10 == 0 {
			_, _, storedSim := fingerprint(i % stored)
			sim = storedSim ^ 0b101
		}
		if _, err := idx.Claim(ctx, url, "", exact, sim); err != nil {
			b.Fatal(err)
		}
	}
}

// realPageDirs hold HTML documentation installed by Debian packages: the
// LibreOffice help in Chinese and English, the Python and PostgreSQL
// manuals. Tests and benchmarks over real pages skip when none is present.
var realPageDirs = []string{
	"/usr/share/libreoffice/help/zh-CN",
	"/usr/share/libreoffice/help/en-US",
	"/usr/share/doc/python3*/html",
	"/usr/share/doc/postgresql-doc-*/html",
}

type realPage struct {
	body []byte
	url  *url.URL
}

// loadRealPages reads up to n HTML files spread evenly over the files of
// realPageDirs, each with a URL on a host named for its directory.
func loadRealPages(tb testing.TB, n int) []realPage {
	tb.Helper()
	var files []string
	var roots []string
	for _, pattern := range realPageDirs {
		dirs, _ := filepath.Glob(pattern)
		for _, dir := range dirs {
			var inDir []string
			filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() && isHTMLFile(path) {
					inDir = append(inDir, path)
				}
				return nil
			})
			for range inDir {
				roots = append(roots, dir)
			}
			files = append(files, inDir...)
		}
	}
	if len(files) == 0 {
		tb.Skip("no HTML documentation installed")
	}
	step := max(1, len(files)/n)
	var pages []realPage
	for i := 0; i < len(files) && len(pages) < n; i += step {
		body, err := os.ReadFile(files[i])
		if err != nil {
			tb.Fatal(err)
		}
		rel, _ := filepath.Rel(roots[i], files[i])
		host := strings.ToLower(strings.NewReplacer("/", ".", "_", "-").Replace(strings.Trim(roots[i], "/"))) + ".test"
		pages = append(pages, realPage{body, &url.URL{Scheme: "http", Host: host, Path: "/" + filepath.ToSlash(rel)}})
	}
	return pages
}

// BenchmarkParseHTMLCorpus parses a few hundred real documentation pages,
// Chinese and English, per iteration.
func BenchmarkParseHTMLCorpus(b *testing.B) {
	pages := loadRealPages(b, 300)
	var size int64
	for _, p := range pages {
		size += int64(len(p.body))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range pages {
			if _, err := ParseHTML(p.body, "text/html", nil, p.url); err != nil {
				b.Fatal(err)
			}
		}
	}
}
