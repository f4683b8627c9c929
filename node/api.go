package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/text/language"

	"sou/crawl"
	"sou/index"
	"sou/p2p"
	"sou/placement"
	"sou/search"
)

// API limits: every parameter from outside is capped.
const (
	maxCrawlBody    = 1 << 20
	maxCrawlURLs    = 1000
	maxQueryParam   = 2048
	maxURLParam     = 8192
	maxTimeoutParam = 10 * time.Second
)

// startHTTP serves the API on a goroutine that wg waits for; it ends once
// the server is shut down.
func (n *Node) startHTTP(ctx context.Context, wg *sync.WaitGroup) (*http.Server, error) {
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", n.cfg.HTTPAddr, err)
	}
	n.httpAddr.Store(ln.Addr().String())
	srv := &http.Server{
		Addr:              ln.Addr().String(),
		Handler:           n.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server", "err", err)
		}
	}()
	return srv, nil
}

// PeerID is the node's libp2p peer ID.
func (n *Node) PeerID() string { return n.net.ID().String() }

// HTTPAddr is the address the API listens on once Run has started ("" before).
func (n *Node) HTTPAddr() string {
	if a, ok := n.httpAddr.Load().(string); ok {
		return a
	}
	return ""
}

// Handler returns the node's HTTP API and UI behind its guard (httpguard.go:
// the Host check, security headers, access rules and limits).
func (n *Node) Handler() http.Handler {
	g := newHTTPGuard(n.cfg)
	mux := http.NewServeMux()
	// Read-only routes; with --public-search only search and cached pages
	// are served to non-loopback clients without a token. Searches fan out
	// to every peer, so they are limited in number.
	mux.HandleFunc("GET /api/search", g.public(g.limited(n.handleSearch)))
	mux.HandleFunc("GET /api/cache", g.public(g.limited(n.handleCache)))
	mux.HandleFunc("GET /opensearch.xml", g.public(n.handleOpenSearch))
	mux.HandleFunc("GET /api/status", g.private(n.handleStatus))
	mux.HandleFunc("GET /api/peers", g.private(n.handlePeers))
	mux.Handle("GET /metrics", g.private(n.metrics.handler().ServeHTTP))
	// State changes always need the token or a session when a token is
	// set, and are refused from beyond loopback without one.
	mux.HandleFunc("POST /api/crawl", g.mutating(n.handleCrawl))
	mux.HandleFunc("GET /api/export/warc", g.private(n.handleWARC))
	// Go's profiles (heap, CPU, goroutines), behind the same rule as
	// status: what a node spends its memory on is measured, not guessed.
	mux.HandleFunc("GET /debug/pprof/", g.private(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/profile", g.private(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/trace", g.private(pprof.Trace))
	n.registerUI(mux, g)
	// A known route asked with the wrong method is a 405 (the catch-all
	// below would otherwise shadow the mux's own 405 with a 404).
	apiMethods := map[string]string{
		"/api/search": "GET, HEAD", "/api/cache": "GET, HEAD", "/api/status": "GET, HEAD",
		"/api/peers": "GET, HEAD", "/api/export/warc": "GET, HEAD", "/api/crawl": "POST",
	}
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if allow, ok := apiMethods[r.URL.Path]; ok {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path+" (use "+allow+")")
			return
		}
		writeError(w, http.StatusNotFound, "no such API route: "+r.Method+" "+r.URL.Path)
	})
	return g.serve(mux)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// searchRequest reads and checks the search parameters shared by the API
// and the UI.
func searchRequest(r *http.Request) (search.Request, error) {
	q := r.URL.Query()
	req := search.Request{Query: q.Get("q"), Script: readerScript(r)}
	if len(req.Query) > maxQueryParam {
		return req, fmt.Errorf("q is longer than %d bytes", maxQueryParam)
	}
	if strings.TrimSpace(req.Query) == "" {
		return req, errors.New("q is required")
	}
	var err error
	if req.Page, err = intParam(q.Get("page"), 1, 1, search.MaxPage, "page"); err != nil {
		return req, err
	}
	if req.N, err = intParam(q.Get("n"), 10, 1, search.MaxResultsPerPage, "n"); err != nil {
		return req, err
	}
	if t := q.Get("timeout"); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil {
			ms, err2 := strconv.Atoi(t)
			if err2 != nil {
				return req, fmt.Errorf("timeout %q: want a duration like 500ms", t)
			}
			d = time.Duration(ms) * time.Millisecond
		}
		if d <= 0 || d > maxTimeoutParam {
			return req, fmt.Errorf("timeout must be between 1ms and %v", maxTimeoutParam)
		}
		req.Timeout = d
	}
	return req, nil
}

// readerScript is the script the reader reads Chinese in, from ?lang= (a
// language tag: zh, zh-TW, en) or else their first language in
// Accept-Language; a query in Latin letters prefers pages in it.
func readerScript(r *http.Request) index.Script {
	if lang := r.URL.Query().Get("lang"); len(lang) <= maxAcceptLanguage {
		if tag, err := language.Parse(lang); err == nil {
			return search.ReaderScript(tag)
		}
	}
	accept := r.Header.Get("Accept-Language")
	if len(accept) > maxAcceptLanguage {
		accept = accept[:maxAcceptLanguage]
	}
	tags, _, err := language.ParseAcceptLanguage(accept)
	if err != nil || len(tags) == 0 {
		return index.ScriptUnknown
	}
	return search.ReaderScript(tags[0])
}

func intParam(s string, def, lo, hi int, name string) (int, error) {
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%s must be an integer between %d and %d", name, lo, hi)
	}
	return v, nil
}

// Search runs a search from this node (the coordinator).
func (n *Node) Search(ctx context.Context, req search.Request) (*search.Response, error) {
	resp, err := n.coord.Search(ctx, req)
	if err != nil {
		return nil, err
	}
	n.metrics.observeSearch(resp)
	return resp, nil
}

func (n *Node) handleSearch(w http.ResponseWriter, r *http.Request) {
	req, err := searchRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	resp, err := n.Search(r.Context(), req)
	if err != nil {
		n.searchError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (n *Node) searchError(w http.ResponseWriter, err error) {
	if errors.Is(err, search.ErrBadRequest) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	n.errs.add("search", err)
	writeError(w, http.StatusServiceUnavailable, "search failed: "+err.Error())
}

func (n *Node) handleCache(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("url")
	if raw == "" || len(raw) > maxURLParam {
		writeError(w, http.StatusBadRequest, "url is required (at most 8 KB)")
		return
	}
	u, err := crawl.NormalizeURL(raw, nil)
	if err != nil {
		writeError(w, http.StatusBadRequest, "url: "+err.Error())
		return
	}
	rec, err := n.ix.Get(r.Context(), u.String())
	if errors.Is(err, index.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no cached copy of "+u.String()+" on this node")
		return
	}
	if err != nil {
		n.errs.add("cache", err)
		writeError(w, http.StatusInternalServerError, "read cached copy: "+err.Error())
		return
	}
	var terms []string
	if q := r.URL.Query().Get("q"); q != "" && len(q) <= maxQueryParam {
		if pq, err := search.ParseQuery(q, n.ix.Analyzer()); err == nil {
			terms = pq.Terms()
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", cacheCSP)
	page, err := index.CachedHTML(rec, terms)
	if err != nil {
		// A page the HTML parser refuses (nesting deeper than its limit,
		// for one) is still shown: as its text, escaped.
		n.log.Debug("cached copy shown as text", "url", rec.URL, "err", err)
		if err := uiTemplates.ExecuteTemplate(w, "cachetext.html", cachedText{Rec: rec, Reason: err.Error()}); err != nil {
			n.log.Warn("render cached text", "url", rec.URL, "err", err)
		}
		return
	}
	_, _ = w.Write(page)
}

// cacheCSP lets a cached copy show its text, its own inline styles and
// inline images, and nothing else: a sandbox (an origin of its own, no
// script, no form, no popup), no form submission anywhere, nothing fetched
// from the original site or this node (that would tell the site who reads
// its cached copy), no framing. index.CachedHTML has already removed the
// scripts, handlers and meta refreshes; this holds even where it missed
// one.
const cacheCSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; form-action 'none'; frame-ancestors 'none'"

// cachedText is what cachetext.html renders.
type cachedText struct {
	Rec    *index.PageRecord
	Reason string
}

// crawlBody is POST /api/crawl's body.
type crawlBody struct {
	URLs []string `json:"urls"`
}

func (n *Node) handleCrawl(w http.ResponseWriter, r *http.Request) {
	var body crawlBody
	dec := json.NewDecoder(io.LimitReader(r.Body, maxCrawlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, `body must be JSON {"urls": ["http://..."]}: `+err.Error())
		return
	}
	if len(body.URLs) == 0 || len(body.URLs) > maxCrawlURLs {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("urls must hold 1..%d URLs", maxCrawlURLs))
		return
	}
	accepted, err := n.AddSeeds(r.Context(), body.URLs)
	var bad *BadURLsError
	switch {
	case errors.As(err, &bad) && accepted == 0:
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.As(err, &bad):
		writeJSON(w, http.StatusAccepted, map[string]any{"accepted": accepted, "rejected": bad.Bad})
	case errors.Is(err, ErrDiskLow):
		writeError(w, http.StatusInsufficientStorage, err.Error())
	case err != nil:
		n.errs.add("crawl add", err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		writeJSON(w, http.StatusAccepted, map[string]any{"accepted": accepted})
	}
}

// Status is GET /api/status.
type Status struct {
	PeerID     string      `json:"peer_id"`
	Addrs      []string    `json:"addrs"`
	Network    string      `json:"network"`
	DataDir    string      `json:"data_dir"`
	UptimeS    float64     `json:"uptime_s"`
	Members    int         `json:"members"`
	KeyPrefix  string      `json:"key_prefix"`
	OwnedHosts int         `json:"owned_hosts"`
	KnownHosts int         `json:"known_hosts"`
	Crawl      crawl.Stats `json:"crawl"`
	// HeldOwned counts pages held unindexed as a replica (Index.Held)
	// of hosts this node owns now: they are indexed within seconds.
	HeldOwned int  `json:"held_owned"`
	Idle      bool `json:"idle"`
	// CrawlIdle is Idle without the outbox: nothing to crawl and every
	// stored page of an owned host searchable, whatever waits for other
	// members.
	CrawlIdle       bool        `json:"crawl_idle"`
	Index           index.Stats `json:"index"`
	Outbox          int         `json:"outbox"`
	P2P             p2p.Stats   `json:"p2p"`
	BadgerLSM       int64       `json:"badger_lsm_bytes"`
	BadgerVLog      int64       `json:"badger_vlog_bytes"`
	SearchCache     any         `json:"search_cache"`
	HandoffPages    int64       `json:"handoff_pages"`
	HandoffReceived int64       `json:"handoff_received"`
	// HandoffRefused counts pages, fetch markers and host exports refused
	// because neither this node nor the sending peer holds their host.
	HandoffRefused int64 `json:"handoff_refused"`
	// HandoffAbandoned counts hosts this node gave up handing off because
	// their owner kept refusing them from this node (placement's
	// HandoffGiveUp); their queued URLs went to the owner as links.
	HandoffAbandoned int64 `json:"handoff_abandoned"`
	// SyncRounds counts the syncs of Badger's logs made before
	// acknowledging peers' deliveries (--sync acked), each shared by the
	// messages that asked while the previous one ran.
	SyncRounds int `json:"sync_rounds"`
	// StoresDetached counts the Stores of pages and fetch markers that
	// returned before their replicas held them (storeItem); the others
	// waited for the replicas.
	StoresDetached int64 `json:"stores_detached"`
	// Placement counts where this node's hosts stand (placement.Summary).
	Placement placement.Summary `json:"placement"`
	// DiskFree is the free space under the data directory at the last
	// check; DiskLow says the node has stopped crawling and taking in data
	// until space returns.
	DiskFree uint64        `json:"disk_free_bytes"`
	DiskLow  bool          `json:"disk_low"`
	Errors   []RecentError `json:"recent_errors"`
}

// Status reports the node's state.
func (n *Node) Status(ctx context.Context) Status {
	s := Status{
		PeerID: n.net.ID().String(), Network: n.cfg.Network, DataDir: n.cfg.DataDir,
		UptimeS: time.Since(n.started).Seconds(), Members: len(n.net.Members()),
		Crawl: n.crawler.Stats(), Index: n.ix.Stats(), Outbox: n.net.OutboxDepth(),
		P2P: n.net.Stats(), SearchCache: n.coord.CacheStats(), Errors: n.errs.list(),
		HandoffPages: n.place.sent.Load(), HandoffReceived: n.place.received.Load(),
		HandoffRefused:   n.place.refused.Load(),
		HandoffAbandoned: n.place.abandoned.Load(),
		StoresDetached:   n.place.storesDetached.Load(),
		Placement:        n.place.summary(ctx),
		DiskFree:         n.disk.lastFree.Load(), DiskLow: n.disk.Low(),
	}
	key := p2p.PeerKey(n.net.ID())
	s.KeyPrefix = hex.EncodeToString(key[:4])
	for _, a := range n.net.Addrs() {
		s.Addrs = append(s.Addrs, a.String())
	}
	if hosts, err := n.crawler.Hosts(ctx); err == nil {
		s.KnownHosts = len(hosts)
		for _, h := range hosts {
			if n.net.IsOwner(h) {
				s.OwnedHosts++
			}
		}
	}
	for h, pages := range n.ix.Held() {
		if n.net.IsOwner(h) {
			s.HeldOwned += pages
		}
	}
	// Idle: nothing to crawl, nothing to forward, and every stored page
	// of an owned host searchable.
	s.CrawlIdle = n.crawler.Idle() && s.Index.Pending == 0 && s.HeldOwned == 0
	s.Idle = s.CrawlIdle && s.Outbox == 0
	s.BadgerLSM, s.BadgerVLog = n.dbSize()
	s.SyncRounds = n.syncs.syncRounds()
	if s.Errors == nil {
		s.Errors = []RecentError{}
	}
	return s
}

func (n *Node) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, n.Status(r.Context()))
}

// PeerInfo is one entry of GET /api/peers.
type PeerInfo struct {
	ID        string   `json:"id"`
	Addrs     []string `json:"addrs"`
	Self      bool     `json:"self"`
	KeyPrefix string   `json:"key_prefix"`
	LastSeen  string   `json:"last_seen"`
	Load      p2p.Load `json:"load"`
	LatencyMS float64  `json:"search_latency_ms"`
}

func (n *Node) handlePeers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"peers": n.peers()})
}

// peers lists the members this node knows, itself included.
func (n *Node) peers() []PeerInfo {
	lat := n.coord.PeerLatency()
	var out []PeerInfo
	for _, m := range n.net.Members() {
		key := p2p.PeerKey(m.ID)
		pi := PeerInfo{
			ID: m.ID.String(), Self: m.ID == n.net.ID(), KeyPrefix: hex.EncodeToString(key[:4]),
			LastSeen: m.LastSeen.UTC().Format(time.RFC3339), Load: m.Load,
			LatencyMS: float64(lat[m.ID.String()].Microseconds()) / 1000,
		}
		for _, a := range m.Addrs {
			pi.Addrs = append(pi.Addrs, a.String())
		}
		out = append(out, pi)
	}
	if out == nil {
		out = []PeerInfo{}
	}
	return out
}

func (n *Node) handleOpenSearch(w http.ResponseWriter, r *http.Request) {
	base := "http://" + r.Host
	w.Header().Set("Content-Type", "application/opensearchdescription+xml")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<OpenSearchDescription xmlns="http://a9.com/-/spec/opensearch/1.1/">
  <ShortName>sou</ShortName>
  <Description>sou (搜) peer-to-peer web search</Description>
  <InputEncoding>UTF-8</InputEncoding>
  <Url type="text/html" template="%[1]s/?q={searchTerms}&amp;page={startPage?}"/>
  <Url type="application/json" template="%[1]s/api/search?q={searchTerms}&amp;page={startPage?}"/>
</OpenSearchDescription>
`, htmlEscape(base))
}
