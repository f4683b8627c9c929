package crawl

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestProcEntryCodec(t *testing.T) {
	body := []byte("<html><body>héllo 世界 héllo 世界 héllo 世界</body></html>")
	roomy := append(make([]byte, 0, len(body)+procHeaderRoom), body...)
	tight := bytes.Clone(body)[:len(body):len(body)]
	var scratch sync.Pool
	for _, tt := range []struct {
		name     string
		body     []byte
		compress bool
		inPlace  bool
	}{
		{"spare capacity", roomy, false, true},
		{"no spare capacity", tight, false, false},
		{"empty body", nil, false, false},
		{"compressed", tight, true, true},
		{"compressed, empty body", nil, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := bytes.Clone(tt.body)
			e := &procEntry{URL: "http://a.test/x", Host: "a.test", Status: 200, Cash: 0.25, Depth: 3,
				Header: http.Header{"Etag": {`"v1"`}}, PrevHash: []byte{1, 2, 3}, Body: tt.body}
			stored := e.Body
			if tt.compress {
				e.BodyS2 = compressBody(&scratch, e.Body)
				stored = e.BodyS2
			}
			blockBefore := bytes.Clone(e.BodyS2)
			v := e.encode()
			if !bytes.Equal(e.Body, want) || !bytes.Equal(e.BodyS2, blockBefore) {
				t.Fatalf("encode changed the body: %q, %q", e.Body, e.BodyS2)
			}
			if shared := len(stored) > 0 && &v[0] == &stored[0]; shared != tt.inPlace {
				t.Errorf("entry shares the stored body's array: %v, want %v", shared, tt.inPlace)
			}
			if tt.compress && len(want) > 0 && len(e.BodyS2) >= len(want) {
				t.Errorf("compressed body of %d bytes for a body of %d", len(e.BodyS2), len(want))
			}
			got, err := decodeProcEntry(bytes.Clone(v))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body, want) || got.URL != e.URL || got.Cash != e.Cash || got.Depth != e.Depth ||
				got.Header.Get("ETag") != `"v1"` || !bytes.Equal(got.PrevHash, e.PrevHash) {
				t.Errorf("decoded %+v, want %+v", got, e)
			}
			if !bytes.Equal(got.BodyS2, e.BodyS2) {
				t.Errorf("decoded block %x, want %x", got.BodyS2, e.BodyS2)
			}
			if cap(got.Body) != len(got.Body) || cap(got.BodyS2) != len(got.BodyS2) {
				t.Errorf("decoded body has spare capacity over the header")
			}
		})
	}
	for _, bad := range [][]byte{nil, {0, 0, 0}, {0xff, 0xff, 0xff, 0xff}, []byte("x{}\x00\x00\x00\x03"), []byte("body{\x00\x00\x00\x01")} {
		if _, err := decodeProcEntry(bad); err == nil {
			t.Errorf("decodeProcEntry(%q) accepted a corrupt entry", bad)
		}
	}
}

// TestProcEntryCompressedRefuses: a stored compressed body that is damaged,
// or states a length over maxProcBodyBytes, is a corrupt entry (which
// process deletes), found before anything is allocated for it.
func TestProcEntryCompressedRefuses(t *testing.T) {
	body := bytes.Repeat([]byte("<p>a page of some length</p>"), 200)
	var scratch sync.Pool
	block := compressBody(&scratch, body)
	huge := binary.AppendUvarint(nil, maxProcBodyBytes+1) // an S2 block states its length first
	huge = append(huge, 0)
	for _, tt := range []struct {
		name  string
		block []byte
	}{
		{"cut", block[:len(block)/2]},
		{"garbage", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"states too much", huge},
		{"states more than it has", append(binary.AppendUvarint(nil, uint64(len(body)+10)), block[1:]...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &procEntry{URL: "http://a.test/x", Host: "a.test", Status: 200, BodyS2: bytes.Clone(tt.block)}
			v := e.encode()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := decodeProcEntry(v)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "decode processing entry") {
				t.Fatalf("decodeProcEntry of a %s block: %v, want a corrupt-entry error", tt.name, err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("refusing a %s block allocated %d bytes", tt.name, n)
			}
		})
	}
}

// TestProcEntryOfOlderBuilds: an entry an older build wrote (raw body, no
// "z") still decodes to its body, with no block.
func TestProcEntryOfOlderBuilds(t *testing.T) {
	body := []byte("<html>an old entry</html>")
	hdr := []byte(`{"u":"http://a.test/x","h":"a.test","s":200,"f":1}`)
	v := binary.BigEndian.AppendUint32(append(bytes.Clone(body), hdr...), uint32(len(hdr)))
	e, err := decodeProcEntry(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.Body, body) || e.BodyS2 != nil || e.URL != "http://a.test/x" {
		t.Errorf("decoded %+v", e)
	}
}
