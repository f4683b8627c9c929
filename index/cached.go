package index

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"strings"
	"unicode/utf8"

	xhtml "golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/text/encoding/htmlindex"
)

// highlightColours are the backgrounds of the 1st, 2nd, ... query term in a
// cached page (Tianwang snapshot style: each term its own colour).
var highlightColours = [...]string{"#ffff66", "#a0ffff", "#99ff99", "#ff9999", "#ff66ff", "#ffcc66", "#b4b4ff", "#cccccc"}

// decodeToUTF8 converts raw bytes in the page's charset to UTF-8; unknown
// or failing charsets fall back to UTF-8 with invalid bytes replaced.
func decodeToUTF8(raw []byte, charset string) string {
	cs := strings.ToLower(strings.TrimSpace(charset))
	if cs != "" && cs != "utf-8" && cs != "utf8" {
		if enc, err := htmlindex.Get(cs); err == nil {
			if out, err := enc.NewDecoder().Bytes(raw); err == nil {
				return string(out)
			}
		}
	}
	return strings.ToValidUTF8(string(raw), "\uFFFD")
}

// CachedHTML renders a stored page with every query term highlighted, each
// term in its own colour, under a banner naming the URL and fetch time.
// Scripts, event handlers, javascript: links, frames and meta refreshes are
// removed; a <base> makes relative links point at the original site.
func CachedHTML(rec *PageRecord, terms []string) ([]byte, error) {
	if rec == nil {
		return nil, errors.New("index: cached page of nil record")
	}
	colour := map[string]string{}
	var uniq []string
	for _, t := range terms {
		if _, ok := colour[t]; t != "" && !ok {
			colour[t] = highlightColours[len(uniq)%len(highlightColours)]
			uniq = append(uniq, t)
		}
	}
	text := decodeToUTF8(rec.Raw, rec.Charset)
	isHTML := strings.Contains(strings.ToLower(rec.ContentType), "html") ||
		(rec.ContentType == "" && strings.Contains(strings.ToLower(text[:min(len(text), 1024)]), "<html"))
	if len(rec.Raw) == 0 {
		text, isHTML = rec.Title+"\n\n"+rec.Body, false
	}
	banner := bannerNode(rec, uniq, colour)
	// Text nodes are analyzed one by one: the page's script decides for
	// those that do not tell (a Taiwan page's 文件 is a mainland 文档).
	page := SharedAnalyzer().pageScript(rec.Title, rec.Body)
	if !isHTML {
		var b bytes.Buffer
		b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><title>`)
		b.WriteString(html.EscapeString(rec.Title))
		b.WriteString("</title></head><body>")
		if err := xhtml.Render(&b, banner); err != nil {
			return nil, fmt.Errorf("index: render banner: %w", err)
		}
		b.WriteString(`<pre style="white-space:pre-wrap">`)
		for _, n := range highlightText(text, colour, page) {
			if err := xhtml.Render(&b, n); err != nil {
				return nil, fmt.Errorf("index: render cached text: %w", err)
			}
		}
		b.WriteString("</pre></body></html>")
		return b.Bytes(), nil
	}
	doc, err := xhtml.Parse(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("index: parse cached page: %w", err)
	}
	var head, body *xhtml.Node
	var walk func(n *xhtml.Node)
	walk = func(n *xhtml.Node) {
		for c := n.FirstChild; c != nil; {
			next := c.NextSibling
			switch c.Type {
			case xhtml.ElementNode:
				switch c.DataAtom {
				case atom.Script, atom.Noscript, atom.Iframe, atom.Frame, atom.Frameset, atom.Object, atom.Embed, atom.Applet, atom.Base:
					n.RemoveChild(c)
					c = next
					continue
				case atom.Meta:
					if isRefreshOrCharset(c) {
						n.RemoveChild(c)
						c = next
						continue
					}
				case atom.Head:
					head = c
				case atom.Body:
					body = c
				}
				c.Attr = cleanAttrs(c.Attr)
				if c.DataAtom != atom.Style && c.DataAtom != atom.Title && c.DataAtom != atom.Textarea {
					walk(c)
				}
			case xhtml.TextNode:
				if len(colour) > 0 && strings.TrimSpace(c.Data) != "" {
					for _, h := range highlightText(c.Data, colour, page) {
						n.InsertBefore(h, c)
					}
					n.RemoveChild(c)
				}
			case xhtml.CommentNode:
				n.RemoveChild(c)
			default:
				walk(c)
			}
			c = next
		}
	}
	walk(doc)
	if head != nil {
		meta := &xhtml.Node{Type: xhtml.ElementNode, Data: "meta", DataAtom: atom.Meta, Attr: []xhtml.Attribute{{Key: "charset", Val: "utf-8"}}}
		base := &xhtml.Node{Type: xhtml.ElementNode, Data: "base", DataAtom: atom.Base, Attr: []xhtml.Attribute{{Key: "href", Val: rec.URL}}}
		head.InsertBefore(base, head.FirstChild)
		head.InsertBefore(meta, base)
	}
	if body != nil {
		body.InsertBefore(banner, body.FirstChild)
	}
	var b bytes.Buffer
	if err := xhtml.Render(&b, doc); err != nil {
		return nil, fmt.Errorf("index: render cached page: %w", err)
	}
	return b.Bytes(), nil
}

func isRefreshOrCharset(n *xhtml.Node) bool {
	for _, a := range n.Attr {
		k := strings.ToLower(a.Key)
		if k == "charset" {
			return true
		}
		if k == "http-equiv" {
			v := strings.ToLower(a.Val)
			if v == "refresh" || v == "content-type" {
				return true
			}
		}
	}
	return false
}

func cleanAttrs(attrs []xhtml.Attribute) []xhtml.Attribute {
	out := attrs[:0]
	for _, a := range attrs {
		k := strings.ToLower(a.Key)
		if strings.HasPrefix(k, "on") {
			continue
		}
		if k == "href" || k == "src" || k == "action" || k == "formaction" || k == "srcdoc" {
			v := strings.ToLower(strings.TrimSpace(a.Val))
			if k == "srcdoc" || strings.HasPrefix(v, "javascript:") || strings.HasPrefix(v, "vbscript:") || strings.HasPrefix(v, "data:text/html") {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// highlightText splits text into text nodes and <mark> elements around
// analyzer tokens that equal a query term; page is the script of the page
// (see Analyzer.pageScript).
func highlightText(text string, colour map[string]string, page script) []*xhtml.Node {
	var out []*xhtml.Node
	at := 0
	if len(colour) > 0 && utf8.ValidString(text) {
		end := -1
		for _, sp := range SharedAnalyzer().analyzeSpans(text, false, page) {
			c, ok := colour[sp.term]
			if !ok || sp.start < end || sp.start < at {
				continue
			}
			if sp.start > at {
				out = append(out, &xhtml.Node{Type: xhtml.TextNode, Data: text[at:sp.start]})
			}
			m := &xhtml.Node{Type: xhtml.ElementNode, Data: "mark", DataAtom: atom.Mark,
				Attr: []xhtml.Attribute{{Key: "style", Val: "background:" + c + ";color:black"}}}
			m.AppendChild(&xhtml.Node{Type: xhtml.TextNode, Data: text[sp.start:sp.end]})
			out = append(out, m)
			at, end = sp.end, sp.end
		}
	}
	if at < len(text) {
		out = append(out, &xhtml.Node{Type: xhtml.TextNode, Data: text[at:]})
	}
	return out
}

func bannerNode(rec *PageRecord, terms []string, colour map[string]string) *xhtml.Node {
	div := &xhtml.Node{Type: xhtml.ElementNode, Data: "div", DataAtom: atom.Div, Attr: []xhtml.Attribute{
		{Key: "id", Val: "sou-cache-banner"},
		{Key: "style", Val: "all:initial;display:block;font:14px sans-serif;background:#f4f4f4;color:#222;border-bottom:1px solid #999;padding:8px;margin:0 0 8px 0"},
	}}
	txt := func(s string) *xhtml.Node { return &xhtml.Node{Type: xhtml.TextNode, Data: s} }
	div.AppendChild(txt("This is sou's cached copy of "))
	a := &xhtml.Node{Type: xhtml.ElementNode, Data: "a", DataAtom: atom.A, Attr: []xhtml.Attribute{{Key: "href", Val: rec.URL}}}
	a.AppendChild(txt(rec.URL))
	div.AppendChild(a)
	when := "at an unknown time"
	if !rec.FetchedAt.IsZero() {
		when = rec.FetchedAt.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	div.AppendChild(txt(", as fetched " + when + ". The page may have changed since."))
	if len(terms) > 0 {
		div.AppendChild(txt(" Highlighted: "))
		for _, t := range terms {
			m := &xhtml.Node{Type: xhtml.ElementNode, Data: "mark", DataAtom: atom.Mark,
				Attr: []xhtml.Attribute{{Key: "style", Val: "background:" + colour[t] + ";color:black;margin-right:4px"}}}
			m.AppendChild(txt(t))
			div.AppendChild(m)
		}
	}
	return div
}
