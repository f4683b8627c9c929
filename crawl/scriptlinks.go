package crawl

import (
	"bytes"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Links in scripts. Pages that build links in JavaScript (location.href =
// "...", window.open("..."), arrays of page names, onclick handlers) name
// the URLs in string literals. The parser scans inline scripts, event
// handler attributes (on*) and javascript: hrefs with a lexer that knows
// only comments, strings, template literals and regular expressions (not a
// JavaScript engine), and keeps a literal only when the whole literal looks
// like a link (scriptURLCandidate): strings that are assembled ("/p?id=" +
// id), HTML fragments, selectors, MIME types and words are not links.
// External scripts on the page's host are fetched as link sources and
// scanned the same way (ScriptLinks), whole (the fetcher cuts them at
// FetcherConfig.MaxScriptBytes).

const (
	// maxScriptScanBytes caps the inline script text scanned per page.
	maxScriptScanBytes = 1 << 20
	// maxScriptLiteralBytes caps a literal worth looking at.
	maxScriptLiteralBytes = 2048
)

// scanScript calls emit with every string literal of the JavaScript (or
// JSON) src that looks like a link, decoded. It stops when emit returns
// false.
func scanScript(src []byte, emit func(string) bool) {
	// regexOK: a '/' here starts a regular expression, not a division.
	// lineStart: nothing but blanks since the last line break.
	regexOK, lineStart := true, true
	for i := 0; i < len(src); {
		c := src[i]
		if c == '\n' {
			lineStart = true
		} else if c != ' ' && c != '\t' && c != '\r' {
			// "<!--" anywhere and "-->" first on a line open a comment
			// to the end of the line (HTML-like comments).
			if c == '<' && hasPrefixAt(src, i, "<!--") || lineStart && c == '-' && hasPrefixAt(src, i, "-->") {
				i = skipPast(src, i, "\n")
				lineStart = true
				continue
			}
			lineStart = false
		}
		switch {
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			i = skipPast(src, i+2, "\n")
			lineStart = true
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			i = skipPast(src, i+2, "*/")
		case c == '/' && regexOK:
			i = skipRegex(src, i+1)
			regexOK = false
		case c == '"' || c == '\'' || c == '`':
			end, raw, escaped, ok := stringLiteral(src, i)
			if ok && mayBeLink(raw, escaped) {
				lit := string(raw)
				if escaped {
					lit = unescapeJS(raw)
				}
				if link, ok := scriptURLCandidate(lit); ok && !emit(link) {
					return
				}
			}
			i = end
			regexOK = false
		case isIdentByte(c):
			j := i + 1
			for j < len(src) && isIdentByte(src[j]) {
				j++
			}
			regexOK = keywordBeforeExpression(string(src[i:j]))
			i = j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		default:
			// Punctuation: after ')' or ']' a '/' divides, after any other
			// (operators, '(', ',', '=', ...) it starts a regular expression.
			regexOK = c != ')' && c != ']'
			i++
		}
	}
}

// ScriptLinks returns the links an external script names: its string
// literals that look like links (as for inline scripts), resolved against
// base, the base URL of the page that included it, de-duplicated and
// capped at MaxLinksPerPage, each marked Link.Script. The body is decoded
// to UTF-8 as a text page is (BOM, Content-Type charset, detection).
func ScriptLinks(body []byte, contentType string, base *url.URL) []Link {
	if base == nil || len(body) == 0 {
		return nil
	}
	src, _ := decodeCharset(body, contentType, false)
	lr := newLinkResolver(base)
	seen := map[string]bool{}
	var out []Link
	scanScript(src, func(raw string) bool {
		if s, ok := lr.resolve(raw); ok && !seen[s] {
			seen[s] = true
			out = append(out, Link{URL: s, Script: true})
		}
		return len(out) < MaxLinksPerPage
	})
	return out
}

func hasPrefixAt(src []byte, i int, prefix string) bool {
	return len(src)-i >= len(prefix) && string(src[i:i+len(prefix)]) == prefix
}

// skipPast returns the index just past the first end at or after i, or
// len(src).
func skipPast(src []byte, i int, end string) int {
	for i < len(src) {
		k := bytes.IndexByte(src[i:], end[0])
		if k < 0 {
			break
		}
		if i += k; hasPrefixAt(src, i, end) {
			return i + len(end)
		}
		i++
	}
	return len(src)
}

// skipRegex returns the index past a regular expression literal whose body
// starts at i (after the opening '/'), and its flags. A line break ends it:
// it was a division after all, and scanning goes on from the next line.
func skipRegex(src []byte, i int) int {
	inClass := false
	for ; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '[':
			inClass = true
		case ']':
			inClass = false
		case '/':
			if !inClass {
				i++
				for i < len(src) && isIdentByte(src[i]) {
					i++
				}
				return i
			}
		case '\n', '\r':
			return i
		}
	}
	return i
}

// stringLiteral reads the literal opening at src[start] (a quote or a
// backtick). It returns the index past it, and its body when the literal
// is short enough to be a link, closed, and (for a template) has no
// substitution; escaped tells whether the body has escape sequences.
func stringLiteral(src []byte, start int) (end int, raw []byte, escaped, ok bool) {
	q := src[start]
	dynamic := false
	depth := 0 // of ${ } in a template
	for i := start + 1; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\':
			escaped = true
			i++
		case q == '`' && c == '$' && i+1 < len(src) && src[i+1] == '{':
			dynamic = true
			depth++
			i++
		case q == '`' && depth > 0 && c == '}':
			depth--
		case c == q && depth == 0:
			raw = src[start+1 : i]
			return i + 1, raw, escaped, !dynamic && len(raw) <= maxScriptLiteralBytes
		case (c == '\n' || c == '\r') && q != '`':
			return i + 1, nil, false, false // unterminated: not a string after all
		}
	}
	return len(src), nil, false, false
}

// mayBeLink is a cheap test before a literal is copied: every link has a
// '/' or a '.'; an unescaped one has no space or control character, and
// unless it starts like an absolute URL or a path, it ends in a page
// extension (see scriptURLCandidate).
func mayBeLink(raw []byte, escaped bool) bool {
	if len(raw) < 2 {
		return false
	}
	mark := false
	for _, c := range raw {
		switch {
		case c == '/' || c == '.' || c == '\\':
			mark = true
		case c <= ' ' && !escaped:
			return false
		}
	}
	if !mark {
		return false
	}
	if escaped || raw[0] == '/' || raw[0] == '.' || raw[0] == 'h' || raw[0] == 'H' {
		return true
	}
	end := 0
	for end < len(raw) && raw[end] != '?' && raw[end] != '#' {
		end++
	}
	path := raw[bytes.LastIndexByte(raw[:end], '/')+1 : end]
	dot := bytes.LastIndexByte(path, '.')
	return dot >= 0 && isPageExtension(string(path[dot+1:]))
}

// unescapeJS decodes the escape sequences of a string literal's body. An
// escape that makes a control character leaves it in (the candidate check
// refuses it); a line continuation disappears.
func unescapeJS(raw []byte) string {
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 == len(raw) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := raw[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b', 'f', 'v', '0':
			b.WriteByte(0)
		case '\n':
		case '\r':
			if i+1 < len(raw) && raw[i+1] == '\n' {
				i++
			}
		case 'x':
			if i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]) {
				b.WriteRune(rune(unhex(raw[i+1])<<4 | unhex(raw[i+2])))
				i += 2
			} else {
				b.WriteByte(e)
			}
		case 'u':
			r, n := unicodeEscape(raw[i+1:])
			if n == 0 {
				b.WriteByte(e)
				continue
			}
			if !utf8.ValidRune(r) {
				r = utf8.RuneError
			}
			b.WriteRune(r)
			i += n
		default:
			b.WriteByte(e)
		}
	}
	return b.String()
}

// unicodeEscape decodes the digits after "\u": XXXX or {X...}. n is the
// number of bytes read, 0 if none form an escape.
func unicodeEscape(s []byte) (r rune, n int) {
	if len(s) >= 4 && isHex(s[0]) && isHex(s[1]) && isHex(s[2]) && isHex(s[3]) {
		for _, c := range s[:4] {
			r = r<<4 | rune(unhex(c))
		}
		return r, 4
	}
	if len(s) >= 3 && s[0] == '{' {
		for j := 1; j < len(s) && j <= 7; j++ {
			if s[j] == '}' {
				if j == 1 {
					return 0, 0
				}
				return r, j + 1
			}
			if !isHex(s[j]) {
				return 0, 0
			}
			r = r<<4 | rune(unhex(s[j]))
		}
	}
	return 0, 0
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// keywordBeforeExpression reports whether a '/' after word starts a regular
// expression: after these keywords an expression follows, after a name or a
// number a division does.
func keywordBeforeExpression(word string) bool {
	switch word {
	case "return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw",
		"instanceof", "yield", "await":
		return true
	}
	return false
}

// scriptURLCandidate decides whether a whole string literal is a link. Taken: absolute http(s) URLs, "//host/..." with a
// dotted host, paths starting with "/", "./" or "../", and bare relative
// paths ("a/b.html?x=1") whose last segment has a page extension; in every
// case an extension, if any, must be a page's. Refused: anything with
// whitespace, quotes, '<', '>', '\\', '{', '}', '|', '^', '`', '$', '*' or a
// stray '%' (HTML, templates, patterns, format strings), a value ending in
// '=', '?' or '&' (a URL being assembled), fragments alone, and paths
// without a letter or digit.
func scriptURLCandidate(s string) (string, bool) {
	if len(s) < 2 || len(s) > maxScriptLiteralBytes {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f:
			return "", false
		case c == '"' || c == '\'' || c == '<' || c == '>' || c == '\\' || c == '{' || c == '}' ||
			c == '|' || c == '^' || c == '`' || c == '$' || c == '*':
			return "", false
		case c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])):
			return "", false
		}
	}
	if !utf8.ValidString(s) {
		return "", false
	}
	switch s[len(s)-1] {
	case '=', '?', '&':
		return "", false
	}
	rest := s // what follows the scheme and host, for the path checks
	absolute := false
	switch {
	case hasPrefixFold(s, "http://") || hasPrefixFold(s, "https://"):
		rest = s[strings.IndexByte(s, ':')+3:]
		if !urlHostLooksReal(&rest, false) {
			return "", false
		}
		absolute = true
	case strings.HasPrefix(s, "//"):
		rest = s[2:]
		if !urlHostLooksReal(&rest, true) {
			return "", false
		}
		absolute = true
	case s[0] == '/' || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../"):
	default:
		if !isASCIIAlnum(s[0]) && s[0] != '_' {
			return "", false
		}
		// A ':' before the first '/' would be a scheme (mailto:, data:).
		colon, slash := strings.IndexByte(s, ':'), strings.IndexByte(s, '/')
		if colon >= 0 && (slash < 0 || colon < slash) {
			return "", false
		}
		ext, ok := lastExtension(s)
		return s, ok && isPageExtension(ext)
	}
	path := rest
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if ext, ok := lastExtension(path); ok && !isPageExtension(ext) {
		return "", false
	}
	if absolute {
		return s, true
	}
	for i := 0; i < len(path); i++ {
		if isASCIIAlnum(path[i]) || path[i] >= 0x80 {
			return s, true
		}
	}
	return "", false
}

// urlHostLooksReal checks the host at the start of *rest (after "scheme://"
// or "//") and leaves *rest at what follows it: DNS characters, a dot
// unless it is localhost (required when needDot, for "//" literals, which
// are as often comments or patterns), and an optional port.
func urlHostLooksReal(rest *string, needDot bool) bool {
	s := *rest
	end := strings.IndexAny(s, "/?#")
	if end < 0 {
		end = len(s)
	}
	host := s[:end]
	if h, port, ok := strings.Cut(host, ":"); ok {
		host = h
		if port == "" || len(port) > 5 {
			return false
		}
		for i := 0; i < len(port); i++ {
			if port[i] < '0' || port[i] > '9' {
				return false
			}
		}
	}
	if host == "" || host[0] == '.' || host[0] == '-' {
		return false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !(isASCIIAlnum(c) || c == '-' || c == '.' || c == '_' || c >= 0x80) {
			return false
		}
	}
	if !strings.Contains(host, ".") && (needDot || !strings.EqualFold(host, "localhost")) {
		return false
	}
	*rest = s[end:]
	return true
}

// lastExtension returns the extension (without the dot) of the last
// segment of a path, ignoring any query or fragment. ok is false when
// the segment has no extension: no dot, or nothing but digits after it (a
// version such as "v2.0").
func lastExtension(p string) (string, bool) {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	p = p[strings.LastIndexByte(p, '/')+1:]
	dot := strings.LastIndexByte(p, '.')
	if dot < 0 || dot == len(p)-1 {
		return "", false
	}
	ext := p[dot+1:]
	letter := false
	for i := 0; i < len(ext); i++ {
		c := ext[i]
		if !isASCIIAlnum(c) {
			return "", false
		}
		if c > '9' {
			letter = true
		}
	}
	if !letter {
		return "", false
	}
	return ext, true
}

// isPageExtension reports the file name extensions of pages (any case),
// which a bare relative literal ("list.html") must end with.
func isPageExtension(ext string) bool {
	var lower [5]byte
	if len(ext) > len(lower) {
		return false
	}
	for i := 0; i < len(ext); i++ {
		c := ext[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	switch string(lower[:len(ext)]) {
	case "html", "htm", "xhtml", "xht", "shtml", "php", "asp", "aspx", "jsp", "jspx", "cfm", "cgi":
		return true
	}
	return false
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
