package crawl

import (
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// URL normalisation. Two URLs that name the same resource must normalise to
// the same string, because that string is the URL-seen key and the ownership
// key. Decisions:
//   - only http and https; user info is dropped (we never send credentials);
//   - host lowercased, trailing dot removed, IDNA mapped to punycode
//     (UTS #46 lookup mapping, underscores tolerated), IPv6 literals in
//     canonical form; the default port is removed;
//   - path: backslashes become slashes (as browsers do), dot segments are
//     resolved (never above the root), percent-encoding is normalised
//     (unreserved characters decoded, hex uppercased, everything outside
//     RFC 3986's allowed set encoded), ";jsessionid=..." path parameters removed,
//     an empty path becomes "/";
//   - query: empty parameters dropped, session-id and utm_* parameters
//     removed, parameters sorted by key (stable, so repeated keys keep their
//     order), a lone "?" removed;
//   - the fragment is removed.

const (
	// maxRawURLLength caps what we even try to parse.
	maxRawURLLength = 16 << 10
	// maxNormalizedURLLength caps what NormalizeURL returns.
	maxNormalizedURLLength = 8 << 10
	maxHostLength          = 253
)

// idnaProfile is immutable after construction.
var idnaProfile = idna.New(idna.MapForLookup(), idna.StrictDomainName(false), idna.Transitional(false))

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
	if len(raw) > maxRawURLLength {
		return nil, fmt.Errorf("normalize url (%d bytes): too long: %w", len(raw), ErrBadURL)
	}
	s := cleanRawURL(raw)
	if s == "" && base == nil {
		return nil, fmt.Errorf("normalize url: empty: %w", ErrBadURL)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("normalize url %q: %v: %w", truncateForError(raw), err, ErrBadURL)
	}
	if base != nil && !u.IsAbs() {
		u = base.ResolveReference(u)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("normalize url %q: scheme %q not crawled: %w", truncateForError(raw), u.Scheme, ErrBadURL)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("normalize url %q: opaque url: %w", truncateForError(raw), ErrBadURL)
	}
	host, err := normalizeHost(u.Hostname(), u.Port(), scheme)
	if err != nil {
		return nil, fmt.Errorf("normalize url %q: %w", truncateForError(raw), err)
	}
	escPath := normalizePath(u.EscapedPath())
	path, err := url.PathUnescape(escPath)
	if err != nil {
		return nil, fmt.Errorf("normalize url %q: path: %v: %w", truncateForError(raw), err, ErrBadURL)
	}
	query := normalizeQuery(u.RawQuery)
	if n := len(scheme) + 3 + len(host) + len(escPath) + 1 + len(query); n > maxNormalizedURLLength {
		return nil, fmt.Errorf("normalize url: %d bytes after normalisation: too long: %w", n, ErrBadURL)
	}
	// RawPath is always set so that String() keeps our escaping (net/url
	// would otherwise escape sub-delimiters such as '(' and '!').
	return &url.URL{Scheme: scheme, Host: host, Path: path, RawPath: escPath, RawQuery: query}, nil
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

// cleanRawURL trims surrounding whitespace/control characters, removes tabs
// and newlines anywhere (as browsers do), turns backslashes before the query
// into slashes, and escapes stray '%' so that url.Parse accepts the rest.
func cleanRawURL(raw string) string {
	s := strings.TrimFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\u00a0' || r == '\ufeff' })
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\t' || c == '\n' || c == '\r' || c == '\\' {
			clean = false
			break
		}
		if c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	inQuery := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\t' || c == '\n' || c == '\r':
			continue
		case c == '?' || c == '#':
			inQuery = true
		case c == '\\' && !inQuery:
			c = '/'
		case c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])):
			b.WriteString("%25")
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func normalizeHost(hostname, port, scheme string) (string, error) {
	if hostname == "" {
		return "", fmt.Errorf("empty host: %w", ErrBadURL)
	}
	var host string
	if strings.IndexByte(hostname, ':') >= 0 {
		addr, err := netip.ParseAddr(hostname)
		if err != nil || addr.Zone() != "" {
			return "", fmt.Errorf("bad IPv6 host %q: %w", hostname, ErrBadURL)
		}
		host = "[" + addr.String() + "]"
	} else {
		h := strings.TrimRight(hostname, ".")
		if h == "" {
			return "", fmt.Errorf("empty host: %w", ErrBadURL)
		}
		ascii := true
		for i := 0; i < len(h); i++ {
			if h[i] >= 0x80 {
				ascii = false
				break
			}
		}
		if ascii {
			h = strings.ToLower(h)
		} else {
			a, err := idnaProfile.ToASCII(h)
			if err != nil || a == "" {
				return "", fmt.Errorf("bad IDN host %q: %w", truncateForError(hostname), ErrBadURL)
			}
			h = strings.TrimRight(strings.ToLower(a), ".")
		}
		for i := 0; i < len(h); i++ {
			c := h[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
				return "", fmt.Errorf("bad host %q: %w", truncateForError(hostname), ErrBadURL)
			}
		}
		if h == "" || len(h) > maxHostLength || strings.Contains(h, "..") || h[0] == '.' {
			return "", fmt.Errorf("bad host %q: %w", truncateForError(hostname), ErrBadURL)
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

// linkResolver resolves many hrefs against one normalised base. Simple
// hrefs (the great majority: ASCII absolute or relative paths without
// escapes, dot segments or session parameters, at most one query
// parameter) are resolved by string concatenation with one allocation; the
// rest go through NormalizeURL. Both give identical results (fuzzed).
type linkResolver struct {
	base   *url.URL
	prefix string // "scheme://host"
	dir    string // escaped base path up to and including its last '/'
}

func newLinkResolver(base *url.URL) *linkResolver {
	lr := &linkResolver{base: base}
	if nb, err := NormalizeURL(base.String(), nil); err == nil {
		lr.base = nb
		lr.prefix = nb.Scheme + "://" + nb.Host
		p := nb.EscapedPath()
		lr.dir = p[:strings.LastIndexByte(p, '/')+1]
	}
	return lr
}

func (lr *linkResolver) resolve(href string) (string, bool) {
	if s, ok := lr.fast(href); ok {
		return s, true
	}
	u, err := NormalizeURL(href, lr.base)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

func (lr *linkResolver) fast(href string) (string, bool) {
	if lr.prefix == "" {
		return "", false
	}
	h := href
	if i := strings.IndexByte(h, '#'); i >= 0 {
		h = h[:i]
	}
	if h == "" || h[0] == '?' || strings.HasPrefix(h, "//") || len(h) > 1024 {
		return "", false
	}
	path, query, hasQuery := strings.Cut(h, "?")
	if hasQuery && query == "" {
		return "", false
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == ':' || c == ';' || !allowedRaw(c, false) {
			return "", false
		}
	}
	if hasDotSegment(path) {
		return "", false
	}
	if hasQuery {
		key, val, _ := strings.Cut(query, "=")
		if key == "" || isSessionParam(key) {
			return "", false
		}
		for i := 0; i < len(query); i++ {
			c := query[i]
			if c != '=' && !allowedRaw(c, true) {
				return "", false
			}
		}
		if strings.IndexByte(val, '=') >= 0 {
			return "", false
		}
	}
	rel := path == "" || path[0] != '/'
	if path == "" {
		return "", false
	}
	var b strings.Builder
	n := len(lr.prefix) + len(h)
	if rel {
		n += len(lr.dir)
	}
	if n > maxNormalizedURLLength {
		return "", false
	}
	b.Grow(n)
	b.WriteString(lr.prefix)
	if rel {
		b.WriteString(lr.dir)
	}
	b.WriteString(h)
	return b.String(), true
}
