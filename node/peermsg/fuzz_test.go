package peermsg

import (
	"testing"

	"sou/crawl"
)

// The fuzz targets feed arbitrary bytes to each decoder: it must return an
// error or a value that encodes back to a payload it decodes again (the
// caps on both sides agree), and never panic.

func FuzzDecodePages(f *testing.F) {
	b, err := EncodePages(samplePages())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	if b, err = EncodePages(formPages()); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	if b, err = EncodePages(storedPages()); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(lie([]byte{0, 0}, 4_000_000))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodePages(b)
		if err != nil {
			return
		}
		again, err := EncodePages(m)
		if err != nil {
			t.Fatalf("decoded pages do not encode: %v", err)
		}
		if _, err := DecodePages(again); err != nil {
			t.Fatalf("re-encoded pages do not decode: %v", err)
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add(EncodeManifest(Manifest{Hosts: []string{"a.test", "b.test"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			return
		}
		if _, err := DecodeManifest(EncodeManifest(m)); err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
	})
}

func FuzzDecodePull(f *testing.F) {
	f.Add(EncodePull(Pull{Host: "a.test", Have: []uint64{1, 2}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodePull(b)
		if err != nil {
			return
		}
		if _, err := DecodePull(EncodePull(m)); err != nil {
			t.Fatalf("re-encoded pull does not decode: %v", err)
		}
	})
}

func FuzzDecodeHostState(f *testing.F) {
	f.Add(EncodeHostState(&crawl.HostExport{Host: "a.test", State: []byte("s"), URLs: [][]byte{[]byte("u")}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeHostState(b)
		if err != nil {
			return
		}
		if _, err := DecodeHostState(EncodeHostState(e)); err != nil {
			t.Fatalf("re-encoded host state does not decode: %v", err)
		}
	})
}

func FuzzDecodeSitemap(f *testing.F) {
	f.Add(EncodeSitemap(Sitemap{Host: "a.test", URL: "http://a.test/s.xml", Listed: []string{"http://a.test/"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSitemap(b)
		if err != nil {
			return
		}
		if _, err := DecodeSitemap(EncodeSitemap(s)); err != nil {
			t.Fatalf("re-encoded sitemap does not decode: %v", err)
		}
	})
}
