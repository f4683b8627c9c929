package index

import (
	"errors"
	"fmt"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// A page's compressed parts (the rest of its record after the summary,
// and its raw body) are written as pageS2 followed by one S2 block.
// S2 compresses and decompresses HTML several times faster than zstd at
// its fastest level, for more bytes (BENCHMARKS.md, "Pages in S2, a
// 64-byte threshold"): compression was most of a stored page's own CPU,
// and every snippet decompresses a record. Parts written
// before, or by a peer of an older build, are zstd frames, whose first
// byte is 0x28 (their magic number); they are read as before.
const pageS2 = 0x53 // 'S'

// maxLocalPartBytes bounds what a part this index stored may decompress
// to; parts from peers have the tighter caps of stored.go.
const maxLocalPartBytes = 64 << 20

// errPageTooLarge: a compressed part that says it decompresses to more
// than its reader's cap.
var errPageTooLarge = errors.New("decompresses over its cap")

// compressPage appends src compressed (pageS2, then an S2 block) to dst.
// S2 encodes into a pooled buffer (ix.encodeBufs) and the block is copied
// out: an encoder needs room for its worst case, larger than the input,
// and a stored value should keep only its own bytes.
func (ix *Index) compressPage(src, dst []byte) []byte {
	buf, _ := ix.encodeBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	block := s2.Encode((*buf)[:cap(*buf)], src)
	dst = append(append(slices.Grow(dst, 1+len(block)), pageS2), block...)
	if cap(block) <= 4<<20 {
		*buf = block[:0]
		ix.encodeBufs.Put(buf)
	}
	return dst
}

// rawPart is the stored part of c's raw body: the caller's S2 block
// (Document.RawS2) when it states the length of c.Raw (a raw body that
// validate cut to MaxRawBytes is shorter than its block says), else c.Raw
// compressed here.
func (ix *Index) rawPart(c *Document) []byte {
	if len(c.Raw) == 0 {
		return nil
	}
	if n, err := s2.DecodedLen(c.RawS2); err == nil && n == len(c.Raw) {
		return append(append(make([]byte, 0, 1+len(c.RawS2)), pageS2), c.RawS2...)
	}
	return ix.compressPage(c.Raw, nil)
}

// decompressPage decompresses a part compressPage wrote, or a legacy zstd
// frame (by zdec), into dst's capacity (dst's contents are not kept). A
// part that would decompress to more than limit bytes is an error before
// any work: S2 states its length up front, and zdec is built with the
// same cap for parts from peers.
func decompressPage(zdec *zstd.Decoder, src, dst []byte, limit int) ([]byte, error) {
	if len(src) == 0 || src[0] != pageS2 {
		out, err := zdec.DecodeAll(src, dst[:0])
		if err == nil && len(out) > limit {
			err = errPageTooLarge
		}
		return out, err
	}
	block := src[1:]
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("s2: %w", err)
	}
	if n > limit {
		return nil, fmt.Errorf("s2 block of %d bytes: %w", n, errPageTooLarge)
	}
	out, err := s2.Decode(dst[:0], block)
	if err != nil {
		return nil, fmt.Errorf("s2: %w", err)
	}
	return out, nil
}
