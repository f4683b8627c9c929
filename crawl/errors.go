package crawl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"
)

// Sentinel errors of the fetch path. Every error returned by NormalizeURL,
// the Resolver, the Fetcher and the parsers wraps one of these (or a
// standard library error that ErrorClass recognises), so that reports can
// count failures by a short stable class.
var (
	// ErrBadURL: the URL cannot be parsed, has an unsupported scheme, an
	// invalid host or port, or is too long.
	ErrBadURL = errors.New("bad url")
	// ErrNXDomain: the name does not exist (NXDOMAIN) or has no A/AAAA records.
	ErrNXDomain = errors.New("no such host")
	// ErrDNS: the DNS server failed (SERVFAIL, REFUSED, timeout, malformed answer).
	ErrDNS = errors.New("dns lookup failed")
	// ErrBlockedIP: every address of the host is loopback/private/link-local/
	// unspecified/multicast and the fetcher is not allowed to reach it.
	ErrBlockedIP = errors.New("address not allowed")
	// ErrTooLarge: an input exceeded a hard cap where truncation is not
	// meaningful (sitemaps and robots files are truncated instead; see their docs).
	ErrTooLarge = errors.New("too large")
	// ErrBadEncoding: an unknown or corrupt Content-Encoding (gzip, deflate, br).
	ErrBadEncoding = errors.New("bad content encoding")
	// ErrParse: a document could not be parsed at all.
	ErrParse = errors.New("parse error")
	// ErrRedirectLoop: a redirect chain came back to a URL already visited
	// (raised by the engine, which follows redirects as new URLs).
	ErrRedirectLoop = errors.New("redirect loop")
)

// ErrorClass maps an error to a short stable class name used in reports
// ("errors_by_class"). The names never change meaning once introduced:
//
//	""              nil error
//	"canceled"      the caller's context was cancelled
//	"timeout"       connect, first-byte or total timeout (any deadline)
//	"dns"           DNS server failure or timeout
//	"dns_nxdomain"  the name does not exist or has no addresses
//	"blocked_ip"    the host resolves only to addresses we may not dial
//	"connect"       connection refused or unreachable
//	"reset"         connection reset, broken pipe, or unexpected EOF mid-response
//	"tls"           TLS handshake or certificate failure
//	"protocol"      malformed HTTP response
//	"too_large"     ErrTooLarge
//	"bad_encoding"  unknown or corrupt Content-Encoding
//	"bad_url"       ErrBadURL (also unusable redirect targets)
//	"robots_5xx"    robots.txt unavailable (5xx or unreachable): host waits
//	"parse"         ErrParse
//	"redirect_loop" ErrRedirectLoop
//	"other"         anything else
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	switch {
	case errors.Is(err, ErrRobotsUnavailable):
		return "robots_5xx"
	case errors.Is(err, ErrNXDomain):
		return "dns_nxdomain"
	case errors.Is(err, ErrDNS):
		return "dns"
	case errors.Is(err, ErrBlockedIP):
		return "blocked_ip"
	case errors.Is(err, ErrBadURL):
		return "bad_url"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	case errors.Is(err, ErrBadEncoding):
		return "bad_encoding"
	case errors.Is(err, ErrRedirectLoop):
		return "redirect_loop"
	case errors.Is(err, ErrParse):
		return "parse"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "timeout"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsNotFound {
			return "dns_nxdomain"
		}
		return "dns"
	}
	var recErr tls.RecordHeaderError
	var alertErr tls.AlertError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidErr x509.CertificateInvalidError
	if errors.As(err, &recErr) || errors.As(err, &alertErr) || errors.As(err, &certErr) ||
		errors.As(err, &unknownAuth) || errors.As(err, &hostErr) || errors.As(err, &invalidErr) {
		return "tls"
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH):
		return "connect"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNABORTED):
		return "reset"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return "connect"
	}
	if isHTTPProtocolError(err) {
		return "protocol"
	}
	return "other"
}

// isHTTPProtocolError recognises net/http's errors for malformed responses,
// which are plain strings without a type.
func isHTTPProtocolError(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		s := e.Error()
		if containsFold(s, "malformed HTTP") || containsFold(s, "bogus") ||
			containsFold(s, "invalid header") || containsFold(s, "too many transfer encodings") ||
			containsFold(s, "unsupported transfer encoding") || containsFold(s, "header too long") ||
			containsFold(s, "server response headers exceeded") || containsFold(s, "chunk") {
			return true
		}
	}
	return false
}

// StatusClass maps an HTTP status to a short stable class name: "2xx",
// "304", "3xx", "401", "403", "404", "410", "429", "4xx", "503", "5xx", and
// "status_other" for anything outside 200..599.
func StatusClass(status int) string {
	switch status {
	case 304, 401, 403, 404, 410, 429, 503:
		return strconv.Itoa(status)
	}
	switch {
	case status >= 200 && status < 300:
		return "2xx"
	case status >= 300 && status < 400:
		return "3xx"
	case status >= 400 && status < 500:
		return "4xx"
	case status >= 500 && status < 600:
		return "5xx"
	}
	return "status_other"
}

// containsFold reports whether substr occurs in s, ASCII case-insensitively.
func containsFold(s, substr string) bool {
	n := len(substr)
	if n == 0 {
		return true
	}
	for i := 0; i+n <= len(s); i++ {
		if equalFoldASCII(s[i:i+n], substr) {
			return true
		}
	}
	return false
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}
