package crawl

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"sou/crawl/internal/htmltok"
)

// HTML parsing is a single pass of a tokenizer (no tree), which is several
// times cheaper than html.Parse and tolerates any input: internal/htmltok,
// x/net/html's tokenizer reading the page's bytes in place (its package doc
// says why and what differs).
// Decisions:
//   - visible text skips script, style, noscript, template, iframe, textarea,
//     select, svg and math content and the <head> (the title is a field of
//     its own); every non-inline element boundary separates words, inline
//     ones (a, b, span, em, ...) do not, so 搜<b>索</b> stays one word;
//     whitespace runs (including &nbsp; and U+3000) collapse to one space;
//   - links: <a href>, <area href>, <frame src>, <iframe src>; anchor text is
//     the link's text plus the alt text of images inside it; links resolve
//     against the first <base href> wherever it appears (it applies to the
//     whole document), are normalised, de-duplicated (anchor texts merged,
//     NoFollow only when every occurrence is nofollow) and capped;
//   - script links (scriptlinks.go): string literals that look like links in
//     inline scripts of JavaScript or JSON type without src, in event
//     handler attributes (onclick, ...) and in javascript: hrefs, up to
//     maxScriptScanBytes of script a page. They resolve like the others but
//     come after every HTML link (the cap never drops an HTML link for
//     one), carry no anchor text, and are marked Link.Script unless an
//     HTML link names the same URL;
//   - external scripts: <script src> of a JavaScript type (not JSON or
//     templates, which browsers do not fetch) on the page's own host, up to
//     maxScriptsPerPage, become links with Link.Base set to the page's
//     base URL, after the HTML links and within the cap: the crawler
//     fetches them for the links in them only (ScriptLinks), which resolve
//     against that base as a browser resolves the links a script writes
//     into the document. Scripts on other hosts, subdomains included, are
//     not fetched;
//   - attributes: the first of a repeated attribute counts, as in browsers;
//   - robots: <meta name="robots"|"sou"> and X-Robots-Tag (plain, or
//     prefixed "sou:"; other agents' prefixed directives ignored): "noindex",
//     "nofollow", "none". Page-level nofollow marks every link NoFollow;
//   - rel="nofollow" on a link marks that link; rel="canonical" sets
//     Canonical; <meta http-equiv="refresh"> sets RefreshURL;
//   - Lang comes from <html lang>, then Content-Language, then a script
//     guess ("zh", "ja", "ko") when the text is mostly CJK.

// Caps on what one page can contribute.
const (
	MaxLinksPerPage = 5000
	maxTextBytes    = 1 << 20
	maxTitleBytes   = 1024
	maxHeadings     = 64
	maxHeadingBytes = 512
	maxAnchorBytes  = 512
	// maxScriptsPerPage caps the external scripts taken from one page.
	maxScriptsPerPage = 32
)

// Link is an outgoing link of a page.
type Link struct {
	URL      string // absolute, normalised
	Anchor   string
	NoFollow bool
	// Script: found only in a script (see scriptlinks.go), so less sure to
	// be a page than an HTML link; it has no anchor text.
	Script bool
	// Base is set on an external script the page includes (<script src>
	// on the page's host) and is the page's base URL: the script is
	// fetched for its links only (not a page), and they resolve against
	// Base.
	Base string
}

// Parsed is what the parser extracts from a page.
type Parsed struct {
	Title    string
	Headings []string
	Text     string
	Lang     string
	Charset  string // the charset decoded from ("utf-8", "gbk", "big5", ...)
	Links    []Link
	// Canonical is the normalised absolute canonical URL, "" if none.
	Canonical string
	NoIndex   bool
	NoFollow  bool
	// RefreshURL is the <meta http-equiv=refresh> target, normalised.
	RefreshURL string
}

// ParseHTML decodes body to UTF-8 and extracts title, headings, visible
// text, links and robots directives. It never panics; an error (wrapping
// ErrParse) means nothing could be extracted.
func ParseHTML(body []byte, contentType string, header http.Header, pageURL *url.URL) (p *Parsed, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("parse html: panic: %v: %w", r, ErrParse)
		}
	}()
	if header != nil && charsetParam(contentType) == "" {
		// Callers may pass FetchResponse.ContentType (the bare media
		// type); the charset parameter is then only in the header.
		if full := header.Get("Content-Type"); charsetParam(full) != "" {
			contentType = full
		}
	}
	decoded, cs := decodeCharset(body, contentType, true)
	hp := newHTMLParser(len(decoded))
	hp.run(decoded)
	out := &Parsed{
		Title:    hp.title,
		Headings: hp.headings,
		Text:     hp.text.String(),
		Lang:     hp.lang,
		Charset:  cs,
		NoIndex:  hp.noIndex,
		NoFollow: hp.noFollow,
	}
	if header != nil {
		for _, v := range header.Values("X-Robots-Tag") {
			ni, nf := parseRobotsDirectives(v, true)
			out.NoIndex = out.NoIndex || ni
			out.NoFollow = out.NoFollow || nf
		}
		if out.Lang == "" {
			out.Lang = firstLangTag(header.Get("Content-Language"))
		}
	}
	if out.Lang == "" {
		out.Lang = guessLang(out.Text)
	}
	base := pageURL
	if hp.baseHref != "" && pageURL != nil {
		if b, err := NormalizeURL(hp.baseHref, pageURL); err == nil {
			base = b
		}
	}
	if hp.canonical != "" {
		if u, err := NormalizeURL(hp.canonical, base); err == nil {
			out.Canonical = u.String()
		}
	}
	if hp.refresh != "" {
		if u, err := NormalizeURL(hp.refresh, base); err == nil {
			out.RefreshURL = u.String()
		}
	}
	if pageURL != nil {
		out.Links = resolveLinks(hp.links, hp.scriptSrcs, hp.scriptLinks, base, HostKey(pageURL), out.NoFollow)
	}
	return out, nil
}

// ParseText handles text/plain: charset detection too; the title is the
// first non-empty line (capped), the text is whitespace-collapsed.
func ParseText(body []byte, contentType string, pageURL *url.URL) (p *Parsed, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("parse text: panic: %v: %w", r, ErrParse)
		}
	}()
	decoded, cs := decodeCharset(body, contentType, false)
	if len(decoded) > maxTextBytes {
		decoded = decoded[:maxTextBytes]
	}
	decoded = sanitizeUTF8(decoded)
	out := &Parsed{Charset: cs}
	for rest := decoded; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if t := collapseSpace(line, maxTitleBytes); t != "" {
			out.Title = t
			break
		}
	}
	var sb strings.Builder
	sb.Grow(len(decoded))
	appendCollapsed(&sb, decoded, new(bool), maxTextBytes)
	out.Text = sb.String()
	out.Lang = guessLang(out.Text)
	return out, nil
}

type rawLink struct {
	href     string
	anchor   string
	noFollow bool
}

type htmlParser struct {
	text         strings.Builder
	pendingSpace bool

	title      string
	titleDone  bool
	headings   []string
	headingLvl int
	headingBuf []byte
	headingSp  bool

	links       []rawLink
	scriptLinks []string
	scriptSrcs  []string // <script src> values of scripts a browser fetches
	scriptBytes int      // script text scanned so far
	inScript    bool     // the next text token is a script to scan
	attrs       []tagAttr
	anchorIdx   int // index in links of the open <a>
	inAnchor    bool
	anchorBuf   []byte
	anchorSp    bool

	skipDepth int // inside elements whose text is not visible
	inHead    bool
	sawBody   bool

	baseHref, canonical, refresh, lang string
	noIndex, noFollow                  bool
}

// tagAttr is an attribute of the current tag; the slices point into the
// tokenizer's buffer and are valid until the next token.
type tagAttr struct{ key, val []byte }

func newHTMLParser(n int) *htmlParser {
	hp := &htmlParser{}
	hp.text.Grow(min(n*3/4+64, maxTextBytes))
	return hp
}

// tagID names an element the parser distinguishes; tagOther is any other
// element (a block element: its boundaries separate words). The classes
// (isSkipTag, isInline, isHeadContent) are ranges of this order.
type tagID uint8

const (
	tagOther tagID = iota
	tagHTML
	tagHead
	tagBody
	tagTitle
	tagBase
	tagMeta
	tagLink
	tagA
	tagArea
	tagFrame
	tagIframe
	tagImg
	tagH1
	tagH2
	tagH3
	tagH4
	tagH5
	tagH6
	tagBr
	tagHr
	tagScript
	tagStyle
	tagNoscript
	tagTemplate
	// Further elements whose content is not visible text.
	tagTextarea
	tagSelect
	tagSvg
	tagMath
	tagNoembed
	tagNoframes
	tagXmp
	tagObject
	tagCanvas
	tagAudio
	tagVideo
	// Inline elements besides a (see isInline).
	tagAbbr
	tagB
	tagBdi
	tagBdo
	tagCite
	tagCode
	tagData
	tagDfn
	tagEm
	tagFont
	tagI
	tagKbd
	tagMark
	tagQ
	tagRp
	tagRt
	tagRuby
	tagS
	tagSamp
	tagSmall
	tagSpan
	tagStrong
	tagSub
	tagSup
	tagTime
	tagU
	tagVar
	tagWbr
	tagDel
	tagIns
	tagLabel
	tagNobr
	tagTt
	tagBig
	tagStrike
	tagBlink
	numTags
)

var tagNames = [numTags]string{
	tagHTML: "html", tagHead: "head", tagBody: "body", tagTitle: "title", tagBase: "base", tagMeta: "meta",
	tagLink: "link", tagA: "a", tagArea: "area", tagFrame: "frame", tagIframe: "iframe", tagImg: "img",
	tagH1: "h1", tagH2: "h2", tagH3: "h3", tagH4: "h4", tagH5: "h5", tagH6: "h6", tagBr: "br", tagHr: "hr",
	tagScript: "script", tagStyle: "style", tagNoscript: "noscript", tagTemplate: "template",
	tagTextarea: "textarea", tagSelect: "select", tagSvg: "svg", tagMath: "math", tagNoembed: "noembed",
	tagNoframes: "noframes", tagXmp: "xmp", tagObject: "object", tagCanvas: "canvas", tagAudio: "audio",
	tagVideo: "video", tagAbbr: "abbr", tagB: "b", tagBdi: "bdi", tagBdo: "bdo", tagCite: "cite",
	tagCode: "code", tagData: "data", tagDfn: "dfn", tagEm: "em", tagFont: "font", tagI: "i", tagKbd: "kbd",
	tagMark: "mark", tagQ: "q", tagRp: "rp", tagRt: "rt", tagRuby: "ruby", tagS: "s", tagSamp: "samp",
	tagSmall: "small", tagSpan: "span", tagStrong: "strong", tagSub: "sub", tagSup: "sup", tagTime: "time",
	tagU: "u", tagVar: "var", tagWbr: "wbr", tagDel: "del", tagIns: "ins", tagLabel: "label",
	tagNobr: "nobr", tagTt: "tt", tagBig: "big", tagStrike: "strike", tagBlink: "blink",
}

// isSkipTag reports elements whose content is not visible text.
func isSkipTag(t tagID) bool {
	return t == tagScript || t == tagStyle || t == tagNoscript || t == tagTemplate || t == tagIframe ||
		(t >= tagTextarea && t <= tagVideo)
}

// isInline reports elements whose boundaries do not separate words.
func isInline(t tagID) bool {
	return t == tagA || t >= tagAbbr
}

// isHeadContent reports elements that can live in <head>.
func isHeadContent(t tagID) bool {
	return t == tagHTML || t == tagHead || t >= tagTitle && t <= tagLink || t >= tagScript && t <= tagTemplate
}

// A tag name is looked up packed into a uint64 (the names distinguished
// are at most 8 bytes long), in an open-addressing table: cheaper than a
// map keyed by string for the one lookup every tag costs.
const tagTableBits = 8

type tagTableEntry struct {
	name uint64
	id   tagID
}

var tagTable = func() (table [1 << tagTableBits]tagTableEntry) {
	for id := tagHTML; id < numTags; id++ {
		var name uint64
		for i := len(tagNames[id]) - 1; i >= 0; i-- {
			name = name<<8 | uint64(tagNames[id][i])
		}
		for h := tagSlot(name); ; h = (h + 1) % len(table) {
			if table[h].name == 0 {
				table[h] = tagTableEntry{name, id}
				break
			}
		}
	}
	return table
}()

func tagSlot(name uint64) int {
	return int((name * 0x9E3779B97F4A7C15) >> (64 - tagTableBits))
}

// rawTag identifies the element of a tag from its raw bytes ("<A href=..>",
// "</p >"): the name is what the tokenizer takes for it, lowercased.
func rawTag(raw []byte) tagID {
	i := 1
	if i < len(raw) && raw[i] == '/' {
		i++
	}
	var name uint64
	for n := 0; i < len(raw); i, n = i+1, n+1 {
		c := raw[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '/' || c == '>' {
			break
		}
		// A NUL would pack like the end of a shorter name; no
		// distinguished name holds one.
		if n == 8 || c == 0 {
			return tagOther
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		name |= uint64(c) << (8 * n)
	}
	if name == 0 {
		return tagOther
	}
	for h := tagSlot(name); ; h = (h + 1) % len(tagTable) {
		switch tagTable[h].name {
		case name:
			return tagTable[h].id
		case 0:
			return tagOther
		}
	}
}

func (hp *htmlParser) run(doc []byte) {
	z := htmltok.New(doc)
	inTitle := false
	var titleBuf []byte
	for {
		tt := z.Next()
		switch tt {
		case htmltok.ErrorToken:
			if inTitle && !hp.titleDone {
				hp.setTitle(titleBuf)
			}
			hp.closeAnchor()
			return
		case htmltok.TextToken:
			// Text is unescaped only when it is used.
			if hp.inScript {
				hp.inScript = false
				hp.scanScript(z.Text())
				continue
			}
			if inTitle {
				if len(titleBuf) < maxTitleBytes*2 {
					titleBuf = append(titleBuf, z.Text()...)
				}
				continue
			}
			if hp.skipDepth > 0 || hp.inHead {
				continue
			}
			hp.addText(z.Text())
		case htmltok.StartTagToken, htmltok.SelfClosingTagToken:
			raw := z.Raw()
			tag := rawTag(raw)
			selfClosing := tt == htmltok.SelfClosingTagToken
			if needsAttrs(tag, hp.inAnchor) || hasEventAttr(raw) {
				hp.readAttrs(z)
			} else {
				hp.attrs = hp.attrs[:0]
			}
			if hp.inHead && !isHeadContent(tag) {
				// An element that cannot live in <head> implies <body>, as
				// the HTML parsing algorithm does for a missing </head>.
				hp.inHead = false
			}
			switch tag {
			case tagHTML:
				if hp.lang == "" {
					hp.lang = firstLangTag(hp.attr("lang"))
				}
				continue
			case tagHead:
				hp.inHead = !hp.sawBody
				continue
			case tagBody:
				hp.inHead = false
				hp.sawBody = true
				continue
			case tagTitle:
				if !hp.titleDone && hp.skipDepth == 0 && !selfClosing {
					inTitle = true
					titleBuf = titleBuf[:0]
				}
				continue
			case tagBase:
				if hp.baseHref == "" {
					hp.baseHref = hp.attr("href")
				}
				continue
			case tagMeta:
				hp.meta()
				continue
			case tagLink:
				hp.linkTag()
				continue
			case tagA, tagArea:
				hp.closeAnchor()
				hp.anchorTag(tag == tagA && !selfClosing)
				continue
			case tagFrame, tagIframe:
				if len(hp.links) < MaxLinksPerPage*2 {
					if src := hp.attr("src"); src != "" {
						hp.links = append(hp.links, rawLink{href: src})
					}
				}
			case tagImg:
				if hp.inAnchor {
					if alt := hp.attr("alt"); alt != "" {
						hp.addAnchor([]byte(alt))
						hp.anchorSp = true
					}
				}
				continue
			case tagScript:
				src, typ := hp.attr("src"), hp.attr("type")
				hp.inScript = !selfClosing && src == "" && isScannedScriptType(typ)
				if src != "" && isFetchedScriptType(typ) && len(hp.scriptSrcs) < maxScriptsPerPage {
					hp.scriptSrcs = append(hp.scriptSrcs, src)
				}
			case tagH1, tagH2, tagH3, tagH4, tagH5, tagH6:
				if !selfClosing {
					if hp.headingLvl == 0 {
						hp.headingBuf = hp.headingBuf[:0]
						hp.headingSp = false
					}
					hp.headingLvl++
				}
			case tagBr, tagHr:
				hp.pendingSpace = true
				hp.anchorSp = true
				continue
			}
			if isSkipTag(tag) {
				if !selfClosing {
					hp.skipDepth++
				}
				continue
			}
			if !isInline(tag) {
				hp.pendingSpace = true
				hp.anchorSp = true
				hp.headingSp = true
			}
		case htmltok.EndTagToken:
			hp.inScript = false
			tag := rawTag(z.Raw())
			switch tag {
			case tagTitle:
				if inTitle {
					inTitle = false
					hp.setTitle(titleBuf)
				}
				continue
			case tagHead:
				hp.inHead = false
				continue
			case tagA:
				hp.closeAnchor()
				continue
			case tagH1, tagH2, tagH3, tagH4, tagH5, tagH6:
				if hp.headingLvl > 0 {
					hp.headingLvl--
					if hp.headingLvl == 0 {
						hp.emitHeading()
					}
				}
			}
			if isSkipTag(tag) {
				if hp.skipDepth > 0 {
					hp.skipDepth--
				}
				continue
			}
			if !isInline(tag) {
				hp.pendingSpace = true
				hp.anchorSp = true
				hp.headingSp = true
			}
		}
	}
}

func (hp *htmlParser) setTitle(b []byte) {
	hp.titleDone = true
	hp.title = collapseSpace(b, maxTitleBytes)
}

func (hp *htmlParser) addText(t []byte) {
	if hp.text.Len() < maxTextBytes {
		appendCollapsed(&hp.text, t, &hp.pendingSpace, maxTextBytes)
	}
	if hp.inAnchor {
		hp.addAnchor(t)
	}
	if hp.headingLvl > 0 && len(hp.headingBuf) < maxHeadingBytes {
		hp.headingBuf = appendCollapsedBytes(hp.headingBuf, t, &hp.headingSp, maxHeadingBytes)
	}
}

func (hp *htmlParser) addAnchor(t []byte) {
	if len(hp.anchorBuf) < maxAnchorBytes {
		hp.anchorBuf = appendCollapsedBytes(hp.anchorBuf, t, &hp.anchorSp, maxAnchorBytes)
	}
}

func (hp *htmlParser) emitHeading() {
	if len(hp.headings) < maxHeadings && len(hp.headingBuf) > 0 {
		hp.headings = append(hp.headings, string(hp.headingBuf))
	}
	hp.headingBuf = hp.headingBuf[:0]
}

func (hp *htmlParser) closeAnchor() {
	if !hp.inAnchor {
		return
	}
	hp.inAnchor = false
	if hp.anchorIdx < len(hp.links) && len(hp.anchorBuf) > 0 {
		hp.links[hp.anchorIdx].anchor = string(hp.anchorBuf)
	}
	hp.anchorBuf = hp.anchorBuf[:0]
}

func (hp *htmlParser) anchorTag(opens bool) {
	href := hp.attr("href")
	if js, ok := javascriptURL(href); ok {
		hp.scanScript([]byte(js))
		return
	}
	if href == "" || len(hp.links) >= MaxLinksPerPage*2 {
		return
	}
	hp.links = append(hp.links, rawLink{href: href, noFollow: hasToken(hp.attr("rel"), "nofollow")})
	if opens {
		hp.anchorIdx = len(hp.links) - 1
		hp.inAnchor = true
		hp.anchorBuf = hp.anchorBuf[:0]
		hp.anchorSp = false
	} else if alt := hp.attr("alt"); alt != "" {
		hp.links[len(hp.links)-1].anchor = collapseSpace([]byte(alt), maxAnchorBytes)
	}
}

func (hp *htmlParser) linkTag() {
	if href := hp.attr("href"); href != "" && hp.canonical == "" && hasToken(hp.attr("rel"), "canonical") {
		hp.canonical = href
	}
}

func (hp *htmlParser) meta() {
	name := strings.ToLower(hp.attr("name"))
	httpEquiv := strings.ToLower(hp.attr("http-equiv"))
	switch {
	case name == "robots" || name == "sou":
		ni, nf := parseRobotsDirectives(hp.attr("content"), false)
		hp.noIndex = hp.noIndex || ni
		hp.noFollow = hp.noFollow || nf
	case httpEquiv == "refresh":
		if hp.refresh == "" {
			hp.refresh = refreshTarget(hp.attr("content"))
		}
	case httpEquiv == "content-language" && hp.lang == "":
		hp.lang = firstLangTag(hp.attr("content"))
	}
}

// needsAttrs reports the elements whose attributes the parser reads (an
// image's only for its alt text inside a link).
func needsAttrs(tag tagID, inAnchor bool) bool {
	switch tag {
	case tagHTML, tagBase, tagMeta, tagLink, tagA, tagArea, tagFrame, tagIframe, tagScript:
		return true
	case tagImg:
		return inAnchor
	}
	return false
}

// hasEventAttr reports whether a tag's raw bytes may hold an event handler
// attribute: "on" after a separator. Values can match too; then the
// attributes are read for nothing.
func hasEventAttr(raw []byte) bool {
	for i := 1; i+2 < len(raw); i++ {
		if raw[i]|0x20 == 'o' && raw[i+1]|0x20 == 'n' {
			switch raw[i-1] {
			case ' ', '\t', '\n', '\r', '\f', '/', '"', '\'':
				return true
			}
		}
	}
	return false
}

// readAttrs reads the current tag's attributes into hp.attrs and scans its
// event handlers for links.
func (hp *htmlParser) readAttrs(z *htmltok.Tokenizer) {
	hp.attrs = hp.attrs[:0]
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		hp.attrs = append(hp.attrs, tagAttr{k, v})
		if len(k) > 2 && k[0] == 'o' && k[1] == 'n' {
			hp.scanScript(v)
		}
	}
}

// attr returns the value of the current tag's first attribute named key,
// trimmed, or "".
func (hp *htmlParser) attr(key string) string {
	for _, a := range hp.attrs {
		if string(a.key) == key {
			return strings.TrimSpace(string(a.val))
		}
	}
	return ""
}

// scanScript collects the links in script text, within the page's budget.
func (hp *htmlParser) scanScript(src []byte) {
	if hp.scriptBytes >= maxScriptScanBytes || len(hp.scriptLinks) >= MaxLinksPerPage {
		return
	}
	src = src[:min(len(src), maxScriptScanBytes-hp.scriptBytes)]
	hp.scriptBytes += len(src)
	scanScript(src, func(link string) bool {
		hp.scriptLinks = append(hp.scriptLinks, link)
		return len(hp.scriptLinks) < MaxLinksPerPage
	})
}

// isScannedScriptType reports whether a <script type> holds JavaScript or
// JSON (whose string literals are JavaScript's); templates and data in
// other formats are not scanned.
func isScannedScriptType(t string) bool {
	t = strings.ToLower(strings.TrimSpace(t))
	if i := strings.IndexByte(t, ';'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	switch t {
	case "", "module", "importmap", "speculationrules":
		return true
	}
	return strings.Contains(t, "javascript") || strings.Contains(t, "ecmascript") || strings.HasSuffix(t, "json")
}

// isFetchedScriptType reports whether a <script type> with src is one a
// browser fetches and runs: a classic script (no type, or a JavaScript MIME
// type) or a module.
func isFetchedScriptType(t string) bool {
	t = strings.ToLower(strings.TrimSpace(t))
	if i := strings.IndexByte(t, ';'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	return t == "" || t == "module" || strings.Contains(t, "javascript") || strings.Contains(t, "ecmascript")
}

// javascriptURL returns the script of a javascript: URL, percent-decoded
// as browsers run it.
func javascriptURL(href string) (string, bool) {
	const scheme = "javascript:"
	if !hasPrefixFold(href, scheme) {
		return "", false
	}
	js := href[len(scheme):]
	if strings.IndexByte(js, '%') < 0 {
		return js, true
	}
	if d, err := url.PathUnescape(js); err == nil {
		return d, true
	}
	return js, true
}

// hasToken reports whether the space-separated list contains tok
// (case-insensitive).
func hasToken(list, tok string) bool {
	for _, f := range strings.Fields(list) {
		if strings.EqualFold(f, tok) {
			return true
		}
	}
	return false
}

// parseRobotsDirectives reads "noindex, nofollow" style directives. In the
// X-Robots-Tag header a directive list may be prefixed by a user agent
// ("sou: noindex"); prefixes naming other agents are ignored.
func parseRobotsDirectives(v string, header bool) (noIndex, noFollow bool) {
	v = strings.ToLower(v)
	if header {
		if i := strings.IndexByte(v, ':'); i > 0 {
			agent := strings.TrimSpace(v[:i])
			if !strings.ContainsAny(agent, ", ") && !isRobotsDirectiveWithValue(agent) {
				if agent != "sou" && agent != "*" {
					return false, false
				}
				v = v[i+1:]
			}
		}
	}
	for _, d := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == ';' }) {
		switch d {
		case "noindex":
			noIndex = true
		case "nofollow":
			noFollow = true
		case "none":
			noIndex, noFollow = true, true
		}
	}
	return noIndex, noFollow
}

func isRobotsDirectiveWithValue(s string) bool {
	switch s {
	case "unavailable_after", "max-snippet", "max-image-preview", "max-video-preview":
		return true
	}
	return false
}

// refreshTarget extracts the URL of a meta refresh content such as
// "5; url='/next'".
func refreshTarget(content string) string {
	i := strings.IndexAny(content, ";,")
	if i < 0 {
		return ""
	}
	rest := strings.TrimSpace(content[i+1:])
	if len(rest) >= 3 && strings.EqualFold(rest[:3], "url") {
		r := strings.TrimSpace(rest[3:])
		if strings.HasPrefix(r, "=") {
			rest = strings.TrimSpace(r[1:])
		}
	}
	if len(rest) > 0 && (rest[0] == '\'' || rest[0] == '"') {
		q := rest[0]
		rest = rest[1:]
		if j := strings.IndexByte(rest, q); j >= 0 {
			rest = rest[:j]
		}
	}
	return strings.TrimSpace(rest)
}

func firstLangTag(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, ", ;"); i >= 0 {
		v = v[:i]
	}
	if len(v) > 35 {
		return ""
	}
	return strings.ToLower(v)
}

// guessLang names the script-implied language of mostly-CJK text; "" else.
func guessLang(text string) string {
	var han, kana, hangul, letters int
	for i, r := range text {
		if i > 4096 {
			break
		}
		switch {
		case r < 0x2E80:
			if r < utf8.RuneSelf {
				if r|0x20 >= 'a' && r|0x20 <= 'z' {
					letters++
				}
			} else if unicode.IsLetter(r) {
				letters++
			}
		case unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r):
			kana++
		case unicode.Is(unicode.Hangul, r):
			hangul++
		case unicode.Is(unicode.Han, r):
			han++
		}
	}
	cjk := han + kana + hangul
	// CJK characters carry about as much as a word of 4-5 Latin letters.
	if cjk == 0 || cjk*4 < letters {
		return ""
	}
	switch {
	case kana*10 > cjk:
		return "ja"
	case hangul > han:
		return "ko"
	}
	return "zh"
}

// resolveLinks normalises, de-duplicates and caps the raw links, then
// adds the external scripts on host (the page's) as links whose Base is
// the page's base (a script an HTML link names too becomes a script: it is
// one), then the script links that no HTML link names, within the same
// cap.
func resolveLinks(raw []rawLink, srcs, script []string, base *url.URL, host string, pageNoFollow bool) []Link {
	if len(raw)+len(srcs)+len(script) == 0 || base == nil {
		return nil
	}
	n := min(len(raw)+len(srcs)+len(script), MaxLinksPerPage)
	out := make([]Link, 0, n)
	index := make(map[string]int, n)
	lr := newLinkResolver(base)
	for _, r := range raw {
		s, ok := lr.resolve(r.href)
		if !ok {
			continue
		}
		if i, dup := index[s]; dup {
			l := &out[i]
			l.NoFollow = l.NoFollow && (r.noFollow || pageNoFollow)
			if r.anchor != "" && !strings.Contains(l.Anchor, r.anchor) && len(l.Anchor)+len(r.anchor) < maxAnchorBytes {
				if l.Anchor == "" {
					l.Anchor = r.anchor
				} else {
					l.Anchor += " " + r.anchor
				}
			}
			continue
		}
		if len(out) >= MaxLinksPerPage {
			continue
		}
		index[s] = len(out)
		out = append(out, Link{URL: s, Anchor: r.anchor, NoFollow: r.noFollow || pageNoFollow})
	}
	baseURL := lr.base.String()
	for _, src := range srcs {
		s, ok := lr.resolve(src)
		if !ok {
			continue
		}
		if u, err := url.Parse(s); err != nil || HostKey(u) != host {
			continue
		}
		if i, dup := index[s]; dup {
			out[i].Base = baseURL
			continue
		}
		if len(out) >= MaxLinksPerPage {
			break
		}
		index[s] = len(out)
		out = append(out, Link{URL: s, NoFollow: pageNoFollow, Base: baseURL})
	}
	for _, href := range script {
		if len(out) >= MaxLinksPerPage {
			break
		}
		s, ok := lr.resolve(href)
		if !ok {
			continue
		}
		if _, dup := index[s]; dup {
			continue
		}
		index[s] = len(out)
		out = append(out, Link{URL: s, NoFollow: pageNoFollow, Script: true})
	}
	return out
}

// collapseSpace returns b with whitespace runs collapsed, trimmed, capped at
// max bytes (on a rune boundary).
func collapseSpace(b []byte, max int) string {
	var sb strings.Builder
	sb.Grow(min(len(b), max))
	appendCollapsed(&sb, b, new(bool), max)
	return sb.String()
}

// isCollapsibleSpace covers ASCII whitespace, NBSP, ideographic space and
// zero-width characters that pages use as spacing.
func isCollapsibleSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\f', '\v', 0xa0, 0x3000, 0x200b, 0xfeff, 0x2028, 0x2029:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// runByte reports whether b can be copied as part of a run without a
// closer look: printable ASCII, UTF-8 continuation bytes, and lead bytes
// that cannot begin a collapsible space (see isCollapsibleSpace) — which
// covers all of Han (U+4000..U+9FFF) and Hangul. The text is valid UTF-8
// (decodeCharset guarantees it), so runs always end on rune boundaries.
func runByte(b byte) bool {
	if b < utf8.RuneSelf {
		return b > ' ' && b != 0x7f
	}
	return b != 0xC2 && b != 0xE2 && b != 0xE3 && b != 0xEF
}

// runBytes is runByte as a table, for the inner loops.
var runBytes = func() (t [256]bool) {
	for b := range t {
		t[b] = runByte(byte(b))
	}
	return t
}()

// runEnd returns the end of the runBytes that start at t[i].
func runEnd(t []byte, i int) int {
	for i < len(t) && runBytes[t[i]] {
		i++
	}
	return i
}

// extendRun extends the run t[i:j] over what would be copied unchanged
// after it anyway, a single ASCII space before more run bytes or a rune
// that is not a space, followed by more run bytes, while the run stays
// within room bytes: so ordinary text is copied in one piece, not word by
// word.
func extendRun(t []byte, i, j, room int) int {
	for j < len(t) {
		k := j
		switch c := t[k]; {
		case c == ' ':
			k++
			if k == len(t) || !runBytes[t[k]] {
				return j
			}
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(t[k:])
			if r == utf8.RuneError && size == 1 || isCollapsibleSpace(r) {
				return j
			}
			k += size
		default:
			return j
		}
		k = runEnd(t, k)
		if k-i > room {
			return j
		}
		j = k
	}
	return j
}

// cutAtRune returns end moved back to a rune boundary, not before start.
func cutAtRune(t []byte, start, end int) int {
	for end > start && end < len(t) && !utf8.RuneStart(t[end]) {
		end--
	}
	return end
}

// appendCollapsed writes t to sb collapsing whitespace; *pending carries a
// separator owed from earlier text or element boundaries. Leading space is
// never written. Invalid UTF-8 becomes U+FFFD. Writing stops at max bytes.
func appendCollapsed(sb *strings.Builder, t []byte, pending *bool, max int) {
	for i := 0; i < len(t); {
		c := t[i]
		if runBytes[c] {
			// Copy a run of bytes that cannot start whitespace at once.
			j := runEnd(t, i+1)
			if *pending && sb.Len() > 0 {
				if sb.Len()+1 > max {
					return
				}
				sb.WriteByte(' ')
			}
			*pending = false
			if room := max - sb.Len(); j-i <= room {
				j = extendRun(t, i, j, room)
			} else {
				j = cutAtRune(t, i, i+max-sb.Len())
				if j <= i {
					return
				}
			}
			sb.Write(t[i:j])
			i = j
			continue
		}
		if c < utf8.RuneSelf {
			i++
			if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v' {
				*pending = true
				continue
			}
			if c < 0x20 || c == 0x7f {
				continue
			}
			if *pending && sb.Len() > 0 {
				if sb.Len()+2 > max {
					return
				}
				sb.WriteByte(' ')
			}
			*pending = false
			if sb.Len()+1 > max {
				return
			}
			sb.WriteByte(c)
			continue
		}
		r, size := utf8.DecodeRune(t[i:])
		i += size
		if isCollapsibleSpace(r) {
			*pending = true
			continue
		}
		if *pending && sb.Len() > 0 {
			if sb.Len()+1 > max {
				return
			}
			sb.WriteByte(' ')
		}
		*pending = false
		invalid := r == utf8.RuneError && size == 1
		need := size
		if invalid {
			need = 3
		}
		if sb.Len()+need > max {
			return
		}
		if invalid {
			sb.WriteString("\uFFFD")
			continue
		}
		sb.Write(t[i-size : i])
	}
}

// appendCollapsedBytes is appendCollapsed into a byte slice.
func appendCollapsedBytes(dst []byte, t []byte, pending *bool, max int) []byte {
	for i := 0; i < len(t); {
		if runBytes[t[i]] {
			j := runEnd(t, i+1)
			if *pending && len(dst) > 0 {
				if len(dst)+1 > max {
					return dst
				}
				dst = append(dst, ' ')
			}
			*pending = false
			if room := max - len(dst); j-i <= room {
				j = extendRun(t, i, j, room)
			} else {
				j = cutAtRune(t, i, i+max-len(dst))
				if j <= i {
					return dst
				}
			}
			dst = append(dst, t[i:j]...)
			i = j
			continue
		}
		r, size := rune(t[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(t[i:])
		}
		i += size
		if isCollapsibleSpace(r) {
			*pending = true
			continue
		}
		if r < 0x20 || r == 0x7f {
			continue
		}
		if *pending && len(dst) > 0 {
			if len(dst)+1 > max {
				return dst
			}
			dst = append(dst, ' ')
		}
		*pending = false
		if len(dst)+utf8.RuneLen(r) > max {
			return dst
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}
