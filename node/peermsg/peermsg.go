package peermsg

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"sou/crawl"
	"sou/index"
	"sou/p2p"
)

// version is what every payload but a pages message with analysed forms
// or stored pages starts with; such a pages message starts with
// versionForms (a node of version 1 refuses it, and analyses the pages it
// gets without forms), or with versionStored when it has stored pages (a
// node of version 2 refuses it, and the sender's outbox keeps it).
const (
	version       = 1
	versionForms  = 2
	versionStored = 3
)

// Caps of one payload.
const (
	MaxDocs          = 128
	MaxMarkers       = 100_000
	MaxAnchorURLs    = 100_000
	MaxAnchorsPerURL = 1024
	MaxSitemaps      = 1000
	MaxSitemapListed = 50_000
	MaxSitemapKids   = 1000
	MaxManifestHosts = 1_000_000
	MaxPullHave      = 400_000
	MaxHostURLs      = 1_000_000

	MaxHostBytes    = 300
	MaxURLBytes     = 8 << 10
	maxTitleBytes   = 4 << 10
	maxHeadings     = 128
	maxHeadingBytes = 2 << 10
	maxBodyBytes    = 2 << 20
	maxShortBytes   = 256 // language, content type, charset
	maxHeaderKeys   = 256
	maxHeaderValues = 64
	maxHeaderBytes  = 8 << 10
	maxAnchorBytes  = 2 << 10
	// MaxRawBytes bounds a page's raw bytes in one message; a larger
	// cached copy is cut by the sender.
	MaxRawBytes = 1536 << 10
	// MaxFormBytes bounds a page's analysed form; a sender leaves out a
	// form that would make its message too large.
	MaxFormBytes = 2 << 20
	// MaxStoredRecordBytes bounds a stored page's compressed record.
	MaxStoredRecordBytes = 4 << 20
	maxHostRecordBytes   = 64 << 10
	maxRobotsBytes       = 2 << 20
)

// Pages is what a holder of a host sends another holder: pages, URLs
// settled without a page, anchor texts for URLs of its hosts, and the
// sitemaps it read.
type Pages struct {
	Docs []*index.Document
	// Forms are the pages' analysed forms as the sender's index made them
	// (index.Index.Form): Forms[i] is Docs[i]'s, empty when the sender has
	// none. A receiver indexes a page by replaying its form
	// (index.Index.PutAnalysedBatch) instead of analysing it. nil when no
	// page has one.
	Forms [][]byte
	// Fetched are URLs the owner settled without a page to store
	// (redirects, errors, unindexed pages): a replica that takes the host
	// over must not fetch them again either.
	Fetched []Fetched
	// Anchors are anchor texts received for URLs (URL -> texts): the
	// anchor field must be the same wherever a page is indexed.
	Anchors map[string][]string
	// Sitemaps are the sitemaps the owner read, with what they listed.
	Sitemaps []Sitemap
	// Queued are URLs other members sent the owner, queued and not
	// fetched yet: a replica that takes the host over queues them again.
	// An optional last section (absent when empty) but before Stored.
	Queued []Fetched
	// Stored are pages as the sender's index stores them (compressed,
	// with their analysed forms): a replica holds them as they are. The
	// last section, present (with its queued section before it, maybe
	// empty) in a message of versionStored only.
	Stored []index.StoredPage
}

// Fetched is a URL of Host settled without a page.
type Fetched struct{ Host, URL string }

// Sitemap is a sitemap its owner read: the host's URLs it listed and the
// host's child sitemaps it named.
type Sitemap struct {
	Host, URL        string
	Listed, Children []string
}

// Manifest names the hosts a member is about to hand over to a joiner.
type Manifest struct{ Hosts []string }

// Pull asks a holder of Host for what it holds and the sender lacks;
// Have are 64-bit hashes of the URLs the sender holds.
type Pull struct {
	Host string
	Have []uint64
}

func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// cloneBytes copies b out of the message (nil for none).
func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = p2p.AppendString(b, s)
	}
	return b
}

func readStrings(r *p2p.Decoder, maxCount, maxBytes int, what string) []string {
	n := r.Count(maxCount, 1, what+" count")
	if n == 0 || r.Err() != nil {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.String(maxBytes, what)
	}
	return out
}

// EncodePages encodes m. Documents must respect the caps (node cuts raw
// bytes to MaxRawBytes); a document that does not is an error, so a
// sender never produces what its peers refuse.
func EncodePages(m *Pages) ([]byte, error) {
	if len(m.Docs) > MaxDocs || len(m.Fetched) > MaxMarkers || len(m.Anchors) > MaxAnchorURLs || len(m.Sitemaps) > MaxSitemaps || len(m.Queued) > MaxMarkers || len(m.Stored) > MaxDocs {
		return nil, fmt.Errorf("pages message over its caps: %d docs, %d markers, %d anchor URLs, %d sitemaps, %d queued, %d stored",
			len(m.Docs), len(m.Fetched), len(m.Anchors), len(m.Sitemaps), len(m.Queued), len(m.Stored))
	}
	v := byte(version)
	if len(m.Forms) > len(m.Docs) {
		return nil, fmt.Errorf("pages message with %d forms for %d pages", len(m.Forms), len(m.Docs))
	}
	for _, f := range m.Forms {
		if len(f) > MaxFormBytes {
			return nil, fmt.Errorf("analysed form of %d bytes over its cap", len(f))
		}
		if len(f) > 0 {
			v = versionForms
		}
	}
	for _, p := range m.Stored {
		if len(p.Record) == 0 || len(p.Record) > MaxStoredRecordBytes || len(p.Raw) > MaxRawBytes || len(p.Form) > MaxFormBytes {
			return nil, fmt.Errorf("stored page of %d record, %d raw and %d form bytes over its caps", len(p.Record), len(p.Raw), len(p.Form))
		}
		v = versionStored
	}
	b := make([]byte, 0, pagesSize(m))
	b = append(b, v)
	b = binary.AppendUvarint(b, uint64(len(m.Docs)))
	for i, d := range m.Docs {
		if err := checkDoc(d); err != nil {
			return nil, fmt.Errorf("encode page: %w", err)
		}
		b = appendDoc(b, d)
		if v >= versionForms {
			var f []byte
			if i < len(m.Forms) {
				f = m.Forms[i]
			}
			b = p2p.AppendLenBytes(b, f)
		}
	}
	b = appendURLs(b, m.Fetched)
	b = binary.AppendUvarint(b, uint64(len(m.Anchors)))
	for u, texts := range m.Anchors {
		if len(texts) > MaxAnchorsPerURL {
			texts = texts[len(texts)-MaxAnchorsPerURL:]
		}
		b = p2p.AppendString(b, u)
		b = appendStrings(b, texts)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Sitemaps)))
	for _, s := range m.Sitemaps {
		b = appendSitemap(b, s)
	}
	if len(m.Queued) > 0 || v == versionStored {
		b = appendURLs(b, m.Queued)
	}
	if v == versionStored {
		b = binary.AppendUvarint(b, uint64(len(m.Stored)))
		for _, p := range m.Stored {
			b = p2p.AppendLenBytes(b, p.Record)
			b = p2p.AppendLenBytes(b, p.Raw)
			b = p2p.AppendLenBytes(b, p.Form)
		}
	}
	return b, nil
}

// pagesSize is about the encoded size of m, so that EncodePages allocates
// a replica message once rather than doubling its way to megabytes.
func pagesSize(m *Pages) int {
	n := 64
	for i, d := range m.Docs {
		n += len(d.URL) + len(d.Host) + len(d.Title) + len(d.Body) + len(d.Lang) + len(d.ContentType) + len(d.Charset) + len(d.Raw) + 80
		for _, h := range d.Headings {
			n += len(h) + 3
		}
		for k, vs := range d.Header {
			n += len(k) + 3
			for _, v := range vs {
				n += len(v) + 3
			}
		}
		if i < len(m.Forms) {
			n += len(m.Forms[i]) + 4
		}
	}
	for _, p := range m.Stored {
		n += len(p.Record) + len(p.Raw) + len(p.Form) + 12
	}
	for _, fs := range [][]Fetched{m.Fetched, m.Queued} {
		for _, f := range fs {
			n += len(f.Host) + len(f.URL) + 4
		}
	}
	for u, texts := range m.Anchors {
		n += len(u) + 4
		for _, t := range texts {
			n += len(t) + 2
		}
	}
	for _, sm := range m.Sitemaps {
		n += len(sm.Host) + len(sm.URL) + 8
		for _, us := range [][]string{sm.Listed, sm.Children} {
			for _, u := range us {
				n += len(u) + 2
			}
		}
	}
	return n
}

func appendURLs(b []byte, us []Fetched) []byte {
	b = binary.AppendUvarint(b, uint64(len(us)))
	for _, f := range us {
		b = p2p.AppendString(b, f.Host)
		b = p2p.AppendString(b, f.URL)
	}
	return b
}

func readURLs(r *p2p.Decoder, what string) []Fetched {
	n := r.Count(MaxMarkers, 2, what+" count")
	if n == 0 {
		return nil
	}
	out := make([]Fetched, n)
	for i := range out {
		out[i] = Fetched{Host: r.String(MaxHostBytes, what+" host"), URL: r.String(MaxURLBytes, what+" URL")}
	}
	return out
}

func appendSitemap(b []byte, s Sitemap) []byte {
	b = p2p.AppendString(b, s.Host)
	b = p2p.AppendString(b, s.URL)
	b = appendStrings(b, s.Listed)
	return appendStrings(b, s.Children)
}

func readSitemap(r *p2p.Decoder) Sitemap {
	var s Sitemap
	s.Host = r.String(MaxHostBytes, "sitemap host")
	s.URL = r.String(MaxURLBytes, "sitemap URL")
	s.Listed = readStrings(r, MaxSitemapListed, MaxURLBytes, "sitemap listed URL")
	s.Children = readStrings(r, MaxSitemapKids, MaxURLBytes, "sitemap child")
	return s
}

// DecodePages decodes a Pages payload.
func DecodePages(b []byte) (*Pages, error) {
	r := p2p.NewDecoder(b)
	v := r.Byte()
	if r.Err() == nil && v != version && v != versionForms && v != versionStored {
		r.Fail("pages message version %d, want %d, %d or %d", v, version, versionForms, versionStored)
	}
	m := &Pages{}
	// A document takes at least 40 bytes (its lengths, status, time,
	// rank, hashes).
	if n := r.Count(MaxDocs, 40, "page count"); n > 0 {
		m.Docs = make([]*index.Document, 0, n)
		for i := 0; i < n && r.Err() == nil; i++ {
			m.Docs = append(m.Docs, readDoc(r))
			if v < versionForms {
				continue
			}
			if f := r.LenBytes(MaxFormBytes, "analysed form"); len(f) > 0 {
				if m.Forms == nil {
					m.Forms = make([][]byte, n)
				}
				m.Forms[i] = append([]byte(nil), f...)
			}
		}
	}
	if r.Err() == nil && v == versionForms && m.Forms == nil {
		r.Fail("pages message of version %d without a form", v)
	}
	m.Fetched = readURLs(r, "marker")
	if n := r.Count(MaxAnchorURLs, 2, "anchor URL count"); n > 0 {
		m.Anchors = make(map[string][]string, n)
		for i := 0; i < n && r.Err() == nil; i++ {
			u := r.String(MaxURLBytes, "anchor URL")
			texts := readStrings(r, MaxAnchorsPerURL, maxAnchorBytes, "anchor text")
			if _, dup := m.Anchors[u]; dup {
				r.Fail("anchor URL %q twice", u)
			}
			m.Anchors[u] = texts
		}
	}
	if n := r.Count(MaxSitemaps, 4, "sitemap count"); n > 0 {
		m.Sitemaps = make([]Sitemap, n)
		for i := range m.Sitemaps {
			m.Sitemaps[i] = readSitemap(r)
		}
	}
	switch {
	case v == versionStored:
		m.Queued = readURLs(r, "queued")
		// A stored page takes at least 4 bytes (three lengths and a
		// record byte).
		n := r.Count(MaxDocs, 4, "stored page count")
		if r.Err() == nil && n == 0 {
			r.Fail("pages message of version %d without a stored page", v)
		}
		if n > 0 && r.Err() == nil {
			m.Stored = make([]index.StoredPage, n)
			for i := range m.Stored {
				p := &m.Stored[i]
				p.Record = cloneBytes(r.LenBytes(MaxStoredRecordBytes, "stored page record"))
				p.Raw = cloneBytes(r.LenBytes(MaxRawBytes, "stored page raw body"))
				p.Form = cloneBytes(r.LenBytes(MaxFormBytes, "stored page form"))
				if r.Err() == nil && len(p.Record) == 0 {
					r.Fail("stored page without a record")
				}
			}
		}
	case r.Err() == nil && len(r.Rest()) > 0:
		m.Queued = readURLs(r, "queued")
		if r.Err() == nil && len(m.Queued) == 0 {
			r.Fail("empty queued section")
		}
	}
	if err := r.Done("pages message"); err != nil {
		return nil, err
	}
	return m, nil
}

func checkDoc(d *index.Document) error {
	switch {
	case d == nil:
		return fmt.Errorf("nil document")
	case d.URL == "" || len(d.URL) > MaxURLBytes || len(d.Host) > MaxHostBytes:
		return fmt.Errorf("URL or host length out of range")
	case len(d.Title) > maxTitleBytes || len(d.Headings) > maxHeadings || len(d.Body) > maxBodyBytes || len(d.Raw) > MaxRawBytes:
		return fmt.Errorf("%s: title, headings, body or raw bytes over their caps", d.URL)
	case len(d.Lang) > maxShortBytes || len(d.ContentType) > maxShortBytes || len(d.Charset) > maxShortBytes || len(d.Header) > maxHeaderKeys:
		return fmt.Errorf("%s: language, content type, charset or header over their caps", d.URL)
	case d.Status < 0 || d.Status > 999:
		return fmt.Errorf("%s: status %d", d.URL, d.Status)
	case math.IsNaN(d.StaticRank) || math.IsInf(d.StaticRank, 0) || d.StaticRank < 0:
		return fmt.Errorf("%s: static rank %v", d.URL, d.StaticRank)
	}
	for _, h := range d.Headings {
		if len(h) > maxHeadingBytes {
			return fmt.Errorf("%s: heading of %d bytes", d.URL, len(h))
		}
	}
	for k, vs := range d.Header {
		if len(k) > maxShortBytes || len(vs) > maxHeaderValues {
			return fmt.Errorf("%s: header %.40q over its caps", d.URL, k)
		}
		for _, v := range vs {
			if len(v) > maxHeaderBytes {
				return fmt.Errorf("%s: header %.40q value of %d bytes", d.URL, k, len(v))
			}
		}
	}
	return nil
}

func appendDoc(b []byte, d *index.Document) []byte {
	b = p2p.AppendString(b, d.URL)
	b = p2p.AppendString(b, d.Host)
	b = p2p.AppendString(b, d.Title)
	b = appendStrings(b, d.Headings)
	b = p2p.AppendString(b, d.Body)
	b = p2p.AppendString(b, d.Lang)
	b = binary.AppendUvarint(b, uint64(d.Status))
	b = appendU64(b, uint64(unixNano(d.FetchedAt)))
	b = p2p.AppendString(b, d.ContentType)
	b = p2p.AppendString(b, d.Charset)
	b = binary.AppendUvarint(b, uint64(len(d.Header)))
	for k, vs := range d.Header {
		b = p2p.AppendString(b, k)
		b = appendStrings(b, vs)
	}
	b = p2p.AppendLenBytes(b, d.Raw)
	b = appendU64(b, math.Float64bits(d.StaticRank))
	b = append(b, d.ContentHash[:]...)
	return appendU64(b, d.SimHash)
}

func readDoc(r *p2p.Decoder) *index.Document {
	d := &index.Document{}
	d.URL = r.String(MaxURLBytes, "page URL")
	d.Host = r.String(MaxHostBytes, "page host")
	d.Title = r.String(maxTitleBytes, "title")
	d.Headings = readStrings(r, maxHeadings, maxHeadingBytes, "heading")
	d.Body = r.String(maxBodyBytes, "body")
	d.Lang = r.String(maxShortBytes, "language")
	d.Status = int(r.Uvarint(999, "status"))
	if ns := int64(r.U64("fetch time")); ns != 0 {
		d.FetchedAt = time.Unix(0, ns)
	}
	d.ContentType = r.String(maxShortBytes, "content type")
	d.Charset = r.String(maxShortBytes, "charset")
	if n := r.Count(maxHeaderKeys, 2, "header count"); n > 0 {
		d.Header = make(map[string][]string, n)
		for i := 0; i < n && r.Err() == nil; i++ {
			k := r.String(maxShortBytes, "header name")
			vs := readStrings(r, maxHeaderValues, maxHeaderBytes, "header value")
			if _, dup := d.Header[k]; dup {
				r.Fail("header %q twice", k)
			}
			d.Header[k] = vs
		}
	}
	if raw := r.LenBytes(MaxRawBytes, "raw bytes"); len(raw) > 0 {
		d.Raw = append([]byte(nil), raw...)
	}
	d.StaticRank = math.Float64frombits(r.U64("static rank"))
	if r.Err() == nil && (math.IsNaN(d.StaticRank) || math.IsInf(d.StaticRank, 0) || d.StaticRank < 0) {
		r.Fail("static rank %v", d.StaticRank)
	}
	copy(d.ContentHash[:], r.Bytes(16, "content hash"))
	d.SimHash = r.U64("simhash")
	if r.Err() == nil && d.URL == "" {
		r.Fail("page without URL")
	}
	return d
}

// EncodeSitemap encodes one sitemap read (node keeps them in Badger too).
func EncodeSitemap(s Sitemap) []byte { return appendSitemap([]byte{version}, s) }

// DecodeSitemap decodes what EncodeSitemap wrote.
func DecodeSitemap(b []byte) (Sitemap, error) {
	r := p2p.NewDecoder(b)
	r.Version(version, "sitemap")
	s := readSitemap(r)
	return s, r.Done("sitemap")
}

// EncodeManifest encodes m.
func EncodeManifest(m Manifest) []byte { return appendStrings([]byte{version}, m.Hosts) }

// DecodeManifest decodes a manifest.
func DecodeManifest(b []byte) (Manifest, error) {
	r := p2p.NewDecoder(b)
	r.Version(version, "manifest")
	m := Manifest{Hosts: readStrings(r, MaxManifestHosts, MaxHostBytes, "manifest host")}
	return m, r.Done("manifest")
}

// EncodePull encodes m.
func EncodePull(m Pull) []byte {
	b := p2p.AppendString([]byte{version}, m.Host)
	b = binary.AppendUvarint(b, uint64(len(m.Have)))
	for _, h := range m.Have {
		b = appendU64(b, h)
	}
	return b
}

// DecodePull decodes a pull request.
func DecodePull(b []byte) (Pull, error) {
	r := p2p.NewDecoder(b)
	r.Version(version, "pull")
	m := Pull{Host: r.String(MaxHostBytes, "pull host")}
	if n := r.Count(MaxPullHave, 8, "pull hash count"); n > 0 {
		m.Have = make([]uint64, n)
		for i := range m.Have {
			m.Have[i] = r.U64("pull hash")
		}
	}
	if err := r.Done("pull"); err != nil {
		return Pull{}, err
	}
	if m.Host == "" {
		return Pull{}, fmt.Errorf("%w: pull without host", p2p.ErrMalformed)
	}
	return m, nil
}

// EncodeHostState encodes a host's crawl state (or one chunk of its URL
// records: node splits large hosts over several messages).
func EncodeHostState(e *crawl.HostExport) []byte {
	b := p2p.AppendString([]byte{version}, e.Host)
	b = p2p.AppendLenBytes(b, e.State)
	b = p2p.AppendLenBytes(b, e.Robots)
	b = binary.AppendUvarint(b, uint64(len(e.URLs)))
	for _, u := range e.URLs {
		b = p2p.AppendLenBytes(b, u)
	}
	return b
}

// DecodeHostState decodes a host's crawl state. Its records stay opaque
// bytes here; crawl.ImportHost decodes and checks each.
func DecodeHostState(b []byte) (*crawl.HostExport, error) {
	r := p2p.NewDecoder(b)
	r.Version(version, "host state")
	e := &crawl.HostExport{Host: r.String(MaxHostBytes, "host")}
	if s := r.LenBytes(maxHostRecordBytes, "host record"); len(s) > 0 {
		e.State = append([]byte(nil), s...)
	}
	if s := r.LenBytes(maxRobotsBytes, "robots record"); len(s) > 0 {
		e.Robots = append([]byte(nil), s...)
	}
	if n := r.Count(MaxHostURLs, 1, "URL record count"); n > 0 {
		e.URLs = make([][]byte, n)
		for i := range e.URLs {
			rec := r.LenBytes(maxHostRecordBytes, "URL record")
			if len(rec) == 0 {
				r.Fail("empty URL record")
			}
			e.URLs[i] = append([]byte(nil), rec...)
		}
	}
	if err := r.Done("host state"); err != nil {
		return nil, err
	}
	if e.Host == "" {
		return nil, fmt.Errorf("%w: host state without host", p2p.ErrMalformed)
	}
	return e, nil
}

// unixNano is t in Unix nanoseconds, 0 for the zero time (whose UnixNano
// is undefined).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
