package p2p

import (
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"golang.org/x/time/rate"
)

// Config describes one p2p node. Start from DefaultLANConfig or
// DefaultWANConfig and override fields.
type Config struct {
	// DataDir holds the persistent identity (DataDir/identity.key, 0600).
	DataDir string
	// Listen is the list of multiaddrs to listen on. Empty means TCP and
	// QUIC on 0.0.0.0 and ::, port 0. QUIC addresses are dropped when PSK
	// is set, because libp2p's QUIC transport does not support private
	// networks.
	Listen []string
	// Bootstrap peers, as multiaddrs ending in /p2p/<ID>.
	Bootstrap []string
	// Network names the sou network. It is part of every protocol ID, the
	// DHT protocol prefix and the membership topic, so separate networks
	// (and testnets) never mix.
	Network string
	// PSK is an optional 32-byte pre-shared key for a private network.
	PSK []byte
	// MDNS enables LAN discovery over multicast DNS.
	MDNS bool
	// Replicas is R: how many closest members hold a host (owner first).
	Replicas int
	// HeartbeatInterval is how often this node announces itself;
	// MemberTimeout is how long a member may stay silent before it is
	// dropped from the view.
	HeartbeatInterval time.Duration
	MemberTimeout     time.Duration
	// MaxHops bounds greedy re-forwarding of URLs and claims.
	MaxHops int
	// MaxMessageBytes caps every framed message read from a peer
	// (compressed and decompressed sizes alike).
	MaxMessageBytes int
	// PeerRate and PeerBurst bound inbound messages (streams and
	// heartbeats) per remote peer. A peer that exceeds them is throttled:
	// its streams are reset for ThrottleFor.
	PeerRate    rate.Limit
	PeerBurst   int
	ThrottleFor time.Duration
	// PeerURLRate and PeerURLBurst bound the URL records accepted from one
	// peer (records per second, and how many may be saved up). A batch is
	// accepted while the peer's allowance is positive and then charged in
	// full (the allowance may go negative, so any batch size gets through
	// eventually); otherwise it is refused as busy and the sender retries
	// it later from its outbox, so nothing is lost. A flooder cannot grow
	// this node's frontier and outboxes faster than the rate.
	PeerURLRate  rate.Limit
	PeerURLBurst int
	// MaxStreamsPerPeer caps the inbound streams one peer may have open at
	// once (all protocols); streams beyond it are reset at once. URL
	// batches are further capped at maxURLBatchesPerPeer.
	MaxStreamsPerPeer int
	// StreamIdleTimeout is how long an inbound stream may stay silent
	// while its request is read before it is reset. A pipe (pipes.go)
	// waits six times as long for its next request, and its sender keeps
	// it idle for twice as long.
	StreamIdleTimeout time.Duration
	// BatchMaxURLs caps the records in one forwarded batch; BatchDelay is
	// how long a sender lingers to fill a batch.
	BatchMaxURLs int
	BatchDelay   time.Duration
	// RetryMin and RetryMax bound the exponential backoff of outbox
	// delivery to an unreachable peer.
	RetryMin, RetryMax time.Duration
	// ConnLow and ConnHigh are the connection manager's watermarks.
	ConnLow, ConnHigh int
	// MaxMembers caps the members this node admits; JoinRate and
	// JoinBurst bound how fast new members are admitted (see admission).
	MaxMembers int
	JoinRate   rate.Limit
	JoinBurst  int
	// ClaimTTL is how long a stored claim is kept. ClaimRate and
	// ClaimBurst bound the claims one origin may store here (per second,
	// saved up); claims beyond are refused, and the claimant indexes its
	// page without the network-wide duplicate check.
	ClaimTTL   time.Duration
	ClaimRate  rate.Limit
	ClaimBurst int
	// MaxOutboxPerPeer caps the URL records waiting in the outbox of one
	// peer. Beyond it, records this node forwards for itself are dropped
	// (counted in URLsDropped) and batches from peers that would need
	// re-forwarding to that peer are refused as busy.
	MaxOutboxPerPeer int
	// MaxSearchesPerPeer caps the search requests of one member handled at
	// once; more are refused as busy.
	MaxSearchesPerPeer int
	// SearchWorkers is how many search requests of other members run at
	// once (0: one per core). A shard search is CPU work; a host with
	// cores to spare for its peers may raise it.
	SearchWorkers int
	// RelayService makes this node offer circuit relay v2 to others when
	// AutoNAT finds it publicly reachable.
	RelayService bool
}

// DefaultLANConfig is tuned for nodes on one LAN or one machine: short
// heartbeat and timeout so joins and crashes show up within seconds
// (hashicorp/memberlist's LAN preset in spirit).
func DefaultLANConfig() Config {
	return Config{
		Network:            "sou",
		Replicas:           2,
		HeartbeatInterval:  500 * time.Millisecond,
		MemberTimeout:      3 * time.Second,
		MaxHops:            4,
		MaxMessageBytes:    4 << 20,
		PeerRate:           1000,
		PeerBurst:          2000,
		ThrottleFor:        5 * time.Second,
		PeerURLRate:        20_000,
		PeerURLBurst:       maxBatchRecords,
		MaxStreamsPerPeer:  128,
		StreamIdleTimeout:  10 * time.Second,
		BatchMaxURLs:       2000,
		BatchDelay:         time.Second,
		RetryMin:           200 * time.Millisecond,
		RetryMax:           10 * time.Second,
		ConnLow:            100,
		ConnHigh:           400,
		MaxMembers:         1024,
		JoinRate:           32,
		JoinBurst:          256,
		ClaimTTL:           7 * 24 * time.Hour,
		ClaimRate:          1000,
		ClaimBurst:         10_000,
		MaxOutboxPerPeer:   1_000_000,
		MaxSearchesPerPeer: 32,
		RelayService:       true,
	}
}

// DefaultWANConfig is tuned for the internet: slower heartbeat, longer
// timeout (tolerates latency spikes and brief partitions), longer backoff.
func DefaultWANConfig() Config {
	c := DefaultLANConfig()
	c.HeartbeatInterval = 5 * time.Second
	c.MemberTimeout = 30 * time.Second
	c.BatchDelay = 500 * time.Millisecond
	c.RetryMin = time.Second
	c.RetryMax = 2 * time.Minute
	return c
}

func (c *Config) fillDefaults() error {
	d := DefaultLANConfig()
	if c.Network == "" {
		c.Network = d.Network
	}
	if c.Replicas <= 0 {
		c.Replicas = d.Replicas
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = d.HeartbeatInterval
	}
	if c.MemberTimeout <= 0 {
		c.MemberTimeout = d.MemberTimeout
	}
	if c.MemberTimeout < 2*c.HeartbeatInterval {
		return fmt.Errorf("p2p config: MemberTimeout %v must be at least twice HeartbeatInterval %v", c.MemberTimeout, c.HeartbeatInterval)
	}
	if c.MaxHops <= 0 {
		c.MaxHops = d.MaxHops
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.MaxMessageBytes < 1024 {
		return fmt.Errorf("p2p config: MaxMessageBytes %d is too small", c.MaxMessageBytes)
	}
	if c.PeerRate <= 0 {
		c.PeerRate = d.PeerRate
	}
	if c.PeerBurst <= 0 {
		c.PeerBurst = d.PeerBurst
	}
	if c.ThrottleFor <= 0 {
		c.ThrottleFor = d.ThrottleFor
	}
	if c.PeerURLRate <= 0 {
		c.PeerURLRate = d.PeerURLRate
	}
	if c.PeerURLBurst <= 0 {
		c.PeerURLBurst = d.PeerURLBurst
	}
	if c.MaxStreamsPerPeer <= 0 {
		c.MaxStreamsPerPeer = d.MaxStreamsPerPeer
	}
	if c.StreamIdleTimeout <= 0 {
		c.StreamIdleTimeout = d.StreamIdleTimeout
	}
	if c.BatchMaxURLs <= 0 {
		c.BatchMaxURLs = d.BatchMaxURLs
	}
	if c.BatchDelay < 0 {
		c.BatchDelay = 0
	}
	if c.RetryMin <= 0 {
		c.RetryMin = d.RetryMin
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = c.RetryMin * 50
	}
	if c.ConnLow <= 0 {
		c.ConnLow = d.ConnLow
	}
	if c.ConnHigh <= c.ConnLow {
		c.ConnHigh = c.ConnLow * 4
	}
	if c.MaxMembers <= 0 {
		c.MaxMembers = d.MaxMembers
	}
	if c.JoinRate <= 0 {
		c.JoinRate = d.JoinRate
	}
	if c.JoinBurst <= 0 {
		c.JoinBurst = d.JoinBurst
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = d.ClaimTTL
	}
	if c.ClaimRate <= 0 {
		c.ClaimRate = d.ClaimRate
	}
	if c.ClaimBurst <= 0 {
		c.ClaimBurst = d.ClaimBurst
	}
	if c.MaxOutboxPerPeer <= 0 {
		c.MaxOutboxPerPeer = d.MaxOutboxPerPeer
	}
	if c.MaxSearchesPerPeer <= 0 {
		c.MaxSearchesPerPeer = d.MaxSearchesPerPeer
	}
	if c.PSK != nil && len(c.PSK) != 32 {
		return fmt.Errorf("p2p config: PSK must be 32 bytes, got %d", len(c.PSK))
	}
	for _, r := range c.Network {
		if r == '/' || r <= ' ' || r > '~' {
			return fmt.Errorf("p2p config: network name %q must be printable ASCII without '/'", c.Network)
		}
	}
	return nil
}

// Clock is the time source for membership expiry and member timestamps.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

type options struct {
	host  host.Host
	clock Clock
	// viewFilter, when set, hides members from this node's view. Tests use
	// it to make views differ deterministically.
	viewFilter func(peerID string) bool
	// intakeGate, when set, is asked before anything a peer sent is
	// stored (URL batches, re-forwarded records, claims); an error refuses
	// it and the sender retries later.
	intakeGate func() error
}

// Option customises New.
type Option func(*options)

// WithHost makes the node use an existing libp2p host (for example a
// mocknet host in the WAN simulator) instead of building one. The caller
// keeps ownership of the host: Close does not close it. Config.Listen,
// PSK, DataDir identity and NAT settings are then the host's business.
func WithHost(h host.Host) Option { return func(o *options) { o.host = h } }

// WithClock replaces the wall clock used for membership timestamps.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithIntakeGate makes the node refuse what peers send for storage while
// gate returns an error (node's disk guard).
func WithIntakeGate(gate func() error) Option { return func(o *options) { o.intakeGate = gate } }

func withViewFilter(f func(peerID string) bool) Option {
	return func(o *options) { o.viewFilter = f }
}
