package simweb

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"html"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
)

// charsets are the encodings synthetic pages are written in, by the name
// that pages declare.
var charsets = map[string]encoding.Encoding{
	"utf-8":      unicode.UTF8,
	"gbk":        simplifiedchinese.GBK,
	"gb18030":    simplifiedchinese.GB18030,
	"big5":       traditionalchinese.Big5,
	"shift_jis":  japanese.ShiftJIS,
	"iso-8859-1": charmap.ISO8859_1,
}

// encodeText converts UTF-8 text to the charset; characters the charset
// lacks become numeric character references, as legacy sites write them.
func encodeText(cs, s string) []byte {
	enc, ok := charsets[cs]
	if !ok || cs == "utf-8" {
		return []byte(s)
	}
	out, err := encoding.HTMLEscapeUnsupported(enc.NewEncoder()).String(s)
	if err != nil {
		return []byte(s)
	}
	return []byte(out)
}

func (w *Web) urlOf(s *site, pathQuery string) string {
	return "http://" + s.name + w.portSuffix + pathQuery
}

func (w *Web) textGen(s *site, contentKey string) *textGen {
	src := s.src()
	return &textGen{
		r:    rngFor(w.sy.seed, "text", src.name, contentKey),
		lang: s.lang,
		zh:   w.lex.chineseFor(s.charset),
		en:   w.lex.english,
		cs:   s.charset,
	}
}

// pageTitle is the decoded title of page k (what a crawler should extract).
func (w *Web) pageTitle(s *site, k int) string {
	if s.isPlain(k) {
		return ""
	}
	return w.textGen(s, s.pagePath(k)).title()
}

// hrefFor writes a link the way the model chose, relative to dir (the
// directory of the page or of its <base href>).
func (w *Web) hrefFor(l link, dir string) string {
	name := l.toName
	if l.to != nil {
		name = l.to.name
	}
	if l.upper {
		labels := strings.Split(name, ".")
		for i, lb := range labels {
			if i == 0 {
				labels[i] = strings.ToUpper(lb[:1]) + lb[1:]
			} else if lb == "sim" {
				labels[i] = "SIM"
			}
		}
		name = strings.Join(labels, ".")
	}
	port := w.portSuffix
	if port == "" && l.port80 {
		port = ":80"
	}
	pq := l.path
	if l.reorder {
		pq = reorderQuery(pq)
	}
	if l.sid {
		sep := "?"
		if strings.Contains(pq, "?") {
			sep = "&"
		}
		pq += sep + "sid=" + strconv.FormatUint(hash64("sid", name, l.path)%0xffffff, 16)
	}
	var h string
	switch l.form {
	case formAbs:
		h = "http://" + name + port + pq
	case formProtoRel:
		h = "//" + name + port + pq
	case formRoot:
		h = pq
	default:
		h = relativize(dir, pq)
	}
	if l.frag != "" {
		h += "#" + l.frag
	}
	return h
}

// relativize writes target (an absolute path with optional query) relative
// to the directory dir (which ends in "/").
func relativize(dir, target string) string {
	tp, tq, hasQ := strings.Cut(target, "?")
	ds := strings.Split(strings.Trim(dir, "/"), "/")
	if dir == "/" {
		ds = nil
	}
	ts := strings.Split(strings.TrimPrefix(tp, "/"), "/")
	tdir, last := ts[:len(ts)-1], ts[len(ts)-1]
	common := 0
	for common < len(ds) && common < len(tdir) && ds[common] == tdir[common] {
		common++
	}
	var b strings.Builder
	for i := common; i < len(ds); i++ {
		b.WriteString("../")
	}
	for _, seg := range tdir[common:] {
		b.WriteString(seg + "/")
	}
	b.WriteString(last)
	r := b.String()
	if r == "" {
		r = "./"
	}
	if hasQ {
		r += "?" + tq
	}
	return r
}

func dirOf(p string) string {
	p, _, _ = strings.Cut(p, "?")
	i := strings.LastIndexByte(p, '/')
	return p[:i+1]
}

// renderedPage is a page body in its final encoding with its headers.
type renderedPage struct {
	contentType string
	body        []byte
}

func contentType(base, decl string) string {
	if decl == "" {
		return base
	}
	return base + "; charset=" + decl
}

// renderPage produces page k of s. print selects the near-duplicate
// printer-friendly variant.
func (w *Web) renderPage(s *site, k int, print bool) renderedPage {
	path := s.pagePath(k)
	g := w.textGen(s, path)
	title := g.title()
	if s.isPlain(k) {
		var b strings.Builder
		for i := 0; i < 3+g.r.IntN(5); i++ {
			b.WriteString(g.paragraph())
			b.WriteString("\n\n")
		}
		return renderedPage{contentType("text/plain", s.declHdr), encodeText(s.charset, b.String())}
	}
	var links []link
	if print {
		links = []link{{to: s, path: path}}
	} else {
		links = w.sy.pageLinks(s, k)
	}
	dir := dirOf(path)
	if print {
		dir = "/print/"
	}
	var head strings.Builder
	if s.declMeta != "" {
		if k%2 == 0 {
			fmt.Fprintf(&head, "<meta charset=\"%s\">\n", s.declMeta)
		} else {
			fmt.Fprintf(&head, "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=%s\">\n", s.declMeta)
		}
	}
	fmt.Fprintf(&head, "<title>%s</title>\n", html.EscapeString(title))
	if pageHasBase(s, k) && !print {
		dir = basePath(k)
		fmt.Fprintf(&head, "<base href=\"%s\">\n", w.urlOf(s, dir))
	}
	if s.has(ClassCanonical) || print {
		fmt.Fprintf(&head, "<link rel=\"canonical\" href=\"%s\">\n", w.urlOf(s, path))
	}
	var metas []string
	if pageNoindex(s, k) && !print {
		metas = append(metas, "noindex")
	}
	if pageNofollow(s, k) && !print {
		metas = append(metas, "nofollow")
	}
	if len(metas) > 0 {
		fmt.Fprintf(&head, "<meta name=\"robots\" content=\"%s\">\n", strings.Join(metas, ", "))
	}
	malformed := s.has(ClassMalformedHTML)
	lang := map[string]string{"zh": "zh-CN", "en": "en", "mixed": "zh-CN"}[s.lang]
	if s.charset == "big5" {
		lang = "zh-TW"
	}
	if s.charset == "shift_jis" {
		lang = "ja"
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"" + lang + "\">\n<head>\n")
	b.WriteString(head.String())
	b.WriteString("</head>\n<body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(title))
	if print {
		b.WriteString("<p class=\"print-note\">Printer-friendly version 打印版本</p>\n")
	}
	paras := 3 + g.r.IntN(6)
	per := (len(links) + paras - 1) / max(1, paras)
	li := 0
	for p := 0; p < paras; p++ {
		if p == 1 && paras > 2 {
			fmt.Fprintf(&b, "<h2 id=\"sec-%d\">%s</h2>\n", p, html.EscapeString(g.phrase(2+g.r.IntN(3))))
		}
		if malformed && p%2 == 1 {
			b.WriteString("<div class=unclosed><P>")
		} else {
			b.WriteString("<p>")
		}
		b.WriteString(html.EscapeString(g.paragraph()))
		for j := 0; j < per && li < len(links); j++ {
			l := links[li]
			li++
			anchor := html.EscapeString(g.phrase(1 + g.r.IntN(3)))
			href := html.EscapeString(w.hrefFor(l, dir))
			rel := ""
			if l.nofollow {
				rel = []string{" rel=\"nofollow\"", " rel=\"ugc nofollow\"", " REL=NOFOLLOW"}[li%3]
			}
			switch {
			case malformed && li%3 == 0 && !strings.ContainsAny(href, " \"'=<>`&"):
				fmt.Fprintf(&b, " <A HREF=%s%s>%s</A>", href, rel, anchor)
			case malformed && li%3 == 1:
				fmt.Fprintf(&b, " <a class='x' href='%s'%s>%s", href, rel, anchor) // no </a>: closed by the next <a> or </p>
			default:
				fmt.Fprintf(&b, " <a href=\"%s\"%s>%s</a>", href, rel, anchor)
			}
		}
		if !malformed {
			b.WriteString("</p>")
		}
		b.WriteString("\n")
	}
	if malformed {
		// Links a parser must not follow: inside a comment and inside a script.
		fmt.Fprintf(&b, "<!-- old menu: <a href=\"/hidden/%d.html\">archive</a> -->\n", k)
		fmt.Fprintf(&b, "<script>if (1 < 2) document.write('<a href=\"/hidden/s%d.html\">x</a>');</script>\n", k)
		b.WriteString("<p>3 < 5 & 7 > 2 <b><i>bold italic</b></i>\n<table><tr><td>cell<td>cell\n")
	} else {
		b.WriteString("</body>\n</html>\n")
	}
	ct := contentType("text/html", s.declHdr)
	return renderedPage{ct, encodeText(s.charset, b.String())}
}

// renderDir renders directory page j of a portal.
func (w *Web) renderDir(s *site, j int) renderedPage {
	links := w.dirLinks(s, j)
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head><body>\n<h1>Directory %d</h1>\n<ul>\n", dirTitle(s, j), j)
	for _, l := range links {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(w.hrefFor(l, "/dir/")), html.EscapeString(l.nameOrTo()))
	}
	b.WriteString("</ul>\n</body></html>\n")
	return renderedPage{"text/html; charset=utf-8", []byte(b.String())}
}

func dirTitle(s *site, j int) string { return fmt.Sprintf("%s directory %d", s.name, j) }

func (l link) nameOrTo() string {
	if l.to != nil {
		return l.to.name
	}
	return l.toName
}

func (w *Web) dirLinks(s *site, j int) []link {
	out := []link{{to: s, path: "/", form: formRoot}}
	for i := 50 * j; i < len(s.listed) && i < 50*(j+1); i++ {
		out = append(out, link{to: s.listed[i], path: "/", form: formAbs})
	}
	return out
}

// renderCalendar is one month of the infinite calendar trap.
func (w *Web) renderCalendar(s *site, y, m int) renderedPage {
	py, pm := y, m-1
	if pm == 0 {
		py, pm = y-1, 12
	}
	ny, nm := y, m+1
	if nm == 13 {
		ny, nm = y+1, 1
	}
	body := fmt.Sprintf("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Events %d-%02d</title></head><body>"+
		"<h1>Events in %d-%02d</h1><p>No events.</p>"+
		"<a href=\"/calendar/%d/%02d/\">previous month</a> <a href=\"/calendar/%d/%02d/\">next month</a> "+
		"<a href=\"../../%d/%02d/?view=week\">week view</a></body></html>\n", y, m, y, m, py, pm, ny, nm, ny, nm)
	return renderedPage{"text/html; charset=utf-8", []byte(body)}
}

func renderPDF(k int) []byte {
	text := fmt.Sprintf("Report %d", k)
	stream := fmt.Sprintf("BT /F1 24 Tf 72 720 Td (%s) Tj ET", text)
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := []int{}
	obj := func(s string) {
		offs = append(offs, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offs), s)
	}
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	obj("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>")
	obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(offs)+1, xref)
	return b.Bytes()
}

func renderPNG(k int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 16; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 16), uint8(y * 16), uint8(k), 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img) // encoding an in-memory RGBA image cannot fail
	return b.Bytes()
}

// bombInflatedSize is roughly how far the gzip bomb inflates.
const bombInflatedSize = 110 << 20

// buildBomb builds a gzip stream that inflates past 100 MB without running
// the compressor over all of it: one megabyte of 'a' is compressed once,
// after a window already full of 'a', and that sync-flushed, byte-aligned
// segment is repeated (it only refers back to 'a's), then closed with an
// empty final block and the gzip trailer.
func buildBomb() []byte {
	prefix := []byte("<!DOCTYPE html><html><head><title>data</title></head><body><p>")
	prime := bytes.Repeat([]byte{'a'}, 64<<10)
	chunk := bytes.Repeat([]byte{'a'}, 1<<20)
	var def bytes.Buffer
	fw, _ := flate.NewWriter(&def, flate.BestCompression) // level is valid
	_, _ = fw.Write(prefix)
	_, _ = fw.Write(prime)
	_ = fw.Flush()
	head := append([]byte(nil), def.Bytes()...)
	_, _ = fw.Write(chunk)
	_ = fw.Flush()
	segment := append([]byte(nil), def.Bytes()[len(head):]...)

	var out bytes.Buffer
	out.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	out.Write(head)
	crc := crc32.Update(0, crc32.IEEETable, prefix)
	crc = crc32.Update(crc, crc32.IEEETable, prime)
	size := uint32(len(prefix) + len(prime))
	for i := 0; i < bombInflatedSize>>20; i++ {
		out.Write(segment)
		crc = crc32.Update(crc, crc32.IEEETable, chunk)
		size += uint32(len(chunk))
	}
	out.Write([]byte{0x03, 0x00}) // empty final block with fixed codes
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[:4], crc)
	binary.LittleEndian.PutUint32(trailer[4:], size)
	out.Write(trailer[:])
	return out.Bytes()
}

// hugeSize is the size of the oversize page.
const hugeSize = 11 << 20

// gzip compresses p. The writers are pooled: a gzip.Writer allocates
// about 1 MB of compressor state, and a fresh one per response was 59 % of
// all bytes allocated by an in-process crawl benchmark (simulated web and
// crawler share one heap there, so the web's garbage was the crawler's GC
// work).
func (w *Web) gzip(p []byte) []byte {
	var b bytes.Buffer
	zw, _ := w.gzipWriters.Get().(*gzip.Writer)
	if zw == nil {
		zw = gzip.NewWriter(&b)
	} else {
		zw.Reset(&b)
	}
	_, _ = zw.Write(p)
	_ = zw.Close()
	w.gzipWriters.Put(zw)
	return b.Bytes()
}

func sitemapXML(urls []string) []byte {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n")
	for _, u := range urls {
		fmt.Fprintf(&b, "  <url><loc>%s</loc></url>\n", html.EscapeString(u))
	}
	b.WriteString("</urlset>\n")
	return []byte(b.String())
}

func sitemapIndexXML(urls []string) []byte {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n")
	for _, u := range urls {
		fmt.Fprintf(&b, "  <sitemap><loc>%s</loc></sitemap>\n", html.EscapeString(u))
	}
	b.WriteString("</sitemapindex>\n")
	return []byte(b.String())
}
