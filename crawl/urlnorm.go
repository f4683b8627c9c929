package crawl

import (
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	whatwgerrors "github.com/nlnwa/whatwg-url/errors"
	whatwgurl "github.com/nlnwa/whatwg-url/url"
)

// URL normalisation. Two URLs that name the same resource must normalise to
// the same string, because that string is the URL-seen key and the ownership
// key; and a link must lead to the page a browser would open. Decisions:
//   - parsing and resolution are the WHATWG URL Standard's (the parser of
//     github.com/nlnwa/whatwg-url), as browsers do it: "http:foo" against an
//     http base is relative, "https:example.com" names the host, "///host"
//     and "\\host" name a host, ":x" is a path, tabs and newlines vanish,
//     backslashes are slashes, numeric IPv4 forms ("0x7f.1", "192.168.257")
//     are addresses, hosts are percent-decoded and IDNA-mapped (UTS #46);
//     testdata/whatwg holds the standard's test suite and the few
//     deliberate differences (whatwg_test.go);
//   - before parsing: leading and trailing NBSP and U+FEFF are trimmed too
//     (an author's copy-paste: the browser's literal URL would be a 404);
//     bytes that are not UTF-8 are kept as percent-escapes, not replaced by
//     U+FFFD; schemes other than http(s) are refused, and so is what the
//     parser would spend quadratic time on (user info over 256 bytes, over
//     512 path separators);
//   - then our normalisation: only http and https; user info is dropped (we
//     never send credentials); host lowercased, trailing dot removed, only
//     DNS characters (letters, digits, '-', '.', '_') or an IP address, so
//     that "a b", "a$b" or "foo.09" (which no resolver answers) is an
//     error; IPv6 in canonical form; the default port removed, port 0
//     refused;
//   - path: dot segments resolved (never above the root), percent-encoding
//     normalised (unreserved characters decoded, hex uppercased, everything
//     outside RFC 3986's allowed set encoded, a stray '%' becomes "%25"),
//     ";jsessionid=..." path parameters removed, an empty path becomes "/";
//   - query: empty parameters dropped, session-id and utm_* parameters
//     removed, parameters sorted by key (stable, so repeated keys keep their
//     order), a lone "?" removed;
//   - the fragment is removed.
//
// Most links skip the parser, which is several times slower than string
// operations: see linkResolver.

const (
	// maxRawURLLength caps what we even try to parse.
	maxRawURLLength = 16 << 10
	// maxNormalizedURLLength caps what NormalizeURL returns.
	maxNormalizedURLLength = 8 << 10
	maxHostLength          = 253
	// The parser's cost grows with the square of the user info's length
	// and of the number of path segments; no real URL comes near these.
	maxUserInfoBytes  = 256
	maxPathSeparators = 512
)

// sessionParams are query keys (lowercase) that carry a session and never
// change the content.
var sessionParams = map[string]struct{}{
	"jsessionid": {}, "phpsessid": {}, "sid": {}, "sessionid": {}, "session_id": {},
	"sessid": {}, "cfid": {}, "cftoken": {}, "zenid": {}, "oscsid": {}, "xtcsid": {},
	"utm_source": {}, "utm_medium": {}, "utm_campaign": {}, "utm_term": {}, "utm_content": {},
}

func isSessionParam(key string) bool {
	k := strings.ToLower(key)
	if _, ok := sessionParams[k]; ok {
		return true
	}
	return strings.HasPrefix(k, "aspsessionid")
}

// NormalizeURL resolves raw against base (base may be nil for absolute URLs)
// and normalises it (see the rules above). Errors wrap ErrBadURL.
func NormalizeURL(raw string, base *url.URL) (*url.URL, error) {
	var noBase linkResolver
	if u, ok := noBase.easyURL(raw); ok {
		return u, nil
	}
	if base == nil {
		return normalize(raw, nil)
	}
	return newLinkResolver(base).normalize(raw)
}

// parseBase parses a base URL for resolving references against it.
func parseBase(base *url.URL) (*whatwgurl.Url, error) {
	s := base.String()
	if len(s) > maxRawURLLength {
		return nil, fmt.Errorf("normalize url: base (%d bytes): too long: %w", len(s), ErrBadURL)
	}
	if err := precheck(s); err != nil {
		return nil, fmt.Errorf("normalize url: base %q: %w", truncateForError(s), err)
	}
	b, err := whatwgurl.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("normalize url: base %q: %s: %w", truncateForError(s), whatwgReason(err), ErrBadURL)
	}
	return b, nil
}

// normalize is NormalizeURL with the base already parsed (nil for none).
func normalize(raw string, base *whatwgurl.Url) (*url.URL, error) {
	if len(raw) > maxRawURLLength {
		return nil, fmt.Errorf("normalize url (%d bytes): too long: %w", len(raw), ErrBadURL)
	}
	s := escapeInvalidUTF8(removeTabNewline(strings.TrimFunc(raw, isTrimmedAroundURL)))
	if s == "" && base == nil {
		return nil, fmt.Errorf("normalize url: empty: %w", ErrBadURL)
	}
	if err := precheck(s); err != nil {
		return nil, fmt.Errorf("normalize url %q: %w", truncateForError(raw), err)
	}
	var u *whatwgurl.Url
	var err error
	if base != nil {
		u, err = base.Parse(s)
	} else {
		u, err = whatwgurl.Parse(s)
	}
	if err != nil {
		return nil, fmt.Errorf("normalize url %q: %s: %w", truncateForError(raw), whatwgReason(err), ErrBadURL)
	}
	scheme := u.Scheme()
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("normalize url %q: scheme %q not crawled: %w", truncateForError(raw), scheme, ErrBadURL)
	}
	host, err := normalizeHost(u.Hostname(), u.Port(), scheme)
	if err != nil {
		return nil, fmt.Errorf("normalize url %q: %w", truncateForError(raw), err)
	}
	escPath := normalizePath(u.Pathname())
	path, err := url.PathUnescape(escPath)
	if err != nil {
		return nil, fmt.Errorf("normalize url %q: path: %v: %w", truncateForError(raw), err, ErrBadURL)
	}
	query := normalizeQuery(u.Query())
	if n := len(scheme) + 3 + len(host) + len(escPath) + 1 + len(query); n > maxNormalizedURLLength {
		return nil, fmt.Errorf("normalize url: %d bytes after normalisation: too long: %w", n, ErrBadURL)
	}
	// RawPath is always set so that String() keeps our escaping (net/url
	// would otherwise escape sub-delimiters such as '(' and '!').
	return &url.URL{Scheme: scheme, Host: host, Path: path, RawPath: escPath, RawQuery: query}, nil
}

// precheck refuses before parsing what could only give a scheme we do not
// crawl, and what the parser would spend quadratic time on: a long user
// info (it appends to a string per character) or many path segments.
// s has no tabs or newlines.
func precheck(s string) error {
	rest, scheme := s, ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ':' && i > 0 {
			scheme, rest = strings.ToLower(s[:i]), s[i+1:]
			break
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			break
		}
	}
	if scheme != "" && scheme != "http" && scheme != "https" {
		return fmt.Errorf("scheme %q not crawled: %w", scheme, ErrBadURL)
	}
	// An authority follows the scheme, or two slashes in a reference.
	if scheme != "" || len(rest) >= 2 && isURLSlash(rest[0]) && isURLSlash(rest[1]) {
		auth := strings.TrimLeft(rest, `/\`)
		if end := strings.IndexAny(auth, `/\?#`); end >= 0 {
			auth = auth[:end]
		}
		if at := strings.LastIndexByte(auth, '@'); at > maxUserInfoBytes {
			return fmt.Errorf("user info of %d bytes: %w", at, ErrBadURL)
		}
	}
	separators := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '?', '#':
			return nil
		case '/', '\\':
			if separators++; separators > maxPathSeparators {
				return fmt.Errorf("more than %d path separators: %w", maxPathSeparators, ErrBadURL)
			}
		}
	}
	return nil
}

func isURLSlash(c byte) bool { return c == '/' || c == '\\' }

// removeTabNewline removes ASCII tabs and newlines anywhere, as the parser
// would, so that precheck sees what the parser sees.
func removeTabNewline(s string) string {
	if !strings.ContainsAny(s, "\t\n\r") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
}

// whatwgReason is the short reason of a parser error, without the input it
// repeats.
func whatwgReason(err error) string {
	if t := whatwgerrors.Type(err); t != "" {
		return string(t)
	}
	return err.Error()
}

// isTrimmedAroundURL: C0 controls and space (as WHATWG trims), NBSP and
// U+FEFF (which WHATWG keeps).
func isTrimmedAroundURL(r rune) bool {
	return r <= ' ' || r == '\u00a0' || r == '\ufeff'
}

// escapeInvalidUTF8 percent-encodes the bytes of s that are not UTF-8, so
// that the parser keeps them (it would turn each into U+FFFD).
func escapeInvalidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteByte('%')
			b.WriteByte(upperHex[s[i]>>4])
			b.WriteByte(upperHex[s[i]&15])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// HostKey is the ownership/politeness key of a URL: lowercase host, plus
// ":port" only when it is not the scheme's default.
func HostKey(u *url.URL) string {
	if u == nil {
		return ""
	}
	host := strings.ToLower(u.Host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		port := host[i+1:]
		if port == "" || port == defaultPort(strings.ToLower(u.Scheme)) {
			host = host[:i]
		}
	}
	return strings.TrimSuffix(host, ".")
}

// HostKeyOf returns the HostKey of a URL string, or "" when it does not
// parse. URLs as NormalizeURL writes them (http or https, a lower-case host
// of letters, digits, dots and hyphens, no escapes, no spaces or control
// bytes) are read without url.Parse, which is most of its cost for the
// many URLs a node keys by host; TestHostKeyOfFastPath and FuzzHostKeyOf
// hold the two ways to the same answer.
func HostKeyOf(raw string) string {
	if h, ok := plainHostKey(raw); ok {
		return h
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return HostKey(u)
}

// plainHostKey is HostKeyOf for the URLs it can read without parsing; ok
// is false for every other string.
func plainHostKey(raw string) (host string, ok bool) {
	scheme, rest, found := strings.Cut(raw, "://")
	if !found || scheme != "http" && scheme != "https" {
		return "", false
	}
	// url.Parse fails on a control byte or a bad escape: a URL with
	// either, a space or any '%' is left to it. Past the host, no other
	// byte changes its answer.
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c <= ' ' || c == 0x7f || c == '%' {
			return "", false
		}
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	host, port := authority, ""
	if i := strings.IndexByte(authority, ':'); i >= 0 {
		host, port = authority[:i], authority[i+1:]
		for j := 0; j < len(port); j++ {
			if port[j] < '0' || port[j] > '9' {
				return "", false
			}
		}
	}
	if host == "" {
		return "", false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return "", false
		}
	}
	if port != "" && port != defaultPort(scheme) {
		host = authority
	}
	return strings.TrimSuffix(host, "."), true
}

func defaultPort(scheme string) string {
	switch scheme {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

func truncateForError(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// normalizeHost takes an ASCII host as the parser gives it (a domain, a
// dotted IPv4 address or a bracketed IPv6 one) and its port, if any.
func normalizeHost(hostname, port, scheme string) (string, error) {
	if hostname == "" {
		return "", fmt.Errorf("empty host: %w", ErrBadURL)
	}
	var host string
	if hostname[0] == '[' {
		addr, err := netip.ParseAddr(strings.Trim(hostname, "[]"))
		if err != nil || addr.Zone() != "" {
			return "", fmt.Errorf("bad IPv6 host %q: %w", hostname, ErrBadURL)
		}
		host = "[" + addr.String() + "]"
	} else {
		h := strings.ToLower(strings.TrimRight(hostname, "."))
		if h == "" {
			return "", fmt.Errorf("empty host: %w", ErrBadURL)
		}
		for i := 0; i < len(h); i++ {
			c := h[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
				return "", fmt.Errorf("bad host %q: %w", truncateForError(hostname), ErrBadURL)
			}
		}
		if len(h) > maxHostLength || strings.Contains(h, "..") || h[0] == '.' {
			return "", fmt.Errorf("bad host %q: %w", truncateForError(hostname), ErrBadURL)
		}
		// The parser turned every host ending in a number into an IPv4
		// address; one that still does ("foo.09..", once its dots are
		// trimmed) would fail to parse again.
		if endsInNumber(h) {
			if a, err := netip.ParseAddr(h); err != nil || !a.Is4() {
				return "", fmt.Errorf("bad host %q: ends in a number: %w", truncateForError(hostname), ErrBadURL)
			}
		}
		host = h
	}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 || p > 65535 {
			return "", fmt.Errorf("bad port %q: %w", port, ErrBadURL)
		}
		ps := strconv.Itoa(p)
		if ps != defaultPort(scheme) {
			host += ":" + ps
		}
	}
	return host, nil
}

// endsInNumber reports whether the last label of a host is a number in the
// WHATWG sense (decimal, or hexadecimal after "0x"), which makes the host
// an IPv4 address to a browser.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		for i := 2; i < len(last); i++ {
			if !isHex(last[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// signedNumber reports a label such as "-256" or "0x-1", which the parser
// reads as an IPv4 number (strconv accepts the sign; the standard sees a
// domain), so that the easy path leaves it to the parser.
func signedNumber(label string) bool {
	switch {
	case len(label) > 2 && (label[:2] == "0x" || label[:2] == "0X"):
		label = label[2:]
	case len(label) > 1 && label[0] == '0':
		label = label[1:]
	}
	return label != "" && (label[0] == '-' || label[0] == '+')
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// allowedRaw reports whether c may appear unescaped in a normalised path
// (query=false) or query component (query=true).
func allowedRaw(c byte, query bool) bool {
	if isUnreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '\'', '(', ')', '*', '+', ',', ';', ':', '@', '/':
		return true
	case '&', '=':
		return !query // in the query they are structure, handled by the caller
	case '?':
		return query
	}
	return false
}

const upperHex = "0123456789ABCDEF"

// normalizePercent decodes percent-escapes of unreserved characters,
// uppercases the others, and escapes bytes outside the allowed set. It
// returns s itself when nothing changes.
func normalizePercent(s string, query bool) string {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' {
			if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				v := unhex(s[i+1])<<4 | unhex(s[i+2])
				if isUnreserved(v) || s[i+1] >= 'a' || s[i+2] >= 'a' {
					break
				}
				i += 2
				continue
			}
			break
		}
		if !allowedRaw(c, query) {
			break
		}
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[v>>4])
				b.WriteByte(upperHex[v&15])
			}
			i += 2
			continue
		}
		if allowedRaw(c, query) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

// normalizePath normalises an escaped path: session path parameters, percent
// encoding, dot segments, empty path.
func normalizePath(p string) string {
	p = stripPathSession(p)
	p = normalizePercent(p, false)
	p = removeDotSegments(p)
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	return p
}

// stripPathSession removes ";jsessionid=..." style parameters from the path
// (up to the next '/').
func stripPathSession(p string) string {
	for {
		i := indexFold(p, ";jsessionid=")
		if i < 0 {
			return p
		}
		end := strings.IndexByte(p[i+1:], '/')
		if end < 0 {
			p = p[:i]
		} else {
			p = p[:i] + p[i+1+end:]
		}
	}
}

func indexFold(s, sub string) int {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if s[i] == sub[0] && equalFoldASCII(s[i:i+n], sub) {
			return i
		}
	}
	return -1
}

// removeDotSegments implements RFC 3986 section 5.2.4; ".." never climbs above
// the root. It returns p itself when it has no dot segments.
func removeDotSegments(p string) string {
	if !hasDotSegment(p) {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	r := strings.Join(out, "/")
	if r == "" || r[0] != '/' {
		r = "/" + r
	}
	return r
}

func hasDotSegment(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '.' || (i > 0 && p[i-1] != '/') {
			continue
		}
		j := i + 1
		if j < len(p) && p[j] == '.' {
			j++
		}
		if j == len(p) || p[j] == '/' {
			return true
		}
	}
	return false
}

// normalizeQuery drops empty and session parameters, normalises
// percent-encoding of keys and values, and sorts by key (stable).
func normalizeQuery(q string) string {
	if q == "" {
		return ""
	}
	params := strings.Split(q, "&")
	kept := params[:0]
	for _, p := range params {
		if p == "" {
			continue
		}
		key, val, hasVal := strings.Cut(p, "=")
		key = normalizePercent(key, true)
		if key == "" && val == "" {
			continue
		}
		if dk, err := url.QueryUnescape(key); err == nil && isSessionParam(dk) {
			continue
		}
		if hasVal {
			p = key + "=" + normalizePercent(val, true)
		} else {
			p = key
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		return ""
	}
	if len(kept) > 1 {
		sort.SliceStable(kept, func(i, j int) bool { return queryKey(kept[i]) < queryKey(kept[j]) })
	}
	return strings.Join(kept, "&")
}

func queryKey(p string) string {
	if i := strings.IndexByte(p, '='); i >= 0 {
		return p[:i]
	}
	return p
}

// linkResolver resolves hrefs against one base. The easy cases (most
// links: ASCII, no backslash, quote or space, escapes well formed, an
// absolute http(s) URL with a plain DNS host, or a path or query relative
// to the base) are resolved with string operations, where RFC 3986 and the
// WHATWG parser agree; the others go through the parser, with the base
// parsed once. Both give identical results (fuzzed).
type linkResolver struct {
	base *url.URL // as given; nil: absolute URLs only
	// The normalised base, split; prefix is "" when there is none.
	prefix, path, query string // "scheme://host", escaped path, query
	// self is the normalised base as a string: what a link to the page
	// itself (an empty href, or a fragment) resolves to.
	self     string
	parsed   *whatwgurl.Url
	parseErr error
}

func newLinkResolver(base *url.URL) *linkResolver {
	lr := &linkResolver{base: base}
	if nb, err := NormalizeURL(base.String(), nil); err == nil {
		lr.base = nb
		lr.prefix = nb.Scheme + "://" + nb.Host
		lr.path = nb.EscapedPath()
		lr.query = nb.RawQuery
		lr.self = joinURL(nb.Scheme, nb.Host, lr.path, lr.query)
	}
	return lr
}

// joinURL builds a URL string from its normalised parts.
func joinURL(scheme, host, path, query string) string {
	if query == "" {
		return scheme + "://" + host + path
	}
	return scheme + "://" + host + path + "?" + query
}

// resolve returns the normalised absolute URL of href.
func (lr *linkResolver) resolve(href string) (string, bool) {
	if lr.prefix != "" && (href == "" || href[0] == '#') {
		return lr.self, true
	}
	if scheme, host, path, query, ok := lr.easy(href); ok {
		return joinURL(scheme, host, path, query), true
	}
	u, err := lr.parse(href)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

func (lr *linkResolver) normalize(href string) (*url.URL, error) {
	if u, ok := lr.easyURL(href); ok {
		return u, nil
	}
	return lr.parse(href)
}

// parse resolves href with the parser.
func (lr *linkResolver) parse(href string) (*url.URL, error) {
	if lr.base == nil {
		return normalize(href, nil)
	}
	if lr.parsed == nil && lr.parseErr == nil {
		lr.parsed, lr.parseErr = parseBase(lr.base)
	}
	if lr.parseErr != nil {
		return nil, lr.parseErr
	}
	return normalize(href, lr.parsed)
}

func (lr *linkResolver) easyURL(href string) (*url.URL, bool) {
	scheme, host, path, query, ok := lr.easy(href)
	if !ok {
		return nil, false
	}
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return nil, false
	}
	return &url.URL{Scheme: scheme, Host: host, Path: unescaped, RawPath: path, RawQuery: query}, true
}

// easy resolves and normalises href without the parser, or reports that
// it is not an easy case (see linkResolver); it never decides an error.
func (lr *linkResolver) easy(href string) (scheme, host, path, query string, ok bool) {
	h := href
	if i := strings.IndexByte(h, '#'); i >= 0 {
		h = h[:i]
	}
	if len(h) > maxRawURLLength || !easyChars(h) {
		return "", "", "", "", false
	}
	var rest string
	switch {
	case hasPrefixFold(h, "http://"):
		scheme, rest = "http", h[len("http://"):]
	case hasPrefixFold(h, "https://"):
		scheme, rest = "https", h[len("https://"):]
	}
	var hasQuery bool
	if scheme != "" {
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		if host, ok = easyHost(rest[:end], scheme); !ok {
			return "", "", "", "", false
		}
		path, query, hasQuery = strings.Cut(rest[end:], "?")
	} else {
		if lr.prefix == "" {
			return "", "", "", "", false
		}
		scheme, host, _ = strings.Cut(lr.prefix, "://")
		switch {
		case h == "":
			return scheme, host, lr.path, lr.query, true
		case h[0] == '?':
			path, query, hasQuery = lr.path, h[1:], true
		case h[0] == '/':
			if strings.HasPrefix(h, "//") {
				return "", "", "", "", false // another host
			}
			path, query, hasQuery = strings.Cut(h, "?")
		default:
			path, query, hasQuery = strings.Cut(h, "?")
			if colon := strings.IndexByte(path, ':'); colon >= 0 && !strings.Contains(path[:colon], "/") {
				return "", "", "", "", false // a scheme, or a path the parser must judge
			}
			path = lr.path[:strings.LastIndexByte(lr.path, '/')+1] + path
		}
	}
	// As precheck, which counts the input's separators.
	if strings.Count(h[:len(h)-len(query)], "/") > maxPathSeparators {
		return "", "", "", "", false
	}
	// The parser resolves dot segments before ";jsessionid=" is stripped,
	// which can leave a "." or ".." behind.
	if strings.IndexByte(path, ';') >= 0 {
		return "", "", "", "", false
	}
	path = normalizePath(path)
	if hasQuery {
		query = normalizeQuery(query)
	}
	if len(scheme)+3+len(host)+len(path)+1+len(query) > maxNormalizedURLLength {
		return "", "", "", "", false
	}
	return scheme, host, path, query, true
}

// easyChars: every byte is unreserved, a sub-delimiter other than "'"
// (which the parser escapes in a query), ':', '@', '/', '?', or '%' before
// two hex digits.
func easyChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isUnreserved(c):
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
		case c == '!' || c == '$' || c == '&' || c == '(' || c == ')' || c == '*' || c == '+' || c == ',' ||
			c == ';' || c == '=' || c == ':' || c == '@' || c == '/' || c == '?':
		default:
			return false
		}
	}
	return true
}

// easyHost normalises "host[:port]" when the host is a plain DNS name (no
// IDNA label, no trailing dot) or a dotted IPv4 address; anything else is
// the parser's.
func easyHost(hostport, scheme string) (string, bool) {
	h, port, hasPort := strings.Cut(hostport, ":")
	if h == "" || len(h) > maxHostLength || h[0] == '.' || h[len(h)-1] == '.' || strings.Contains(h, "..") {
		return "", false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(isASCIIAlnum(c) || c == '-' || c == '.' || c == '_') {
			return "", false
		}
	}
	h = strings.ToLower(h)
	if strings.Contains(h, "xn--") {
		return "", false
	}
	if endsInNumber(h) || signedNumber(h[strings.LastIndexByte(h, '.')+1:]) {
		if a, err := netip.ParseAddr(h); err != nil || !a.Is4() || a.String() != h {
			return "", false
		}
	}
	if hasPort {
		if port == "" || len(port) > 5 {
			return "", false
		}
		for i := 0; i < len(port); i++ {
			if port[i] < '0' || port[i] > '9' {
				return "", false
			}
		}
	}
	host, err := normalizeHost(h, port, scheme)
	return host, err == nil
}
