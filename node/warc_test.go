package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net/http"
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
