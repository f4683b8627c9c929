package crawl

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testDNSRecord is what the test DNS server knows about one name.
type testDNSRecord struct {
	a, aaaa  []string
	cname    string
	ttl      uint32
	delay    time.Duration
	servfail bool
}

// testDNSServer is a real miekg/dns server on 127.0.0.1:0 that counts the
// queries it receives.
type testDNSServer struct {
	addr    string
	mu      sync.Mutex
	records map[string]testDNSRecord
	queries map[string]int // "name/TYPE"
	total   atomic.Int64
}

func startTestDNS(t *testing.T, records map[string]testDNSRecord) *testDNSServer {
	t.Helper()
	s := &testDNSServer{records: make(map[string]testDNSRecord), queries: make(map[string]int)}
	for k, v := range records {
		s.records[dns.Fqdn(k)] = v
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = pc.LocalAddr().String()
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(s.serve), NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

func (s *testDNSServer) serve(w dns.ResponseWriter, req *dns.Msg) {
	s.total.Add(1)
	m := new(dns.Msg)
	m.SetReply(req)
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	s.mu.Lock()
	s.queries[name+"/"+dns.TypeToString[q.Qtype]]++
	rec, ok := s.records[name]
	s.mu.Unlock()
	if rec.delay > 0 {
		time.Sleep(rec.delay)
	}
	switch {
	case !ok:
		m.Rcode = dns.RcodeNameError
	case rec.servfail:
		m.Rcode = dns.RcodeServerFailure
	case rec.cname != "":
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: rec.ttl}, Target: dns.Fqdn(rec.cname)})
	case q.Qtype == dns.TypeA:
		for _, a := range rec.a {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: rec.ttl}, A: net.ParseIP(a)})
		}
	case q.Qtype == dns.TypeAAAA:
		for _, a := range rec.aaaa {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: rec.ttl}, AAAA: net.ParseIP(a)})
		}
	}
	_ = w.WriteMsg(m)
}

func (s *testDNSServer) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[dns.Fqdn(name)+"/A"] + s.queries[dns.Fqdn(name)+"/AAAA"]
}

type dnsTestClock struct{ ns atomic.Int64 }

func (c *dnsTestClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *dnsTestClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newTestResolver(t *testing.T, server string, mod func(*ResolverConfig)) (*Resolver, *dnsTestClock) {
	t.Helper()
	cfg := DefaultResolverConfig()
	cfg.Server = server
	cfg.MinTTL = 0
	cfg.Timeout = 2 * time.Second
	if mod != nil {
		mod(&cfg)
	}
	r := NewResolver(cfg)
	clock := &dnsTestClock{}
	clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	r.now = clock.now
	t.Cleanup(r.Close)
	return r, clock
}

func TestResolverCacheHitsAndMisses(t *testing.T) {
	srv := startTestDNS(t, map[string]testDNSRecord{
		"a.test": {a: []string{"192.0.2.1", "192.0.2.2"}, aaaa: []string{"2001:db8::1"}, ttl: 300},
	})
	r, _ := newTestResolver(t, srv.addr, nil)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		addrs, err := r.LookupAddrs(ctx, "A.test.")
		if err != nil {
			t.Fatal(err)
		}
		want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::1")}
		if len(addrs) != len(want) {
			t.Fatalf("addrs %v", addrs)
		}
		for j := range want {
			if addrs[j] != want[j] {
				t.Fatalf("addrs %v, want %v", addrs, want)
			}
		}
	}
	if got := srv.count("a.test"); got != 2 {
		t.Fatalf("server saw %d queries, want 2 (one A, one AAAA)", got)
	}
	st := r.Stats()
	if st.Misses != 1 || st.Hits != 2 || st.Entries != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResolverPreferIPv6AndLiterals(t *testing.T) {
	srv := startTestDNS(t, map[string]testDNSRecord{
		"dual.test": {a: []string{"192.0.2.1"}, aaaa: []string{"2001:db8::1"}, ttl: 300},
		"v6.test":   {aaaa: []string{"2001:db8::2"}, ttl: 300},
	})
	r, _ := newTestResolver(t, srv.addr, func(c *ResolverConfig) { c.PreferIPv6 = true })
	addrs, err := r.LookupAddrs(context.Background(), "dual.test")
	if err != nil || len(addrs) != 2 || !addrs[0].Is6() {
		t.Fatalf("dual: %v %v", addrs, err)
	}
	addrs, err = r.LookupAddrs(context.Background(), "v6.test")
	if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("2001:db8::2") {
		t.Fatalf("v6: %v %v", addrs, err)
	}
	for _, lit := range []string{"127.0.0.1", "[::1]", "::1"} {
		addrs, err := r.LookupAddrs(context.Background(), lit)
		if err != nil || len(addrs) != 1 {
			t.Fatalf("literal %s: %v %v", lit, addrs, err)
		}
	}
	if n := srv.total.Load(); n != 4 {
		t.Fatalf("server saw %d queries, want 4", n)
	}
}

func TestResolverNegativeCaching(t *testing.T) {
	srv := startTestDNS(t, map[string]testDNSRecord{"empty.test": {ttl: 300}})
	r, clock := newTestResolver(t, srv.addr, func(c *ResolverConfig) { c.NegativeTTL = time.Minute })
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := r.LookupAddrs(ctx, "nope.test")
		if ErrorClass(err) != "dns_nxdomain" {
			t.Fatalf("lookup %d: %v (class %q)", i, err, ErrorClass(err))
		}
	}
	if got := srv.count("nope.test"); got != 2 {
		t.Fatalf("server saw %d queries for nope.test, want 2", got)
	}
	if _, err := r.LookupAddrs(ctx, "empty.test"); ErrorClass(err) != "dns_nxdomain" {
		t.Fatalf("no-address name: %v", err)
	}
	if st := r.Stats(); st.NegativeHits != 2 {
		t.Fatalf("stats %+v", st)
	}
	clock.advance(61 * time.Second)
	if _, err := r.LookupAddrs(ctx, "nope.test"); err == nil {
		t.Fatal("expected error")
	}
	if got := srv.count("nope.test"); got != 4 {
		t.Fatalf("after negative TTL: %d queries, want 4", got)
	}
}

func TestResolverServfailNotCached(t *testing.T) {
	srv := startTestDNS(t, map[string]testDNSRecord{"broken.test": {servfail: true}})
	r, _ := newTestResolver(t, srv.addr, nil)
	for i := 0; i < 2; i++ {
		_, err := r.LookupAddrs(context.Background(), "broken.test")
		if ErrorClass(err) != "dns" {
			t.Fatalf("class %q for %v", ErrorClass(err), err)
		}
	}
	if got := srv.count("broken.test"); got != 4 {
		t.Fatalf("server saw %d queries, want 4 (failures are not cached)", got)
	}
}

func TestResolverSingleflight(t *testing.T) {
	srv := startTestDNS(t, map[string]testDNSRecord{
		"slow.test": {a: []string{"192.0.2.9"}, ttl: 300, delay: 150 * time.Millisecond},
	})
	r, _ := newTestResolver(t, srv.addr, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs, err := r.LookupAddrs(context.Background(), "slow.test")
			if err == nil && (len(addrs) != 1 || addrs[0] != netip.MustParseAddr("192.0.2.9")) {
				err = dnsTestErr("wrong addrs")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.count("slow.test"); got != 2 {
		t.Fatalf("server saw %d queries under 50 concurrent lookups, want 2", got)
	}
	st := r.Stats()
	if st.Misses != 1 || st.Shared+st.Hits != 49 {
		t.Fatalf("stats %+v", st)
	}
}

type dnsTestErr string

func (e dnsTestErr) Error() string { return string(e) }

func TestResolverTTL(t *testing.T) {
	srv := startTestDNS(t, map[string]testDNSRecord{
		"short.test": {a: []string{"192.0.2.1"}, ttl: 2},
		"long.test":  {a: []string{"192.0.2.2"}, ttl: 86400},
	})
	ctx := context.Background()
	t.Run("expiry", func(t *testing.T) {
		r, clock := newTestResolver(t, srv.addr, nil)
		before := srv.count("short.test")
		_, _ = r.LookupAddrs(ctx, "short.test")
		clock.advance(time.Second)
		_, _ = r.LookupAddrs(ctx, "short.test")
		if got := srv.count("short.test") - before; got != 2 {
			t.Fatalf("within TTL: %d queries", got)
		}
		clock.advance(1500 * time.Millisecond)
		_, _ = r.LookupAddrs(ctx, "short.test")
		if got := srv.count("short.test") - before; got != 4 {
			t.Fatalf("after TTL: %d queries, want 4", got)
		}
	})
	t.Run("min ttl", func(t *testing.T) {
		r, clock := newTestResolver(t, srv.addr, func(c *ResolverConfig) { c.MinTTL = time.Minute })
		before := srv.count("short.test")
		_, _ = r.LookupAddrs(ctx, "short.test")
		clock.advance(30 * time.Second)
		_, _ = r.LookupAddrs(ctx, "short.test")
		if got := srv.count("short.test") - before; got != 2 {
			t.Fatalf("min TTL not applied: %d queries", got)
		}
	})
	t.Run("max ttl", func(t *testing.T) {
		r, clock := newTestResolver(t, srv.addr, func(c *ResolverConfig) { c.MaxTTL = time.Hour })
		before := srv.count("long.test")
		_, _ = r.LookupAddrs(ctx, "long.test")
		clock.advance(61 * time.Minute)
		_, _ = r.LookupAddrs(ctx, "long.test")
		if got := srv.count("long.test") - before; got != 4 {
			t.Fatalf("max TTL not applied: %d queries", got)
		}
	})
}

func TestResolverLRUBound(t *testing.T) {
	recs := map[string]testDNSRecord{}
	for _, n := range []string{"h1.test", "h2.test", "h3.test"} {
		recs[n] = testDNSRecord{a: []string{"192.0.2.1"}, ttl: 300}
	}
	srv := startTestDNS(t, recs)
	r, _ := newTestResolver(t, srv.addr, func(c *ResolverConfig) { c.CacheSize = 2 })
	ctx := context.Background()
	for _, n := range []string{"h1.test", "h2.test", "h1.test", "h3.test"} {
		if _, err := r.LookupAddrs(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Stats(); st.Entries != 2 {
		t.Fatalf("entries %d", st.Entries)
	}
	// h2 was least recently used and is gone; h1 stays.
	_, _ = r.LookupAddrs(ctx, "h1.test")
	_, _ = r.LookupAddrs(ctx, "h2.test")
	if srv.count("h1.test") != 2 || srv.count("h2.test") != 4 {
		t.Fatalf("h1 %d h2 %d queries", srv.count("h1.test"), srv.count("h2.test"))
	}
}

func TestResolverCNAMEAndTimeout(t *testing.T) {
	srv := startTestDNS(t, map[string]testDNSRecord{
		"alias.test":  {cname: "target.test", ttl: 300},
		"target.test": {a: []string{"192.0.2.7"}, ttl: 300},
		"hang.test":   {a: []string{"192.0.2.8"}, ttl: 300, delay: 900 * time.Millisecond},
	})
	r, _ := newTestResolver(t, srv.addr, func(c *ResolverConfig) { c.Timeout = 300 * time.Millisecond })
	addrs, err := r.LookupAddrs(context.Background(), "alias.test")
	if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("192.0.2.7") {
		t.Fatalf("cname: %v %v", addrs, err)
	}
	start := time.Now()
	_, err = r.LookupAddrs(context.Background(), "hang.test")
	if ErrorClass(err) != "dns" || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("timeout: %v class %q after %v", err, ErrorClass(err), time.Since(start))
	}
	// The caller's own context bounds its wait.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.LookupAddrs(ctx, "hang.test"); ErrorClass(err) != "timeout" {
		t.Fatalf("caller deadline: %v", err)
	}
}

func TestResolverPrefetch(t *testing.T) {
	srv := startTestDNS(t, map[string]testDNSRecord{"pre.test": {a: []string{"192.0.2.3"}, ttl: 300}})
	r, _ := newTestResolver(t, srv.addr, nil)
	r.Prefetch("pre.test")
	r.Prefetch("pre.test")
	r.Prefetch("10.0.0.1")
	deadline := time.Now().Add(2 * time.Second)
	for r.Stats().Entries == 0 {
		if time.Now().After(deadline) {
			t.Fatal("prefetch never completed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := r.LookupAddrs(context.Background(), "pre.test"); err != nil {
		t.Fatal(err)
	}
	if got := srv.count("pre.test"); got != 2 {
		t.Fatalf("server saw %d queries, want 2", got)
	}
	if st := r.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResolverPrefetchBounded(t *testing.T) {
	recs := map[string]testDNSRecord{}
	for i := 0; i < 10; i++ {
		recs[string(rune('a'+i))+".slow.test"] = testDNSRecord{a: []string{"192.0.2.1"}, ttl: 300, delay: 500 * time.Millisecond}
	}
	srv := startTestDNS(t, recs)
	r, _ := newTestResolver(t, srv.addr, func(c *ResolverConfig) { c.PrefetchConcurrency = 3 })
	start := time.Now()
	for i := 0; i < 10; i++ {
		r.Prefetch(string(rune('a'+i)) + ".slow.test")
	}
	if time.Since(start) > 400*time.Millisecond {
		t.Fatal("Prefetch blocked")
	}
	if st := r.Stats(); st.PrefetchDropped != 7 {
		t.Fatalf("dropped %d, want 7", st.PrefetchDropped)
	}
}

func TestResolverSystemServerFallback(t *testing.T) {
	r := NewResolver(ResolverConfig{})
	defer r.Close()
	if _, _, err := net.SplitHostPort(r.server); err != nil {
		t.Fatalf("server %q from /etc/resolv.conf is not ip:port: %v", r.server, err)
	}
	if _, err := r.LookupAddrs(context.Background(), ""); ErrorClass(err) != "dns_nxdomain" {
		t.Fatalf("empty name: %v", err)
	}
}
