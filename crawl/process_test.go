package crawl

import (
	"bytes"
	"net/http"
	"testing"
)

func TestProcEntryCodec(t *testing.T) {
	body := []byte("<html><body>héllo 世界</body></html>")
	roomy := append(make([]byte, 0, len(body)+procHeaderRoom), body...)
	tight := bytes.Clone(body)[:len(body):len(body)]
	for _, tt := range []struct {
		name    string
		body    []byte
		inPlace bool
	}{
		{"spare capacity", roomy, true},
		{"no spare capacity", tight, false},
		{"empty body", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := bytes.Clone(tt.body)
			e := &procEntry{URL: "http://a.test/x", Host: "a.test", Status: 200, Cash: 0.25, Depth: 3,
				Header: http.Header{"Etag": {`"v1"`}}, PrevHash: []byte{1, 2, 3}, Body: tt.body}
			v := e.encode()
			if !bytes.Equal(e.Body, want) {
				t.Fatalf("encode changed the body: %q", e.Body)
			}
			if shared := len(tt.body) > 0 && &v[0] == &tt.body[0]; shared != tt.inPlace {
				t.Errorf("entry shares the body's array: %v, want %v", shared, tt.inPlace)
			}
			got, err := decodeProcEntry(bytes.Clone(v))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body, want) || got.URL != e.URL || got.Cash != e.Cash || got.Depth != e.Depth ||
				got.Header.Get("ETag") != `"v1"` || !bytes.Equal(got.PrevHash, e.PrevHash) {
				t.Errorf("decoded %+v, want %+v", got, e)
			}
			if cap(got.Body) != len(got.Body) {
				t.Errorf("decoded body has spare capacity %d over the header", cap(got.Body)-len(got.Body))
			}
		})
	}
	for _, bad := range [][]byte{nil, {0, 0, 0}, {0xff, 0xff, 0xff, 0xff}, []byte("x{}\x00\x00\x00\x03"), []byte("body{\x00\x00\x00\x01")} {
		if _, err := decodeProcEntry(bad); err == nil {
			t.Errorf("decodeProcEntry(%q) accepted a corrupt entry", bad)
		}
	}
}
