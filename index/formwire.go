package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// A page's analysed form travels to the page's replicas, which index the
// page by replaying it (PutAnalysedBatch) instead of decoding, parsing and
// segmenting it again. The encoding, version formWireVersion:
//
//	byte     formWireVersion
//	string   Analyzer.Version of the index that made it (uvarint length, bytes)
//	byte     the page's script
//	uvarint  titleSpan, titleToks, bodyFrom, urlFrom, nToks
//	uvarint  term count, then each term (uvarint length, bytes)
//	uvarint  length of toks, then toks (analysedForm.toks)
//
// The bytes come from a peer, so decodeForm checks everything replayForm
// and the postings encoder rely on before it allocates or trusts it: the
// counts against the bytes left and against maxFormTokens, every term
// valid UTF-8 of at most maxTokenBytes, every token's term in the table,
// the field boundaries in order, title positions below titleSpan, and
// each term's positions strictly increasing across the whole form (what
// appendDocEntry's d-gaps need). What it cannot check is that the form is
// the analysis of the page's text: a replica trusts its owner's form as it
// trusts its owner's text, since the sender was authorised for the host.
const formWireVersion = 1

const (
	// maxFormTokens bounds a received form's tokens: well above what a
	// page of Options.MaxBodyBytes analyses into (about one token per
	// four bytes of English, two per Chinese character).
	maxFormTokens = 1 << 21
	// maxFormPosition bounds a received form's positions, so that shifting
	// the part after the anchors by the anchors' span cannot wrap.
	maxFormPosition = 1 << 28
)

// errFormVersion is a form made by another analyzer (or encoding) version.
var errFormVersion = errors.New("analysed form of another version")

// appendForm appends f's encoding, made by an analyzer of version av.
func appendForm(b []byte, f *analysedForm, av string) []byte {
	b = append(b, formWireVersion)
	b = binary.AppendUvarint(b, uint64(len(av)))
	b = append(b, av...)
	b = append(b, byte(f.page))
	for _, v := range []int{int(f.titleSpan), f.titleToks, f.bodyFrom, f.urlFrom, f.nToks} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = binary.AppendUvarint(b, uint64(len(f.termEnd)))
	lo := uint32(0)
	for _, hi := range f.termEnd {
		b = binary.AppendUvarint(b, uint64(hi-lo))
		b = append(b, f.terms[lo:hi]...)
		lo = hi
	}
	b = binary.AppendUvarint(b, uint64(len(f.toks)))
	return append(b, f.toks...)
}

// formReader reads a received form; the first error sticks.
type formReader struct {
	b   []byte
	err error
}

func (r *formReader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: analysed form: "+format, append([]any{errCorrupt}, a...)...)
	}
}

func (r *formReader) uvarint(max uint64, what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > max {
		r.fail("%s out of range", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *formReader) bytes(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("%s: %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

// decodeForm decodes and checks a received form made by an analyzer of
// version av. The form owns its memory (b may be reused).
func decodeForm(b []byte, av string) (*analysedForm, error) {
	r := &formReader{b: b}
	if v := r.bytes(1, "version"); r.err == nil && v[0] != formWireVersion {
		return nil, fmt.Errorf("%w: encoding %d", errFormVersion, v[0])
	}
	if v := r.bytes(r.uvarint(256, "analyzer version length"), "analyzer version"); r.err == nil && string(v) != av {
		return nil, fmt.Errorf("%w: analyzer %.40q", errFormVersion, v)
	}
	f := &analysedForm{}
	if s := r.bytes(1, "script"); r.err == nil {
		if f.page = script(s[0]); f.page < scriptUnknown || f.page > scriptTraditional {
			r.fail("script %d", s[0])
		}
	}
	f.titleSpan = uint32(r.uvarint(maxFormPosition, "title span"))
	f.titleToks = int(r.uvarint(maxFormTokens, "title tokens"))
	f.bodyFrom = int(r.uvarint(maxFormTokens, "body start"))
	f.urlFrom = int(r.uvarint(maxFormTokens, "URL start"))
	f.nToks = int(r.uvarint(maxFormTokens, "tokens"))
	if r.err == nil && !(f.titleToks <= f.bodyFrom && f.bodyFrom <= f.urlFrom && f.urlFrom <= f.nToks) {
		r.fail("field boundaries %d, %d, %d of %d tokens", f.titleToks, f.bodyFrom, f.urlFrom, f.nToks)
	}
	// A term takes at least two bytes (its length and one byte), a token
	// at least two (its term and its gap): counts are checked against the
	// bytes left before anything is allocated.
	nTerms := int(r.uvarint(uint64(min(f.nToks, len(r.b)/2)), "term count"))
	if r.err != nil {
		return nil, r.err
	}
	f.termEnd = make([]uint32, 0, nTerms)
	terms := make([]byte, 0, min(len(r.b), nTerms*maxTokenBytes))
	for range nTerms {
		t := r.bytes(r.uvarint(maxTokenBytes, "term length"), "term")
		if r.err != nil {
			return nil, r.err
		}
		if len(t) == 0 || !utf8.Valid(t) {
			r.fail("term %q", t)
			return nil, r.err
		}
		terms = append(terms, t...)
		f.termEnd = append(f.termEnd, uint32(len(terms)))
	}
	toks := r.bytes(r.uvarint(uint64(len(r.b)), "token bytes"), "tokens")
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the tokens", len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	if f.nToks > len(toks)/2 {
		return nil, fmt.Errorf("%w: analysed form: %d tokens in %d bytes", errCorrupt, f.nToks, len(toks))
	}
	if err := checkFormTokens(f, toks, nTerms); err != nil {
		return nil, err
	}
	f.terms, f.toks = string(terms), append([]byte(nil), toks...)
	return f, nil
}

// checkFormTokens checks that toks holds exactly f.nToks tokens of the
// form's nTerms terms, title positions below f.titleSpan, the rest below
// maxFormPosition, and each term's positions strictly increasing as the
// document lays them out (title, then the rest after titleSpan).
func checkFormTokens(f *analysedForm, toks []byte, nTerms int) error {
	last := make([]uint64, nTerms) // a term's last position plus one
	r := byteReader{b: toks}
	pos, base := uint64(0), uint64(0)
	for k := range f.nToks {
		if k == f.titleToks {
			pos, base = 0, uint64(f.titleSpan)
		}
		t, gap := uint64(r.uvarint()), uint64(r.uvarint())
		if r.err != nil {
			return fmt.Errorf("%w: analysed form: token %d", errCorrupt, k)
		}
		// positions are kept modulo 2^32 (formOf), and an honest gap is
		// small: a wrapped one would be over maxFormPosition here.
		pos = (pos + gap) & (1<<32 - 1)
		abs := base + pos
		switch {
		case t >= uint64(nTerms):
			return fmt.Errorf("%w: analysed form: token %d names term %d of %d", errCorrupt, k, t, nTerms)
		case k < f.titleToks && pos >= uint64(f.titleSpan), pos >= maxFormPosition:
			return fmt.Errorf("%w: analysed form: token %d at position %d", errCorrupt, k, pos)
		case abs < last[t]:
			return fmt.Errorf("%w: analysed form: term %d goes back at token %d", errCorrupt, t, k)
		}
		last[t] = abs + 1
	}
	if r.off != len(toks) {
		return fmt.Errorf("%w: analysed form: %d bytes after %d tokens", errCorrupt, len(toks)-r.off, f.nToks)
	}
	return nil
}
