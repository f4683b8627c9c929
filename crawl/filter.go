package crawl

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// FilterConfig decides which normalised URLs are worth fetching. Zero values
// mean "no limit" for the numeric caps.
type FilterConfig struct {
	MaxURLLength    int // bytes of the normalised URL string
	MaxDepth        int // link depth from a seed
	MaxPagesPerHost int // enforced by the engine, which knows the counts
	// SkipExtensions are path suffixes (lowercase, with the dot) of resources
	// we never parse as pages (.js among them: an external script is
	// fetched as a link source, see CheckScript).
	SkipExtensions []string
	// MaxRepeatedSegments is the trap detector: a URL whose path repeats one
	// segment more than this many times (/a/b/a/b/a/b/...) is refused.
	MaxRepeatedSegments int
	MaxPathSegments     int
	// Allow and Deny are per host (HostKey) lists of regular expressions
	// matched against path+query ("/a/b?x=1"); the key "*" applies to every
	// host. Deny wins. When a host (or "*") has Allow patterns, a URL must
	// match one of them.
	Allow, Deny map[string][]string
}

// DefaultFilterConfig is a sensible filter for the real web.
func DefaultFilterConfig() FilterConfig {
	return FilterConfig{
		MaxURLLength:        2048,
		MaxDepth:            0,
		MaxPagesPerHost:     0,
		SkipExtensions:      defaultSkipExtensions(),
		MaxRepeatedSegments: 3,
		MaxPathSegments:     32,
	}
}

func defaultSkipExtensions() []string {
	return []string{
		".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".svg", ".ico", ".tif", ".tiff", ".avif",
		".mp3", ".mp4", ".m4a", ".m4v", ".avi", ".mov", ".wmv", ".flv", ".mkv", ".webm", ".ogg", ".wav", ".flac",
		".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".tar", ".iso", ".dmg",
		".exe", ".msi", ".bin", ".apk", ".deb", ".rpm", ".jar", ".dll", ".so",
		".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods",
		".css", ".js", ".woff", ".woff2", ".ttf", ".otf", ".eot", ".swf",
	}
}

// Filter applies a FilterConfig. It is immutable and safe for concurrent use.
type Filter struct {
	cfg   FilterConfig
	exts  map[string]struct{}
	allow map[string][]*regexp.Regexp
	deny  map[string][]*regexp.Regexp
}

// NewFilter compiles the allow/deny patterns; a bad pattern is an error.
func NewFilter(cfg FilterConfig) (*Filter, error) {
	f := &Filter{cfg: cfg, exts: make(map[string]struct{}, len(cfg.SkipExtensions))}
	for _, e := range cfg.SkipExtensions {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if e[0] != '.' {
			e = "." + e
		}
		f.exts[e] = struct{}{}
	}
	var err error
	if f.allow, err = compilePatterns(cfg.Allow); err != nil {
		return nil, fmt.Errorf("filter allow patterns: %w", err)
	}
	if f.deny, err = compilePatterns(cfg.Deny); err != nil {
		return nil, fmt.Errorf("filter deny patterns: %w", err)
	}
	return f, nil
}

func compilePatterns(m map[string][]string) (map[string][]*regexp.Regexp, error) {
	out := make(map[string][]*regexp.Regexp, len(m))
	for host, pats := range m {
		key := strings.ToLower(host)
		for _, p := range pats {
			re, err := regexp.Compile(p)
			if err != nil {
				return nil, fmt.Errorf("host %q pattern %q: %w", host, p, err)
			}
			out[key] = append(out[key], re)
		}
	}
	return out, nil
}

// Check reports whether u (already normalised) at link depth depth should be
// fetched. When it should not, reason is one of: "bad_url", "too_long",
// "depth", "extension", "too_many_segments", "trap", "deny", "not_allowed".
func (f *Filter) Check(u *url.URL, depth int) (reason string, ok bool) {
	return f.check(u, depth, true)
}

// CheckScript is Check for an external script fetched for its links
// (Link.Base): every rule but SkipExtensions, since a script is no page.
func (f *Filter) CheckScript(u *url.URL, depth int) (reason string, ok bool) {
	return f.check(u, depth, false)
}

func (f *Filter) check(u *url.URL, depth int, page bool) (reason string, ok bool) {
	if u == nil || u.Host == "" {
		return "bad_url", false
	}
	if f.cfg.MaxDepth > 0 && depth > f.cfg.MaxDepth {
		return "depth", false
	}
	path := u.EscapedPath()
	if f.cfg.MaxURLLength > 0 {
		n := len(u.Scheme) + 3 + len(u.Host) + len(path)
		if u.RawQuery != "" {
			n += 1 + len(u.RawQuery)
		}
		if n > f.cfg.MaxURLLength {
			return "too_long", false
		}
	}
	if page && len(f.exts) > 0 {
		last := path[strings.LastIndexByte(path, '/')+1:]
		if dot := strings.LastIndexByte(last, '.'); dot >= 0 {
			ext := last[dot:]
			if len(ext) <= 8 {
				if _, skip := f.exts[strings.ToLower(ext)]; skip {
					return "extension", false
				}
			}
		}
	}
	if f.cfg.MaxPathSegments > 0 || f.cfg.MaxRepeatedSegments > 0 {
		if reason, ok := f.checkSegments(path); !ok {
			return reason, false
		}
	}
	if len(f.deny) > 0 || len(f.allow) > 0 {
		target := path
		if u.RawQuery != "" {
			target = path + "?" + u.RawQuery
		}
		host := HostKey(u)
		if matchAny(f.deny[host], target) || matchAny(f.deny["*"], target) {
			return "deny", false
		}
		hostAllow, anyAllow := f.allow[host], f.allow["*"]
		if (len(hostAllow) > 0 || len(anyAllow) > 0) && !matchAny(hostAllow, target) && !matchAny(anyAllow, target) {
			return "not_allowed", false
		}
	}
	return "", true
}

// checkSegments counts path segments and detects traps: a segment that
// occurs more than MaxRepeatedSegments times, which catches both
// /a/a/a/a and cycles like /a/b/a/b/a/b from relative links gone wrong.
func (f *Filter) checkSegments(path string) (string, bool) {
	var segs [64]string
	n := 0
	for rest := strings.TrimPrefix(path, "/"); rest != ""; {
		seg := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if seg == "" {
			continue
		}
		if n == len(segs) {
			return "too_many_segments", false
		}
		segs[n] = seg
		n++
	}
	if f.cfg.MaxPathSegments > 0 && n > f.cfg.MaxPathSegments {
		return "too_many_segments", false
	}
	if f.cfg.MaxRepeatedSegments > 0 && n > f.cfg.MaxRepeatedSegments {
		for i := 0; i < n; i++ {
			count := 1
			for j := i + 1; j < n; j++ {
				if segs[j] == segs[i] {
					count++
				}
			}
			if count > f.cfg.MaxRepeatedSegments {
				return "trap", false
			}
		}
	}
	return "", true
}

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// URLShape is the "family" of a URL for trap detection by counting: the
// host key, the path with every run of digits replaced by "N", and the
// sorted query keys without values. /calendar/2024/05/?view=week and
// /calendar/1999/12/?view=day share the shape "host/calendar/N/N/?view".
// The Filter is stateless; the engine, which knows per-host counts, can cap
// the pages of one shape.
func URLShape(u *url.URL) string {
	if u == nil {
		return ""
	}
	var b strings.Builder
	path := u.EscapedPath()
	b.Grow(len(u.Host) + len(path) + 16)
	b.WriteString(HostKey(u))
	inDigits := false
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c >= '0' && c <= '9' {
			if !inDigits {
				b.WriteByte('N')
			}
			inDigits = true
			continue
		}
		inDigits = false
		b.WriteByte(c)
	}
	if u.RawQuery != "" {
		sep := byte('?')
		prev := ""
		for _, kv := range strings.Split(u.RawQuery, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if k == prev {
				continue
			}
			prev = k
			b.WriteByte(sep)
			b.WriteString(k)
			sep = '&'
		}
	}
	return b.String()
}
