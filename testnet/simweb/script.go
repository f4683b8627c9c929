package simweb

import (
	"net/url"
	"strings"
)

// External scripts in the truth walk. A correct crawler fetches the
// scripts a page includes from its own host (<script src> of a type
// browsers run) for the links they name: string literals that are whole
// links, resolved against the including page's base URL, as a browser
// resolves the links a script writes into the document. The walk reads a
// script once, with the base of the first page that includes it (in walk
// order), cut at maxScriptBytes. It takes fewer literals than a crawler
// may: only those that name an HTML page (a path ending in .html or
// .htm), written without escapes, outside comments and regular
// expressions. Like Normalize, this is written apart from the crawler's
// scanner on purpose.

const (
	// maxScriptBytes is how much of a script a crawler reads (sou's
	// FetcherConfig.MaxScriptBytes).
	maxScriptBytes = 2 << 20
	// maxScriptLinks is how many distinct links a crawler takes from one
	// script (sou's MaxLinksPerPage).
	maxScriptLinks = 5000
	// maxScriptLiteral is the longest literal taken as a link.
	maxScriptLiteral = 2048
	// maxScriptsPerPage is how many <script src> of a page count.
	maxScriptsPerPage = 32
)

// runsScript reports whether a browser fetches and runs a <script src>
// of this type: a classic script or a module, not data or templates.
func runsScript(typ string) bool {
	t := strings.ToLower(strings.TrimSpace(typ))
	if i := strings.IndexByte(t, ';'); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	return t == "" || t == "module" || strings.Contains(t, "javascript") || strings.Contains(t, "ecmascript")
}

// readsScript reports whether a crawler reads a script served with this
// content type (JavaScript, JSON or plain text); others it hangs up on.
func readsScript(contentType string) bool {
	switch contentType {
	case "text/javascript", "application/json", "text/plain":
		return true
	}
	return false
}

// scriptLinks returns the normalised URLs of the pages the script src
// names, resolved against base, in order of appearance, de-duplicated.
func scriptLinks(src []byte, base *url.URL) []string {
	if len(src) > maxScriptBytes {
		src = src[:maxScriptBytes]
	}
	var out []string
	seen := map[string]bool{}
	for _, lit := range jsLiterals(src) {
		if !namesPage(lit) {
			continue
		}
		ref, err := url.Parse(lit)
		if err != nil {
			continue
		}
		u, err := normalizeURL(base.ResolveReference(ref))
		if err != nil || seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, u)
		if len(out) == maxScriptLinks {
			break
		}
	}
	return out
}

// jsLiterals returns the bodies of the string literals of JavaScript src
// written without escapes ('...', "..." and `...` without ${}), skipping
// comments (// and /* */, and the HTML-like <!-- and --> line comments)
// and regular expression literals. A '/' starts a regular expression
// where an expression may start: after an operator or punctuation other
// than ')' and ']', or after a keyword such as return; elsewhere it
// divides.
func jsLiterals(src []byte) []string {
	var out []string
	regex := true // a '/' here starts a regular expression
	lineStart := true
	for i := 0; i < len(src); {
		c := src[i]
		rest := src[i:]
		switch {
		case c == '\n':
			lineStart = true
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case hasBytePrefix(rest, "<!--") || lineStart && hasBytePrefix(rest, "-->"):
			i = lineEnd(src, i)
			continue
		}
		lineStart = false
		switch {
		case hasBytePrefix(rest, "//"):
			i = lineEnd(src, i)
		case hasBytePrefix(rest, "/*"):
			if j := strings.Index(string(src[i+2:]), "*/"); j >= 0 {
				i += 2 + j + 2
			} else {
				i = len(src)
			}
		case c == '/' && regex:
			i = regexEnd(src, i+1)
			regex = false
		case c == '"' || c == '\'' || c == '`':
			body, end, clean := jsString(src, i)
			if clean && len(body) <= maxScriptLiteral {
				out = append(out, body)
			}
			i = end
			regex = false
		case isWordByte(c):
			j := i
			for j < len(src) && isWordByte(src[j]) {
				j++
			}
			switch string(src[i:j]) {
			case "return", "typeof", "case", "do", "else", "in", "of", "new", "delete", "void", "throw",
				"instanceof", "yield", "await":
				regex = true
			default:
				regex = false
			}
			i = j
		default:
			regex = c != ')' && c != ']'
			i++
		}
	}
	return out
}

func hasBytePrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

// lineEnd returns the index of the line break at or after i (len if none).
func lineEnd(src []byte, i int) int {
	for i < len(src) && src[i] != '\n' {
		i++
	}
	return i
}

// regexEnd returns the index past a regular expression literal whose body
// starts at i, and its flags; a line break ends it where it is.
func regexEnd(src []byte, i int) int {
	class := false
	for ; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '[':
			class = true
		case ']':
			class = false
		case '\n', '\r':
			return i
		case '/':
			if !class {
				i++
				for i < len(src) && isWordByte(src[i]) {
					i++
				}
				return i
			}
		}
	}
	return i
}

// jsString reads the literal that opens at src[i]. clean is false when it
// has escapes or substitutions or is not closed (a quote string ends at a
// line break: it was not a string).
func jsString(src []byte, i int) (body string, end int, clean bool) {
	q := src[i]
	clean = true
	depth := 0
	for j := i + 1; j < len(src); j++ {
		c := src[j]
		switch {
		case c == '\\':
			clean = false
			j++
		case q == '`' && c == '$' && j+1 < len(src) && src[j+1] == '{':
			clean = false
			depth++
			j++
		case q == '`' && depth > 0 && c == '}':
			depth--
		case c == q && depth == 0:
			return string(src[i+1 : j]), j + 1, clean
		case (c == '\n' || c == '\r') && q != '`':
			return "", j + 1, false
		}
	}
	return "", len(src), false
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// namesPage reports whether a whole literal is a link to an HTML page:
// an absolute http(s) URL, a path from the root ("/a/b.html", not
// "//host"), "./" or "../", or a relative path starting with a letter,
// digit or '_'; whose path ends in .html or .htm; made of URL characters
// only (no space, quote, '<', '>', '\\', braces, '|', '^', '`', '$', '*',
// no '%' but before two hex digits); not ending in '=', '?' or '&'.
func namesPage(s string) bool {
	if len(s) < 6 || strings.ContainsAny(s[len(s)-1:], "=?&") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"'<>\\{}|^`$*", c) >= 0 {
			return false
		}
		if c == '%' && (i+2 >= len(s) || !isHexByte(s[i+1]) || !isHexByte(s[i+2])) {
			return false
		}
	}
	p := s
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	switch {
	case p == "":
		return false // a query or fragment alone
	case strings.HasPrefix(p, "http://") || strings.HasPrefix(p, "https://"):
		rest := p[strings.Index(p, "//")+2:]
		slash := strings.IndexByte(rest, '/')
		if slash <= 0 || !plainHost(rest[:slash]) {
			return false
		}
		p = rest[slash:]
		if strings.Contains(p, ":") {
			return false
		}
	case strings.HasPrefix(p, "//"):
		return false
	case strings.Contains(s, ":"):
		return false // a scheme, or a value that is no path
	case strings.HasPrefix(p, "/"), strings.HasPrefix(p, "./"), strings.HasPrefix(p, "../"):
	default:
		c := p[0]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	last := strings.ToLower(p[strings.LastIndexByte(p, '/')+1:])
	for _, ext := range []string{".html", ".htm"} {
		if strings.HasSuffix(last, ext) && len(last) > len(ext) {
			return true
		}
	}
	return false
}

// plainHost reports whether h is a dotted DNS name of letters, digits and
// '-', with an optional port.
func plainHost(h string) bool {
	if name, port, ok := strings.Cut(h, ":"); ok {
		if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return false
		}
		h = name
	}
	if !strings.Contains(h, ".") || h[0] == '.' || h[0] == '-' {
		return false
	}
	return strings.Trim(strings.ToLower(h), "abcdefghijklmnopqrstuvwxyz0123456789.-") == ""
}

func isHexByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
