package simweb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// UserAgent is the robots.txt user agent the truth is computed for.
const UserAgent = "sou"

// Config configures a simulated web.
type Config struct {
	Seed  int64
	Hosts int // synthetic hosts; synthetic mode when > 0
	Pages int // synthetic pages in total (0 = 100 per host)
	// Sites is a sites.tsv for directory mode ("" = none). Both modes can
	// run together.
	Sites string
	// Misbehave lists the classes switched on (see AllClasses); nil or
	// ["all"] = all, ["none"] = a well-behaved web.
	Misbehave []string
	// BindIP is the IPv4 loopback address of HTTP and DNS ("" = a random
	// 127.x.y.z other than 127.0.0.1).
	BindIP string
	// Port is the HTTP port (0 = try 80, else a random high port, which the
	// URLs then carry). DNS tries 53, else a random high port.
	Port int
	// ControlAddr is where /truth and /requests are served ("" = 127.0.0.1:0).
	ControlAddr string
	Logger      *slog.Logger
	// Latency, when set, delays every response by Latency(client IP,
	// vhost) before it starts (see LatencyMatrix); nil = no delay.
	Latency func(clientIP, vhost string) time.Duration
}

// Request is one entry of the request log.
type Request struct {
	Index      int       `json:"index"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	StartNS    int64     `json:"start_unix_ns"`
	EndNS      int64     `json:"end_unix_ns"`
	DurationNS int64     `json:"duration_ns"`
	Client     string    `json:"client"`
	Local      string    `json:"local"`
	Host       string    `json:"host"`
	VHost      string    `json:"vhost"`
	Method     string    `json:"method"`
	Target     string    `json:"target"`
	URL        string    `json:"url"`
	Status     int       `json:"status"`
	Bytes      int64     `json:"bytes"`
	Completed  bool      `json:"completed"`
	UserAgent  string    `json:"user_agent"`
}

// Web is a running simulated web.
type Web struct {
	cfg        Config
	log        *slog.Logger
	lex        *lexicon
	sy         *synth
	dirs       []*dirSite
	dirByName  map[string]*dirSite
	ip         string
	port       int
	portSuffix string
	httpAddr   string
	http6Addr  string
	dnsAddr    string
	ctrlURL    string
	seeds      []string
	classes    map[string]bool

	robots   map[*site]robotsFacts
	truth    *Truth
	truthErr error
	ready    chan struct{}

	stateMu sync.Mutex
	hits    map[string]int

	reqMu sync.Mutex
	reqs  []Request

	bomb        func() []byte
	gzipWriters sync.Pool // *gzip.Writer

	lns     listeners
	httpSrv *http.Server
	ctrlSrv *http.Server
	dnsSrvs []*dns.Server
	done    chan struct{}
	wg      sync.WaitGroup
	closeMu sync.Mutex
	closed  bool
}

// Start builds the web and starts its listeners. The web stops when ctx is
// cancelled or Close is called.
func Start(ctx context.Context, cfg Config) (*Web, error) {
	if cfg.Hosts < 0 {
		return nil, fmt.Errorf("hosts must be >= 0, got %d", cfg.Hosts)
	}
	if cfg.Pages < 0 {
		return nil, fmt.Errorf("pages must be >= 0, got %d", cfg.Pages)
	}
	if cfg.Hosts > 100000 || cfg.Pages > 50_000_000 {
		return nil, fmt.Errorf("hosts %d / pages %d too large", cfg.Hosts, cfg.Pages)
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("port %d out of range", cfg.Port)
	}
	if cfg.Hosts > 0 && cfg.Pages == 0 {
		cfg.Pages = 100 * cfg.Hosts
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	classes, err := ParseClasses(cfg.Misbehave)
	if err != nil {
		return nil, err
	}
	w := &Web{
		cfg: cfg, log: cfg.Logger, classes: classes,
		dirByName: map[string]*dirSite{}, hits: map[string]int{},
		ready: make(chan struct{}), done: make(chan struct{}),
		bomb: sync.OnceValue(buildBomb),
	}
	if cfg.Sites != "" {
		w.dirs, err = loadSites(cfg.Sites)
		if err != nil {
			return nil, err
		}
		for _, d := range w.dirs {
			w.dirByName[d.name] = d
		}
	}
	if cfg.Hosts == 0 && len(w.dirs) == 0 {
		return nil, errors.New("nothing to serve: give hosts > 0 or a sites file")
	}
	if cfg.Hosts > 0 {
		if w.lex, err = loadLexicon(); err != nil {
			return nil, err
		}
	}
	w.sy = newSynth(cfg.Seed, cfg.Hosts, cfg.Pages, classes)
	for _, d := range w.dirs {
		if _, clash := w.sy.byName[d.name]; clash {
			return nil, fmt.Errorf("sites file host %s clashes with a synthetic host", d.name)
		}
	}
	if err := w.listen(); err != nil {
		w.closeListeners()
		return nil, err
	}
	w.robots = map[*site]robotsFacts{}
	for _, s := range w.sy.sites {
		w.robots[s] = w.sy.robots(s, w.urlOf)
	}
	for _, p := range w.sy.portals {
		w.seeds = append(w.seeds, w.urlOf(p, "/"), w.urlOf(p, "/dir/0.html"))
	}
	for _, d := range w.dirs {
		for _, sp := range d.seeds {
			if u, err := Normalize("http://" + d.name + w.portSuffix + sp); err == nil {
				w.seeds = append(w.seeds, u)
			}
		}
	}
	w.serve()
	go func() {
		select {
		case <-ctx.Done():
			_ = w.Close()
		case <-w.done:
		}
	}()
	// The synthetic truth is cheap; the directory walk reads every page, so
	// it runs in the background and Truth waits for it.
	if len(w.dirs) == 0 {
		w.buildTruth()
	} else {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.buildTruth()
		}()
	}
	return w, nil
}

// randomLoopback picks 127.x.y.z outside 127.0.0.0/16, which the LAN
// testnet's nodes and ordinary local services use.
func randomLoopback() string {
	return fmt.Sprintf("127.%d.%d.%d", 1+rand.IntN(254), rand.IntN(256), 1+rand.IntN(254))
}

// listeners, opened by listen and handed to the servers by serve.
type listeners struct {
	http4, http6, ctrl, dnsTCP net.Listener
	dnsUDP                     net.PacketConn
}

func (w *Web) listen() error {
	ip := w.cfg.BindIP
	if ip == "" {
		ip = randomLoopback()
	}
	if net.ParseIP(ip) == nil || net.ParseIP(ip).To4() == nil {
		return fmt.Errorf("bind ip %q is not an IPv4 address", ip)
	}
	w.ip = ip
	var err error
	l := &w.lns
	if w.cfg.Port > 0 {
		l.http4, err = net.Listen("tcp4", net.JoinHostPort(ip, strconv.Itoa(w.cfg.Port)))
		if err != nil {
			return fmt.Errorf("http listen: %w", err)
		}
	} else {
		l.http4, err = net.Listen("tcp4", net.JoinHostPort(ip, "80"))
		if err != nil {
			w.log.Info("port 80 unavailable, using a high port", "err", err)
			l.http4, err = net.Listen("tcp4", net.JoinHostPort(ip, "0"))
			if err != nil {
				return fmt.Errorf("http listen: %w", err)
			}
		}
	}
	w.port = l.http4.Addr().(*net.TCPAddr).Port
	w.httpAddr = l.http4.Addr().String()
	if w.port != 80 {
		w.portSuffix = ":" + strconv.Itoa(w.port)
	}
	l.http6, err = net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(w.port)))
	if err != nil {
		w.log.Warn("no IPv6 listener on [::1]; AAAA queries get no answer", "err", err)
		l.http6 = nil
	} else {
		w.http6Addr = l.http6.Addr().String()
	}
	if err := w.listenDNS(ip); err != nil {
		return err
	}
	ctrl := w.cfg.ControlAddr
	if ctrl == "" {
		ctrl = "127.0.0.1:0"
	}
	l.ctrl, err = net.Listen("tcp", ctrl)
	if err != nil {
		return fmt.Errorf("control listen: %w", err)
	}
	w.ctrlURL = "http://" + l.ctrl.Addr().String()
	return nil
}

func (w *Web) listenDNS(ip string) error {
	l := &w.lns
	try := func(port int) error {
		pc, err := net.ListenPacket("udp4", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		p := pc.LocalAddr().(*net.UDPAddr).Port
		tl, err := net.Listen("tcp4", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			pc.Close()
			return err
		}
		l.dnsUDP, l.dnsTCP = pc, tl
		w.dnsAddr = net.JoinHostPort(ip, strconv.Itoa(p))
		return nil
	}
	if err := try(53); err == nil {
		return nil
	}
	var last error
	for i := 0; i < 20; i++ {
		if last = try(0); last == nil {
			return nil
		}
	}
	return fmt.Errorf("dns listen: %w", last)
}

func (w *Web) closeListeners() {
	for _, c := range []io.Closer{w.lns.http4, w.lns.http6, w.lns.ctrl, w.lns.dnsTCP, w.lns.dnsUDP} {
		if c != nil {
			_ = c.Close()
		}
	}
}

func (w *Web) serve() {
	w.httpSrv = &http.Server{
		Handler:           http.HandlerFunc(w.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(w.log.Handler(), slog.LevelDebug),
	}
	for _, l := range []net.Listener{w.lns.http4, w.lns.http6} {
		if l == nil {
			continue
		}
		w.wg.Add(1)
		go func(l net.Listener) {
			defer w.wg.Done()
			if err := w.httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				w.log.Error("http server", "err", err)
			}
		}(l)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/truth", w.serveTruth)
	mux.HandleFunc("/requests", w.serveRequests)
	mux.HandleFunc("/seeds", func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, w.Seeds())
	})
	mux.HandleFunc("/{$}", func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "sou simulated web\nhttp %s\nhttp6 %s\ndns %s\n/truth /requests?since=N /seeds\n", w.httpAddr, w.http6Addr, w.dnsAddr)
	})
	w.ctrlSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if err := w.ctrlSrv.Serve(w.lns.ctrl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("control server", "err", err)
		}
	}()
	h := dns.HandlerFunc(w.serveDNS)
	w.dnsSrvs = []*dns.Server{
		{PacketConn: w.lns.dnsUDP, Handler: h},
		{Listener: w.lns.dnsTCP, Handler: h},
	}
	for _, s := range w.dnsSrvs {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		w.wg.Add(1)
		go func(s *dns.Server) {
			defer w.wg.Done()
			if err := s.ActivateAndServe(); err != nil {
				select {
				case <-w.done:
				default:
					w.log.Error("dns server", "err", err)
				}
			}
		}(s)
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			w.log.Warn("dns server slow to start")
		}
	}
}

// Close stops every listener and goroutine. It is safe to call twice.
func (w *Web) Close() error {
	w.closeMu.Lock()
	if w.closed {
		w.closeMu.Unlock()
		return nil
	}
	w.closed = true
	close(w.done)
	w.closeMu.Unlock()
	var errs []error
	if w.httpSrv != nil {
		errs = append(errs, w.httpSrv.Close())
	}
	if w.ctrlSrv != nil {
		errs = append(errs, w.ctrlSrv.Close())
	}
	for _, s := range w.dnsSrvs {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.ShutdownContext(ctx); err != nil {
			errs = append(errs, fmt.Errorf("dns shutdown: %w", err))
		}
		cancel()
	}
	w.wg.Wait()
	return errors.Join(errs...)
}

// HTTPAddr is the IPv4 HTTP address, "127.a.b.c:80".
func (w *Web) HTTPAddr() string { return w.httpAddr }

// HTTP6Addr is the IPv6 HTTP address "[::1]:port" ("" when ::1 is unavailable).
func (w *Web) HTTP6Addr() string { return w.http6Addr }

// DNSAddr is the address of the authoritative DNS server (UDP and TCP).
func (w *Web) DNSAddr() string { return w.dnsAddr }

// ControlURL is the base URL of /truth and /requests.
func (w *Web) ControlURL() string { return w.ctrlURL }

// Port is the HTTP port that URLs use (80 means URLs carry no port).
func (w *Web) Port() int { return w.port }

// HostNames lists every virtual host: synthetic hosts first, then
// directory sites.
func (w *Web) HostNames() []string {
	var out []string
	for _, s := range w.sy.sites {
		out = append(out, s.name)
	}
	for _, d := range w.dirs {
		out = append(out, d.name)
	}
	return out
}

// Seeds returns the absolute seed URLs.
func (w *Web) Seeds() []string { return append([]string(nil), w.seeds...) }

// Truth waits for the ground truth (directory sites are walked in the
// background) and returns it. It returns nil if the web closed first.
func (w *Web) Truth() *Truth {
	select {
	case <-w.ready:
		return w.truth
	case <-w.done:
		select {
		case <-w.ready:
			return w.truth
		default:
			return nil
		}
	}
}

// Requests returns a copy of the log entries with index >= since.
func (w *Web) Requests(since int) []Request {
	w.reqMu.Lock()
	defer w.reqMu.Unlock()
	if since < 0 {
		since = 0
	}
	if since >= len(w.reqs) {
		return []Request{}
	}
	return append([]Request(nil), w.reqs[since:]...)
}

func (w *Web) knownHost(hostport string) bool {
	name, port, err := net.SplitHostPort(hostport)
	if err != nil {
		name, port = hostport, "80"
	}
	if port != strconv.Itoa(w.port) {
		return false
	}
	_, a := w.sy.byName[name]
	_, b := w.dirByName[name]
	return a || b
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(rw)
	enc.SetIndent("", " ")
	_ = enc.Encode(v) // a failed write means the client left
}

func (w *Web) serveTruth(rw http.ResponseWriter, r *http.Request) {
	select {
	case <-w.ready:
	case <-r.Context().Done():
		return
	case <-w.done:
		http.Error(rw, "closing", http.StatusServiceUnavailable)
		return
	}
	writeJSON(rw, w.truth)
}

func (w *Web) serveRequests(rw http.ResponseWriter, r *http.Request) {
	since := 0
	if s := r.URL.Query().Get("since"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			http.Error(rw, "since must be a non-negative integer", http.StatusBadRequest)
			return
		}
		since = n
	}
	writeJSON(rw, w.Requests(since))
}

// WriteTruth writes the truth as JSON to wr.
func (w *Web) WriteTruth(wr io.Writer) error {
	t := w.Truth()
	if t == nil {
		return errors.New("web closed before the truth was ready")
	}
	enc := json.NewEncoder(wr)
	enc.SetIndent("", " ")
	if err := enc.Encode(t); err != nil {
		return fmt.Errorf("write truth: %w", err)
	}
	return nil
}

// WriteRequests writes the request log as a JSON array to wr.
func (w *Web) WriteRequests(wr io.Writer) error {
	enc := json.NewEncoder(wr)
	enc.SetIndent("", " ")
	if err := enc.Encode(w.Requests(0)); err != nil {
		return fmt.Errorf("write requests: %w", err)
	}
	return nil
}

// DNS.

const zone = "sim.test"

func (w *Web) hostTTL(name string) (uint32, bool) {
	if s, ok := w.sy.byName[name]; ok {
		return s.ttl, true
	}
	if d, ok := w.dirByName[name]; ok {
		return d.ttl, true
	}
	return 0, false
}

func (w *Web) soa() dns.RR {
	return &dns.SOA{
		Hdr: dns.RR_Header{Name: zone + ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns:  "ns." + zone + ".", Mbox: "hostmaster." + zone + ".",
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 60,
	}
}

func (w *Web) serveDNS(rw dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.SetRcode(req, dns.RcodeFormatError)
		_ = rw.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.TrimSuffix(strings.ToLower(q.Name), ".")
	ttl, ok := w.hostTTL(name)
	switch {
	case !ok && name == zone:
		m.Ns = []dns.RR{w.soa()}
	case !ok:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{w.soa()}
	case q.Qclass != dns.ClassINET:
		m.Ns = []dns.RR{w.soa()}
	case q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY:
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
			A:   net.ParseIP(w.ip).To4(),
		})
		if q.Qtype == dns.TypeANY && w.http6Addr != "" {
			m.Answer = append(m.Answer, w.aaaa(q.Name, ttl))
		}
	case q.Qtype == dns.TypeAAAA && w.http6Addr != "":
		m.Answer = append(m.Answer, w.aaaa(q.Name, ttl))
	default:
		m.Ns = []dns.RR{w.soa()}
	}
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(1232, false)
	}
	_ = rw.WriteMsg(m) // a lost UDP answer is the client's retry to make
}

func (w *Web) aaaa(name string, ttl uint32) dns.RR {
	return &dns.AAAA{
		Hdr:  dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl},
		AAAA: net.ParseIP("::1"),
	}
}

// HTTP.

// logWriter records the status and body bytes of a response.
type logWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	err    error
}

func (l *logWriter) WriteHeader(code int) {
	if l.status == 0 {
		l.status = code
	}
	l.ResponseWriter.WriteHeader(code)
}

func (l *logWriter) Write(p []byte) (int, error) {
	if l.status == 0 {
		l.status = http.StatusOK
	}
	n, err := l.ResponseWriter.Write(p)
	l.bytes += int64(n)
	if err != nil && l.err == nil {
		l.err = err
	}
	return n, err
}

func (l *logWriter) Flush() {
	if f, ok := l.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// errAborted marks a response the server gave up on (web closing, client gone).
var errAborted = errors.New("aborted")

func (w *Web) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	lw := &logWriter{ResponseWriter: rw}
	vhost := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(vhost); err == nil {
		vhost = h
	}
	vhost = strings.TrimSuffix(vhost, ".")
	aborted := false
	defer func() {
		end := time.Now()
		local := ""
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			local = a.String()
		}
		full := ""
		if u, err := Normalize("http://" + r.Host + r.URL.RequestURI()); err == nil {
			full = u
		}
		w.reqMu.Lock()
		w.reqs = append(w.reqs, Request{
			Index: len(w.reqs), Start: start.UTC(), End: end.UTC(), StartNS: start.UnixNano(), EndNS: end.UnixNano(),
			DurationNS: end.Sub(start).Nanoseconds(), Client: r.RemoteAddr, Local: local, Host: r.Host, VHost: vhost,
			Method: r.Method, Target: r.URL.RequestURI(), URL: full, Status: lw.status, Bytes: lw.bytes,
			Completed: !aborted && lw.err == nil && r.Context().Err() == nil, UserAgent: r.UserAgent(),
		})
		w.reqMu.Unlock()
		if aborted {
			// Drop the connection without a response (or mid-body).
			panic(http.ErrAbortHandler)
		}
	}()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		lw.Header().Set("Allow", "GET, HEAD")
		http.Error(lw, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := w.linkDelay(r, vhost); err != nil {
		aborted = true
		return
	}
	if s, ok := w.sy.byName[vhost]; ok {
		if err := w.serveSynth(lw, r, s); err != nil {
			aborted = true
		}
		return
	}
	if d, ok := w.dirByName[vhost]; ok {
		w.serveDir(lw, r, d)
		return
	}
	http.Error(lw, "404 unknown host", http.StatusNotFound)
}

// sleep waits d unless the request or the web ends first.
func (w *Web) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return errAborted
	case <-w.done:
		return errAborted
	}
}

// bump counts a request to key and returns the count including this one.
func (w *Web) bump(key string) int {
	w.stateMu.Lock()
	defer w.stateMu.Unlock()
	w.hits[key]++
	return w.hits[key]
}

// send writes a complete response, paced by the site's bandwidth or drip.
func (w *Web) send(lw *logWriter, r *http.Request, s *site, status int, ctype string, body []byte, hdr map[string]string) error {
	h := lw.Header()
	if ctype != "" {
		h.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		h.Set(k, v)
	}
	drip := s.has(ClassDrip)
	if !drip {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	lw.WriteHeader(status)
	if r.Method == http.MethodHead {
		return nil
	}
	chunk, pause := len(body), time.Duration(0)
	switch {
	case drip:
		chunk, pause = 16, 250*time.Millisecond
	case s.bandwidth > 0:
		chunk, pause = max(512, s.bandwidth/50), 20*time.Millisecond
	}
	for off := 0; off < len(body); off += chunk {
		end := min(len(body), off+chunk)
		if _, err := lw.Write(body[off:end]); err != nil {
			return errAborted
		}
		if end < len(body) && pause > 0 {
			lw.Flush()
			if err := w.sleep(r.Context(), pause); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *Web) serveSynth(lw *logWriter, r *http.Request, s *site) error {
	ctx := r.Context()
	if s.has(ClassBlackhole) {
		select {
		case <-ctx.Done():
		case <-w.done:
		}
		return errAborted
	}
	if err := w.sleep(ctx, s.latency); err != nil {
		return err
	}
	rt := w.sy.route(s, r.URL.EscapedPath(), r.URL.RawQuery, w.urlOf)
	norm, _ := Normalize(w.urlOf(s, r.URL.RequestURI()))
	text := func(status int, msg string) error {
		return w.send(lw, r, s, status, "text/html; charset=utf-8", []byte("<html><head><title>"+msg+"</title></head><body><h1>"+msg+"</h1></body></html>\n"), nil)
	}
	switch rt.kind {
	case rRobots:
		rf := w.robots[s]
		if n := w.bump("robots " + s.name); n <= rf.firstFails {
			return w.send(lw, r, s, 503, "text/plain", []byte("503 busy\n"), map[string]string{"Retry-After": "1"})
		}
		if rf.status != 200 {
			return w.send(lw, r, s, rf.status, "text/plain", []byte("not found\n"), nil)
		}
		return w.send(lw, r, s, 200, "text/plain", []byte(rf.body), nil)
	case rSitemap:
		return w.send(lw, r, s, 200, "application/xml", sitemapXML(w.sitemapURLs(s)), nil)
	case rSitemapIndex:
		urls := w.sitemapURLs(s)
		var parts []string
		for i := 0; i*sitemapPart < len(urls); i++ {
			parts = append(parts, w.urlOf(s, fmt.Sprintf("/sitemaps/part-%d.xml.gz", i)))
		}
		return w.send(lw, r, s, 200, "application/gzip", w.gzip(sitemapIndexXML(parts)), nil)
	case rSitemapPart:
		urls := w.sitemapURLs(s)
		if rt.k*sitemapPart >= len(urls) {
			return text(404, "404 Not Found")
		}
		part := urls[rt.k*sitemapPart : min(len(urls), (rt.k+1)*sitemapPart)]
		return w.send(lw, r, s, 200, "application/gzip", w.gzip(sitemapXML(part)), nil)
	case rPage:
		if ts := transientStatus(s, rt.k); ts != 0 && w.bump(norm) == 1 {
			return w.send(lw, r, s, ts, "text/html", []byte("<html><body>try again</body></html>\n"), map[string]string{"Retry-After": "1"})
		}
		return w.sendPage(lw, r, s, norm, w.renderPage(s, rt.k, false))
	case rDir:
		return w.sendPage(lw, r, s, norm, w.renderDir(s, rt.k))
	case rPrint:
		return w.sendPage(lw, r, s, norm, w.renderPage(s, rt.k, true))
	case rOldRedirect, rGoRedirect, rLoop:
		return w.send(lw, r, s, rt.status, "text/html", []byte("<html><body>moved <a href=\""+rt.location+"\">here</a></body></html>\n"), map[string]string{"Location": rt.location})
	case rMissing, rNotFound:
		return text(404, "404 Not Found")
	case rGone:
		return text(410, "410 Gone")
	case rBroken:
		return text(500, "500 Internal Server Error")
	case rCalendar:
		p := w.renderCalendar(s, rt.cal[0], rt.cal[1])
		return w.send(lw, r, s, 200, p.contentType, p.body, nil)
	case rPDF:
		return w.send(lw, r, s, 200, "application/pdf", renderPDF(rt.k), nil)
	case rPNG:
		return w.send(lw, r, s, 200, "image/png", renderPNG(rt.k), nil)
	case rHuge:
		return w.send(lw, r, s, 200, "text/html; charset=utf-8", hugePage(), nil)
	case rBomb:
		return w.send(lw, r, s, 200, "text/html", w.bomb(), map[string]string{"Content-Encoding": "gzip"})
	}
	return text(404, "404 Not Found")
}

const sitemapPart = 100

// sendPage sends a generated page the way a real server does: with a
// Last-Modified date and an ETag that conditional requests are answered
// with 304, and gzip-compressed when the client accepts it.
func (w *Web) sendPage(lw *logWriter, r *http.Request, s *site, norm string, p renderedPage) error {
	h := hash64(w.sy.seed, "lastmod", norm)
	modified := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(h%(365*24*3600)) * time.Second)
	etag := fmt.Sprintf("\"%x\"", hash64(p.body))
	hdr := map[string]string{
		"Last-Modified": modified.Format(http.TimeFormat), "ETag": etag, "Vary": "Accept-Encoding",
	}
	notModified := false
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		notModified = strings.Contains(inm, etag) || strings.TrimSpace(inm) == "*"
	} else if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil {
		notModified = !modified.After(ims)
	}
	if notModified {
		delete(hdr, "Vary")
		for k, v := range hdr {
			lw.Header().Set(k, v)
		}
		lw.WriteHeader(http.StatusNotModified)
		return nil
	}
	body := p.body
	if acceptsGzip(r.Header.Get("Accept-Encoding")) && !s.has(ClassDrip) {
		body = w.gzip(body)
		hdr["Content-Encoding"] = "gzip"
	}
	return w.send(lw, r, s, 200, p.contentType, body, hdr)
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

func hugePage() []byte {
	head := []byte("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Complete archive</title></head><body>\n")
	tail := []byte("</body></html>\n")
	line := []byte("<p>archive entry with the same words again and again to fill the page</p>\n")
	n := (hugeSize - len(head) - len(tail)) / len(line)
	var b bytes.Buffer
	b.Grow(hugeSize + len(line))
	b.Write(head)
	for i := 0; i <= n; i++ {
		b.Write(line)
	}
	b.Write(tail)
	return b.Bytes()
}

// sitemapURLs lists the required pages of a host, for its sitemaps.
func (w *Web) sitemapURLs(s *site) []string {
	t := w.Truth()
	if t == nil {
		return nil
	}
	var out []string
	for _, p := range t.Pages {
		if p.Host == s.name && p.InSitemap {
			out = append(out, p.URL)
		}
	}
	return out
}
