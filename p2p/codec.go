package p2p

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrMalformed marks a message that does not decode. A correct peer never
// sends one, so the stream handlers throttle its sender at once.
var ErrMalformed = errors.New("malformed message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Decoder reads untrusted bytes for the binary codecs of p2p's protocols
// and of the payloads other packages send over them. Every length and
// count is checked against a cap and against the bytes that remain before
// anything is allocated, so a message costs at most about its own size.
// The first error sticks and every later read returns zero values, so a
// decoder checks Err (or Done) once at the end.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder reads b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err is the first error met, wrapping ErrMalformed.
func (r *Decoder) Err() error { return r.err }

// Rest is what has not been read yet.
func (r *Decoder) Rest() []byte { return r.b }

// Fail records a decoding error unless one is recorded already.
func (r *Decoder) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = malformed(format, args...)
	}
}

// Byte reads one byte.
func (r *Decoder) Byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.Fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// Version reads the version byte of a payload and fails unless it is want.
func (r *Decoder) Version(want byte, what string) {
	if v := r.Byte(); r.err == nil && v != want {
		r.Fail("%s version %d, want %d", what, v, want)
	}
}

// Uvarint reads an unsigned varint of at most max.
func (r *Decoder) Uvarint(max uint64, what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail("bad varint for %s", what)
		return 0
	}
	r.b = r.b[n:]
	if v > max {
		r.Fail("%s %d exceeds %d", what, v, max)
		return 0
	}
	return v
}

// Count reads the number of items that follow: at most max, and at most
// what the remaining bytes can hold when each item takes at least
// minBytes. Callers may allocate Count items at once. minBytes must not
// exceed the shortest encoding of a valid item, or a payload that decodes
// could fail to decode once re-encoded.
func (r *Decoder) Count(max, minBytes int, what string) int {
	n := int(r.Uvarint(uint64(max), what))
	if r.err == nil && minBytes > 0 && n > len(r.b)/minBytes {
		r.Fail("%s %d larger than the %d bytes left", what, n, len(r.b))
		return 0
	}
	return n
}

// Bytes reads n bytes; the result aliases the input.
func (r *Decoder) Bytes(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.Fail("truncated %s", what)
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

// LenBytes reads a uvarint length of at most max, then that many bytes.
func (r *Decoder) LenBytes(max int, what string) []byte {
	n := r.Uvarint(uint64(max), what+" length")
	return r.Bytes(int(n), what)
}

// String reads a length-prefixed string of at most max bytes that must be
// valid UTF-8.
func (r *Decoder) String(max int, what string) string {
	b := r.LenBytes(max, what)
	if r.err == nil && !utf8.Valid(b) {
		r.Fail("%s is not valid UTF-8", what)
		return ""
	}
	return string(b)
}

// U64 reads 8 bytes big-endian.
func (r *Decoder) U64(what string) uint64 {
	b := r.Bytes(8, what)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Done fails if bytes remain, and returns the first error.
func (r *Decoder) Done(what string) error {
	if r.err == nil && len(r.b) != 0 {
		r.Fail("%d trailing bytes after %s", len(r.b), what)
	}
	return r.err
}

// AppendLenBytes appends a uvarint length and s.
func AppendLenBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendString appends a uvarint length and s.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
