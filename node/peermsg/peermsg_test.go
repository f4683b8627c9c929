package peermsg

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"sou/crawl"
	"sou/index"
	"sou/p2p"
)

func sampleDoc() *index.Document {
	return &index.Document{
		URL: "http://a.test/x.html", Host: "a.test", Title: "标题 title", Headings: []string{"h1", "第二"},
		Body: "body text 正文", Lang: "zh", Status: 200, FetchedAt: time.Unix(1700000000, 123).UTC(),
		ContentType: "text/html", Charset: "gbk", Header: map[string][]string{"Content-Type": {"text/html; charset=gbk"}},
		Raw: []byte("<html>\xb1\xea</html>"), StaticRank: 0.25, ContentHash: [16]byte{1, 2, 3}, SimHash: 0xdeadbeef,
	}
}

func samplePages() *Pages {
	return &Pages{
		Docs:     []*index.Document{sampleDoc(), {URL: "http://a.test/", Host: "a.test"}},
		Fetched:  []Fetched{{Host: "a.test", URL: "http://a.test/gone"}},
		Anchors:  map[string][]string{"http://a.test/x.html": {"see x", "x"}},
		Sitemaps: []Sitemap{{Host: "a.test", URL: "http://a.test/sitemap.xml", Listed: []string{"http://a.test/y"}, Children: []string{"http://a.test/s2.xml"}}},
		Queued:   []Fetched{{Host: "a.test", URL: "http://a.test/next"}},
	}
}

// formPages is samplePages with an analysed form for its first page.
func formPages() *Pages {
	m := samplePages()
	m.Forms = [][]byte{[]byte("form of x.html"), nil}
	return m
}

// storedPages is formPages with two stored pages and no queued URLs.
func storedPages() *Pages {
	m := formPages()
	m.Queued = nil
	m.Stored = []index.StoredPage{{Record: []byte("record"), Raw: []byte("raw"), Form: []byte("form")}, {Record: []byte("r2")}}
	return m
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		pages   *Pages
		version byte
	}{
		{samplePages(), version}, // without forms, what a node of version 1 reads
		{formPages(), versionForms},
		{storedPages(), versionStored},
		{&Pages{Stored: storedPages().Stored}, versionStored},
	} {
		pages := tc.pages
		b, err := EncodePages(pages)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != tc.version {
			t.Errorf("pages with %d forms encoded as version %d, want %d", len(pages.Forms), b[0], tc.version)
		}
		got, err := DecodePages(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got.Docs {
			d.FetchedAt = d.FetchedAt.UTC()
		}
		if !reflect.DeepEqual(got, pages) {
			t.Fatalf("pages round trip:\n got %+v\nwant %+v", got, pages)
		}
	}
	pages := samplePages()
	m := Manifest{Hosts: []string{"a.test", "b.test:8080"}}
	if got, err := DecodeManifest(EncodeManifest(m)); err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("manifest round trip: %+v, %v", got, err)
	}
	pl := Pull{Host: "a.test", Have: []uint64{1, 1 << 63}}
	if got, err := DecodePull(EncodePull(pl)); err != nil || !reflect.DeepEqual(got, pl) {
		t.Fatalf("pull round trip: %+v, %v", got, err)
	}
	e := &crawl.HostExport{Host: "a.test", State: []byte("state"), Robots: []byte("{}"), URLs: [][]byte{[]byte("u1"), []byte("u2")}}
	if got, err := DecodeHostState(EncodeHostState(e)); err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("host state round trip: %+v, %v", got, err)
	}
	s := pages.Sitemaps[0]
	if got, err := DecodeSitemap(EncodeSitemap(s)); err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("sitemap round trip: %+v, %v", got, err)
	}
}

// TestEncodeRefusesWhatPeersRefuse: a sender never produces a payload its
// peers' decoders reject.
func TestEncodeRefusesWhatPeersRefuse(t *testing.T) {
	for name, forms := range map[string][][]byte{
		"form over its cap":     {make([]byte, MaxFormBytes+1)},
		"more forms than pages": {[]byte("a"), []byte("b"), []byte("c")},
	} {
		m := samplePages()
		m.Forms = forms
		if _, err := EncodePages(m); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	for name, p := range map[string]index.StoredPage{
		"stored record over its cap": {Record: make([]byte, MaxStoredRecordBytes+1)},
		"stored page without record": {Raw: []byte("raw")},
		"stored raw over its cap":    {Record: []byte("r"), Raw: make([]byte, MaxRawBytes+1)},
		"stored form over its cap":   {Record: []byte("r"), Form: make([]byte, MaxFormBytes+1)},
	} {
		if _, err := EncodePages(&Pages{Stored: []index.StoredPage{p}}); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	for name, mutate := range map[string]func(d *index.Document){
		"raw":    func(d *index.Document) { d.Raw = make([]byte, MaxRawBytes+1) },
		"title":  func(d *index.Document) { d.Title = strings.Repeat("t", maxTitleBytes+1) },
		"rank":   func(d *index.Document) { d.StaticRank = -1 },
		"status": func(d *index.Document) { d.Status = 1000 },
		"url":    func(d *index.Document) { d.URL = "" },
	} {
		d := sampleDoc()
		mutate(d)
		if _, err := EncodePages(&Pages{Docs: []*index.Document{d}}); err == nil {
			t.Errorf("%s: encoded a document over its caps", name)
		}
	}
}

// lie builds a payload that announces count items of which none follows.
func lie(prefix []byte, count uint64) []byte {
	return binary.AppendUvarint(append([]byte{version}, prefix...), count)
}

// TestLyingCountsCostNothing: counts that the remaining bytes cannot hold
// are refused before anything is allocated for them (a gob decoder
// allocated a map of whatever size the wire announced).
func TestLyingCountsCostNothing(t *testing.T) {
	cases := []struct {
		name   string
		decode func([]byte) error
		msg    []byte
	}{
		{"pages", func(b []byte) error { _, err := DecodePages(b); return err }, lie(nil, MaxDocs)},
		{"markers", func(b []byte) error { _, err := DecodePages(b); return err }, lie([]byte{0}, MaxMarkers)},
		{"anchors", func(b []byte) error { _, err := DecodePages(b); return err }, lie([]byte{0, 0}, MaxAnchorURLs)},
		{"anchors over cap", func(b []byte) error { _, err := DecodePages(b); return err }, lie([]byte{0, 0}, 4_000_000)},
		{"manifest", func(b []byte) error { _, err := DecodeManifest(b); return err }, lie(nil, MaxManifestHosts)},
		{"pull", func(b []byte) error { _, err := DecodePull(b); return err }, lie([]byte{1, 'a'}, MaxPullHave)},
		{"host state", func(b []byte) error { _, err := DecodeHostState(b); return err }, lie([]byte{1, 'a', 0, 0}, MaxHostURLs)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := c.decode(c.msg)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, p2p.ErrMalformed) {
				t.Fatalf("want a malformed error, got %v", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
				t.Fatalf("refusing a %d-byte lie allocated %d bytes", len(c.msg), grew)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	good, err := EncodePages(samplePages())
	if err != nil {
		t.Fatal(err)
	}
	withForms, err := EncodePages(formPages())
	if err != nil {
		t.Fatal(err)
	}
	// version 2 whose every form is empty.
	one, err := EncodePages(&Pages{Docs: []*index.Document{{URL: "http://a.test/", Host: "a.test"}}, Forms: [][]byte{[]byte("FORM")}})
	if err != nil {
		t.Fatal(err)
	}
	noPages, err := EncodePages(&Pages{Fetched: []Fetched{{Host: "a.test", URL: "http://a.test/gone"}}})
	if err != nil {
		t.Fatal(err)
	}
	noPages[0] = versionForms
	i := bytes.Index(one, []byte("\x04FORM"))
	noForm := append(append(one[:i:i], 0), one[i+5:]...)
	stored, err := EncodePages(storedPages())
	if err != nil {
		t.Fatal(err)
	}
	noStored, err := EncodePages(&Pages{Stored: []index.StoredPage{{Record: []byte("R")}}})
	if err != nil {
		t.Fatal(err)
	}
	// noStored ends with the stored count 1, then 1 'R' (the record), 0
	// (raw), 0 (form).
	emptyRecord := append(bytes.Clone(noStored[:len(noStored)-4]), 0, 0, 0)
	cases := map[string][]byte{
		"stored truncated":           stored[:len(stored)-1],
		"stored, read as version 2":  append([]byte{versionForms}, stored[1:]...),
		"version 3 without stored":   append([]byte{versionStored}, withForms[1:]...),
		"version 3, stored count 0":  append(bytes.Clone(noStored[:len(noStored)-5]), 0),
		"version 3, empty record":    emptyRecord,
		"empty":                      nil,
		"version":                    append([]byte{9}, good[1:]...),
		"truncated":                  good[:len(good)-1],
		"trailing":                   append(bytes.Clone(good), 0),
		"invalid utf-8":              EncodeManifest(Manifest{Hosts: []string{"\xff"}}),
		"forms, read as version 1":   append([]byte{version}, withForms[1:]...),
		"version 1, read with forms": append([]byte{versionForms}, good[1:]...),
		"forms truncated":            withForms[:len(withForms)-1],
		"version 2 without a form":   noForm,
		"version 2 without pages":    noPages,
	}
	for name, b := range cases {
		_, err1 := DecodePages(b)
		_, err2 := DecodeManifest(b)
		if name == "invalid utf-8" {
			err1 = err2
		}
		if !errors.Is(err1, p2p.ErrMalformed) {
			t.Errorf("%s: want malformed, got %v", name, err1)
		}
	}
}

// benchPages is a replica message as an owner sends one: 32 pages of a
// few KB with their raw bytes, markers and anchors.
func benchPages() *Pages {
	m := &Pages{Anchors: map[string][]string{}}
	body := strings.Repeat("搜索引擎 search engine text ", 200)
	for i := range 32 {
		d := sampleDoc()
		d.URL = fmt.Sprintf("http://a.test/page-%d.html", i)
		d.Body = body
		d.Raw = []byte("<html><body>" + body + "</body></html>")
		m.Docs = append(m.Docs, d)
		m.Anchors[d.URL] = []string{"anchor text", "another"}
		m.Fetched = append(m.Fetched, Fetched{Host: "a.test", URL: d.URL + "?x"})
	}
	return m
}

// BenchmarkDecodePages is the cost of the bounded codec on a replica
// message, beside gob's on the same message (what it replaced).
func BenchmarkDecodePages(b *testing.B) {
	m := benchPages()
	enc, err := EncodePages(m)
	if err != nil {
		b.Fatal(err)
	}
	var gobBuf bytes.Buffer
	if err := gob.NewEncoder(&gobBuf).Encode(m); err != nil {
		b.Fatal(err)
	}
	b.Run("codec=peermsg", func(b *testing.B) {
		b.SetBytes(int64(len(enc)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodePages(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=gob", func(b *testing.B) {
		b.SetBytes(int64(gobBuf.Len()))
		b.ReportAllocs()
		for b.Loop() {
			var out Pages
			if err := gob.NewDecoder(bytes.NewReader(gobBuf.Bytes())).Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// EncodePages allocates a message once: pagesSize is never short.
func TestPagesSizeCoversTheEncoding(t *testing.T) {
	for name, m := range map[string]*Pages{"sample": samplePages(), "forms": formPages(), "stored": storedPages(), "bench": benchPages(), "empty": {}} {
		b, err := EncodePages(m)
		if err != nil {
			t.Fatal(err)
		}
		if est := pagesSize(m); est < len(b) {
			t.Errorf("%s: estimated %d bytes, encoded %d", name, est, len(b))
		}
	}
}
