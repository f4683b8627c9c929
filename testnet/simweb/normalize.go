package simweb

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// SessionParams are the query parameter names (compared case-insensitively)
// that Normalize drops: they carry a visitor's session, not a page identity.
var SessionParams = []string{"sid", "sessionid", "phpsessid", "jsessionid"}

func isSessionParam(name string) bool {
	for _, p := range SessionParams {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

// Normalize returns the form of an absolute http(s) URL that the truth
// listing uses. It is written apart from crawl.NormalizeURL on purpose: the
// ground truth must not share code with the crawler it judges. The form: lowercase scheme and host, default port removed, empty path
// made "/", dot segments resolved, fragment dropped, session parameters
// removed and the remaining query parameters sorted (by the raw "key=value"
// string, so that values keep their encoding).
func Normalize(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("parse url %q: %w", raw, err)
	}
	return normalizeURL(u)
}

func normalizeURL(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("url %q: scheme %q is not http(s)", u.String(), u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", fmt.Errorf("url %q has no host", u.String())
	}
	host = strings.TrimSuffix(host, ".")
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" {
		hostport += ":" + port
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	p = resolveDots(p)
	var params []string
	if u.RawQuery != "" {
		for _, kv := range strings.Split(u.RawQuery, "&") {
			if kv == "" {
				continue
			}
			k, _, _ := strings.Cut(kv, "=")
			if name, err := url.QueryUnescape(k); err == nil && isSessionParam(name) {
				continue
			}
			params = append(params, kv)
		}
	}
	sort.Strings(params)
	out := scheme + "://" + hostport + p
	if len(params) > 0 {
		out += "?" + strings.Join(params, "&")
	}
	return out, nil
}

// resolveDots removes "." and ".." segments the way RFC 3986 section 5.2.4
// does, keeping a trailing slash.
func resolveDots(p string) string {
	if !strings.Contains(p, "/.") {
		return p
	}
	segs := strings.Split(p, "/")
	var out []string
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
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
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}
