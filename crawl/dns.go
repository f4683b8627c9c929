package crawl

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// The caching resolver follows the crawler-DNS lessons of the seed paper:
// the system resolver is slow and serial, so the crawler keeps its own
// bounded LRU of answers with a clamped TTL (a minimum TTL keeps a hot host
// from being re-resolved every few seconds, a maximum bounds staleness),
// caches negative answers (NXDOMAIN and "no A/AAAA records") for
// NegativeTTL, never has more than one lookup in flight per name (waiters
// share it), queries A and AAAA in parallel, and resolves names as soon as
// links are discovered (Prefetch) so the fetcher rarely waits.
//
// Server failures (SERVFAIL, REFUSED, timeouts) are not cached: the next
// lookup tries again. CNAME chains are followed (up to 8 hops) when the
// server does not flatten them. Truncated UDP answers are retried over TCP.

// ResolverConfig configures a Resolver.
type ResolverConfig struct {
	// Server is the DNS server as "ip:port"; "" uses the first nameserver of
	// /etc/resolv.conf (127.0.0.1:53 if there is none).
	Server      string
	CacheSize   int           // max cached names (LRU)
	MinTTL      time.Duration // positive answers are kept at least this long
	MaxTTL      time.Duration // and at most this long
	NegativeTTL time.Duration // NXDOMAIN / no-address answers
	Timeout     time.Duration // per lookup (both record types, CNAME hops included)
	PreferIPv6  bool          // order AAAA answers first
	// PrefetchConcurrency bounds background lookups started by Prefetch;
	// prefetches beyond it are dropped. 0 means 16.
	PrefetchConcurrency int
}

// DefaultResolverConfig is tuned for a crawler on the real web.
func DefaultResolverConfig() ResolverConfig {
	return ResolverConfig{
		CacheSize:           100_000,
		MinTTL:              5 * time.Minute,
		MaxTTL:              6 * time.Hour,
		NegativeTTL:         10 * time.Minute,
		Timeout:             5 * time.Second,
		PrefetchConcurrency: 16,
	}
}

// ResolverStats are cumulative counters of a Resolver.
type ResolverStats struct {
	Hits            int64 // answered from the cache (positive)
	NegativeHits    int64 // answered from the cache (negative)
	Misses          int64 // lookups sent to the server (one per name, waiters excluded)
	Shared          int64 // callers that waited for a lookup already in flight
	Errors          int64 // lookups that failed (not cached)
	Queries         int64 // DNS messages exchanged with the server
	InFlight        int64 // lookups in flight now
	Entries         int64 // names cached now
	PrefetchDropped int64 // prefetches dropped because the bound was reached
}

// Resolver is a caching DNS resolver. It is safe for concurrent use.
type Resolver struct {
	cfg    ResolverConfig
	server string
	udp    *dns.Client
	tcp    *dns.Client
	now    func() time.Time // replaced in tests

	mu      sync.Mutex
	entries map[string]*list.Element // of *dnsEntry
	lru     *list.List
	calls   map[string]*dnsCall
	// prefetching holds the names whose prefetch goroutine has not yet
	// finished, so a second Prefetch before the lookup registers in calls
	// does not start a duplicate.
	prefetching map[string]struct{}
	closed      bool

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	prefetch chan struct{}

	hits, negHits, misses, shared, errs, queries, inflight, prefetchDropped atomic.Int64
}

type dnsEntry struct {
	name    string
	addrs   []netip.Addr
	err     error // non-nil for a negative entry
	expires time.Time
}

type dnsCall struct {
	done  chan struct{}
	addrs []netip.Addr
	err   error
}

// NewResolver builds a resolver. It starts no goroutine until used.
func NewResolver(cfg ResolverConfig) *Resolver {
	def := DefaultResolverConfig()
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = def.CacheSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = def.Timeout
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = def.MaxTTL
	}
	if cfg.MinTTL > cfg.MaxTTL {
		cfg.MinTTL = cfg.MaxTTL
	}
	if cfg.PrefetchConcurrency <= 0 {
		cfg.PrefetchConcurrency = def.PrefetchConcurrency
	}
	server := cfg.Server
	if server == "" {
		server = systemDNSServer()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Resolver{
		cfg:         cfg,
		server:      server,
		udp:         &dns.Client{Net: "udp", Timeout: cfg.Timeout, UDPSize: 4096},
		tcp:         &dns.Client{Net: "tcp", Timeout: cfg.Timeout},
		now:         time.Now,
		entries:     make(map[string]*list.Element),
		lru:         list.New(),
		calls:       make(map[string]*dnsCall),
		prefetching: make(map[string]struct{}),
		ctx:         ctx,
		cancel:      cancel,
		prefetch:    make(chan struct{}, cfg.PrefetchConcurrency),
	}
}

func systemDNSServer() string {
	conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil || len(conf.Servers) == 0 {
		return "127.0.0.1:53"
	}
	port := conf.Port
	if port == "" {
		port = "53"
	}
	return net.JoinHostPort(conf.Servers[0], port)
}

// canonicalName lowercases and strips brackets and the trailing dot.
func canonicalName(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// LookupAddrs returns the IPv4 and IPv6 addresses of host (IPv4 first unless
// PreferIPv6). IP literals are returned as they are. Errors wrap ErrNXDomain
// (cached) or ErrDNS (not cached). The caller's context only bounds its own
// wait: a lookup it started continues for other waiters.
func (r *Resolver) LookupAddrs(ctx context.Context, host string) ([]netip.Addr, error) {
	name := canonicalName(host)
	if addr, err := netip.ParseAddr(name); err == nil {
		return []netip.Addr{addr.Unmap()}, nil
	}
	if name == "" || len(name) > maxHostLength {
		return nil, fmt.Errorf("resolve %q: invalid name: %w", host, ErrNXDomain)
	}
	if _, ok := dns.IsDomainName(name); !ok {
		return nil, fmt.Errorf("resolve %q: not a domain name: %w", host, ErrNXDomain)
	}
	r.mu.Lock()
	if addrs, err, ok := r.cachedLocked(name); ok {
		r.mu.Unlock()
		return addrs, err
	}
	if r.closed {
		r.mu.Unlock()
		return nil, fmt.Errorf("resolve %q: resolver closed: %w", host, ErrDNS)
	}
	call, inFlight := r.calls[name]
	if inFlight {
		r.shared.Add(1)
	} else {
		call = &dnsCall{done: make(chan struct{})}
		r.calls[name] = call
		r.misses.Add(1)
		r.inflight.Add(1)
		r.wg.Add(1)
		go r.run(name, call)
	}
	r.mu.Unlock()
	select {
	case <-call.done:
		if call.err != nil {
			return nil, call.err
		}
		return append([]netip.Addr(nil), call.addrs...), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("resolve %q: %w", host, ctx.Err())
	}
}

// cachedLocked returns a fresh cache entry; r.mu must be held.
func (r *Resolver) cachedLocked(name string) ([]netip.Addr, error, bool) {
	el, ok := r.entries[name]
	if !ok {
		return nil, nil, false
	}
	e := el.Value.(*dnsEntry)
	if !r.now().Before(e.expires) {
		r.lru.Remove(el)
		delete(r.entries, name)
		return nil, nil, false
	}
	r.lru.MoveToFront(el)
	if e.err != nil {
		r.negHits.Add(1)
		return nil, e.err, true
	}
	r.hits.Add(1)
	return append([]netip.Addr(nil), e.addrs...), nil, true
}

// run performs one lookup for every waiter of call.
func (r *Resolver) run(name string, call *dnsCall) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.Timeout)
	addrs, ttl, err := r.resolve(ctx, name)
	cancel()
	call.addrs, call.err = addrs, err

	r.mu.Lock()
	switch {
	case err == nil:
		r.storeLocked(name, addrs, nil, clampDuration(ttl, r.cfg.MinTTL, r.cfg.MaxTTL))
	case errors.Is(err, ErrNXDomain):
		if r.cfg.NegativeTTL > 0 {
			r.storeLocked(name, nil, err, r.cfg.NegativeTTL)
		}
	default:
		r.errs.Add(1)
	}
	delete(r.calls, name)
	r.inflight.Add(-1)
	r.mu.Unlock()
	close(call.done)
}

func clampDuration(d, lo, hi time.Duration) time.Duration {
	if d < lo {
		d = lo
	}
	if d > hi {
		d = hi
	}
	return d
}

func (r *Resolver) storeLocked(name string, addrs []netip.Addr, err error, ttl time.Duration) {
	e := &dnsEntry{name: name, addrs: addrs, err: err, expires: r.now().Add(ttl)}
	if el, ok := r.entries[name]; ok {
		el.Value = e
		r.lru.MoveToFront(el)
		return
	}
	r.entries[name] = r.lru.PushFront(e)
	for r.lru.Len() > r.cfg.CacheSize {
		old := r.lru.Back()
		r.lru.Remove(old)
		delete(r.entries, old.Value.(*dnsEntry).name)
	}
}

type rrResult struct {
	addrs []netip.Addr
	ttl   time.Duration
	nx    bool // NXDOMAIN
	err   error
}

// resolve queries A and AAAA in parallel and combines the answers.
func (r *Resolver) resolve(ctx context.Context, name string) ([]netip.Addr, time.Duration, error) {
	var v4, v6 rrResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		v6 = r.queryType(ctx, name, dns.TypeAAAA)
	}()
	v4 = r.queryType(ctx, name, dns.TypeA)
	wg.Wait()

	if len(v4.addrs)+len(v6.addrs) > 0 {
		var addrs []netip.Addr
		if r.cfg.PreferIPv6 {
			addrs = append(append(addrs, v6.addrs...), v4.addrs...)
		} else {
			addrs = append(append(addrs, v4.addrs...), v6.addrs...)
		}
		ttl := time.Duration(-1)
		for _, res := range []rrResult{v4, v6} {
			if len(res.addrs) > 0 && (ttl < 0 || res.ttl < ttl) {
				ttl = res.ttl
			}
		}
		return addrs, ttl, nil
	}
	if v4.err == nil && v6.err == nil {
		if v4.nx || v6.nx {
			return nil, 0, fmt.Errorf("resolve %q: NXDOMAIN: %w", name, ErrNXDomain)
		}
		return nil, 0, fmt.Errorf("resolve %q: no A or AAAA records: %w", name, ErrNXDomain)
	}
	err := v4.err
	if err == nil {
		err = v6.err
	}
	return nil, 0, fmt.Errorf("resolve %q: %w", name, err)
}

// queryType asks for one record type, following CNAMEs the server did not
// resolve for us.
func (r *Resolver) queryType(ctx context.Context, name string, qtype uint16) rrResult {
	target := dns.Fqdn(name)
	var res rrResult
	res.ttl = -1
	for hop := 0; hop < 8; hop++ {
		m := new(dns.Msg)
		m.SetQuestion(target, qtype)
		m.RecursionDesired = true
		resp, err := r.exchange(ctx, m)
		if err != nil {
			return rrResult{err: err}
		}
		switch resp.Rcode {
		case dns.RcodeSuccess:
		case dns.RcodeNameError:
			return rrResult{nx: true}
		default:
			return rrResult{err: fmt.Errorf("%s for %s: %w", dns.RcodeToString[resp.Rcode], dns.TypeToString[qtype], ErrDNS)}
		}
		next := ""
		for _, rr := range resp.Answer {
			h := rr.Header()
			ttl := time.Duration(h.Ttl) * time.Second
			var addr netip.Addr
			switch v := rr.(type) {
			case *dns.A:
				addr, _ = netip.AddrFromSlice(v.A.To4())
			case *dns.AAAA:
				addr, _ = netip.AddrFromSlice(v.AAAA.To16())
			case *dns.CNAME:
				if strings.EqualFold(h.Name, target) {
					next = v.Target
				}
				if res.ttl < 0 || ttl < res.ttl {
					res.ttl = ttl
				}
				continue
			default:
				continue
			}
			if !addr.IsValid() {
				continue
			}
			res.addrs = append(res.addrs, addr.Unmap())
			if res.ttl < 0 || ttl < res.ttl {
				res.ttl = ttl
			}
		}
		if len(res.addrs) > 0 || next == "" {
			if res.ttl < 0 {
				res.ttl = 0
			}
			return res
		}
		target = next
	}
	return rrResult{err: fmt.Errorf("CNAME chain too long for %s: %w", name, ErrDNS)}
}

func (r *Resolver) exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	r.queries.Add(1)
	resp, _, err := r.udp.ExchangeContext(ctx, m, r.server)
	if err == nil && resp.Truncated {
		r.queries.Add(1)
		resp, _, err = r.tcp.ExchangeContext(ctx, m, r.server)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("dns server %s: %v: %w", r.server, ctx.Err(), ErrDNS)
		}
		return nil, fmt.Errorf("dns server %s: %v: %w", r.server, err, ErrDNS)
	}
	if resp.Id != m.Id {
		return nil, fmt.Errorf("dns server %s: mismatched answer id: %w", r.server, ErrDNS)
	}
	return resp, nil
}

// Prefetch starts resolving host in the background if it is not cached and
// fewer than PrefetchConcurrency prefetches are running; otherwise it does
// nothing. It never blocks.
func (r *Resolver) Prefetch(host string) {
	name := canonicalName(host)
	if name == "" {
		return
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if el, ok := r.entries[name]; ok && r.now().Before(el.Value.(*dnsEntry).expires) {
		return
	}
	if _, ok := r.calls[name]; ok {
		return
	}
	if _, ok := r.prefetching[name]; ok {
		return
	}
	select {
	case r.prefetch <- struct{}{}:
	default:
		r.prefetchDropped.Add(1)
		return
	}
	r.prefetching[name] = struct{}{}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() { <-r.prefetch }()
		_, _ = r.LookupAddrs(r.ctx, name)
		r.mu.Lock()
		delete(r.prefetching, name)
		r.mu.Unlock()
	}()
}

// Stats returns the counters.
func (r *Resolver) Stats() ResolverStats {
	r.mu.Lock()
	entries := int64(r.lru.Len())
	r.mu.Unlock()
	return ResolverStats{
		Hits:            r.hits.Load(),
		NegativeHits:    r.negHits.Load(),
		Misses:          r.misses.Load(),
		Shared:          r.shared.Load(),
		Errors:          r.errs.Load(),
		Queries:         r.queries.Load(),
		InFlight:        r.inflight.Load(),
		Entries:         entries,
		PrefetchDropped: r.prefetchDropped.Load(),
	}
}

// Close cancels lookups in flight and waits for their goroutines.
func (r *Resolver) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}
