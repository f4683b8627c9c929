package node

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// httpGuard stands between the network and the handlers: the Host check,
// the headers every answer carries, who may use which route (token,
// session, loopback), and the search concurrency limit. One guard serves
// one Handler.
type httpGuard struct {
	token        string
	publicSearch bool
	// hosts are the names accepted in the Host header besides localhost
	// and IP addresses (lowercase, no port).
	hosts    map[string]bool
	sessions *sessionStore
	logins   *loginThrottle
	searches *inflightLimiter
	// crossOrigin refuses browsers' cross-origin posts (CSRF).
	crossOrigin *http.CrossOriginProtection
}

func newHTTPGuard(cfg Config) *httpGuard {
	g := &httpGuard{
		token: cfg.HTTPToken, publicSearch: cfg.PublicSearch, hosts: map[string]bool{},
		sessions:    newSessionStore(sessionTTL, maxSessions),
		logins:      newLoginThrottle(),
		crossOrigin: http.NewCrossOriginProtection(),
		searches: newInflightLimiter(
			cmp.Or(cfg.SearchConcurrency, DefaultSearchConcurrency),
			cmp.Or(cfg.SearchConcurrencyPerClient, DefaultSearchConcurrencyPerClient)),
	}
	if host, _, err := net.SplitHostPort(cfg.HTTPAddr); err == nil && host != "" {
		g.hosts[canonicalHost(host)] = true
	}
	for _, h := range cfg.HTTPHosts {
		g.hosts[canonicalHost(h)] = true
	}
	return g
}

// apiCSP is the policy of every answer that does not set its own (JSON,
// metrics, profiles): nothing loads, nothing frames it.
const apiCSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// serve wraps the whole route table: security headers on every answer,
// then the Host check.
func (g *httpGuard) serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", apiCSP)
		if !g.hostAllowed(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, "Host "+strconv.Quote(truncate(r.Host, 200))+
				" is not a name of this node: without --http-token it answers only to localhost, IP addresses and the names given with --http-host (DNS rebinding defence)")
			return
		}
		if s, ok := g.session(r); ok {
			r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed is the DNS-rebinding defence. A web page that a name of the
// attacker's (rebound to 127.0.0.1) serves sends that name as Host; an IP
// address cannot be rebound, and "localhost" and the configured names are
// not the attacker's. With a token nothing is served on the strength of
// the client's address, and a session cookie is never sent to another
// name, so any Host is accepted: a LAN server is reached by whatever name
// its users type.
func (g *httpGuard) hostAllowed(hostHeader string) bool {
	if g.token != "" {
		return true
	}
	h := canonicalHost(hostHeader)
	if h == "" {
		return false
	}
	if h == "localhost" || g.hosts[h] {
		return true
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}

// canonicalHost is a Host header's name without port, brackets or a
// trailing dot, lowercased.
func canonicalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimPrefix(h, "[")
	h = strings.TrimSuffix(h, "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// sessionKey marks a request that carries a valid session cookie.
type sessionKey struct{}

func hasSession(r *http.Request) bool {
	_, ok := r.Context().Value(sessionKey{}).(string)
	return ok
}

func (g *httpGuard) tokenOK(r *http.Request) bool {
	if g.token == "" {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && g.tokenMatches(got)
}

// tokenMatches compares in constant time; hashing first hides the length.
func (g *httpGuard) tokenMatches(got string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(g.token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// fromLoopback trusts only the connection's address: X-Forwarded-For,
// Forwarded and the like are the client's word and count for nothing.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	return err == nil && isLoopbackHost(host)
}

// allowedRead: the token, a session, or, on a node without a token, a
// loopback client.
func (g *httpGuard) allowedRead(r *http.Request) bool {
	return g.tokenOK(r) || hasSession(r) || g.token == "" && fromLoopback(r)
}

// public serves search and cached pages: to anyone with --public-search,
// otherwise like private.
func (g *httpGuard) public(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g.publicSearch || g.allowedRead(r) {
			h(w, r)
			return
		}
		g.deny(w, r)
	}
}

func (g *httpGuard) private(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g.allowedRead(r) {
			h(w, r)
			return
		}
		g.deny(w, r)
	}
}

// mutating routes need the token or a session whenever a token is
// configured; without one, only loopback clients may use them. Browsers'
// cross-origin posts are refused, so no other web site can add seeds
// through a user's node (CSRF); a request that rides on a session cookie
// must moreover show that a page of this node sent it (Sec-Fetch-Site or
// Origin, which every browser sends with a POST), on top of the cookie's
// SameSite=Strict.
func (g *httpGuard) mutating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := g.crossOrigin.Check(r); err != nil {
			writeError(w, http.StatusForbidden, "refused a cross-origin request: "+err.Error())
			return
		}
		switch {
		case g.tokenOK(r), g.token == "" && fromLoopback(r):
			h(w, r)
		case hasSession(r) && r.Header.Get("Sec-Fetch-Site") == "" && r.Header.Get("Origin") == "":
			writeError(w, http.StatusForbidden, "a change made with a session cookie must come from this node's pages (no Origin or Sec-Fetch-Site header)")
		case hasSession(r):
			h(w, r)
		default:
			g.deny(w, r)
		}
	}
}

// deny answers a request without the right to its route: a browser asking
// for a UI page of a node with a token is sent to the login form, anything
// else gets a 401.
func (g *httpGuard) deny(w http.ResponseWriter, r *http.Request) {
	if g.token != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		isUIPage(r.URL.Path) && r.Header.Get("Authorization") == "" {
		http.Redirect(w, r, "/login?"+url.Values{"next": {r.URL.RequestURI()}}.Encode(), http.StatusSeeOther)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="sou"`)
	msg := "this route needs Authorization: Bearer TOKEN (the node's --http-token)"
	if g.token != "" {
		msg += " or a session (log in at /login)"
	}
	writeError(w, http.StatusUnauthorized, msg)
}

func isUIPage(path string) bool { return path == "/" || path == "/dashboard" }

// limited admits at most the configured number of searches at once, in
// all and per client (inflightLimiter); beyond that a 429.
func (g *httpGuard) limited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		client := clientKey(r)
		if !g.searches.acquire(client) {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "too many searches at once (from this client or in all): try again in a moment")
			return
		}
		defer g.searches.release(client)
		h(w, r)
	}
}

// clientKey names the client a limit applies to: its IPv4 address or its
// IPv6 /64 (one subscriber's prefix), from the connection only.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return a.String()
	}
	return p.String()
}

// inflightLimiter counts requests in flight, in all and per client.
type inflightLimiter struct {
	total, perClient int

	mu       sync.Mutex
	inFlight int
	byClient map[string]int // only clients with requests in flight
}

func newInflightLimiter(total, perClient int) *inflightLimiter {
	return &inflightLimiter{total: total, perClient: perClient, byClient: map[string]int{}}
}

func (l *inflightLimiter) acquire(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight >= l.total || l.byClient[client] >= l.perClient {
		return false
	}
	l.inFlight++
	l.byClient[client]++
	return true
}

func (l *inflightLimiter) release(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	if l.byClient[client]--; l.byClient[client] <= 0 {
		delete(l.byClient, client)
	}
}
