package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// zstdFastest compresses as pages were compressed before pagecodec.go
// (and still are by peers of older builds): stored pages in that form
// must read back.
func zstdFastest(t testing.TB) func(src, dst []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll
}

func TestDecompressPage(t *testing.T) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxLocalPartBytes))
	if err != nil {
		t.Fatal(err)
	}
	ix := &Index{}
	page := []byte(strings.Repeat("<p>正文 body text</p>\n", 500))
	s2Part := ix.compressPage(page, nil)
	zPart := zstdFastest(t)(page, nil)
	for _, c := range []struct {
		name    string
		part    []byte
		limit   int
		want    []byte
		tooBig  bool
		corrupt bool
	}{
		{name: "s2", part: s2Part, limit: len(page), want: page},
		{name: "zstd of an older build", part: zPart, limit: len(page), want: page},
		{name: "empty page", part: ix.compressPage(nil, nil), limit: 0, want: []byte{}},
		{name: "s2 over the limit", part: s2Part, limit: len(page) - 1, tooBig: true},
		{name: "zstd over the limit", part: zPart, limit: len(page) - 1, tooBig: true},
		{name: "s2 declaring 1 GiB", part: binary.AppendUvarint([]byte{pageS2}, 1<<30), limit: 1 << 20, tooBig: true},
		{name: "s2 cut short", part: s2Part[:len(s2Part)/2], limit: len(page), corrupt: true},
		{name: "s2 without a length", part: []byte{pageS2}, limit: len(page), corrupt: true},
		{name: "neither codec", part: []byte("<html>"), limit: len(page), corrupt: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := decompressPage(dec, c.part, make([]byte, 0, 64), c.limit)
			switch {
			case c.tooBig:
				if !errors.Is(err, errPageTooLarge) {
					t.Fatalf("err %v, want errPageTooLarge", err)
				}
			case c.corrupt:
				if err == nil {
					t.Fatal("a damaged part decompressed without an error")
				}
			case err != nil:
				t.Fatal(err)
			case !bytes.Equal(got, c.want):
				t.Fatalf("got %d bytes, want %d", len(got), len(c.want))
			}
		})
	}
	if len(s2Part) >= len(zPart)*2 {
		t.Errorf("s2 part %d bytes against zstd's %d: not compressed", len(s2Part), len(zPart))
	}
}

// A page stored by an older build (record rest and raw body in zstd)
// reads back whole beside one stored now.
func TestPagesOfOlderBuildsRead(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	ix := openIndex(t, db, 1)
	defer ix.Close()
	d := doc("http://a.example/new", "new page", "apple banana")
	d.Raw = []byte("<html><body>apple banana</body></html>")
	if err := ix.Put(ctx, d); err != nil {
		t.Fatal(err)
	}
	old := *d
	zenc := zstdFastest(t)
	err := db.Update(func(txn *badger.Txn) error {
		id, ok, err := getDocID(txn, d.URL)
		if err != nil || !ok {
			return fmt.Errorf("doc id of %s: %t, %w", d.URL, ok, err)
		}
		if err := txn.Set(docKey(prefixDoc, id), appendStored(nil, &old, zenc)); err != nil {
			return err
		}
		return txn.Set(docKey(prefixRaw, id), zenc(old.Raw, nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ix.Get(ctx, d.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got.Body != d.Body || got.Title != d.Title || !bytes.Equal(got.Raw, d.Raw) {
		t.Fatalf("read back %q %q %q", got.Title, got.Body, got.Raw)
	}
}

// FuzzDecompressPage: no input panics or decompresses past its limit.
func FuzzDecompressPage(f *testing.F) {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(1<<16))
	if err != nil {
		f.Fatal(err)
	}
	ix := &Index{}
	f.Add(ix.compressPage([]byte(strings.Repeat("abc", 100)), nil))
	f.Add(zstdFastest(f)([]byte("hello"), nil))
	f.Add(binary.AppendUvarint([]byte{pageS2}, 1<<30))
	f.Fuzz(func(t *testing.T, part []byte) {
		out, err := decompressPage(dec, part, nil, 1<<16)
		if err == nil && len(out) > 1<<16 {
			t.Fatalf("%d bytes past the limit", len(out))
		}
	})
}

// BenchmarkPageCodec compresses and decompresses each of the two parts a
// stored page has, its raw HTML and its record's rest, for 200 real pages of
// each of two sites, in S2 (pagecodec.go) and in zstd at its fastest
// level (older builds). Reports CPU per page and the compressed share.
//
//	go test -run '^$' -bench BenchmarkPageCodec -count 6 ./index/
func BenchmarkPageCodec(b *testing.B) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		b.Fatal(err)
	}
	ix := &Index{}
	codecs := []struct {
		name string
		enc  func(src, dst []byte) []byte
	}{{"s2", ix.compressPage}, {"zstd", zstdFastest(b)}}
	for _, set := range []struct{ name, pattern string }{
		{"help-zh-CN", "/usr/share/libreoffice/help/zh-CN/text/shared/01/*.html"},
		{"python", "/usr/share/doc/python3*/html/library/*.html"},
	} {
		docs := corpusPages(b, set.pattern, 200)
		paths, _ := filepath.Glob(set.pattern)
		slices.Sort(paths)
		raws, rests := make([][]byte, len(docs)), make([][]byte, len(docs))
		for i, d := range docs {
			if raws[i], err = os.ReadFile(paths[i]); err != nil {
				b.Fatal(err)
			}
			rests[i] = encodeRest(d)
		}
		for _, part := range []struct {
			name  string
			parts [][]byte
		}{{"raw", raws}, {"rest", rests}} {
			var plain int64
			for _, p := range part.parts {
				plain += int64(len(p))
			}
			for _, c := range codecs {
				name := set.name + "/" + part.name + "/" + c.name
				b.Run(name+"/compress", func(b *testing.B) {
					var out int64
					cpu0 := cpuTime()
					var dst []byte
					for b.Loop() {
						out = 0
						for _, p := range part.parts {
							dst = c.enc(p, dst[:0])
							out += int64(len(dst))
						}
					}
					b.SetBytes(plain)
					b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*len(docs)), "cpu-µs/page")
					b.ReportMetric(float64(out)/float64(plain), "compressed/plain")
				})
				compressed := make([][]byte, len(part.parts))
				for i, p := range part.parts {
					compressed[i] = c.enc(p, nil)
				}
				b.Run(name+"/decompress", func(b *testing.B) {
					cpu0 := cpuTime()
					var dst []byte
					for b.Loop() {
						for _, p := range compressed {
							if dst, err = decompressPage(dec, p, dst, maxLocalPartBytes); err != nil {
								b.Fatal(err)
							}
						}
					}
					b.SetBytes(plain)
					b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*len(docs)), "cpu-µs/page")
				})
			}
		}
	}
}

// TestPutKeepsCallersBlock: a page put with its raw body as an S2 block
// (Document.RawS2) reads back the same raw body, stored as that block;
// a block that does not state the raw body's length, or a raw body cut to
// MaxRawBytes, is ignored and the raw body compressed here.
func TestPutKeepsCallersBlock(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	defer db.Close()
	opts := DefaultOptions()
	opts.FlushDocs, opts.FlushInterval, opts.MaxRawBytes = 1, 0, 4096
	ix, err := Open(db, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var raw []byte
	for i := range 60 {
		raw = fmt.Appendf(raw, "<p>apple %d banana %d cherry</p>", i*i%97, i%7)
	}
	long := []byte(strings.Repeat("<p>a long page</p>", 400)) // over MaxRawBytes
	other := []byte("<html>another page</html>")
	if bytes.Equal(s2.EncodeBest(nil, raw), s2.Encode(nil, raw)) {
		t.Fatal("the test needs a block unlike compressPage's")
	}
	for _, tt := range []struct {
		name      string
		raw       []byte
		block     []byte
		keepBlock bool
	}{
		// EncodeBest: a block compressPage would not make, so that
		// keeping it is seen.
		{"its block", raw, s2.EncodeBest(nil, raw), true},
		{"no block", raw, nil, false},
		{"block of another length", raw, s2.Encode(nil, other), false},
		{"not a block", raw, []byte{0xff, 0xff, 0xff}, false},
		{"raw cut to the cap", long, s2.Encode(nil, long), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := doc("http://a.example/"+strings.ReplaceAll(tt.name, " ", "-"), "a page", "apple banana")
			d.Raw, d.RawS2 = tt.raw, tt.block
			if err := ix.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
			want := tt.raw[:min(len(tt.raw), opts.MaxRawBytes)]
			got, err := ix.Get(ctx, d.URL)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Raw, want) {
				t.Fatalf("raw body of %d bytes read back, want %d", len(got.Raw), len(want))
			}
			p, err := ix.Stored(ctx, d.URL)
			if err != nil {
				t.Fatal(err)
			}
			if kept := bytes.Equal(p.Raw, append([]byte{pageS2}, tt.block...)); kept != tt.keepBlock {
				t.Errorf("stored the caller's block: %t, want %t", kept, tt.keepBlock)
			}
		})
	}
}
