package node

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config is everything a node needs to start. cmd/sou fills it from flags,
// a config file and SOU_* environment variables.
type Config struct {
	// DataDir holds the Badger database and the libp2p identity.
	DataDir string
	// HTTPAddr is where the API and UI listen (default 127.0.0.1:7070).
	HTTPAddr string
	// HTTPToken, when set, guards every route: API clients send it as
	// Authorization: Bearer, browsers log in with it once (/login) and
	// get a session cookie. It is required to bind the API beyond
	// loopback, unless PublicSearch serves search and cached pages to
	// anyone and nothing else beyond loopback.
	HTTPToken    string
	PublicSearch bool
	// HTTPHosts are further names the API answers to as the Host header
	// gives them (a LAN name, a reverse proxy's public name). Without a
	// token, a request whose Host is not "localhost", an IP address or one
	// of these is refused: that is how DNS rebinding reaches a loopback API.
	HTTPHosts []string
	// SearchConcurrency caps the searches and cached-page views served at
	// once (each search asks every peer), SearchConcurrencyPerClient those
	// of one client address (an IPv6 /64 counts as one); beyond them a
	// request is answered 429. 0 means the default.
	SearchConcurrency          int
	SearchConcurrencyPerClient int

	// DNS is the resolver the crawler asks ("ip:port"); empty means the
	// system's.
	DNS string
	// Seeds are submitted to the network at start, like `sou crawl add`.
	Seeds []string

	// Network separates sou networks; nodes of different networks never mix.
	Network   string
	Listen    []string
	Bootstrap []string
	// PSKFile holds a 32-byte pre-shared key (hex) for a private network.
	PSKFile string
	MDNS    bool
	// WAN selects WAN membership timeouts instead of LAN ones.
	WAN bool

	// Fast turns politeness delays to zero (testnets); one request per host
	// in flight still holds.
	Fast bool
	// AllowLoopback lets the crawler fetch from loopback addresses (the
	// testnet's simulated web lives there); AllowPrivate likewise for
	// RFC 1918 and link-local addresses.
	AllowLoopback bool
	AllowPrivate  bool
	// SourceIP is the local address of the crawler's connections ("" = the
	// system's choice); a testnet gives each node its own loopback address.
	SourceIP string
	// Workers is the number of concurrent fetches (0 = the crawl default).
	Workers int
	// MinDelay overrides the per-host politeness delay floor when > 0.
	MinDelay time.Duration
	// MaxPagesPerHost caps pages per host (0 = unlimited).
	MaxPagesPerHost int
	// MinFreeDisk is the free space (bytes) under DataDir below which the
	// node stops crawling and taking in data until space returns (see
	// disk.go); 0 disables the guard.
	MinFreeDisk uint64
	// Sync says which writes are flushed to stable storage before they are
	// acknowledged: SyncAcked (the default), SyncAlways or SyncNone; see
	// syncAcknowledged.
	Sync string
}

// Sync modes.
const (
	// SyncAcked fsyncs before acknowledging what a peer delivered
	// (replicated and handed-off pages, URL batches): the sender forgets
	// what this node acknowledged, so only those writes must survive a
	// power loss. The node's own writes are not synced.
	SyncAcked = "acked"
	// SyncAlways syncs every write (Badger's SyncWrites).
	SyncAlways = "always"
	// SyncNone syncs nothing: a power loss can lose the last seconds of
	// writes, acknowledged ones included; a killed process loses nothing.
	SyncNone = "none"
)

// DefaultDataDir is a per-user data directory.
func DefaultDataDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "sou")
	}
	return ".sou"
}

// DefaultConfig returns a node configuration for the real web.
func DefaultConfig() Config {
	return Config{
		DataDir:  DefaultDataDir(),
		HTTPAddr: "127.0.0.1:7070",
		Network:  "sou",
		Listen: []string{
			"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1",
			"/ip6/::/tcp/4001", "/ip6/::/udp/4001/quic-v1",
		},
		MDNS:        true,
		MinFreeDisk: DefaultMinFreeDisk,
		Sync:        SyncAcked,
	}
}

// The default search concurrency: far above what a person or the testnet's
// query phase (one search at a time per node) asks, low enough that a
// client cannot keep a node's peers busy with fan-out.
const (
	DefaultSearchConcurrency          = 32
	DefaultSearchConcurrencyPerClient = 4
)

// DefaultMinFreeDisk leaves room for Badger's memtables, a value-log file
// and compactions after the guard trips.
const DefaultMinFreeDisk = 1 << 30

// Validate reports the first problem with c as a one-line error.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("--data: a data directory is required")
	}
	if c.Network == "" {
		return errors.New("--network: must not be empty")
	}
	host, port, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http %q: want host:port: %w", c.HTTPAddr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("--http %q: bad port", c.HTTPAddr)
	}
	if !isLoopbackHost(host) && c.HTTPToken == "" && !c.PublicSearch {
		return fmt.Errorf("--http %s binds beyond loopback: set --http-token (or --public-search to expose only search and cached pages)", c.HTTPAddr)
	}
	for _, h := range c.HTTPHosts {
		if h == "" || strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == '/' || r == 0x7f }) {
			return fmt.Errorf("--http-host %q: want a host name as browsers send it (no scheme, path or spaces)", h)
		}
	}
	if c.SearchConcurrency < 0 || c.SearchConcurrencyPerClient < 0 {
		return errors.New("--http-max-searches and --http-max-searches-per-client must not be negative")
	}
	if c.DNS != "" {
		if _, _, err := net.SplitHostPort(c.DNS); err != nil {
			return fmt.Errorf("--dns %q: want ip:port: %w", c.DNS, err)
		}
	}
	if c.SourceIP != "" {
		if _, err := netip.ParseAddr(c.SourceIP); err != nil {
			return fmt.Errorf("--source-ip %q: %w", c.SourceIP, err)
		}
	}
	switch c.Sync {
	case "", SyncAcked, SyncAlways, SyncNone:
	default:
		return fmt.Errorf("--sync %q: want %s, %s or %s", c.Sync, SyncAcked, SyncAlways, SyncNone)
	}
	if c.Workers < 0 || c.MaxPagesPerHost < 0 || c.MinDelay < 0 {
		return errors.New("--workers, --max-pages-per-host and --min-delay must not be negative")
	}
	return nil
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}
