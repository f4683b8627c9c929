package simweb

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/html/charset"
)

func TestNormalize(t *testing.T) {
	cases := []struct{ in, want string }{
		{"HTTP://News-17.SIM.test:80/a/b.html#frag", "http://news-17.sim.test/a/b.html"},
		{"http://h.sim.test", "http://h.sim.test/"},
		{"http://h.sim.test:8080/x?b=2&a=1", "http://h.sim.test:8080/x?a=1&b=2"},
		{"http://h.sim.test/list?page=3&sid=abc&cat=x", "http://h.sim.test/list?cat=x&page=3"},
		{"http://h.sim.test/x?PHPSESSID=1", "http://h.sim.test/x"},
		{"http://h.sim.test/a/./b/../c.html", "http://h.sim.test/a/c.html"},
		{"http://h.sim.test/a/..", "http://h.sim.test/"},
		{"https://h.sim.test:443/", "https://h.sim.test/"},
	}
	for _, c := range cases {
		got, err := Normalize(c.in)
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"ftp://h/x", "mailto:a@b", "/relative", "http://%zz"} {
		if _, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) succeeded", bad)
		}
	}
}

func TestRelativize(t *testing.T) {
	cases := []struct{ dir, target, want string }{
		{"/", "/a/b.html", "a/b.html"},
		{"/a/", "/a/b.html", "b.html"},
		{"/a/x/", "/a/b.html", "../b.html"},
		{"/a/", "/", "../"},
		{"/", "/", "./"},
		{"/a/", "/list?cat=x&page=2", "../list?cat=x&page=2"},
	}
	for _, c := range cases {
		got := relativize(c.dir, c.target)
		if got != c.want {
			t.Errorf("relativize(%q, %q) = %q, want %q", c.dir, c.target, got, c.want)
		}
		base, _ := Normalize("http://h.sim.test" + c.dir)
		if r, _ := resolveHref(mustParse(t, base), got); r != "http://h.sim.test"+c.target {
			t.Errorf("%q from %q resolves to %q", got, c.dir, r)
		}
	}
}

func TestDeterminism(t *testing.T) {
	cfg := Config{Seed: 11, Hosts: 15, Pages: 300}
	a, b := startWeb(t, cfg), startWeb(t, cfg)
	cfg.Seed = 12
	other := startWeb(t, cfg)
	pages := func(w *Web) []PageTruth {
		var out []PageTruth
		for _, p := range w.Truth().Pages {
			p.URL = stripPort(p.URL, w.portSuffix)
			p.RedirectTo = stripPort(p.RedirectTo, w.portSuffix)
			p.Canonical, p.MirrorOf, p.NearDuplicateOf = stripPort(p.Canonical, w.portSuffix), stripPort(p.MirrorOf, w.portSuffix), stripPort(p.NearDuplicateOf, w.portSuffix)
			out = append(out, p)
		}
		return out
	}
	pa, pb, po := pages(a), pages(b), pages(other)
	if !jsonEqual(pa, pb) {
		t.Fatal("same seed, different truth")
	}
	if jsonEqual(pa, po) {
		t.Fatal("different seeds, same truth")
	}
	if !jsonEqual(a.Truth().Hosts[0].Classes, b.Truth().Hosts[0].Classes) {
		t.Fatal("same seed, different classes")
	}
	// Bodies are byte-identical (URLs inside carry the port, which differs
	// only if port 80 was taken).
	ca, cb := dnsClient(a, 30*time.Second), dnsClient(b, 30*time.Second)
	n := 0
	for _, p := range a.Truth().Pages {
		if !p.Required || p.TransientStatus != 0 || n >= 40 {
			continue
		}
		n++
		fa, err1 := getRetry(ca, p.URL)
		fb, err2 := getRetry(cb, strings.Replace(p.URL, a.portSuffix+"/", b.portSuffix+"/", 1))
		if err1 != nil || err2 != nil {
			t.Fatalf("fetch %s: %v %v", p.URL, err1, err2)
		}
		ba := strings.ReplaceAll(string(fa.body), a.portSuffix, "")
		bb := strings.ReplaceAll(string(fb.body), b.portSuffix, "")
		if a.portSuffix == "" && b.portSuffix == "" && ba != bb {
			t.Errorf("%s: bodies differ between two webs with one seed", p.URL)
		}
		if len(fa.body) < 200 {
			t.Errorf("%s: body only %d bytes", p.URL, len(fa.body))
		}
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestCharsetRoundTrip renders pages in each charset and declaration style
// and checks that decoding them with their charset gives the title of the
// truth, and that a standard sniffer finds the declared charset.
func TestCharsetRoundTrip(t *testing.T) {
	lex, err := loadLexicon()
	if err != nil {
		t.Fatal(err)
	}
	w := &Web{lex: lex, sy: &synth{seed: 5}}
	cases := []struct {
		cs, lang, hdr, meta string
		sniff               string // what x/net/html/charset should find from header+meta ("" = skip)
	}{
		{"utf-8", "mixed", "utf-8", "utf-8", "utf-8"},
		{"gbk", "zh", "gbk", "", "gbk"},
		{"gb18030", "zh", "", "gb18030", "gb18030"},
		{"big5", "zh", "big5", "big5", "big5"},
		{"shift_jis", "zh", "", "shift_jis", "shift_jis"},
		{"iso-8859-1", "en", "iso-8859-1", "", "windows-1252"},
		{"gbk", "zh", "", "", ""},
		{"big5", "zh", "", "", ""},
		// charset-wrong: a naive sniffer is misled, the truth names the real charset.
		{"utf-8", "zh", "iso-8859-1", "utf-8", "windows-1252"},
		{"gbk", "zh", "", "utf-8", "utf-8"},
	}
	for i, c := range cases {
		t.Run(c.cs+"/"+c.hdr+"/"+c.meta, func(t *testing.T) {
			s := &site{idx: i, name: "c" + strconv.Itoa(i) + ".sim.test", kind: "news", n: 20, classes: map[string]bool{},
				charset: c.cs, declHdr: c.hdr, declMeta: c.meta, lang: c.lang}
			w.sy.sites = []*site{s}
			for k := 1; k < 6; k++ {
				p := w.renderPage(s, k, false)
				want := w.pageTitle(s, k)
				if want == "" {
					continue
				}
				dec, err := charsets[c.cs].NewDecoder().Bytes(p.body)
				if err != nil {
					t.Fatalf("decode %s: %v", c.cs, err)
				}
				if bytes.Contains(p.body, []byte("&#")) {
					t.Errorf("page %d in %s needed character references", k, c.cs)
				}
				info := parseHTMLWithType(dec, "http://"+s.name+"/", "text/html; charset=utf-8")
				if info.title != want {
					t.Errorf("page %d: title %q, want %q", k, info.title, want)
				}
				if c.cs != "utf-8" && bytes.Equal(dec, p.body) {
					t.Errorf("page %d: %s bytes are plain UTF-8", k, c.cs)
				}
				if c.sniff != "" {
					_, name, _ := charset.DetermineEncoding(p.body, p.contentType)
					if name != c.sniff {
						t.Errorf("page %d: sniffed %s from %q, want %s", k, name, p.contentType, c.sniff)
					}
				}
				if c.cs == "iso-8859-1" && !bytes.ContainsAny(p.body, "\xe9\xef\xe7\xfc\xf1\xe8\xc5\xe5\xf6") {
					t.Errorf("page %d: Latin-1 page has no Latin-1 letters", k)
				}
			}
		})
	}
}

func TestDNS(t *testing.T) {
	w := startWeb(t, Config{Seed: 2, Hosts: 20, Pages: 200})
	tr := w.Truth()
	ip, _, _ := net.SplitHostPort(w.HTTPAddr())
	h := tr.Hosts[len(tr.Hosts)-1]
	cases := []struct {
		name, net string
		qtype     uint16
		rcode     int
		want      string // answer address, "" = no answer
	}{
		{h.Host, "udp", dns.TypeA, dns.RcodeSuccess, ip},
		{strings.ToUpper(h.Host[:1]) + h.Host[1:], "tcp", dns.TypeA, dns.RcodeSuccess, ip},
		{h.Host, "udp", dns.TypeAAAA, dns.RcodeSuccess, "::1"},
		{h.Host, "udp", dns.TypeMX, dns.RcodeSuccess, ""},
		{"no-such-host.sim.test", "udp", dns.TypeA, dns.RcodeNameError, ""},
		{"example.com", "tcp", dns.TypeA, dns.RcodeNameError, ""},
	}
	if w.HTTP6Addr() == "" {
		cases[2].want = ""
	}
	for _, c := range cases {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(c.name), c.qtype)
		cl := &dns.Client{Net: c.net, Timeout: 2 * time.Second}
		r, _, err := cl.Exchange(m, w.DNSAddr())
		if err != nil {
			t.Fatalf("%s %s: %v", c.name, c.net, err)
		}
		if r.Rcode != c.rcode || !r.Authoritative {
			t.Errorf("%s: rcode %d aa=%v, want %d aa", c.name, r.Rcode, r.Authoritative, c.rcode)
		}
		got := ""
		for _, rr := range r.Answer {
			switch a := rr.(type) {
			case *dns.A:
				got = a.A.String()
			case *dns.AAAA:
				got = a.AAAA.String()
			}
			if rr.Header().Ttl != h.TTL {
				t.Errorf("%s: ttl %d, truth %d", c.name, rr.Header().Ttl, h.TTL)
			}
			if rr.Header().Name != dns.Fqdn(c.name) {
				t.Errorf("answer name %q, question %q", rr.Header().Name, c.name)
			}
		}
		if got != c.want {
			t.Errorf("%s %d over %s: answer %q, want %q", c.name, c.qtype, c.net, got, c.want)
		}
		if c.rcode == dns.RcodeNameError && len(r.Ns) == 0 {
			t.Errorf("%s: NXDOMAIN without SOA", c.name)
		}
	}
	ttls := map[uint32]bool{}
	for _, h := range tr.Hosts {
		ttls[h.TTL] = true
	}
	if len(ttls) < len(tr.Hosts)/2 {
		t.Errorf("TTLs barely vary: %d distinct over %d hosts", len(ttls), len(tr.Hosts))
	}
	// The same content over IPv6.
	if w.HTTP6Addr() != "" {
		c := &http.Client{Timeout: 5 * time.Second}
		req, _ := http.NewRequest("GET", "http://"+w.HTTP6Addr()+"/", nil)
		req.Host = tr.Hosts[0].Host + w.portSuffix
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("IPv6 fetch: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("IPv6 fetch of %s: %d", req.Host, resp.StatusCode)
		}
	}
}

// firstHost returns a host that has the class and is not a mirror.
func firstHost(t *testing.T, tr *Truth, class string) HostTruth {
	t.Helper()
	for _, h := range tr.Hosts {
		if h.Role == "main" && contains(h.Classes, class) {
			return h
		}
	}
	t.Fatalf("no host with class %s", class)
	return HostTruth{}
}

func TestMisbehaviours(t *testing.T) {
	w := startWeb(t, Config{Seed: 4, Hosts: 40, Pages: 800})
	tr := w.Truth()
	c := dnsClient(w, 30*time.Second)
	u := func(class, path string) string {
		return "http://" + firstHost(t, tr, class).Host + w.portSuffix + path
	}
	pageOf := func(class string, pred func(PageTruth) bool) PageTruth {
		h := firstHost(t, tr, class)
		for _, p := range tr.Pages {
			if p.Host == h.Host && pred(p) {
				return p
			}
		}
		t.Fatalf("no page for %s", class)
		return PageTruth{}
	}
	t.Run("rate-limit", func(t *testing.T) {
		p := pageOf(ClassRateLimit, func(p PageTruth) bool { return p.TransientStatus == 429 })
		f1, err := get(c, p.URL)
		if err != nil || f1.status != 429 || f1.header.Get("Retry-After") != "1" {
			t.Fatalf("first fetch: %v %d %q", err, f1.status, f1.header.Get("Retry-After"))
		}
		f2, err := get(c, p.URL)
		if err != nil || f2.status != 200 {
			t.Fatalf("second fetch: %v %d", err, f2.status)
		}
	})
	t.Run("transient-503", func(t *testing.T) {
		p := pageOf(ClassErrors, func(p PageTruth) bool { return p.TransientStatus == 503 })
		f1, _ := get(c, p.URL)
		f2, _ := get(c, p.URL)
		if f1.status != 503 || f2.status != 200 {
			t.Fatalf("statuses %d, %d; want 503, 200", f1.status, f2.status)
		}
	})
	t.Run("gzip-bomb", func(t *testing.T) {
		f, err := get(c, u(ClassGzipBomb, "/bomb/data.html"))
		if err != nil || f.status != 200 || f.header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%v %d %q", err, f.status, f.header.Get("Content-Encoding"))
		}
		if len(f.body) > 256<<10 {
			t.Errorf("bomb is %d bytes on the wire", len(f.body))
		}
		zr, _ := gzip.NewReader(bytes.NewReader(f.body))
		n, _ := io.Copy(io.Discard, zr)
		if n <= 100<<20 {
			t.Errorf("bomb inflates to %d bytes", n)
		}
	})
	t.Run("huge", func(t *testing.T) {
		f, err := get(c, u(ClassHuge, "/big/archive.html"))
		if err != nil || f.status != 200 || len(f.body) <= 10<<20 {
			t.Fatalf("%v %d %d bytes", err, f.status, len(f.body))
		}
	})
	t.Run("blackhole", func(t *testing.T) {
		short := dnsClient(w, 300*time.Millisecond)
		start := time.Now()
		_, err := get(short, u(ClassBlackhole, "/"))
		if err == nil {
			t.Fatal("blackhole answered")
		}
		if time.Since(start) < 250*time.Millisecond {
			t.Errorf("blackhole failed fast: %v", err)
		}
	})
	t.Run("drip", func(t *testing.T) {
		short := dnsClient(w, 600*time.Millisecond)
		_, err := get(short, u(ClassDrip, "/"))
		if err == nil {
			t.Fatal("drip host answered a page within 600ms")
		}
	})
	t.Run("redirect-loop", func(t *testing.T) {
		a, _ := get(c, u(ClassRedirectLoop, "/loop/a"))
		b, _ := get(c, u(ClassRedirectLoop, "/loop/b"))
		if a.status/100 != 3 || b.status/100 != 3 || !strings.HasSuffix(a.header.Get("Location"), "/loop/b") || !strings.HasSuffix(b.header.Get("Location"), "/loop/a") {
			t.Fatalf("loop: %d %q, %d %q", a.status, a.header.Get("Location"), b.status, b.header.Get("Location"))
		}
	})
	t.Run("slow", func(t *testing.T) {
		h := firstHost(t, tr, ClassSlow)
		start := time.Now()
		f, err := get(c, "http://"+h.Host+w.portSuffix+"/")
		if err != nil || f.status != 200 {
			t.Fatal(err, f.status)
		}
		if took := time.Since(start); took < time.Duration(h.LatencyMS)*time.Millisecond || h.LatencyMS == 0 {
			t.Errorf("slow host answered in %v, latency %d ms", took, h.LatencyMS)
		}
	})
	t.Run("malformed-hidden-links", func(t *testing.T) {
		p := pageOf(ClassMalformedHTML, func(p PageTruth) bool { return p.Required && p.ContentType == "text/html" })
		f, _ := getRetry(c, p.URL)
		if !bytes.Contains(f.body, []byte("/hidden/")) {
			t.Fatal("malformed page has no hidden links")
		}
		for _, q := range tr.Pages {
			if strings.Contains(q.URL, "/hidden/") {
				t.Errorf("truth lists a link from a comment or script: %s", q.URL)
			}
		}
	})
	t.Run("near-dup", func(t *testing.T) {
		p := pageOf(ClassNearDup, func(p PageTruth) bool { return p.NearDuplicateOf != "" })
		a, _ := getRetry(c, p.URL)
		b, _ := getRetry(c, p.NearDuplicateOf)
		if a.status != 200 || b.status != 200 || bytes.Equal(a.body, b.body) {
			t.Fatalf("near-dup %d / original %d, identical=%v", a.status, b.status, bytes.Equal(a.body, b.body))
		}
	})
	t.Run("conditional-and-gzip", func(t *testing.T) {
		p := pageOf(ClassSlow, func(p PageTruth) bool { return p.Required && p.TransientStatus == 0 })
		plain, err := get(c, p.URL)
		if err != nil || plain.status != 200 || plain.header.Get("Last-Modified") == "" || plain.header.Get("ETag") == "" {
			t.Fatalf("%v %d %v", err, plain.status, plain.header)
		}
		for _, hdr := range [][2]string{
			{"If-None-Match", plain.header.Get("ETag")},
			{"If-Modified-Since", plain.header.Get("Last-Modified")},
			{"Accept-Encoding", "gzip"},
		} {
			req, _ := http.NewRequest("GET", p.URL, nil)
			req.Header.Set(hdr[0], hdr[1])
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch hdr[0] {
			case "Accept-Encoding":
				if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
					t.Fatalf("gzip: %d %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
				}
				if got := gunzip(t, body); !bytes.Equal(got, plain.body) {
					t.Error("gzip body differs from the plain one")
				}
			default:
				if resp.StatusCode != 304 || len(body) != 0 {
					t.Errorf("%s: %d with %d bytes, want 304", hdr[0], resp.StatusCode, len(body))
				}
			}
		}
	})
	t.Run("garbage-paths", func(t *testing.T) {
		var hosts []string
		for _, cl := range []string{ClassRedirects, ClassTrap, ClassNearDup, ClassURLVariants, ClassErrors, ClassNonHTML, ClassSitemapIndexGz} {
			hosts = append(hosts, firstHost(t, tr, cl).Host)
		}
		paths := []string{"/-", "/-.html", "/x-01.html", "/x-99999999999999999999.html", "/old/", "/old/-1", "/old/99999",
			"/go//", "/go/1/", "/go/-1/2", "/go/999999/0", "/calendar/x/", "/calendar/2024/13/", "/calendar/2024/1/",
			"/print/-1.html", "/print/99999.html", "/list?page=x", "/list?page=7", "/list?page=7&cat=nope",
			"/files/report-x.pdf", "/sitemaps/part-999.xml.gz", "/sitemaps/part-01.xml.gz", "/%41", "/a/../../b"}
		for _, h := range hosts {
			for _, p := range paths {
				f, err := get(c, "http://"+h+w.portSuffix+p)
				if err != nil {
					t.Fatalf("%s%s: %v", h, p, err)
				}
				if f.status != 404 {
					t.Errorf("%s%s: %d, want 404", h, p, f.status)
				}
			}
		}
	})
	t.Run("method", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, u(ClassSlow, "/"), nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("POST: %d", resp.StatusCode)
		}
	})
}

func TestRequestLogAndControl(t *testing.T) {
	w := startWeb(t, Config{Seed: 9, Hosts: 10, Pages: 100, Misbehave: []string{"none"}})
	tr := w.Truth()
	c := dnsClient(w, 30*time.Second)
	var urls []string
	for _, p := range tr.Pages[:5] {
		urls = append(urls, p.URL)
	}
	urls = append(urls, "http://"+tr.Hosts[1].Host+w.portSuffix+"/nope.html?sid=1&b=2&a=1")
	var bodies [][]byte
	var statuses []int
	for _, u := range urls {
		f, err := get(c, u)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, f.body)
		statuses = append(statuses, f.status)
	}
	// Handlers log after the response is written: wait for the entries.
	deadline := time.Now().Add(2 * time.Second)
	for len(w.Requests(0)) < len(urls) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	log := w.Requests(0)
	if len(log) != len(urls) {
		t.Fatalf("%d log entries for %d requests", len(log), len(urls))
	}
	byURL := map[string]Request{}
	for i, r := range log {
		if r.Index != i {
			t.Errorf("entry %d has index %d", i, r.Index)
		}
		byURL[r.Target+"@"+r.VHost] = r
	}
	for i, u := range urls {
		nu, _ := Normalize(u)
		pu := mustParse(t, u)
		r, ok := byURL[pu.RequestURI()+"@"+pu.Hostname()]
		if !ok {
			t.Errorf("no log entry for %s", u)
			continue
		}
		if r.Status != statuses[i] || r.Bytes != int64(len(bodies[i])) || !r.Completed || r.Method != "GET" ||
			r.URL != nu || r.UserAgent != "sou-test" || r.End.Before(r.Start) || r.DurationNS <= 0 || r.DurationNS > r.EndNS-r.StartNS+int64(time.Millisecond) {
			t.Errorf("%s: log entry %+v; served status %d, %d bytes", u, r, statuses[i], len(bodies[i]))
		}
		if !strings.HasPrefix(r.Client, "127.") {
			t.Errorf("client %q", r.Client)
		}
	}
	if got := w.Requests(4); len(got) != 2 || got[0].Index != 4 {
		t.Errorf("Requests(4) = %d entries", len(got))
	}
	if got := w.Requests(100); len(got) != 0 {
		t.Errorf("Requests(100) = %d entries", len(got))
	}
	// Control endpoints.
	hc := &http.Client{Timeout: 5 * time.Second}
	var reqs []Request
	getJSON(t, hc, w.ControlURL()+"/requests?since=3", &reqs)
	if len(reqs) != len(urls)-3 || reqs[0].Index != 3 {
		t.Errorf("/requests?since=3 gave %d entries", len(reqs))
	}
	var truth Truth
	getJSON(t, hc, w.ControlURL()+"/truth", &truth)
	if len(truth.Pages) != len(tr.Pages) || truth.Required != tr.Required || len(truth.Hosts) != 10 {
		t.Errorf("/truth: %d pages %d required, want %d %d", len(truth.Pages), truth.Required, len(tr.Pages), tr.Required)
	}
	if len(truth.Classes) != 0 {
		t.Errorf("misbehave none, truth classes %v", truth.Classes)
	}
	resp, err := hc.Get(w.ControlURL() + "/requests?since=-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("since=-1: %d", resp.StatusCode)
	}
	var buf bytes.Buffer
	if err := w.WriteRequests(&buf); err != nil || !json.Valid(buf.Bytes()) {
		t.Errorf("WriteRequests: %v", err)
	}
}

func getJSON(t *testing.T, c *http.Client, u string, v any) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
}

func TestCloseReleasesEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	w, err := Start(context.Background(), Config{Seed: 1, Hosts: 20, Pages: 200})
	if err != nil {
		t.Fatal(err)
	}
	tr := w.Truth()
	// A request held by the blackhole host must not keep Close waiting.
	var hole string
	for _, h := range tr.Hosts {
		if contains(h.Classes, ClassBlackhole) {
			hole = h.Host
		}
	}
	if hole == "" {
		t.Fatal("no blackhole host")
	}
	done := make(chan error, 1)
	go func() {
		_, err := get(dnsClient(w, 30*time.Second), "http://"+hole+w.portSuffix+"/")
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Close took %v", took)
	}
	if err := <-done; err == nil {
		t.Error("blackhole request succeeded")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, a := range []string{w.HTTPAddr(), w.DNSAddr(), strings.TrimPrefix(w.ControlURL(), "http://")} {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Errorf("%s still bound: %v", a, err)
			continue
		}
		l.Close()
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("%d goroutines before Start, %d after Close", before, n)
	}
	pc, err := net.ListenPacket("udp", w.DNSAddr())
	if err != nil {
		t.Errorf("dns udp %s still bound: %v", w.DNSAddr(), err)
	} else {
		pc.Close()
	}
	if w.HTTP6Addr() != "" {
		l, err := net.Listen("tcp", w.HTTP6Addr())
		if err != nil {
			t.Errorf("%s still bound: %v", w.HTTP6Addr(), err)
		} else {
			l.Close()
		}
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative hosts", Config{Hosts: -1}, "hosts"},
		{"nothing", Config{}, "nothing to serve"},
		{"missing sites", Config{Sites: filepath.Join(dir, "none.tsv")}, "no such file"},
		{"docroot missing", Config{Sites: write("a.tsv", "a.test\t/nonexistent/x\tindex.html\tmain\n")}, "docroot"},
		{"docroot is a file", Config{Sites: write("b.tsv", "b.test\t"+file+"\tindex.html\tmain\n")}, "not a directory"},
		{"bad role", Config{Sites: write("c.tsv", "c.test\t"+dir+"\tindex.html\tcopy\n")}, "role"},
		{"bad line", Config{Sites: write("d.tsv", "just-a-host\n")}, "want HOST"},
		{"unknown class", Config{Hosts: 3, Misbehave: []string{"weird"}}, "unknown misbehaviour"},
		{"port in use", Config{Hosts: 3, BindIP: "127.0.0.1", Port: busyPort}, "address already in use"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := Start(context.Background(), c.cfg)
			if err == nil {
				w.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line containing %q", err, c.want)
			}
		})
	}
}

func TestContextCancelCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := Start(ctx, Config{Seed: 1, Hosts: 5, Pages: 50})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		l, err := net.Listen("tcp", w.HTTPAddr())
		if err == nil {
			l.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("cancelling the context did not release the HTTP port")
}

func TestClassAssignment(t *testing.T) {
	cases := []struct {
		name      string
		misbehave []string
		want      []string
	}{
		{"all by default", nil, AllClasses},
		{"all", []string{"all"}, AllClasses},
		{"none", []string{"none"}, nil},
		{"some", []string{"trap", " Slow "}, []string{ClassSlow, ClassTrap}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enabled, err := ParseClasses(c.misbehave)
			if err != nil {
				t.Fatal(err)
			}
			sy := newSynth(1, 30, 600, enabled)
			got := map[string]bool{}
			for _, s := range sy.sites {
				for cl := range s.classes {
					got[cl] = true
				}
				if s.portal && len(s.classes) > 0 {
					t.Errorf("portal %s misbehaves: %v", s.name, s.sortedClasses())
				}
				exclusive := 0
				for _, cl := range exclusiveClasses {
					if s.classes[cl] {
						exclusive++
					}
				}
				if exclusive > 1 || (exclusive == 1 && !s.has(ClassMirror) && len(s.classes) > 1) {
					t.Errorf("%s: exclusive class shared: %v", s.name, s.sortedClasses())
				}
				if s.has(ClassMirror) && (s.mirrorOf == nil || s.mirrorOf.has(ClassMirror)) {
					t.Errorf("%s: mirror without a proper source", s.name)
				}
			}
			if len(got) != len(c.want) {
				t.Errorf("classes on hosts: %d, want %d", len(got), len(c.want))
			}
			for _, cl := range c.want {
				if !got[cl] {
					t.Errorf("no host has %s", cl)
				}
			}
		})
	}
}
