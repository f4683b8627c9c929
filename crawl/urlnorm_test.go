package crawl

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestNormalizeURL(t *testing.T) {
	base, err := url.Parse("http://Example.COM/a/b/c.html?q=1#frag")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		raw  string
		base *url.URL
		want string // "" means an error wrapping ErrBadURL
	}{
		{"lowercase scheme and host", "HTTP://WWW.Example.COM/Path", nil, "http://www.example.com/Path"},
		{"mixed-case host keeps path case", "http://ExAmPlE.org/AbC", nil, "http://example.org/AbC"},
		{"empty path", "http://example.com", nil, "http://example.com/"},
		{"default http port", "http://example.com:80/x", nil, "http://example.com/x"},
		{"default https port", "https://example.com:443/x", nil, "https://example.com/x"},
		{"non-default port kept", "http://example.com:8080/x", nil, "http://example.com:8080/x"},
		{"port leading zeros", "http://example.com:0080/x", nil, "http://example.com/x"},
		{"empty port", "http://example.com:/x", nil, "http://example.com/x"},
		{"https on 80 keeps port", "https://example.com:80/", nil, "https://example.com:80/"},
		{"dot segments", "http://example.com/a/./b/../c", nil, "http://example.com/a/c"},
		{"trailing dot segment", "http://example.com/a/b/..", nil, "http://example.com/a/"},
		{"dot dot above root", "http://example.com/../../a", nil, "http://example.com/a"},
		{"encoded dots are dots", "http://example.com/a/%2e%2E/b", nil, "http://example.com/b"},
		{"decode unreserved", "http://example.com/%7Euser/%41b%2d", nil, "http://example.com/~user/Ab-"},
		{"uppercase hex", "http://example.com/a%2fb%3f", nil, "http://example.com/a%2Fb%3F"},
		{"encode space and unicode", "http://example.com/a b/é", nil, "http://example.com/a%20b/%C3%A9"},
		{"stray percent", "http://example.com/100%/x%zz", nil, "http://example.com/100%25/x%25zz"},
		{"fragment removed", "http://example.com/a#top", nil, "http://example.com/a"},
		{"sorted query", "http://example.com/?b=2&a=1&c=3", nil, "http://example.com/?a=1&b=2&c=3"},
		{"stable equal keys", "http://example.com/?b=2&a=z&a=y", nil, "http://example.com/?a=z&a=y&b=2"},
		{"empty query dropped", "http://example.com/x?", nil, "http://example.com/x"},
		{"empty params dropped", "http://example.com/x?&&a=1&", nil, "http://example.com/x?a=1"},
		{"session ids removed", "http://example.com/x?PHPSESSID=abc&id=7&jsessionid=1&sid=9&ASPSESSIONIDQQ=3", nil, "http://example.com/x?id=7"},
		{"utm removed", "http://example.com/x?utm_source=a&p=2", nil, "http://example.com/x?p=2"},
		{"path jsessionid removed", "http://example.com/shop;jsessionid=ABC123?item=4", nil, "http://example.com/shop?item=4"},
		{"query encoding normalised", "http://example.com/?q=%e4%b8%ad&x=a+b", nil, "http://example.com/?q=%E4%B8%AD&x=a+b"},
		{"query unicode encoded", "http://example.com/?q=搜索", nil, "http://example.com/?q=%E6%90%9C%E7%B4%A2"},
		{"userinfo dropped", "http://user:pw@example.com/", nil, "http://example.com/"},
		{"trailing dot host", "http://example.com./a", nil, "http://example.com/a"},
		{"idna", "http://Bücher.example/", nil, "http://xn--bcher-kva.example/"},
		{"idna chinese", "http://中文.测试/路径", nil, "http://xn--fiq228c.xn--0zwm56d/%E8%B7%AF%E5%BE%84"},
		{"ipv6", "http://[2001:DB8::1]:8080/", nil, "http://[2001:db8::1]:8080/"},
		{"ipv4", "http://192.168.0.1/", nil, "http://192.168.0.1/"},
		{"whitespace trimmed", "  http://example.com/a\n ", nil, "http://example.com/a"},
		{"tabs and newlines removed", "http://exa\tmple.com/a\nb", nil, "http://example.com/ab"},
		{"backslash", `http://example.com\a\b`, nil, "http://example.com/a/b"},
		{"relative", "d.html", base, "http://example.com/a/b/d.html"},
		{"relative parent", "../x", base, "http://example.com/a/x"},
		{"relative above root", "../../../../x", base, "http://example.com/x"},
		{"absolute path", "/root?z=1&a=2", base, "http://example.com/root?a=2&z=1"},
		{"scheme relative", "//Other.org/p", base, "http://other.org/p"},
		{"query only", "?y=2", base, "http://example.com/a/b/c.html?y=2"},
		{"fragment only", "#x", base, "http://example.com/a/b/c.html?q=1"},
		{"empty with base", "", base, "http://example.com/a/b/c.html?q=1"},
		{"absolute ignores base", "https://B.org/", base, "https://b.org/"},
		{"mailto", "mailto:a@b.c", base, ""},
		{"javascript", "javascript:void(0)", base, ""},
		{"ftp", "ftp://example.com/", nil, ""},
		{"data", "data:text/html,hi", nil, ""},
		{"relative without base", "/a/b", nil, ""},
		{"extra slashes before the host", "http:///a", nil, "http://a/"},
		{"three slashes leave the base host", "///other.org/p", base, "http://other.org/p"},
		{"backslashes name a host", `\\other.org\p`, base, "http://other.org/p"},
		{"same scheme without slashes is relative", "http:d.html", base, "http://example.com/a/b/d.html"},
		{"other scheme without slashes names a host", "https:other.org/p", base, "https://other.org/p"},
		{"leading colon is a path", ":x", base, "http://example.com/a/b/:x"},
		{"short IPv4", "http://0x7f.1/", nil, "http://127.0.0.1/"},
		{"IPv4 with a large last part", "http://192.168.257/", nil, "http://192.168.1.1/"},
		{"IPv4 out of range", "http://256.256.256.256/", nil, ""},
		{"host ending in a non-IPv4 number", "http://foo.09/", nil, ""},
		{"percent-encoded host", "http://ex%41mple.com/", nil, "http://example.com/"},
		{"nbsp around", "\u00a0http://example.com/a\ufeff", nil, "http://example.com/a"},
		{"invalid UTF-8 kept as escapes", "http://example.com/caf\xe9?q=\xe9", nil, "http://example.com/caf%E9?q=%E9"},
		{"invalid UTF-8 host", "http://ex\xe9.com/", nil, ""},
		{"port zero", "http://example.com:0/", nil, ""},
		{"quote in query encoded", "http://example.com/?q='x'", nil, "http://example.com/?q=%27x%27"},
		{"bad port", "http://example.com:99999/", nil, ""},
		{"letters port", "http://example.com:ab/", nil, ""},
		{"bad host chars", "http://exa<mple.com/", nil, ""},
		{"empty", "", nil, ""},
		{"huge", "http://example.com/" + strings.Repeat("a", 20000), nil, ""},
		{"huge after normalisation", "http://example.com/" + strings.Repeat("é", 3000), nil, ""},
		{"ipv6 zone", "http://[fe80::1%25eth0]/", nil, ""},
		{"control char escaped", "http://example.com/a\x01b", nil, "http://example.com/a%01b"},
		{"forbidden host char", "http://exa mple.com/", nil, ""},
		{"trailing control stripped", "http://example.com/a\x01", nil, "http://example.com/a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := NormalizeURL(tc.raw, tc.base)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("NormalizeURL(%q) = %q, want error", tc.raw, u)
				}
				if !errors.Is(err, ErrBadURL) {
					t.Fatalf("error %v does not wrap ErrBadURL", err)
				}
				if ErrorClass(err) != "bad_url" {
					t.Fatalf("class %q", ErrorClass(err))
				}
				return
			}
			if err != nil {
				t.Fatalf("NormalizeURL(%q): %v", tc.raw, err)
			}
			if got := u.String(); got != tc.want {
				t.Fatalf("NormalizeURL(%q) = %q, want %q", tc.raw, got, tc.want)
			}
			// Idempotent: normalising the result changes nothing.
			again, err := NormalizeURL(u.String(), nil)
			if err != nil || again.String() != tc.want {
				t.Fatalf("not idempotent: %q -> %v %v", tc.want, again, err)
			}
		})
	}
}

func TestHostKey(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"http://Example.com/", "example.com"},
		{"http://example.com:80/", "example.com"},
		{"https://example.com:443/", "example.com"},
		{"http://example.com:8080/", "example.com:8080"},
		{"https://example.com:80/", "example.com:80"},
		{"http://[::1]:8080/", "[::1]:8080"},
		{"http://[::1]/", "[::1]"},
		{"http://example.com./", "example.com"},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := HostKey(u); got != tc.want {
			t.Errorf("HostKey(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
	if HostKey(nil) != "" {
		t.Error("HostKey(nil) not empty")
	}
}

func TestFilter(t *testing.T) {
	cfg := DefaultFilterConfig()
	cfg.MaxDepth = 5
	cfg.MaxURLLength = 100
	cfg.Deny = map[string][]string{"example.com": {`^/private/`}, "*": {`\?print=1`}}
	cfg.Allow = map[string][]string{"only.org": {`^/docs/`}}
	f, err := NewFilter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		raw    string
		depth  int
		reason string
		script bool // CheckScript: an external script
	}{
		{"http://example.com/page.html", 1, "", false},
		{"http://example.com/js/menu.js", 1, "extension", false},
		{"http://example.com/js/menu.js", 1, "", true},
		{"http://example.com/js/menu.js", 6, "depth", true},
		{"http://example.com/private/m.js", 0, "deny", true},
		{"http://example.com/a/b/a/b/a/b/a/b.js", 0, "trap", true},
		{"http://example.com/img/Photo.JPG", 1, "extension", false},
		{"http://example.com/a.tar.gz", 1, "extension", false},
		{"http://example.com/page", 6, "depth", false},
		{"http://example.com/" + strings.Repeat("x", 100), 0, "too_long", false},
		{"http://example.com/a/b/a/b/a/b/a/b", 0, "trap", false},
		{"http://example.com/cal/2020/01/02/", 0, "", false},
		{"http://example.com/private/x", 0, "deny", false},
		{"http://other.com/private/x", 0, "", false},
		{"http://other.com/x?print=1", 0, "deny", false},
		{"http://only.org/docs/a", 0, "", false},
		{"http://only.org/blog/a", 0, "not_allowed", false},
		{"http://example.com/" + strings.Repeat("s/", 33), 0, "too_many_segments", false},
	}
	for _, tc := range tests {
		u, err := NormalizeURL(tc.raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		check := f.Check
		if tc.script {
			check = f.CheckScript
		}
		reason, ok := check(u, tc.depth)
		if ok != (tc.reason == "") || reason != tc.reason {
			t.Errorf("Check(%q, %d) (script %v) = %q, %v; want %q", tc.raw, tc.depth, tc.script, reason, ok, tc.reason)
		}
	}
	if _, err := NewFilter(FilterConfig{Deny: map[string][]string{"*": {"("}}}); err == nil {
		t.Error("bad pattern accepted")
	}
}

func TestURLShape(t *testing.T) {
	shape := func(raw string) string {
		u, err := NormalizeURL(raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		return URLShape(u)
	}
	a := shape("http://wiki.test/calendar/2024/05/?view=week")
	b := shape("http://wiki.test/calendar/1999/12/?view=day")
	if a != b || a != "wiki.test/calendar/N/N/?view" {
		t.Fatalf("shapes %q %q", a, b)
	}
	if shape("http://wiki.test/page/12?id=3&a=1&a=2") != "wiki.test/page/N?a&id" {
		t.Fatal(shape("http://wiki.test/page/12?id=3&a=1&a=2"))
	}
	if shape("http://wiki.test/about") == shape("http://wiki.test/contact") {
		t.Fatal("different pages share a shape")
	}
	if URLShape(nil) != "" {
		t.Fatal("nil")
	}
}
