package crawl

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
)

// The fetcher. Decisions:
//   - Our own DialContext resolves through the caching Resolver (never the
//     system resolver) and checks every address after resolution, so a name
//     that resolves to 127.0.0.1 or 10.x (DNS rebinding) cannot reach inside
//     unless AllowLoopback/AllowPrivate. No proxy from the environment.
//   - HTTP/1.1 with keep-alive; Accept-Encoding "gzip, deflate, br" is set by
//     us and decoded by us, so that the size cap applies to decoded bytes.
//   - Oversized bodies (including decompression bombs) are NOT an error: the
//     first MaxBodyBytes decoded bytes are returned with Truncated=true, and
//     the connection is closed rather than drained.
//   - Redirects are not followed: a 3xx comes back with Location resolved and
//     normalised, so the engine can treat the target as a new URL (perhaps
//     on a host another node owns).
//   - Bodies of content types we do not parse are not read (Skipped=true).
//     A script request (FetchRequest.Script) reads JavaScript, JSON and
//     text/plain bodies instead (others, HTML included, are Skipped), up to
//     MaxScriptBytes.
//   - Timeouts: ConnectTimeout per dial (and TLS handshake), FirstByteTimeout
//     from request written to response headers, TotalTimeout for everything
//     including the body. A body still arriving at TotalTimeout is kept as
//     far as it came, Truncated and TimedOut (Heritrix's "timeTrunc"), once
//     at least minTimeTruncatedBytes had arrived: the host is sending a large
//     page over a slow link, so the fetch is not a failure that counts
//     towards parking the host, and the links read so far are followed. A
//     trickle below that is a timeout: a host that drips bytes is parked.

// DefaultUserAgent names the crawler and says where it is explained.
const DefaultUserAgent = "sou/0.1 (+https://github.com/sou-search/sou/blob/main/docs/CRAWLER.md)"

// FetcherConfig configures a Fetcher.
type FetcherConfig struct {
	UserAgent                                      string
	MaxBodyBytes                                   int64 // decoded-size cap
	MaxScriptBytes                                 int64 // decoded-size cap of a script request
	ConnectTimeout, FirstByteTimeout, TotalTimeout time.Duration
	// AllowLoopback permits loopback and unspecified addresses; AllowPrivate
	// permits RFC 1918, unique-local, CGNAT and link-local addresses.
	// Multicast is never dialled.
	AllowLoopback, AllowPrivate bool
	// AcceptTypes are the media types whose bodies are read; others stop
	// after the headers. A missing Content-Type is read.
	AcceptTypes         []string
	MaxIdleConnsPerHost int
	// SourceIP, when valid, is the local address of connections to
	// addresses of its family (a testnet gives each node its own loopback
	// address, so the simulated web can tell the nodes apart).
	SourceIP netip.Addr
}

// DefaultFetcherConfig is polite and safe for the real web.
func DefaultFetcherConfig() FetcherConfig {
	return FetcherConfig{
		UserAgent:        DefaultUserAgent,
		MaxBodyBytes:     5 << 20,
		MaxScriptBytes:   2 << 20,
		ConnectTimeout:   10 * time.Second,
		FirstByteTimeout: 20 * time.Second,
		TotalTimeout:     60 * time.Second,
		AcceptTypes: []string{
			"text/html", "application/xhtml+xml", "text/plain",
			"application/xml", "text/xml", "application/gzip", "application/x-gzip",
		},
		MaxIdleConnsPerHost: 2,
	}
}

// FetchRequest is one GET. ETag and LastModified make it conditional.
// Script asks for an external script (read for its links), not a page.
type FetchRequest struct {
	URL                *url.URL
	ETag, LastModified string
	Script             bool
}

// FetchResponse is what came back.
type FetchResponse struct {
	URL         string
	Status      int
	Header      http.Header
	ContentType string // media type, lowercase, without parameters
	Body        []byte // after content-encoding decoding, capped
	Truncated   bool   // Body stopped at MaxBodyBytes, or at TotalTimeout (TimedOut)
	TimedOut    bool   // Body stopped at TotalTimeout while it was arriving
	Skipped     bool   // content type not accepted: body not read
	Location    string // for 3xx: absolute normalised target ("" if absent or invalid)
	RetryAfter  time.Duration
	Duration    time.Duration // total, body included
	FirstByte   time.Duration // until response headers
	RemoteAddr  string
}

// Fetcher performs HTTP GETs. It is safe for concurrent use.
type Fetcher struct {
	cfg       FetcherConfig
	resolver  *Resolver
	transport *http.Transport
	accept    map[string]struct{}
	dialer    net.Dialer
	srcDialer net.Dialer // dialer bound to cfg.SourceIP
	gzipPool  sync.Pool
}

// NewFetcher builds a fetcher whose connections go through r.
func NewFetcher(cfg FetcherConfig, r *Resolver) *Fetcher {
	def := DefaultFetcherConfig()
	if cfg.UserAgent == "" {
		cfg.UserAgent = def.UserAgent
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = def.MaxBodyBytes
	}
	if cfg.MaxScriptBytes <= 0 {
		cfg.MaxScriptBytes = def.MaxScriptBytes
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = def.ConnectTimeout
	}
	if cfg.FirstByteTimeout <= 0 {
		cfg.FirstByteTimeout = def.FirstByteTimeout
	}
	if cfg.TotalTimeout <= 0 {
		cfg.TotalTimeout = def.TotalTimeout
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = def.MaxIdleConnsPerHost
	}
	if r == nil {
		r = NewResolver(DefaultResolverConfig())
	}
	f := &Fetcher{cfg: cfg, resolver: r, accept: make(map[string]struct{})}
	for _, t := range cfg.AcceptTypes {
		f.accept[strings.ToLower(strings.TrimSpace(t))] = struct{}{}
	}
	f.dialer = net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	f.srcDialer = f.dialer
	if cfg.SourceIP.IsValid() {
		f.srcDialer.LocalAddr = &net.TCPAddr{IP: cfg.SourceIP.AsSlice()}
	}
	f.transport = &http.Transport{
		Proxy:                  nil,
		DialContext:            f.dialContext,
		ForceAttemptHTTP2:      false,
		DisableCompression:     true,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        60 * time.Second,
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ResponseHeaderTimeout:  cfg.FirstByteTimeout,
		MaxResponseHeaderBytes: 256 << 10,
		ExpectContinueTimeout:  time.Second,
	}
	return f
}

// Close releases idle connections.
func (f *Fetcher) Close() {
	f.transport.CloseIdleConnections()
}

// Accepts reports whether bodies of this Content-Type are read.
func (f *Fetcher) Accepts(contentType string) bool {
	if len(f.accept) == 0 {
		return true
	}
	mt := mediaType(contentType)
	if mt == "" {
		return true
	}
	_, ok := f.accept[mt]
	return ok
}

// isScriptBody reports whether a script request reads a body of media type
// mt: JavaScript (any of its registered and legacy names), JSON, text/plain
// (servers that do not know .js), or none.
func isScriptBody(mt string) bool {
	switch {
	case mt == "", mt == "text/plain", mt == "application/json":
		return true
	case strings.HasPrefix(mt, "text/") || strings.HasPrefix(mt, "application/"):
		return strings.Contains(mt, "javascript") || strings.Contains(mt, "ecmascript")
	}
	return false
}

func mediaType(contentType string) string {
	mt := contentType
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = mt[:i]
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// genericSitemapBody lets sitemaps and robots files served with a generic
// binary type through the content-type filter: servers commonly send
// .xml.gz as application/octet-stream. Pages with these extensions never
// reach the fetcher (the Filter skips .gz), so this only concerns sitemaps.
func genericSitemapBody(mediaType, path string) bool {
	if mediaType != "application/octet-stream" && mediaType != "binary/octet-stream" {
		return false
	}
	p := strings.ToLower(path)
	return strings.HasSuffix(p, ".xml") || strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, ".txt")
}

// addrAllowed applies the address policy.
func (f *Fetcher) addrAllowed(a netip.Addr) bool {
	a = a.Unmap()
	switch {
	case !a.IsValid(), a.IsMulticast(), a.IsInterfaceLocalMulticast(), a.IsLinkLocalMulticast():
		return false
	case a.IsLoopback(), a.IsUnspecified():
		return f.cfg.AllowLoopback
	case a.IsPrivate(), a.IsLinkLocalUnicast(), cgnat.Contains(a), a == broadcast4:
		return f.cfg.AllowPrivate
	}
	return true
}

var (
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})
)

// dialContext resolves through the Resolver, refuses disallowed addresses,
// and tries the allowed ones in order.
func (f *Fetcher) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %q: %v: %w", address, err, ErrBadURL)
	}
	addrs, err := f.resolver.LookupAddrs(ctx, host)
	if err != nil {
		return nil, err
	}
	var firstErr error
	tried := 0
	for _, a := range addrs {
		if !f.addrAllowed(a) {
			continue
		}
		tried++
		d := &f.dialer
		if src := f.cfg.SourceIP; src.IsValid() && src.Is4() == a.Unmap().Is4() {
			d = &f.srcDialer
		}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if tried == 0 {
		return nil, fmt.Errorf("dial %s: %d addresses, none allowed: %w", host, len(addrs), ErrBlockedIP)
	}
	return nil, firstErr
}

// Fetch performs one GET. Transport failures are returned as errors (see
// ErrorClass); any HTTP status is a response.
func (f *Fetcher) Fetch(ctx context.Context, req FetchRequest) (*FetchResponse, error) {
	if req.URL == nil {
		return nil, fmt.Errorf("fetch: nil url: %w", ErrBadURL)
	}
	rawURL := req.URL.String()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, f.cfg.TotalTimeout)
	defer cancel()

	resp := &FetchResponse{URL: rawURL}
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Conn != nil {
				resp.RemoteAddr = info.Conn.RemoteAddr().String()
			}
		},
	}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %v: %w", rawURL, err, ErrBadURL)
	}
	hreq.Header.Set("User-Agent", f.cfg.UserAgent)
	if req.Script {
		hreq.Header.Set("Accept", "*/*") // what browsers send for a script
	} else {
		hreq.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/xml;q=0.8,*/*;q=0.5")
	}
	hreq.Header.Set("Accept-Encoding", "gzip, deflate, br")
	if req.ETag != "" {
		hreq.Header.Set("If-None-Match", req.ETag)
	}
	if req.LastModified != "" {
		hreq.Header.Set("If-Modified-Since", req.LastModified)
	}

	start := time.Now()
	hresp, err := f.transport.RoundTrip(hreq)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%v: %w", err, ctxErr)
		}
		return nil, fmt.Errorf("fetch %s: %w", rawURL, err)
	}
	defer hresp.Body.Close()
	resp.FirstByte = time.Since(start)
	resp.Status = hresp.StatusCode
	resp.Header = hresp.Header
	resp.ContentType = mediaType(hresp.Header.Get("Content-Type"))
	resp.RetryAfter = parseRetryAfter(hresp.Header.Get("Retry-After"), time.Now())
	if hresp.StatusCode >= 300 && hresp.StatusCode < 400 {
		if loc := hresp.Header.Get("Location"); loc != "" {
			if u, err := NormalizeURL(loc, req.URL); err == nil {
				resp.Location = u.String()
			}
		}
	}

	readBody := hresp.StatusCode >= 200 && hresp.StatusCode < 300 && hresp.StatusCode != http.StatusNoContent
	accepted := f.Accepts(hresp.Header.Get("Content-Type")) || genericSitemapBody(resp.ContentType, req.URL.Path)
	limit := f.cfg.MaxBodyBytes
	if req.Script {
		accepted, limit = isScriptBody(resp.ContentType), f.cfg.MaxScriptBytes
	}
	if readBody && !accepted {
		resp.Skipped = true
		readBody = false
	}
	if !readBody {
		// Error pages and redirects: read a little so the connection can be
		// reused, never much.
		_, _ = io.CopyN(io.Discard, hresp.Body, 4<<10)
		resp.Duration = time.Since(start)
		return resp, nil
	}
	body, truncated, err := f.readBody(hresp, limit)
	resp.Duration = time.Since(start)
	if err != nil && len(body) >= minTimeTruncatedBytes && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		resp.Body, resp.Truncated, resp.TimedOut = body, true, true
		return resp, nil
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%v: %w", err, ctxErr)
		}
		return nil, fmt.Errorf("fetch %s: body: %w", rawURL, err)
	}
	resp.Body, resp.Truncated = body, truncated
	return resp, nil
}

// minTimeTruncatedBytes is how much of a body must have arrived by
// TotalTimeout for it to be kept (FetchResponse.TimedOut): more than most
// whole pages, so a host that trickles bytes still times out.
const minTimeTruncatedBytes = 64 << 10

// readBody decodes the content encodings and reads at most limit bytes.
// On a failure while reading it also returns what was decoded before it.
func (f *Fetcher) readBody(hresp *http.Response, limit int64) ([]byte, bool, error) {
	var r io.Reader = hresp.Body
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	encodings := hresp.Header.Values("Content-Encoding")
	var list []string
	for _, v := range encodings {
		for _, e := range strings.Split(v, ",") {
			if e = strings.ToLower(strings.TrimSpace(e)); e != "" && e != "identity" {
				list = append(list, e)
			}
		}
	}
	if len(list) > 3 {
		return nil, false, fmt.Errorf("%d content encodings: %w", len(list), ErrBadEncoding)
	}
	// Encodings are listed in the order applied; undo them in reverse.
	for i := len(list) - 1; i >= 0; i-- {
		switch list[i] {
		case "gzip", "x-gzip":
			zr, err := f.getGzip(r)
			if err != nil {
				return nil, false, fmt.Errorf("gzip header: %v: %w", err, ErrBadEncoding)
			}
			closers = append(closers, func() { f.gzipPool.Put(zr) })
			r = zr
		case "deflate":
			r = newDeflateReader(r)
		case "br":
			r = brotli.NewReader(r)
		default:
			return nil, false, fmt.Errorf("content encoding %q: %w", list[i], ErrBadEncoding)
		}
	}
	size := int64(4 << 10)
	if len(list) == 0 && hresp.ContentLength > 0 {
		size = min(hresp.ContentLength+1, limit+1)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		if len(list) > 0 && !isNetErr(err) {
			return nil, false, fmt.Errorf("decoding %s after %d bytes: %v: %w", strings.Join(list, ","), n, err, ErrBadEncoding)
		}
		return buf.Bytes(), false, err
	}
	if n > limit {
		return buf.Bytes()[:limit], true, nil
	}
	return buf.Bytes(), false, nil
}

// isNetErr distinguishes transport failures from decoder failures.
func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func (f *Fetcher) getGzip(r io.Reader) (*gzip.Reader, error) {
	if zr, ok := f.gzipPool.Get().(*gzip.Reader); ok {
		if err := zr.Reset(r); err != nil {
			return nil, err
		}
		return zr, nil
	}
	return gzip.NewReader(r)
}

// newDeflateReader accepts both zlib-wrapped deflate (what RFC 9110 means)
// and raw deflate (what some servers send).
func newDeflateReader(r io.Reader) io.Reader {
	br := bufio.NewReaderSize(r, 512)
	hdr, err := br.Peek(2)
	if err == nil && len(hdr) == 2 && hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
		zr, err := zlib.NewReader(br)
		if err == nil {
			return zr
		}
	}
	return flate.NewReader(br)
}

// parseRetryAfter understands delta-seconds and HTTP dates; 0 when absent or
// invalid. Values are capped at 7 days.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	const maxRetryAfter = 7 * 24 * time.Hour
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// asciiLower lowercases A-Z only, keeping every other byte where it was.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// charsetParam returns the charset parameter of a Content-Type, "" if none.
func charsetParam(contentType string) string {
	if !strings.Contains(asciiLower(contentType), "charset") {
		return ""
	}
	_, params, err := mime.ParseMediaType(contentType)
	if err == nil {
		return params["charset"]
	}
	// Lenient fallback for broken headers like "text/html; charset=gbk;;".
	// Only ASCII is folded, so that an index into the folded string is an
	// index into contentType (strings.ToLower turns an invalid byte into a
	// three-byte U+FFFD).
	i := strings.Index(asciiLower(contentType), "charset=")
	if i < 0 {
		return ""
	}
	v := contentType[i+len("charset="):]
	if j := strings.IndexAny(v, "; "); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(v, `"'`)
}
