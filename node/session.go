package node

// Browser login for a node with --http-token. A browser cannot send a
// Bearer header, so GET /login shows a form, POST /login checks the token
// and sets a session cookie, and the session then counts as the token:
// for reads, for the dashboard's forms and for the UI's own API calls.
// Sessions live in memory only (a restart logs everyone out), are random
// 32-byte values of which only the SHA-256 is kept, and expire after
// sessionTTL; at most maxSessions exist, the oldest going first. Failed
// logins are rate-limited per client address (loginThrottle).

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/time/rate"
)

const (
	sessionCookie = "sou_session"
	sessionTTL    = 12 * time.Hour
	maxSessions   = 256
	maxLoginBody  = 8 << 10
	// A client may fail loginBurst times in a row, then once per
	// loginEvery: guessing a token by the web form is hopeless.
	loginBurst      = 5
	loginEvery      = 12 * time.Second
	maxLoginClients = 4096
)

// sessionStore holds the live sessions by the SHA-256 of their cookie
// value, with their expiry.
type sessionStore struct {
	ttl time.Duration
	max int

	mu     sync.Mutex
	expiry map[[sha256.Size]byte]time.Time
}

func newSessionStore(ttl time.Duration, max int) *sessionStore {
	return &sessionStore{ttl: ttl, max: max, expiry: map[[sha256.Size]byte]time.Time{}}
}

// create starts a session and returns its cookie value.
func (s *sessionStore) create(now time.Time) (string, error) {
	var id [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", fmt.Errorf("session ID: %w", err)
	}
	value := base64.RawURLEncoding.EncodeToString(id[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.expiry {
		if !now.Before(exp) {
			delete(s.expiry, k)
		}
	}
	for len(s.expiry) >= s.max {
		var oldest [sha256.Size]byte
		var oldestExp time.Time
		for k, exp := range s.expiry {
			if oldestExp.IsZero() || exp.Before(oldestExp) {
				oldest, oldestExp = k, exp
			}
		}
		delete(s.expiry, oldest)
	}
	s.expiry[sha256.Sum256([]byte(value))] = now.Add(s.ttl)
	return value, nil
}

// valid reports whether value is a live session's cookie.
func (s *sessionStore) valid(value string, now time.Time) bool {
	if len(value) != base64.RawURLEncoding.EncodedLen(32) {
		return false
	}
	k := sha256.Sum256([]byte(value))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.expiry[k]
	if ok && !now.Before(exp) {
		delete(s.expiry, k)
		return false
	}
	return ok
}

func (s *sessionStore) remove(value string) {
	k := sha256.Sum256([]byte(value))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expiry, k)
}

// session returns the request's valid session cookie value, if any.
func (g *httpGuard) session(r *http.Request) (string, bool) {
	if g.token == "" {
		return "", false
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || !g.sessions.valid(c.Value, time.Now()) {
		return "", false
	}
	return c.Value, true
}

// loginThrottle counts failed logins per client address.
type loginThrottle struct {
	mu       sync.Mutex
	byClient map[string]*rate.Limiter
}

func newLoginThrottle() *loginThrottle {
	return &loginThrottle{byClient: map[string]*rate.Limiter{}}
}

// wait returns how long client must wait before its next attempt (0: it
// may try now).
func (t *loginThrottle) wait(client string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byClient[client]
	if l == nil {
		return 0
	}
	if tokens := l.TokensAt(now); tokens < 1 {
		return time.Duration((1 - tokens) * float64(loginEvery))
	}
	return 0
}

// failed spends one of client's attempts.
func (t *loginThrottle) failed(client string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byClient[client]
	if l == nil {
		if len(t.byClient) >= maxLoginClients {
			// Forget the clients that have their full allowance back;
			// if all are still throttled, forget them all rather than grow.
			for k, old := range t.byClient {
				if old.TokensAt(now) >= loginBurst {
					delete(t.byClient, k)
				}
			}
			if len(t.byClient) >= maxLoginClients {
				clear(t.byClient)
			}
		}
		l = rate.NewLimiter(rate.Every(loginEvery), loginBurst)
		t.byClient[client] = l
	}
	l.AllowN(now, 1)
}

// loginPage is what login.html renders.
type loginPage struct {
	T        *uiText
	Next     string
	Error    string
	LangHref string
	LoggedIn bool
}

func (n *Node) renderLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	t := uiLanguage(r)
	n.renderUI(w, status, "login.html", loginPage{T: t, Next: next, Error: msg,
		LangHref: "/login?" + url.Values{"lang": {t.Other}, "next": {next}}.Encode()})
}

// handleLoginPage shows the login form, or sends a logged-in browser on.
func (n *Node) handleLoginPage(g *httpGuard) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g.token == "" {
			writeError(w, http.StatusNotFound, "this node has no --http-token: there is nothing to log in to")
			return
		}
		next := safeNext(r.URL.Query().Get("next"))
		if hasSession(r) {
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		n.renderLogin(w, r, http.StatusOK, next, "")
	}
}

// handleLogin checks the posted token and starts a session.
func (n *Node) handleLogin(g *httpGuard) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g.token == "" {
			writeError(w, http.StatusNotFound, "this node has no --http-token: there is nothing to log in to")
			return
		}
		if err := g.crossOrigin.Check(r); err != nil {
			writeError(w, http.StatusForbidden, "refused a cross-origin login: "+err.Error())
			return
		}
		t := uiLanguage(r)
		client, now := clientKey(r), time.Now()
		if wait := g.logins.wait(client, now); wait > 0 {
			secs := int(wait.Seconds()) + 1
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			n.renderLogin(w, r, http.StatusTooManyRequests, "/", fill(t.TooManyLogins, "{s}", strconv.Itoa(secs)))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
		if err := r.ParseForm(); err != nil {
			n.renderLogin(w, r, http.StatusBadRequest, "/", "form: "+err.Error())
			return
		}
		next := safeNext(r.PostForm.Get("next"))
		if !g.tokenMatches(r.PostForm.Get("token")) {
			g.logins.failed(client, now)
			n.log.Warn("failed login", "client", client)
			n.renderLogin(w, r, http.StatusUnauthorized, next, t.WrongToken)
			return
		}
		value, err := g.sessions.create(now)
		if err != nil {
			n.errs.add("login", err)
			writeError(w, http.StatusInternalServerError, "start a session: "+err.Error())
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: sessionCookie, Value: value, Path: "/", MaxAge: int(sessionTTL.Seconds()),
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		http.Redirect(w, r, next, http.StatusSeeOther)
	}
}

// handleLogout ends the session and clears the cookie.
func (n *Node) handleLogout(g *httpGuard) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := g.crossOrigin.Check(r); err != nil {
			writeError(w, http.StatusForbidden, "refused a cross-origin logout: "+err.Error())
			return
		}
		if value, ok := g.session(r); ok {
			g.sessions.remove(value)
		}
		http.SetCookie(w, &http.Cookie{
			Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	}
}

// safeNext is where a login may send the browser: a path on this node,
// never another site ("//evil.example", "/\evil.example" and control
// characters are how an open redirect hides), never the login itself.
func safeNext(next string) string {
	if next == "" || len(next) > maxURLParam || next[0] != '/' || strings.HasPrefix(next, "//") ||
		strings.ContainsRune(next, '\\') || strings.ContainsFunc(next, unicode.IsControl) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Path == "/login" {
		return "/"
	}
	return next
}
