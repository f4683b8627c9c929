package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"sou/index"
)

// warcRecord is one record as a WARC reader sees it.
type warcRecord struct {
	header map[string]string
	block  []byte
}

// readWARC is a strict WARC 1.1 reader: version line, named fields,
// Content-Length-delimited block, and the two CRLFs after each record.
func readWARC(r io.Reader) ([]warcRecord, error) {
	br := bufio.NewReader(r)
	var out []warcRecord
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if line != "WARC/1.1\r\n" {
			return nil, fmt.Errorf("record %d: version line %q", len(out), line)
		}
		h := map[string]string{}
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return nil, err
			}
			if l == "\r\n" {
				break
			}
			k, v, ok := strings.Cut(strings.TrimRight(l, "\r\n"), ": ")
			if !ok {
				return nil, fmt.Errorf("record %d: bad field %q", len(out), l)
			}
			h[k] = v
		}
		n, err := strconv.Atoi(h["Content-Length"])
		if err != nil {
			return nil, fmt.Errorf("record %d: Content-Length %q", len(out), h["Content-Length"])
		}
		block := make([]byte, n)
		if _, err := io.ReadFull(br, block); err != nil {
			return nil, err
		}
		end := make([]byte, 4)
		if _, err := io.ReadFull(br, end); err != nil || string(end) != "\r\n\r\n" {
			return nil, fmt.Errorf("record %d: missing record end", len(out))
		}
		out = append(out, warcRecord{header: h, block: block})
	}
}

func sha1B32(b []byte) string {
	s := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
}

func TestWARCExportReadsBack(t *testing.T) {
	n, srv := newHandlerNode(t, testConfig(t))
	ctx := context.Background()
	pages := []*index.Document{
		{URL: "http://a.sim.test/", Host: "a.sim.test", Title: "A", Body: "alpha", Status: 200,
			Header: map[string][]string{"Content-Type": {"text/html; charset=utf-8"}, "Content-Encoding": {"gzip"}},
			Raw:    []byte("<html><title>A</title>alpha</html>"), FetchedAt: time.Unix(1700000000, 0)},
		{URL: "http://b.sim.test/x?y=1", Host: "b.sim.test", Title: "B", Body: "北京", Status: 200,
			Header: map[string][]string{"Content-Type": {"text/html; charset=gbk"}},
			Raw:    []byte{0xb1, 0xb1, 0xbe, 0xa9}, FetchedAt: time.Unix(1700000100, 0)},
		{URL: "http://b.sim.test/empty", Host: "b.sim.test", Title: "", Body: "empty", Status: 200, FetchedAt: time.Unix(1700000200, 0)},
	}
	for _, d := range pages {
		if err := n.ix.Put(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(srv.URL + "/api/export/warc")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/warc" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	recs, err := readWARC(resp.Body)
	if err != nil {
		t.Fatalf("read WARC: %v", err)
	}
	if len(recs) != len(pages)+1 || recs[0].header["WARC-Type"] != "warcinfo" {
		t.Fatalf("%d records (first %q), want a warcinfo and %d responses", len(recs), recs[0].header["WARC-Type"], len(pages))
	}
	byURL := map[string]warcRecord{}
	for _, r := range recs[1:] {
		if r.header["WARC-Type"] != "response" || !strings.HasPrefix(r.header["WARC-Record-ID"], "<urn:uuid:") {
			t.Fatalf("bad response record header %v", r.header)
		}
		if got := sha1B32(r.block); got != r.header["WARC-Block-Digest"] {
			t.Errorf("%s: block digest %s, header says %s", r.header["WARC-Target-URI"], got, r.header["WARC-Block-Digest"])
		}
		byURL[r.header["WARC-Target-URI"]] = r
	}
	for _, d := range pages {
		r, ok := byURL[d.URL]
		if !ok {
			t.Fatalf("no record for %s", d.URL)
		}
		hr, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(r.block)), nil)
		if err != nil {
			t.Fatalf("%s: HTTP message in the record: %v", d.URL, err)
		}
		payload, err := io.ReadAll(hr.Body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(payload, d.Raw) {
			t.Errorf("%s: payload %q, stored %q", d.URL, payload, d.Raw)
		}
		if got := sha1B32(payload); got != r.header["WARC-Payload-Digest"] {
			t.Errorf("%s: payload digest %s, header says %s", d.URL, got, r.header["WARC-Payload-Digest"])
		}
		if hr.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: Content-Encoding kept although the payload is decoded", d.URL)
		}
		if want := d.FetchedAt.UTC().Format("2006-01-02T15:04:05Z"); r.header["WARC-Date"] != want {
			t.Errorf("%s: WARC-Date %s, want %s", d.URL, r.header["WARC-Date"], want)
		}
	}
}

// TestWARCHostileFieldsSanitised: a stored page's URL and headers may come
// from a peer. CR, LF and other control characters in them, or header names
// that are not HTTP tokens, must not end a WARC or HTTP field early and
// inject one (issue 20, finding 10).
func TestWARCHostileFieldsSanitised(t *testing.T) {
	n, srv := newHandlerNode(t, testConfig(t))
	hostileURL := "http://a.sim.test/x\r\nWARC-Type: injected\r\nContent-Length: 0\r\n\r\nWARC/1.1\r\n"
	page := &index.Document{URL: hostileURL, Host: "a.sim.test", Title: "A", Body: "alpha", Status: 200, FetchedAt: time.Unix(1700000000, 0),
		Header: map[string][]string{
			"Content-Type":          {"text/html"},
			"X-Evil\r\nInjected":    {"v"},
			"Bad Name":              {"x"},
			"X:Colon":               {"y"},
			"Set-Cookie":            {"a=b\r\nInjected-Field: x"},
			"X-Control":             {"a\x00b\x1bc\x7fd"},
			"\r\nWARC-Type: forged": {"z"},
		},
		Raw: []byte("<html>alpha</html>")}
	if err := n.ix.Put(context.Background(), page); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/api/export/warc")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	recs, err := readWARC(resp.Body)
	if err != nil {
		t.Fatalf("the export does not read as WARC: %v", err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want a warcinfo and one response", len(recs))
	}
	rec := recs[1]
	want := "http://a.sim.test/x%0D%0AWARC-Type:%20injected%0D%0AContent-Length:%200%0D%0A%0D%0AWARC/1.1%0D%0A"
	if rec.header["WARC-Type"] != "response" || rec.header["WARC-Target-URI"] != want {
		t.Fatalf("record header %q", rec.header)
	}
	hr, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(rec.block)), nil)
	if err != nil {
		t.Fatalf("HTTP message in the record: %v\n%q", err, rec.block)
	}
	if got, _ := io.ReadAll(hr.Body); string(got) != "<html>alpha</html>" {
		t.Errorf("payload %q", got)
	}
	for name := range hr.Header {
		switch name {
		case "Content-Type", "Set-Cookie", "X-Control", "Content-Length":
		default:
			t.Errorf("header %q reached the record", name)
		}
	}
	if got := hr.Header.Get("Set-Cookie"); got != "a=b  Injected-Field: x" {
		t.Errorf("Set-Cookie %q, want the line break as spaces", got)
	}
	if got := hr.Header.Get("X-Control"); got != "a b c d" {
		t.Errorf("X-Control %q, want control characters as spaces", got)
	}
}

// failingWriter is a connection that breaks after limit bytes, as a
// client's network or a full disk on a proxy would.
type failingWriter struct {
	http.ResponseWriter
	limit int
}

func (f *failingWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) <= f.limit {
		f.limit -= len(p)
		return f.ResponseWriter.Write(p)
	}
	k := 0
	if f.limit > 0 {
		k, _ = f.ResponseWriter.Write(p[:f.limit])
		f.limit = 0
	}
	return k, errors.New("connection broke")
}

// TestWARCExportAbortsOnFailure: an export that fails after its first
// bytes breaks the connection, so the client sees a truncated transfer
// and not a clean end of a short file; one that fails before any byte is
// a 500.
func TestWARCExportAbortsOnFailure(t *testing.T) {
	n, _ := newHandlerNode(t, testConfig(t))
	for i := range 12 {
		d := &index.Document{URL: fmt.Sprintf("http://big.sim.test/%d", i), Host: "big.sim.test", Title: "big", Body: "big",
			Status: 200, FetchedAt: time.Unix(1700000000, 0), Raw: bytes.Repeat([]byte{'a' + byte(i)}, 64<<10)}
		if err := n.ix.Put(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	h := n.Handler()
	tests := []struct {
		name      string
		limit     int // -1: no failure
		status    int
		truncated bool
	}{
		{"complete", -1, 200, false},
		{"fails after 300 KB", 300 << 10, 200, true},
		{"fails at once", 0, 500, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.limit >= 0 {
					w = &failingWriter{ResponseWriter: w, limit: tc.limit}
				}
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/api/export/warc")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %.200s", resp.StatusCode, tc.status, body)
			}
			if truncated := err != nil; truncated != tc.truncated {
				t.Fatalf("read %d bytes, error %v; want truncated %v", len(body), err, tc.truncated)
			}
			if !tc.truncated && tc.status == 200 {
				if recs, err := readWARC(bytes.NewReader(body)); err != nil || len(recs) != 13 {
					t.Fatalf("complete export: %d records, %v", len(recs), err)
				}
			}
		})
	}
}
