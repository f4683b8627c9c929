package crawl

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/saintfish/chardet"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
)

// Charset decoding. Order of evidence: a byte-order mark (always wins, as in
// browsers), the Content-Type charset, <meta charset>/<meta http-equiv> in
// the first 4 KiB, then detection. Declarations are checked against the
// bytes, because mislabelled pages are common:
//   - bytes that are valid UTF-8 and contain non-ASCII are decoded as UTF-8
//     whatever a legacy declaration says (real GBK/Big5/Latin-1 text is
//     practically never valid UTF-8);
//   - a declared legacy charset is kept when its decoder produces (almost)
//     no replacement characters and plausible text; otherwise detection
//     candidates (saintfish/chardet, an ICU port, then GB18030, Big5,
//     Shift_JIS, EUC-KR, EUC-JP) are tried and the first that decodes
//     cleanly wins, or only one that is also plausible when the
//     declaration decoded cleanly; when none does, the declaration is kept.
// Labels follow the WHATWG encoding standard (x/net/html/charset), so
// "iso-8859-1" and "latin1" decode as windows-1252 and "gb2312" as GBK; the
// reported Charset is the canonical WHATWG name.

const (
	metaPrescanBytes = 4 << 10
	detectSampleSize = 32 << 10
)

// decodeCharset converts body to UTF-8 and names the charset it came from.
// The result may alias body when body is already UTF-8.
func decodeCharset(body []byte, contentType string, isHTML bool) ([]byte, string) {
	switch {
	case bytes.HasPrefix(body, []byte("\xef\xbb\xbf")):
		return sanitizeUTF8(body[3:]), "utf-8"
	case bytes.HasPrefix(body, []byte("\xff\xfe")):
		return decodeWith(unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM), body), "utf-16le"
	case bytes.HasPrefix(body, []byte("\xfe\xff")):
		return decodeWith(unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM), body), "utf-16be"
	}
	highBit := hasHighBit(body)
	if highBit && utf8.Valid(body) {
		// Such bytes are decoded as UTF-8 whatever the declaration says,
		// so it is not looked for.
		return body, "utf-8"
	}
	label := charsetParam(contentType)
	if label == "" && isHTML {
		label = metaCharset(body)
	}
	var declared encoding.Encoding
	name := ""
	if label != "" {
		declared, name = charset.Lookup(label)
		if name == "utf-16le" || name == "utf-16be" {
			// A declaration of UTF-16 without a BOM on an ASCII-compatible
			// page is a lie (the spec treats it as UTF-8).
			declared, name = nil, ""
		}
	}
	if !highBit {
		if declared != nil && name != "utf-8" && !asciiCompatible(name) {
			return decodeWith(declared, body), name
		}
		if name == "" {
			name = "utf-8"
		}
		return body, name
	}
	if name == "utf-8" && mostlyUTF8(body) {
		// A declared UTF-8 page with the odd broken sequence (text cut
		// mid-character, a stray Latin-1 byte) stays UTF-8: switching to a
		// single-byte charset would garble every other character.
		return sanitizeUTF8(body), "utf-8"
	}
	if declared != nil && name != "utf-8" && name != "replacement" {
		out := decodeWith(declared, body)
		clean := cleanDecode(out)
		if clean && plausibleDecode(out, name) {
			return out, name
		}
		// A clean decoding that only looks unlikely (a GBK page quoting
		// katakana) stays when the detector rates the declared charset
		// best, and otherwise gives way only to a candidate that is clean
		// and plausible, not to a guess.
		if alt, altName, ok := detectCharset(body, name, clean); ok {
			return alt, altName
		}
		return out, name
	}
	if alt, altName, ok := detectCharset(body, "", false); ok {
		return alt, altName
	}
	if name == "utf-8" || name == "" {
		return sanitizeUTF8(body), "utf-8"
	}
	return decodeWith(declared, body), name
}

// mostlyUTF8 reports whether at most one in twenty non-ASCII sequences of
// b is invalid UTF-8.
func mostlyUTF8(b []byte) bool {
	valid, invalid := 0, 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			invalid++
			i++
			continue
		}
		valid++
		i += n
	}
	return invalid*20 <= valid
}

// asciiCompatible reports whether ASCII bytes mean ASCII in the encoding
// (false for the 7-bit ISO-2022 family and UTF-16).
func asciiCompatible(name string) bool {
	return !strings.HasPrefix(name, "iso-2022") && !strings.HasPrefix(name, "utf-16")
}

func hasHighBit(b []byte) bool {
	const highBits = 0x8080808080808080
	for ; len(b) >= 8; b = b[8:] {
		if binary.LittleEndian.Uint64(b)&highBits != 0 {
			return true
		}
	}
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

func decodeWith(enc encoding.Encoding, b []byte) []byte {
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return sanitizeUTF8(b)
	}
	return out
}

// sanitizeUTF8 replaces invalid sequences with U+FFFD.
func sanitizeUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return bytes.ToValidUTF8(b, []byte("\uFFFD"))
}

// cleanDecode accepts a decoding with at most one replacement character per
// 2000 runes (real pages carry the odd broken byte).
func cleanDecode(out []byte) bool {
	bad := bytes.Count(out, []byte("\uFFFD"))
	if bad == 0 {
		return true
	}
	return bad*2000 <= utf8.RuneCount(out)
}

// plausibleDecode rejects a clean decoding that is still unlikely text:
// many private-use characters, or (for Chinese and Korean encodings) many
// Japanese kana, which is what GBK bytes look like through a Big5 decoder.
func plausibleDecode(out []byte, name string) bool {
	chinese := name == "gbk" || name == "gb18030" || name == "big5" || name == "euc-kr"
	var nonASCII, odd int
	for i := 0; i < len(out); {
		if out[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(out[i:])
		i += size
		nonASCII++
		switch {
		case r >= 0xE000 && r <= 0xF8FF:
			odd++
		case chinese && r >= 0x3040 && r <= 0x30FF:
			odd++
		case chinese && r >= 0xFF61 && r <= 0xFF9F:
			odd++
		}
	}
	return odd*50 <= nonASCII
}

var detectionFallbacks = []string{"gb18030", "big5", "shift_jis", "euc-kr", "euc-jp"}

// detectCharset tries the detector's candidates, then the CJK fallbacks,
// skipping exclude, and returns the first that decodes cleanly and
// plausibly; failing that the first clean one, then a single-byte charset.
// When declaredClean (exclude is a declaration that decoded cleanly) it
// returns only a clean and plausible candidate, and none when the detector
// rates exclude's family best.
func detectCharset(body []byte, exclude string, declaredClean bool) ([]byte, string, bool) {
	sample := body
	if len(sample) > detectSampleSize {
		sample = sample[:detectSampleSize]
	}
	var candidates []string
	if results, err := chardet.NewHtmlDetector().DetectAll(sample); err == nil {
		// The detector's recognizers report in the order their goroutines
		// finish, and it sorts without keeping order, so results of equal
		// confidence come in any order; the name decides between them.
		slices.SortStableFunc(results, func(a, b chardet.Result) int {
			if a.Confidence != b.Confidence {
				return cmp.Compare(b.Confidence, a.Confidence)
			}
			return strings.Compare(a.Charset, b.Charset)
		})
		if declaredClean && len(results) > 0 {
			if _, best := charset.Lookup(chardetLabel(results[0].Charset)); sameFamily(best, exclude) {
				return nil, "", false
			}
		}
		for _, r := range results {
			if r.Confidence < 10 {
				continue
			}
			candidates = append(candidates, chardetLabel(r.Charset))
		}
	}
	candidates = append(candidates, detectionFallbacks...)
	tried := map[string]bool{exclude: true, "utf-8": true}
	var firstClean encoding.Encoding
	firstCleanName := ""
	for _, label := range candidates {
		enc, name := charset.Lookup(label)
		if enc == nil || tried[name] || !asciiCompatible(name) {
			continue
		}
		tried[name] = true
		if isSingleByte(name) {
			// Single-byte charsets decode anything; they are considered
			// only after every multi-byte candidate failed.
			continue
		}
		// Judge on the sample, decode the whole body only for the winner.
		out := decodeWith(enc, sample)
		if cleanDecode(out) {
			if plausibleDecode(out, name) {
				return decodeWith(enc, body), name, true
			}
			if firstClean == nil {
				firstClean, firstCleanName = enc, name
			}
		}
	}
	if declaredClean {
		return nil, "", false
	}
	if firstClean != nil {
		return decodeWith(firstClean, body), firstCleanName, true
	}
	// Nothing multi-byte fits: a single-byte Latin text (windows-1252 is a
	// superset of Latin-1 for printable characters).
	for _, label := range candidates {
		enc, name := charset.Lookup(label)
		if enc != nil && isSingleByte(name) && name != exclude {
			return decodeWith(enc, body), name, true
		}
	}
	if exclude != "windows-1252" {
		enc, name := charset.Lookup("windows-1252")
		return decodeWith(enc, body), name, true
	}
	return nil, "", false
}

// sameFamily reports whether two WHATWG charset names decode the same
// pages: equal, or GBK and its superset GB18030.
func sameFamily(a, b string) bool {
	gb := func(n string) bool { return n == "gbk" || n == "gb18030" }
	return a == b || gb(a) && gb(b)
}

func isSingleByte(name string) bool {
	return strings.HasPrefix(name, "windows-") || strings.HasPrefix(name, "iso-8859") ||
		strings.HasPrefix(name, "koi8") || name == "ibm866" || name == "macintosh" || name == "x-mac-cyrillic"
}

func chardetLabel(s string) string {
	switch s {
	case "GB-18030":
		return "gb18030"
	case "ISO-8859-1":
		return "windows-1252"
	}
	return strings.ToLower(s)
}

// metaCharset finds a <meta charset> or <meta http-equiv="content-type">
// declaration in the first bytes of an HTML document.
func metaCharset(body []byte) string {
	if len(body) > metaPrescanBytes {
		body = body[:metaPrescanBytes]
	}
	if bytes.IndexByte(body, '<') < 0 || indexFoldBytes(body, "charset") < 0 {
		return ""
	}
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			switch rawTag(z.Raw()) {
			case tagBody:
				return ""
			case tagMeta:
			default:
				continue
			}
			var cs, httpEquiv, content string
			for more := true; more; {
				var k, v []byte
				k, v, more = z.TagAttr()
				switch string(k) {
				case "charset":
					cs = string(v)
				case "http-equiv":
					httpEquiv = string(v)
				case "content":
					content = string(v)
				}
			}
			if cs != "" {
				return strings.TrimSpace(cs)
			}
			if strings.EqualFold(strings.TrimSpace(httpEquiv), "content-type") && content != "" {
				if c := charsetParam(content); c != "" {
					return c
				}
			}
		}
	}
}

func indexFoldBytes(b []byte, sub string) int {
	n := len(sub)
	for i := 0; i+n <= len(b); i++ {
		c := b[i] | 0x20
		if c == sub[0] && equalFoldASCII(string(b[i:i+n]), sub) {
			return i
		}
	}
	return -1
}
