package crawl

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

type charsetSample struct {
	name  string // WHATWG name ParseHTML must report
	label string // what a page declares
	enc   encoding.Encoding
	title string
	text  string
}

var charsetSamples = []charsetSample{
	{"gbk", "gbk", simplifiedchinese.GBK, "搜索引擎简介",
		"搜索引擎是一种在互联网上查找信息的工具。网络爬虫负责抓取网页，索引程序建立倒排索引。用户输入查询词以后，系统返回相关的结果，并且按照重要性排序。中文分词是处理中文网页的关键步骤。"},
	{"gb18030", "gb18030", simplifiedchinese.GB18030, "汉字扩展𠀀测试",
		"国家标准字符集包含𠀀𠀁等扩展汉字。搜索引擎需要正确解码这些字符，否则索引会出现乱码。网页编码的识别依次使用响应头、字节顺序标记和元标签。"},
	{"big5", "big5", traditionalchinese.Big5, "搜尋引擎簡介",
		"搜尋引擎是一種在網際網路上查詢資訊的工具。網路爬蟲負責抓取網頁，索引程式建立反向索引。使用者輸入查詢字詞之後，系統會傳回相關的結果，並依照重要性排序。"},
	{"shift_jis", "shift_jis", japanese.ShiftJIS, "検索エンジンの仕組み",
		"検索エンジンはインターネット上の情報を探すための道具です。クローラーがウェブページを集め、インデックスを作ります。利用者が検索語を入力すると、関連する結果が表示されます。"},
	{"euc-kr", "euc-kr", korean.EUCKR, "검색 엔진 소개",
		"검색 엔진은 인터넷에서 정보를 찾는 도구입니다. 웹 크롤러가 페이지를 수집하고 색인을 만듭니다. 사용자가 검색어를 입력하면 관련된 결과를 중요도 순서로 보여 줍니다."},
	{"windows-1252", "iso-8859-1", charmap.ISO8859_1, "Café à Noël",
		"Le moteur de recherche trouve des pages où l'on parle de café, d'été et de Noël. Ça marche très bien, même pour les élèves françaises qui écrivent des phrases déjà longues."},
}

func encodeSample(t *testing.T, enc encoding.Encoding, s string) []byte {
	t.Helper()
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatalf("encode %q: %v", s, err)
	}
	return b
}

func samplePage(t *testing.T, cs charsetSample, meta string) []byte {
	head := "<html><head>" + meta + "<title>" + cs.title + "</title></head><body><p>" + cs.text + "</p><p>" + cs.text + "</p></body></html>"
	return encodeSample(t, cs.enc, head)
}

func TestCharsetRoundTrips(t *testing.T) {
	page := mustURL(t, "http://example.com/")
	wantText := func(cs charsetSample) string { return cs.text + " " + cs.text }
	for _, cs := range charsetSamples {
		cases := []struct {
			name, contentType, meta string
		}{
			{"header", "text/html; charset=" + cs.label, ""},
			{"meta charset", "text/html", `<meta charset="` + cs.label + `">`},
			{"meta http-equiv", "", `<meta http-equiv="Content-Type" content="text/html; charset=` + strings.ToUpper(cs.label) + `">`},
			{"detected", "text/html", ""},
			{"wrong utf-8 declaration", "text/html; charset=utf-8", ""},
		}
		for _, c := range cases {
			t.Run(cs.name+"/"+c.name, func(t *testing.T) {
				body := samplePage(t, cs, c.meta)
				p, err := ParseHTML(body, c.contentType, nil, page)
				if err != nil {
					t.Fatal(err)
				}
				if p.Title != cs.title || p.Text != wantText(cs) {
					t.Fatalf("decoded as %s:\n title %q\n text %q", p.Charset, p.Title, p.Text)
				}
				// Detection may legitimately name a superset (GB18030 for
				// GBK text), the decoded text is what matters; declared
				// charsets must be reported as declared.
				if c.name != "detected" && c.name != "wrong utf-8 declaration" && p.Charset != cs.name {
					t.Fatalf("charset %q, want %q", p.Charset, cs.name)
				}
			})
		}
		t.Run(cs.name+"/utf-8 labelled "+cs.label, func(t *testing.T) {
			// The bytes are UTF-8 but the header claims a legacy charset.
			body := []byte("<title>" + cs.title + "</title><p>" + cs.text + "</p><p>" + cs.text + "</p>")
			p, err := ParseHTML(body, "text/html; charset="+cs.label, nil, page)
			if err != nil {
				t.Fatal(err)
			}
			if p.Charset != "utf-8" || p.Title != cs.title || p.Text != wantText(cs) {
				t.Fatalf("charset %q title %q", p.Charset, p.Title)
			}
		})
	}
}

const kanaInGBKText = "帮助 模块 目录 索引 ASC Converts double-byte (full-width) characters to single-byte (half-width) " +
	"ASCII and katakana characters. 语法 ASC(Text) 示例 =ASC(\"ライト\") returns a string of " +
	"single-byte characters. 相关主题 JIS 文本函数"

// TestCharsetDeclaredKanaInGBK is a GBK page that quotes katakana, as the
// LibreOffice help of ASC and JIS does: the declaration decodes it cleanly,
// so the kana that make it look like GBK read through Big5 must not hand it
// to a detector's guess (EUC-JP reads its few Chinese words as kanji).
func TestCharsetDeclaredKanaInGBK(t *testing.T) {
	const title = "ASC 函数"
	text := kanaInGBKText
	utf8Page := "<html><head><title>" + title + "</title></head><body><p>" + text + "</p></body></html>"
	body, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(utf8Page))
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range []string{"text/html; charset=gbk", "text/html; charset=gb2312"} {
		for range 20 {
			p, err := ParseHTML(body, ct, nil, mustURL(t, "http://example.com/"))
			if err != nil {
				t.Fatal(err)
			}
			if p.Charset != "gbk" || p.Title != title || p.Text != text {
				t.Fatalf("%s: decoded as %s: title %q text %q", ct, p.Charset, p.Title, p.Text)
			}
		}
	}
}

// TestCharsetCleanButWrongDeclaration is Big5 declared as GBK: GBK decodes
// any Big5 bytes without a replacement character, but into kana and
// unlikely characters, and the detector rates Big5 best.
func TestCharsetCleanButWrongDeclaration(t *testing.T) {
	big5 := charsetSamples[2]
	p, err := ParseHTML(samplePage(t, big5, ""), "text/html; charset=gbk", nil, mustURL(t, "http://example.com/"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Charset != "big5" || p.Title != big5.title {
		t.Fatalf("decoded as %s: title %q", p.Charset, p.Title)
	}
}

// TestCharsetDetectionDeterministic decodes an undeclared page that the
// detector rates equally as two charsets (the GBK page quoting katakana)
// many times: the same guess every time.
func TestCharsetDetectionDeterministic(t *testing.T) {
	body, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte("<p>" + kanaInGBKText + "</p>"))
	if err != nil {
		t.Fatal(err)
	}
	want, wantName := decodeCharset(body, "text/html", true)
	for range 300 {
		got, name := decodeCharset(body, "text/html", true)
		if name != wantName || !bytes.Equal(got, want) {
			t.Fatalf("decoded as %s, then as %s", wantName, name)
		}
	}
}

func TestCharsetFromHeaderWhenContentTypeIsBare(t *testing.T) {
	// The engine passes FetchResponse.ContentType (no parameters) and the
	// response header: the header's charset must still be used.
	big5 := charsetSamples[2]
	h := http.Header{}
	h.Set("Content-Type", "text/html; charset=big5")
	p, err := ParseHTML(samplePage(t, big5, ""), "text/html", h, mustURL(t, "http://example.com/"))
	if err != nil || p.Charset != "big5" || p.Title != big5.title {
		t.Fatalf("%v %s %q", err, p.Charset, p.Title)
	}
}

func TestCharsetWrongLegacyDeclaration(t *testing.T) {
	page := mustURL(t, "http://example.com/")
	gbk := charsetSamples[0]
	// GBK bytes declared as Big5 and as Shift_JIS: the declared decoders
	// produce replacement characters, GBK/GB18030 decodes cleanly.
	for _, label := range []string{"big5", "shift_jis", "euc-kr"} {
		body := samplePage(t, gbk, "")
		p, err := ParseHTML(body, "text/html; charset="+label, nil, page)
		if err != nil {
			t.Fatal(err)
		}
		if p.Title != gbk.title || (p.Charset != "gbk" && p.Charset != "gb18030") {
			t.Errorf("declared %s: decoded as %s, title %q", label, p.Charset, p.Title)
		}
	}
	// A BOM beats every declaration.
	body := append([]byte("\xef\xbb\xbf"), []byte("<title>"+gbk.title+"</title>")...)
	p, _ := ParseHTML(body, "text/html; charset=big5", nil, page)
	if p.Charset != "utf-8" || p.Title != gbk.title {
		t.Errorf("BOM: %s %q", p.Charset, p.Title)
	}
	u16 := []byte{0xff, 0xfe}
	for _, r := range "<title>标题</title>" {
		u16 = append(u16, byte(r), byte(r>>8))
	}
	p, _ = ParseHTML(u16, "text/html", nil, page)
	if p.Charset != "utf-16le" || p.Title != "标题" {
		t.Errorf("UTF-16 BOM: %s %q", p.Charset, p.Title)
	}
}

func TestParseHTMLExtraction(t *testing.T) {
	doc := `<!DOCTYPE html>
<html lang="en-GB"><head>
<meta charset="utf-8">
<title>  The   Title &amp; more </title>
<base href="/base/dir/">
<link rel="canonical" href="/canonical?b=2&amp;a=1">
<meta name="description" content="not text">
<meta http-equiv="refresh" content="5; URL='next.html'">
<style>body { color: red }</style>
<script>var hidden = "script text";</script>
</head>
<body>
<h1>Main <em>heading</em></h1>
<p>First&nbsp;paragraph   with
   spaces.</p><p>Second</p><div>搜<b>索</b>引擎</div>
<noscript>no script text</noscript>
<template><p>template text</p></template>
<a href="rel.html">Relative <b>link</b></a>
<a href="http://Other.COM:80/x#frag" rel="nofollow noopener">Other</a>
<a href="http://other.com/x">Other again</a>
<a href="rel.html">Second anchor</a>
<a href="javascript:void(0)">JS</a>
<a href="mailto:a@b.c">mail</a>
<a href="/img-link"><img src="i.png" alt="Picture alt"></a>
<map><area href="/area" alt="Area alt"></map>
<h2>Sub
 heading</h2>
<ul><li>one</li><li>two</li></ul>
<iframe src="/frame.html">iframe text</iframe>
<svg><title>svg title</title><text>svg text</text></svg>
</body></html>`
	p, err := ParseHTML([]byte(doc), "text/html", nil, mustURL(t, "http://example.com/page/index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "The Title & more" {
		t.Errorf("title %q", p.Title)
	}
	if p.Lang != "en-gb" {
		t.Errorf("lang %q", p.Lang)
	}
	wantText := "Main heading First paragraph with spaces. Second 搜索引擎 Relative link Other Other again Second anchor JS mail Sub heading one two"
	if p.Text != wantText {
		t.Errorf("text\n got %q\nwant %q", p.Text, wantText)
	}
	if !reflect.DeepEqual(p.Headings, []string{"Main heading", "Sub heading"}) {
		t.Errorf("headings %q", p.Headings)
	}
	wantLinks := []Link{
		{URL: "http://example.com/base/dir/rel.html", Anchor: "Relative link Second anchor"},
		{URL: "http://other.com/x", Anchor: "Other Other again"},
		{URL: "http://example.com/img-link", Anchor: "Picture alt"},
		{URL: "http://example.com/area", Anchor: "Area alt"},
		{URL: "http://example.com/frame.html"},
	}
	if !reflect.DeepEqual(p.Links, wantLinks) {
		t.Errorf("links\n got %+v\nwant %+v", p.Links, wantLinks)
	}
	if p.Canonical != "http://example.com/canonical?a=1&b=2" {
		t.Errorf("canonical %q", p.Canonical)
	}
	if p.RefreshURL != "http://example.com/base/dir/next.html" {
		t.Errorf("refresh %q", p.RefreshURL)
	}
	if p.NoIndex || p.NoFollow || p.Charset != "utf-8" {
		t.Errorf("flags %v %v %s", p.NoIndex, p.NoFollow, p.Charset)
	}
}

func TestParseHTMLRobotsDirectives(t *testing.T) {
	page := mustURL(t, "http://example.com/")
	tests := []struct {
		name                 string
		meta                 string
		header               []string
		noIndex, noFollow    bool
		linkNoFollowExpected bool
	}{
		{"none", "", nil, false, false, false},
		{"meta noindex", `<meta name="robots" content="NOINDEX">`, nil, true, false, false},
		{"meta nofollow", `<meta name="Robots" content="index, nofollow">`, nil, false, true, true},
		{"meta none", `<meta name="robots" content="none">`, nil, true, true, true},
		{"meta for us", `<meta name="sou" content="noindex">`, nil, true, false, false},
		{"meta for another bot", `<meta name="googlebot" content="noindex">`, nil, false, false, false},
		{"header", "", []string{"noindex, nofollow"}, true, true, true},
		{"header for us", "", []string{"sou: noindex"}, true, false, false},
		{"header for other bot", "", []string{"otherbot: noindex, nofollow"}, false, false, false},
		{"header unavailable_after", "", []string{"unavailable_after: 25 Jun 2010 15:00:00 PST, nofollow"}, false, true, true},
		{"two headers", "", []string{"otherbot: noindex", "nofollow"}, false, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.header {
				h.Add("X-Robots-Tag", v)
			}
			doc := "<head>" + tc.meta + "</head><body><a href=/x>x</a></body>"
			p, err := ParseHTML([]byte(doc), "text/html", h, page)
			if err != nil {
				t.Fatal(err)
			}
			if p.NoIndex != tc.noIndex || p.NoFollow != tc.noFollow {
				t.Fatalf("noindex %v nofollow %v", p.NoIndex, p.NoFollow)
			}
			if len(p.Links) != 1 || p.Links[0].NoFollow != tc.linkNoFollowExpected {
				t.Fatalf("links %+v", p.Links)
			}
		})
	}
}

func TestParseHTMLMalformed(t *testing.T) {
	page := mustURL(t, "http://example.com/")
	manyLinks := &strings.Builder{}
	for i := 0; i < 7000; i++ {
		manyLinks.WriteString(`<a href="/p` + strings.Repeat("x", i%7) + "/" + itoa(i) + `">l</a>`)
	}
	tests := []struct {
		name  string
		doc   string
		check func(t *testing.T, p *Parsed)
	}{
		{"empty", "", func(t *testing.T, p *Parsed) {
			if p.Text != "" || p.Title != "" || len(p.Links) != 0 {
				t.Fatalf("%+v", p)
			}
		}},
		{"unclosed everything", "<html><title>T<body><p>a<div>b<a href=/x>link", func(t *testing.T, p *Parsed) {
			// An unclosed <title> swallows the rest as RCDATA, as in browsers.
			if !strings.HasPrefix(p.Title, "T") {
				t.Fatalf("title %q", p.Title)
			}
		}},
		{"unclosed anchor", "<p>a <a href=/x>one <a href=/y>two</p>", func(t *testing.T, p *Parsed) {
			if len(p.Links) != 2 || p.Links[0].Anchor != "one" || p.Links[1].Anchor != "two" {
				t.Fatalf("links %+v", p.Links)
			}
		}},
		{"missing head end and body", "<html><head><title>T</title><meta charset=utf-8><a href=/l>body</a> text", func(t *testing.T, p *Parsed) {
			if p.Title != "T" || p.Text != "body text" {
				t.Fatalf("%q %q", p.Title, p.Text)
			}
		}},
		{"frame inside anchor", `<a href="/a">before <iframe src="/f"></iframe>after</a>`, func(t *testing.T, p *Parsed) {
			if len(p.Links) != 2 || p.Links[0].Anchor != "before after" || p.Links[1].Anchor != "" {
				t.Fatalf("%+v", p.Links)
			}
		}},
		{"stray end tags", "</a></p></div>text</b></body></html>more", func(t *testing.T, p *Parsed) {
			if p.Text != "text more" {
				t.Fatalf("text %q", p.Text)
			}
		}},
		{"unterminated comment", "before<!-- comment never ends <a href=/x>x</a>", func(t *testing.T, p *Parsed) {
			if p.Text != "before" || len(p.Links) != 0 {
				t.Fatalf("%q %+v", p.Text, p.Links)
			}
		}},
		{"unquoted attrs", "<a href=/a?x=1&y=2 rel=nofollow>q</a>", func(t *testing.T, p *Parsed) {
			if len(p.Links) != 1 || p.Links[0].URL != "http://example.com/a?x=1&y=2" || !p.Links[0].NoFollow {
				t.Fatalf("%+v", p.Links)
			}
		}},
		{"unclosed script", "<p>visible</p><script>var x = '<a href=/no>'", func(t *testing.T, p *Parsed) {
			if p.Text != "visible" || len(p.Links) != 0 {
				t.Fatalf("%q %+v", p.Text, p.Links)
			}
		}},
		{"binary junk", "\x00\x01\xff\xfe<\x00a href=\xff>\x80\x81</a>", func(t *testing.T, p *Parsed) {
			if !utf8.ValidString(p.Text) {
				t.Fatalf("invalid UTF-8 text %q", p.Text)
			}
		}},
		{"link cap", manyLinks.String(), func(t *testing.T, p *Parsed) {
			if len(p.Links) != MaxLinksPerPage {
				t.Fatalf("%d links", len(p.Links))
			}
		}},
		{"deep nesting", strings.Repeat("<div><span>", 20000) + "deep" + strings.Repeat("</span></div>", 20000), func(t *testing.T, p *Parsed) {
			if p.Text != "deep" {
				t.Fatalf("text %q", p.Text)
			}
		}},
		{"text cap", "<p>" + strings.Repeat("word ", 400000) + "</p>", func(t *testing.T, p *Parsed) {
			if len(p.Text) > maxTextBytes || len(p.Text) < maxTextBytes-10 {
				t.Fatalf("text %d bytes", len(p.Text))
			}
		}},
		{"huge title", "<title>" + strings.Repeat("t", 100000) + "</title>", func(t *testing.T, p *Parsed) {
			if len(p.Title) != maxTitleBytes {
				t.Fatalf("title %d bytes", len(p.Title))
			}
		}},
		{"bad hrefs", `<a href="http://[::1">a</a><a href="http://exa mple.com/">b</a><a href="   ">c</a><a href="">d</a>`, func(t *testing.T, p *Parsed) {
			for _, l := range p.Links {
				if l.URL != "http://example.com/" {
					t.Fatalf("unexpected link %+v", l)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseHTML([]byte(tc.doc), "text/html", nil, page)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p)
		})
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return string(b[n:])
}

func TestParseText(t *testing.T) {
	gbk := charsetSamples[0]
	body := encodeSample(t, gbk.enc, "\n\n  "+gbk.title+"  \n"+gbk.text+"\n")
	p, err := ParseText(body, "text/plain", mustURL(t, "http://example.com/a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != gbk.title || p.Text != gbk.title+" "+gbk.text || p.Lang != "zh" {
		t.Fatalf("%+v", p)
	}
	p, err = ParseText([]byte("Hello\r\n\r\nworld  again"), "text/plain; charset=utf-8", nil)
	if err != nil || p.Title != "Hello" || p.Text != "Hello world again" || p.Lang != "" {
		t.Fatalf("%v %+v", err, p)
	}
}

func TestRefreshTarget(t *testing.T) {
	tests := map[string]string{
		"5; url=http://a.com/": "http://a.com/",
		"0;URL='/next'":        "/next",
		`3 ; url = "x.html" `:  "x.html",
		"10":                   "",
		"0; /direct":           "/direct",
	}
	for in, want := range tests {
		if got := refreshTarget(in); got != want {
			t.Errorf("refreshTarget(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGuessLang(t *testing.T) {
	tests := map[string]string{
		"搜索引擎是一种工具":                                                         "zh",
		"検索エンジンはインターネット上の道具です":                                              "ja",
		"검색 엔진은 도구입니다":                                                      "ko",
		"plain english words here":                                          "",
		"mostly english with 一个 word here and there and more english words": "",
	}
	for in, want := range tests {
		if got := guessLang(in); got != want {
			t.Errorf("guessLang(%q) = %q, want %q", in, got, want)
		}
	}
	if !bytes.Equal(sanitizeUTF8([]byte("a\xffb")), []byte("a\uFFFDb")) {
		t.Error("sanitizeUTF8")
	}
}

func TestDeclaredUTF8WithStrayBytesStaysUTF8(t *testing.T) {
	text := strings.Repeat("搜索引擎 网络爬虫 ", 50)
	body := []byte("<html><head><meta charset=utf-8><title>标题</title></head><body><p>" + text + "\xba\x8a" + text + "</p></body></html>")
	u := mustURL(t, "http://zh.sim.test/")
	p, err := ParseHTML(body, "text/html", http.Header{"Content-Type": {"text/html; charset=utf-8"}}, u)
	if err != nil {
		t.Fatal(err)
	}
	if p.Charset != "utf-8" || p.Title != "标题" || !strings.Contains(p.Text, "搜索引擎") {
		t.Fatalf("charset %q title %q text %.40q", p.Charset, p.Title, p.Text)
	}
}

// TestRawTag checks the tag table: every distinguished name is found
// whatever its case, in start and end tags, and other names are not; the
// classes hold the elements the package documentation lists.
func TestRawTag(t *testing.T) {
	for id := tagHTML; id < numTags; id++ {
		name := tagNames[id]
		for _, raw := range []string{"<" + name + ">", "<" + strings.ToUpper(name) + " x=y>", "</" + name + " >", "<" + name + "/>", "<" + name} {
			if got := rawTag([]byte(raw)); got != id {
				t.Errorf("rawTag(%q) = %q, want %q", raw, tagNames[got], name)
			}
		}
	}
	for _, raw := range []string{"<>", "</>", "<p>", "<div class=a>", "<a\x00>", "<h7>", "<abbrx>", "<blockquote>", "<headers>", "<scripts>", "<é>", "<ab>"} {
		if got := rawTag([]byte(raw)); got != tagOther {
			t.Errorf("rawTag(%q) = %q, want another element", raw, tagNames[got])
		}
	}
	class := func(f func(tagID) bool) string {
		var names []string
		for id := tagOther; id < numTags; id++ {
			if f(id) {
				names = append(names, tagNames[id])
			}
		}
		return strings.Join(names, " ")
	}
	for _, tc := range []struct {
		class, got, want string
	}{
		{"skip", class(isSkipTag), "iframe script style noscript template textarea select svg math noembed noframes xmp object canvas audio video"},
		{"inline", class(isInline), "a abbr b bdi bdo cite code data dfn em font i kbd mark q rp rt ruby s samp small span strong sub sup time u var wbr del ins label nobr tt big strike blink"},
		{"head", class(isHeadContent), "html head title base meta link script style noscript template"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s elements: %s, want %s", tc.class, tc.got, tc.want)
		}
	}
}
