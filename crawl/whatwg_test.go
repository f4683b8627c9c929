package crawl

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// whatwgCase is one object of web-platform-tests' urltestdata.json (string
// entries are comments).
type whatwgCase struct {
	Input    string  `json:"input"`
	Base     *string `json:"base"`
	Href     string  `json:"href"`
	Protocol string  `json:"protocol"`
	Failure  bool    `json:"failure"`
}

// whatwgDeliberate lists the http(s) URLs browsers accept that NormalizeURL
// rejects, keyed by input and base, with the reason. Every other case must
// reach the browser's page.
var whatwgDeliberate = map[[2]string]string{
	{"http://f:0/c", "http://example.org/foo/bar"}:              "port 0 cannot be connected to (browsers refuse it too, as a bad port)",
	{"http://f:00000000000000/c", "http://example.org/foo/bar"}: "port 0",
	{"http://./", ""}:                    `host "." is empty once the trailing dot is removed; no resolver answers it`,
	{"http://../", ""}:                   `host ".." is not a DNS name`,
	{"http://!\"$&'()*+,-.;=_`{}~/", ""}: "a host of characters DNS names cannot hold",
	{"http://foo.09..", ""}:              `without its trailing dots the host ends in a number, which is not a DNS name (and "foo.09" is no IPv4 address)`,
}

// TestWHATWGURLSuite runs the URL Standard's test suite (testdata/whatwg):
// every http(s) case a browser accepts must normalise to the browser's URL
// (normalised the same way), except the deliberate differences above, and
// every case a browser rejects must be rejected.
func TestWHATWGURLSuite(t *testing.T) {
	data, err := os.ReadFile("testdata/whatwg/urltestdata.json")
	if err != nil {
		t.Fatal(err)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatal(err)
	}
	var same, deliberate, browserRejects int
	seenDeliberate := map[[2]string]bool{}
	for _, e := range entries {
		var c whatwgCase
		if err := json.Unmarshal(e, &c); err != nil {
			continue // a comment
		}
		baseStr := ""
		if c.Base != nil {
			baseStr = *c.Base
		}
		// A base that is not http(s) can only matter to absolute inputs.
		base, _ := NormalizeURL(baseStr, nil)
		got, err := NormalizeURL(c.Input, base)
		if c.Failure {
			browserRejects++
			if err == nil {
				t.Errorf("input %q base %q: browsers reject it, NormalizeURL gives %s", c.Input, baseStr, got)
			}
			continue
		}
		if c.Protocol != "http:" && c.Protocol != "https:" {
			continue
		}
		key := [2]string{c.Input, baseStr}
		if reason, ok := whatwgDeliberate[key]; ok {
			seenDeliberate[key] = true
			deliberate++
			if err == nil {
				t.Errorf("input %q base %q: listed as deliberately rejected (%s) but gives %s", c.Input, baseStr, reason, got)
			}
			continue
		}
		want, werr := NormalizeURL(c.Href, nil)
		switch {
		case werr != nil:
			t.Errorf("browser URL %q (input %q base %q) does not normalise: %v", c.Href, c.Input, baseStr, werr)
		case err != nil:
			if !errors.Is(err, ErrBadURL) {
				t.Errorf("input %q: error %v does not wrap ErrBadURL", c.Input, err)
			}
			t.Errorf("input %q base %q: rejected (%v), browsers open %s", c.Input, baseStr, err, c.Href)
		case got.String() != want.String():
			t.Errorf("input %q base %q: NormalizeURL gives %s, browsers open %s (normalised %s)", c.Input, baseStr, got, c.Href, want)
		default:
			same++
			if again, err := NormalizeURL(got.String(), nil); err != nil || again.String() != got.String() {
				t.Errorf("input %q: %s is not idempotent: %v %v", c.Input, got, again, err)
			}
		}
	}
	for key, reason := range whatwgDeliberate {
		if !seenDeliberate[key] {
			t.Errorf("deliberate difference %q (%s) is not in the suite", key, reason)
		}
	}
	t.Logf("http(s) cases browsers accept: %d reach the browser's page, %d rejected deliberately; %d cases browsers reject, all rejected",
		same, deliberate, browserRejects)
	if same < 200 {
		t.Errorf("only %d cases checked: is the suite complete?", same)
	}
}
