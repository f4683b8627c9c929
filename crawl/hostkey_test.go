package crawl

import (
	"net/url"
	"testing"
)

// parsedHostKey is HostKeyOf by url.Parse alone, the reference of its
// fast path.
func parsedHostKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return HostKey(u)
}

var hostKeyOfCases = []struct {
	raw   string
	plain bool // read without url.Parse
}{
	{"http://example.com/a/b?c=d#e", true},
	{"https://docs.python.test/3/library/os.html", true},
	{"http://example.com", true},
	{"http://example.com:80/", true},
	{"https://example.com:443/x", true},
	{"http://example.com:8080/", true},
	{"https://example.com:80/", true},
	{"http://example.com:/", true},
	{"http://example.com./p", true},
	{"http://example.com.:8080/p", true},
	{"http://a-b.c9.test?q", true},
	{"http://host#frag", true},
	{"http://host/\"<>{}|\\^`/中文", true},
	{"http://Example.com/", false},
	{"http://user@example.com/", false},
	{"http://[::1]:80/", false},
	{"http://example.com:8o/", false},
	{"http://example.com:1:2/", false},
	{"http://exa mple.com/", false},
	{"http://example.com/a b", false},
	{"http://example.com/%zz", false},
	{"http://example.com/%41", false},
	{"http://example.com/\x7f", false},
	{"http://host\\evil/", false},
	{"http://", false},
	{"http:///path", false},
	{"ftp://example.com/", false},
	{"HTTP://example.com/", false},
	{"mailto:a@b", false},
	{"", false},
	{"://x", false},
	{"http://例子.测试/", false},
	{"http://xn--fsqu00a.xn--0zwm56d/", true},
}

func TestHostKeyOfFastPath(t *testing.T) {
	for _, c := range hostKeyOfCases {
		_, plain := plainHostKey(c.raw)
		if plain != c.plain {
			t.Errorf("%q: read without parsing %v, want %v", c.raw, plain, c.plain)
		}
		if got, want := HostKeyOf(c.raw), parsedHostKey(c.raw); got != want {
			t.Errorf("%q: host %q, url.Parse gives %q", c.raw, got, want)
		}
	}
}

func FuzzHostKeyOf(f *testing.F) {
	for _, c := range hostKeyOfCases {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if got, want := HostKeyOf(raw), parsedHostKey(raw); got != want {
			t.Fatalf("%q: host %q, url.Parse gives %q", raw, got, want)
		}
	})
}

func BenchmarkHostKeyOf(b *testing.B) {
	urls := []string{
		"http://help.libreoffice.test/zh-CN/text/shared/05/new_help.html",
		"https://docs.python.test/3/library/os.path.html#os.path.join",
		"http://www.postgresql.test/docs/15/sql-select.html",
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		HostKeyOf(urls[i%len(urls)])
	}
}
