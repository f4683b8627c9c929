package crawl

import (
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// TestEasyPathAgreesWithParser builds many links from pieces that reach the
// corners of the easy path (case, ports, IPv4 forms, dot segments,
// escapes, queries, fragments, colons) and checks that, whenever the easy
// path takes one, the parser gives the same URL. FuzzNormalizeURL does the
// same on arbitrary input.
func TestEasyPathAgreesWithParser(t *testing.T) {
	pieces := []string{
		"http://", "HTTPS://", "https://", "//", "/", "/", "./", "../", ".", "..", "%2e", "%2E%2e", "a", "B", "x.html",
		"example.com", "Ex.ORG", "1.2.3.4", "01.2.3.4", "0x7f", "256", "foo.09", "a_b", "xn--p1ai", "-", "~", "..",
		":", ":80", ":443", ":8080", ":0", ":065535", ":99999", "@", "?", "?", "&", "=", "#", "#f", "%41", "%7e", "%zz",
		"%2F", ";jsessionid=1", ";", "sid=3", "b=2", "a=1", "a=", "=x", "q=%E4%B8%AD", "+", "!", "$", "(", ")", "*", ",",
	}
	bases := []string{"http://example.com/dir/page.html?x=1", "https://h.test:8443/", "http://h.test/a/b/"}
	rng := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for _, b := range bases {
		base, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		resolvers := []*linkResolver{{}, newLinkResolver(base)}
		for i := 0; i < 20000; i++ {
			var sb strings.Builder
			for n := 1 + rng.IntN(7); n > 0; n-- {
				sb.WriteString(pieces[rng.IntN(len(pieces))])
			}
			raw := sb.String()
			for _, lr := range resolvers {
				easy, ok := lr.easyURL(raw)
				if !ok {
					continue
				}
				checked++
				parsed, err := lr.parse(raw)
				if err != nil || parsed.String() != easy.String() {
					t.Fatalf("input %q base %v: easy path %v, parser %v, %v", raw, lr.base, easy, parsed, err)
				}
			}
		}
	}
	if checked < 10000 {
		t.Fatalf("only %d inputs took the easy path", checked)
	}
	t.Logf("%d easy inputs agree with the parser", checked)
}
