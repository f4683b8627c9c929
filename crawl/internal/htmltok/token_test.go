package htmltok

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// tokens renders every token of a tokenizer as x/net/html and this package
// both see it: type, raw bytes (read before Text or TagAttr, which
// x/net/html's may rewrite in place), text, attributes and the final error.
type tokenizer interface {
	Raw() []byte
	Text() []byte
	TagAttr() ([]byte, []byte, bool)
	Err() error
}

func render(z tokenizer, next func() int) string {
	var b strings.Builder
	for n := 0; ; n++ {
		tt := next()
		fmt.Fprintf(&b, "%d %q", tt, z.Raw())
		switch tt {
		case int(ErrorToken):
			fmt.Fprintf(&b, " err=%v\n", z.Err())
			return b.String()
		case int(TextToken), int(CommentToken), int(DoctypeToken):
			fmt.Fprintf(&b, " text=%q", z.Text())
		case int(StartTagToken), int(SelfClosingTagToken):
			// Keys and values are kept until the tag's end, as crawl
			// keeps them, so a later attribute overwriting an earlier
			// one's bytes shows.
			var kept [][2][]byte
			for more := true; more; {
				var k, v []byte
				k, v, more = z.TagAttr()
				kept = append(kept, [2][]byte{k, v})
			}
			for _, a := range kept {
				fmt.Fprintf(&b, " %q=%q", a[0], a[1])
			}
		}
		b.WriteByte('\n')
	}
}

func renderOurs(doc []byte) string {
	z := New(doc)
	return render(z, func() int { return int(z.Next()) })
}

func renderTheirs(doc []byte) string {
	z := html.NewTokenizer(bytes.NewReader(doc))
	return render(z, func() int { return int(z.Next()) })
}

// matches fails t when the two tokenizers disagree on doc or this one
// writes to doc.
func matches(t *testing.T, name string, doc []byte) {
	t.Helper()
	before := bytes.Clone(doc)
	ours := renderOurs(doc)
	if !bytes.Equal(doc, before) {
		t.Fatalf("%s: the tokenizer wrote to its input", name)
	}
	if theirs := renderTheirs(doc); ours != theirs {
		ol, tl := strings.Split(ours, "\n"), strings.Split(theirs, "\n")
		for i := range min(len(ol), len(tl)) {
			if ol[i] != tl[i] {
				t.Fatalf("%s: token %d differs:\nours   %s\ntheirs %s", name, i, ol[i], tl[i])
			}
		}
		t.Fatalf("%s: %d tokens against %d", name, len(ol), len(tl))
	}
}

var tricky = []string{
	"",
	"plain",
	"a < b > c <3 </ x",
	"<p>a&amp;b &lt;c&gt; &nbsp;&#20013;&#x6587; &notit; &#0; &#x110000; &#128; &amp</p>",
	"<a href='x?a=1&amp;b=2&c=3&copy=4' TITLE=\"T&eacute;\" title=dup Title=dup2>x</a>",
	"<A HREF=\"/p\"\r\nonClick=\"go('/q')\">line\r\nbreak\rcr</A>",
	"<img src=x alt=/><p a=/><br/><br /><p a=\"/\"/>",
	"<div =x ==y a= b =c d></div>",
	"<title>a<b>c</b>&amp;d</title><textarea>x</textarea2></textarea >",
	"<script>var s = '</scr' + 'ipt>'; if (a<b) {}</script><p>after",
	"<script><!-- document.write('<script>x</script>'); --></script>tail",
	"<script><!--<script></script>--></script>t",
	"<SCRIPT>x</ScRiPt>",
	"<style>p { color: red } </style><style>unclosed",
	"<plaintext><p>all text</p>",
	"<xmp><b></xmp><iframe><a></iframe><noscript><i></noscript><noembed>x</noembed><noframes>y</noframes>",
	"<!-- c --><!----><!--><!---><!-- a -- b --!><!--x--!-y-->z<!-- unclosed -",
	"<!DOCTYPE html><!doctype  HTML PUBLIC \"x\"><!DOCTYPE><!DOC><!DOCTYPE",
	"<![CDATA[x]]><?xml version=\"1.0\"?></><//x></ x></1>",
	"<a\x00b c\x00d=\"e\x00f\">t\x00u</a\x00>",
	"<p x=\"unclosed>",
	"<p x='a\r\nb'  y", "<p", "<", "</", "</p", "<!", "<!-", "<!--", "<!D", "<!DOCTY",
	"<a href=\"1\" b=2 c='3' d e=\"\" f='' g=>",
	"<div a1 a2 a3 a4 a5 a6 a7 a8 a9 a10 a11 a12 a13 a14 a15 a16 a17 a18 A1 a19 A17 a20>",
	"<p>\r\n\r\r\n</p>&#13;&#x0d;",
	"<svg><![CDATA[<b>]]></svg>",
	"text &lt text &gt; &ampx; &AMP; &Amp; &xyz; &#; &#x; &#xZ;",
	"<a href=\"&lt\" b=\"&lt=\" c=\"&notit=\" d=\"&notit;\">",
	"<meta http-equiv=Content-Type content=\"text/html; charset=gbk\">中文<b>搜</b>索",
}

func TestMatchesXNetHTML(t *testing.T) {
	for i, s := range tricky {
		matches(t, fmt.Sprintf("case %d %q", i, s), []byte(s))
	}
	var long strings.Builder
	long.WriteString("<div")
	for i := range 3 * attrScanMax {
		fmt.Fprintf(&long, " k%d=%d K%d=x", i%(2*attrScanMax), i, i%attrScanMax)
	}
	long.WriteString(">")
	matches(t, "many attributes", []byte(long.String()))
}

// TestMatchesXNetHTMLOnCorpus compares the two on every 40th HTML file of
// the corpus of ../shared/corpus (every file with SOU_HTMLTOK_ALL=1),
// Chinese mirrors in GBK and Big5 included (as raw bytes); it skips when
// the corpus is not installed.
func TestMatchesXNetHTMLOnCorpus(t *testing.T) {
	f, err := os.Open("/var/lib/sou-corpus/sites.tsv")
	if err != nil {
		t.Skip("corpus not installed (../shared/corpus/install.sh)")
	}
	defer f.Close()
	if testing.Short() {
		t.Skip("short")
	}
	every := 40
	if os.Getenv("SOU_HTMLTOK_ALL") == "1" {
		every = 1
	}
	var seen, n int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 2 {
			continue
		}
		filepath.WalkDir(fields[1], func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if ext := strings.ToLower(filepath.Ext(path)); ext != ".html" && ext != ".htm" && ext != ".xhtml" {
				return nil
			}
			if seen++; (seen-1)%every != 0 {
				return nil
			}
			doc, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			matches(t, path, doc)
			n++
			return nil
		})
	}
	if n == 0 {
		t.Skip("no HTML files under the corpus's sites")
	}
	t.Logf("%d files tokenized alike", n)
}

func FuzzMatchesXNetHTML(f *testing.F) {
	for _, s := range tricky {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		matches(t, "fuzz input", doc)
	})
}
