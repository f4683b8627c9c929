// Package htmltok is golang.org/x/net/html's tokenizer (v0.62.0) changed to
// read a byte slice in place instead of an io.Reader: the tokens, their raw
// bytes, text and attributes are the same as x/net/html's for every input
// (TestMatchesXNetHTML and FuzzMatchesXNetHTML compare the two).
//
// Why a copy: crawl parses every fetched page with the tokenizer, and
// x/net/html reads its input one byte at a time through a call that copies
// the reader into a growing buffer and cannot be inlined, and allocates a
// string and a map entry for every attribute (the measurements are in
// BENCHMARKS.md, "A tokenizer over the page's bytes"). The changes, none
// of which alters a token:
//   - input is the caller's slice, never written to: Text and TagAttr copy
//     what they unescape, lower-case or convert into a scratch buffer that
//     the next call to Next reuses, so what TagAttr returns is valid until
//     then (x/net/html's were copies the caller kept);
//   - runs of text, raw text, script data and quoted attribute values, and
//     the first '\r' and '&' of what Text and TagAttr convert, are found
//     with bytes.IndexByte;
//   - a repeated attribute is found by comparing keys in place (a map only
//     past attrScanMax attributes), not by a string and a map per attribute;
//   - what crawl does not use is gone: CDATA (x/net/html's default refuses
//     it too), fragments, NextIsNotRawText, Token, TagName and the buffer
//     limit.
//
// entity.go is x/net/html's unchanged; escape.go keeps its unescaping
// (finding the first '&' with bytes.IndexByte). The tests compare with the
// x/net/html of go.mod, so an upgrade that changes its tokens fails them
// until this copy follows.
package htmltok
