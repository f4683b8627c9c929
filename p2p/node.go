package p2p

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	"golang.org/x/time/rate"
)

// Node is one member of a sou network: a libp2p host with its DHT,
// membership view, outboxes and protocol handlers.
type Node struct {
	cfg   Config
	log   *slog.Logger
	db    *badger.DB
	clock Clock
	opts  options

	h        host.Host
	ownsHost bool
	kad      *dht.IpfsDHT
	ps       *pubsub.PubSub
	topic    *pubsub.Topic
	sub      *pubsub.Subscription
	mdns     interface{ Close() error }

	protoURLs, protoSearch, protoDeliver, protoClaim, protoClaims protocol.ID
	// pipeOf maps each protocol that has a pipe version to it; pipes
	// holds the idle pipes (pipes.go).
	pipeOf    map[protocol.ID]protocol.ID
	pipes     *pipePool
	topicName string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// spawnMu orders goIfOpen against Close: no goroutine is added once
	// Close waits for them.
	spawnMu sync.Mutex
	// staleNotifiee closes the connections a crashed peer left behind
	// (staleConns).
	staleNotifiee network.Notifiee
	closed        atomic.Bool
	start         time.Time

	// mu guards the search and deliver handlers.
	mu       sync.Mutex
	searchH  func(ctx context.Context, from peer.ID, req []byte) ([]byte, error)
	deliverH map[string]func(ctx context.Context, from peer.ID, payload []byte) error

	mem    *membership
	limits *peerLimits
	outbox *Outbox
	urls   *urlRouter
	claims *claims // set once the host's key is known (startRest)

	// searches runs other members' search requests in turn (searchqueue.go).
	searches *searchQueue
	// refusalLog paces the warnings about refused strangers, which come
	// as fast as a stranger sends.
	refusalLog *rate.Limiter

	st counters
}

type counters struct {
	urlsForwarded, urlsReceived, urlsReforwarded, urlsDropped, urlsInvalid    atomic.Uint64
	batchesSent, batchesReceived, forwardBytes, receivedBytes                 atomic.Uint64
	sendFailures, rejected, throttledMessages, throttleEvents                 atomic.Uint64
	streamsRefused, streamsTimedOut, urlBatchesRefused, claimsRefused         atomic.Uint64
	nonMemberStreams, membersRefused, heartbeatsIgnored, candidateDialsFailed atomic.Uint64
	claimsThrottled, outboxFull, searchesRefused, urlsFiltered                atomic.Uint64
	claimBatchesSent, claimsBatched, claimBatchesReceived                     atomic.Uint64
	deliveriesReceived, staleConnsClosed                                      atomic.Uint64
	relayersBanned                                                            atomic.Uint64
	maxHops                                                                   atomic.Int64
	gossip                                                                    gossipDrops
}

// Stats is a snapshot of the node's counters.
type Stats struct {
	URLsForwarded   uint64 // records acknowledged by the peer they were sent to
	URLsReceived    uint64 // records received in batches (owned or not)
	URLsReforwarded uint64 // received records passed on greedily to a closer member
	URLsDropped     uint64 // records dropped because they exceeded MaxHops
	URLsInvalid     uint64 // records refused by Forward (caps, encoding)
	BatchesSent     uint64
	BatchesReceived uint64
	// ForwardBytes counts URL batch frames as written to streams by this
	// node (length prefix + compressed payload); transport overhead
	// (yamux, noise/TLS, TCP/IP) is not included.
	ForwardBytes  uint64
	ReceivedBytes uint64
	MaxHopsSeen   int
	SendFailures  uint64 // failed batch deliveries (retried later)
	// RejectedMessages counts malformed messages (stream reset).
	RejectedMessages uint64
	// ThrottledMessages counts messages refused by per-peer rate limits;
	// ThrottleEvents counts how often a peer was put into the penalty box;
	// ThrottledPeers is how many are in it now.
	ThrottledMessages uint64
	ThrottleEvents    uint64
	ThrottledPeers    int
	// StreamsRefused counts inbound streams reset because their peer
	// already had MaxStreamsPerPeer open (or, for URL batches,
	// maxURLBatchesPerPeer under way); StreamsTimedOut those reset after
	// StreamIdleTimeout of silence.
	StreamsRefused  uint64
	StreamsTimedOut uint64
	// URLBatchesRefused counts batches refused as busy because their
	// sender exceeded PeerURLRate (the sender retries them).
	URLBatchesRefused uint64
	// ClaimsRefused counts claims refused because the claimant does not
	// hold the host of the claimed URL.
	ClaimsRefused uint64
	// NonMemberStreams counts inbound streams reset because their peer is
	// not a member: every protocol serves members only.
	NonMemberStreams uint64
	// MembersRefused counts heartbeats of connected origins not admitted
	// (member cap, join rate) or of new candidates beyond the candidate
	// cap; HeartbeatsIgnored those dropped before decoding for want of
	// room; CandidateDialsFailed the candidates that did not answer at
	// their announced addresses.
	MembersRefused       uint64
	HeartbeatsIgnored    uint64
	CandidateDialsFailed uint64
	// RelayersBanned counts peers blacklisted in gossip for relaying
	// heartbeats of members that do not answer (admission.go).
	RelayersBanned uint64
	// ClaimsThrottled counts claims refused because their origin exceeded
	// ClaimRate.
	ClaimsThrottled uint64
	// ClaimBatchesSent counts batches of this node's claims answered by
	// their registry, ClaimsBatched the claims in them;
	// ClaimBatchesReceived the batches this node answered.
	ClaimBatchesSent, ClaimsBatched, ClaimBatchesReceived uint64
	// DeliveriesReceived counts the deliver messages (replicas, handoffs,
	// any outbox topic but URLs) this node's handlers accepted.
	DeliveriesReceived uint64
	// StaleConnsClosed counts connections closed because they no longer
	// answered once a newer one to the same peer arrived (staleConns).
	StaleConnsClosed uint64
	// OutboxFull counts records refused or dropped because a peer's outbox
	// held MaxOutboxPerPeer records.
	OutboxFull uint64
	// URLsFiltered counts records refused by the URL filter
	// (SetURLFilter).
	URLsFiltered uint64
	// SearchesRefused counts search requests refused because their member
	// had MaxSearchesPerPeer under way.
	SearchesRefused uint64
	// GossipDrops counts membership messages gossipsub dropped at a full
	// queue (a peer's outbound queue, the validation queue, or this
	// node's subscription).
	GossipDrops uint64
	OutboxDepth int
	// OutboxByPeer is the URL outbox depth of each peer with records
	// waiting; OutboxByTopic the records waiting under each topic.
	OutboxByPeer  map[string]int `json:",omitempty"`
	OutboxByTopic map[string]int `json:",omitempty"`
	Members       int
}

// ProtocolIDs are the stream protocols of a network: URL batches, search,
// deliver, claim (signed, routed) and claims (a member's own claims in
// batches).
func ProtocolIDs(network string) (urls, search, deliver, claim, claims protocol.ID) {
	base := "/sou/" + network
	return protocol.ID(base + "/urls/1.0.0"), protocol.ID(base + "/search/1.0.0"),
		protocol.ID(base + "/deliver/1.0.0"), protocol.ID(base + "/claim/2.0.0"),
		protocol.ID(base + "/claims/1.0.0")
}

// MembershipTopic is the GossipSub topic of a network's heartbeats. Its
// version is the ownership scheme's: nodes that place hosts differently
// must not become members of one another, or forwarding between them
// would go round until the hop limit.
func MembershipTopic(network string) string { return "sou/" + network + "/members/2" }

// New starts a node: host (unless WithHost), DHT, membership gossip,
// protocol handlers, and the senders of any outbox left from a previous run.
// db must stay open until Close has returned.
func New(ctx context.Context, db *badger.DB, cfg Config, log *slog.Logger, opts ...Option) (*Node, error) {
	if db == nil {
		return nil, errors.New("p2p: nil badger DB")
	}
	if err := cfg.fillDefaults(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock == nil {
		o.clock = realClock{}
	}
	n := &Node{
		cfg: cfg, log: log.With("pkg", "p2p"), db: db, clock: o.clock, opts: o,
		refusalLog: rate.NewLimiter(rate.Every(10*time.Second), 1),
		searches:   newSearchQueue(cmp.Or(cfg.SearchWorkers, runtime.GOMAXPROCS(0))),
		deliverH:   map[string]func(context.Context, peer.ID, []byte) error{},
		start:      time.Now(),
	}
	n.protoURLs, n.protoSearch, n.protoDeliver, n.protoClaim, n.protoClaims = ProtocolIDs(cfg.Network)
	pipeURLs, pipeDeliver, pipeClaims := PipeProtocolIDs(cfg.Network)
	n.pipeOf = map[protocol.ID]protocol.ID{n.protoURLs: pipeURLs, n.protoDeliver: pipeDeliver, n.protoClaims: pipeClaims}
	n.pipes = newPipePool()
	n.topicName = MembershipTopic(cfg.Network)
	// The node's goroutines live until Close, not until the caller's ctx
	// (which may be a startup deadline).
	n.ctx, n.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.limits = newPeerLimits(cfg, n.log, &n.st)
	n.outbox = newOutbox(n)
	n.mem = newMembership(n.ctx, cfg, n.log, o.clock, &n.st, n.limits, n.outbox, o.viewFilter, n.goLoop)
	n.urls = &urlRouter{
		cfg: cfg, log: n.log, st: &n.st, ctx: n.ctx, mem: n.mem, limits: n.limits, outbox: n.outbox,
		call: n.call, proto: n.protoURLs, intakeGate: o.intakeGate, refusalLog: n.refusalLog,
	}

	if err := n.startHost(ctx); err != nil {
		n.cancel()
		return nil, err
	}
	n.mem.setHost(n.h)
	if err := n.startRest(ctx); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) startHost(ctx context.Context) error {
	if n.opts.host != nil {
		n.h = n.opts.host
		return nil
	}
	priv, err := loadOrCreateIdentity(n.cfg.DataDir)
	if err != nil {
		return err
	}
	listen := n.cfg.Listen
	if len(listen) == 0 {
		listen = []string{
			"/ip4/0.0.0.0/tcp/0", "/ip6/::/tcp/0",
			"/ip4/0.0.0.0/udp/0/quic-v1", "/ip6/::/udp/0/quic-v1",
		}
	}
	if n.cfg.PSK != nil {
		kept := listen[:0:0]
		for _, a := range listen {
			if strings.Contains(a, "/udp/") {
				n.log.Info("dropping UDP listen address: QUIC does not support private networks", "addr", a)
				continue
			}
			kept = append(kept, a)
		}
		listen = kept
		if len(listen) == 0 {
			return errors.New("p2p: with a PSK only TCP listen addresses are usable, none given")
		}
	}
	cm, err := connmgr.NewConnManager(n.cfg.ConnLow, n.cfg.ConnHigh, connmgr.WithGracePeriod(time.Minute))
	if err != nil {
		return fmt.Errorf("p2p: connection manager: %w", err)
	}
	lopts := []libp2p.Option{
		libp2p.Identity(priv),
		libp2p.ListenAddrStrings(listen...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.ConnectionManager(cm),
		libp2p.UserAgent("sou/" + n.cfg.Network),
		libp2p.NATPortMap(),
		libp2p.EnableRelay(),
		libp2p.EnableHolePunching(),
		libp2p.EnableNATService(),
		libp2p.EnableAutoNATv2(),
		// A NATed node finds relays among the members it already knows.
		libp2p.EnableAutoRelayWithPeerSource(n.mem.relayCandidates),
	}
	if n.cfg.PSK != nil {
		lopts = append(lopts, libp2p.PrivateNetwork(pnet.PSK(n.cfg.PSK)))
	} else {
		lopts = append(lopts, libp2p.Transport(quic.NewTransport))
	}
	if n.cfg.RelayService {
		lopts = append(lopts, libp2p.EnableRelayService())
	}
	h, err := libp2p.New(lopts...)
	if err != nil {
		return fmt.Errorf("p2p: start libp2p host: %w", err)
	}
	n.h = h
	n.ownsHost = true
	return nil
}

func (n *Node) startRest(ctx context.Context) error {
	if err := n.outbox.load(); err != nil {
		return err
	}
	stale := &staleConns{
		net: n.h.Network(), ctx: n.ctx, spawn: n.goIfOpen, log: n.log,
		closed: func() { n.st.staleConnsClosed.Add(1) },
	}
	n.staleNotifiee = stale.notifiee()
	n.h.Network().Notify(n.staleNotifiee)
	priv := n.h.Peerstore().PrivKey(n.h.ID())
	if priv == nil {
		n.log.Warn("the libp2p host has no private key in its peerstore: claims are disabled")
	}
	n.claims = &claims{
		cfg: n.cfg, log: n.log, st: &n.st, db: n.db, priv: priv, mem: n.mem, limits: n.limits,
		call: n.call, proto: n.protoClaim, batchProto: n.protoClaims, intakeGate: n.opts.intakeGate, refusalLog: n.refusalLog,
		ctx: n.ctx, spawn: n.goIfOpen,
	}
	n.claims.batcher.c = n.claims
	for proto, h := range map[protocol.ID]func(context.Context, peer.ID, []byte) ([]byte, error){
		n.protoURLs: n.urls.handleURLs, n.protoSearch: n.handleSearch, n.protoDeliver: n.handleDeliver,
		n.protoClaim: n.claims.handle, n.protoClaims: n.claims.handleBatch,
	} {
		n.h.SetStreamHandler(proto, n.streamHandler(h, false))
		if pipe, ok := n.pipeOf[proto]; ok {
			n.h.SetStreamHandler(pipe, n.streamHandler(h, true))
		}
	}
	n.goLoop(n.sweepPipes)

	var boot []peer.AddrInfo
	for _, s := range n.cfg.Bootstrap {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return fmt.Errorf("p2p: bootstrap address %q: %w", s, err)
		}
		ai, err := peer.AddrInfoFromP2pAddr(a)
		if err != nil {
			return fmt.Errorf("p2p: bootstrap address %q needs /p2p/<id>: %w", s, err)
		}
		if ai.ID != n.h.ID() {
			boot = append(boot, *ai)
		}
	}
	kad, err := dht.New(n.h,
		dht.Mode(dht.ModeServer),
		dht.ProtocolPrefix(protocol.ID("/sou/"+n.cfg.Network)),
		dht.BootstrapPeers(boot...),
		dht.DisableProviders(),
		dht.DisableValues(),
	)
	if err != nil {
		return fmt.Errorf("p2p: start DHT: %w", err)
	}
	n.kad = kad

	ps, err := pubsub.NewGossipSub(n.ctx, n.h,
		pubsub.WithGossipSubParams(gossipParams(n.cfg.HeartbeatInterval)),
		pubsub.WithMaxMessageSize(64<<10),
		pubsub.WithPeerExchange(true),
		// Heartbeats come in bursts when many nodes start together; the
		// default queue of 32 RPCs per peer drops them (Stats.GossipDrops).
		pubsub.WithPeerOutboundQueueSize(256),
		pubsub.WithRawTracer(&n.st.gossip),
		pubsub.WithBlacklist(newRelayBlacklist(n.clock)),
	)
	if err != nil {
		return fmt.Errorf("p2p: start gossipsub: %w", err)
	}
	n.ps = ps
	n.mem.ps = ps // the validator may blacklist a relayer
	if err := ps.RegisterTopicValidator(n.topicName, pubsub.ValidatorEx(n.mem.validateHeartbeat)); err != nil {
		return fmt.Errorf("p2p: register heartbeat validator: %w", err)
	}
	if n.topic, err = ps.Join(n.topicName); err != nil {
		return fmt.Errorf("p2p: join %s: %w", n.topicName, err)
	}
	if n.sub, err = n.topic.Subscribe(pubsub.WithBufferSize(1024)); err != nil {
		return fmt.Errorf("p2p: subscribe %s: %w", n.topicName, err)
	}

	if n.cfg.MDNS && n.ownsHost {
		svc := mdns.NewMdnsService(n.h, "sou-"+n.cfg.Network, mdnsNotifee{n})
		if err := svc.Start(); err != nil {
			n.log.Warn("mDNS unavailable", "err", err)
		} else {
			n.mdns = svc
		}
	}

	n.mem.start(n.kad, n.topic, n.sub)
	n.goLoop(func() { n.bootstrap(boot) })
	n.outbox.startSenders()
	return nil
}

// gossipParams tunes gossipsub for sou's one topic, the membership
// heartbeat: small messages, one per member per heartbeatInterval, each
// superseded by the next. The mesh (D = 6) delivers them; gossip (IHAVE)
// only repairs what the mesh missed, and the next heartbeat repairs too.
// So gossip goes to Dlazy (6) peers per gossipsub heartbeat, not to a
// quarter of all connected peers (GossipFactor 0: with every member
// connected, a quarter of N made gossip O(N) per node and O(N²) in all),
// and the gossipsub heartbeat (mesh upkeep and gossip) runs every fifth
// of a membership heartbeat interval, at least a second apart (its
// default). Measured in a 128-node simulation (20 s heartbeat): pubsub
// bytes fell from 2.2 MB to 0.33 MB per crawled page.
func gossipParams(heartbeatInterval time.Duration) pubsub.GossipSubParams {
	p := pubsub.DefaultGossipSubParams()
	p.GossipFactor = 0
	p.HeartbeatInterval = max(p.HeartbeatInterval, heartbeatInterval/5)
	return p
}

func (n *Node) goLoop(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// goIfOpen runs f on a goroutine that Close waits for, unless the node
// is closing (then it reports false).
func (n *Node) goIfOpen(f func()) bool {
	n.spawnMu.Lock()
	defer n.spawnMu.Unlock()
	if n.closed.Load() {
		return false
	}
	n.goLoop(f)
	return true
}

type mdnsNotifee struct{ n *Node }

func (m mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	if ai.ID == m.n.h.ID() || m.n.closed.Load() {
		return
	}
	m.n.goLoop(func() {
		ctx, cancel := context.WithTimeout(m.n.ctx, 10*time.Second)
		defer cancel()
		if err := m.n.h.Connect(ctx, ai); err != nil {
			m.n.log.Debug("mDNS peer unreachable", "peer", ai.ID, "err", err)
		}
	})
}

// bootstrap connects to the bootstrap peers (retrying until at least one
// answers) and starts the DHT's routing table refresh.
func (n *Node) bootstrap(boot []peer.AddrInfo) {
	backoff := n.cfg.RetryMin
	for len(boot) > 0 {
		ok := 0
		for _, ai := range boot {
			ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
			err := n.h.Connect(ctx, ai)
			cancel()
			if err != nil {
				n.log.Debug("bootstrap peer unreachable", "peer", ai.ID, "err", err)
				continue
			}
			ok++
		}
		if ok > 0 || n.ctx.Err() != nil {
			break
		}
		if !sleepCtx(n.ctx, backoff) {
			return
		}
		backoff = min(backoff*2, n.cfg.RetryMax)
	}
	if err := n.kad.Bootstrap(n.ctx); err != nil && n.ctx.Err() == nil {
		n.log.Warn("DHT bootstrap", "err", err)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Close announces departure, stops every goroutine, and closes the DHT,
// pubsub and (if it built it) the host. The Badger DB stays open: it
// belongs to the caller. Outbox contents survive for the next start.
func (n *Node) Close() error {
	return n.close(true)
}

func (n *Node) close(announce bool) error {
	if !n.closed.CompareAndSwap(false, true) {
		return nil
	}
	// Barrier: the outbox checks closed under its lock, so no sender
	// starts (wg.Add) once Close proceeds to wg.Wait.
	n.outbox.mu.Lock()
	n.outbox.mu.Unlock() //nolint:staticcheck // empty critical section is the barrier
	n.spawnMu.Lock()
	n.spawnMu.Unlock() //nolint:staticcheck // the same barrier for goIfOpen

	if announce && n.mem.topic != nil && n.mem.leave() {
		// Publish only queues the message; give it a moment to reach the
		// wire before the connections close (else peers time us out).
		time.Sleep(min(n.cfg.HeartbeatInterval, 150*time.Millisecond))
	}
	var errs []error
	if n.h != nil && n.staleNotifiee != nil {
		n.h.Network().StopNotify(n.staleNotifiee)
	}
	if n.h != nil {
		for _, p := range []protocol.ID{n.protoURLs, n.protoSearch, n.protoDeliver, n.protoClaim, n.protoClaims} {
			n.h.RemoveStreamHandler(p)
			if pipe, ok := n.pipeOf[p]; ok {
				n.h.RemoveStreamHandler(pipe)
			}
		}
	}
	if n.mdns != nil {
		errs = append(errs, n.mdns.Close())
	}
	if n.sub != nil {
		n.sub.Cancel()
	}
	n.cancel()
	if n.topic != nil {
		// Topic.Close refuses while handlers are active; cancellation of the
		// pubsub context tears it down anyway.
		_ = n.topic.Close()
	}
	if n.kad != nil {
		errs = append(errs, n.kad.Close())
	}
	if n.ownsHost && n.h != nil {
		errs = append(errs, n.h.Close())
	}
	n.wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("p2p: close: %w", err)
	}
	return nil
}

// ID is this node's peer ID.
func (n *Node) ID() peer.ID { return n.h.ID() }

// Host exposes the libp2p host (for metrics or the simulator).
func (n *Node) Host() host.Host { return n.h }

// Addrs returns the node's addresses including /p2p/<id>, ready to be
// used as bootstrap addresses by other nodes.
func (n *Node) Addrs() []ma.Multiaddr {
	out, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: n.h.ID(), Addrs: n.h.Addrs()})
	if err != nil {
		return nil
	}
	return out
}

// OutboxDepth is the number of URL records waiting in outboxes.
func (n *Node) OutboxDepth() int {
	d, _ := n.outbox.Depth(TopicURLs)
	return d
}

// Outbox is the node's durable per-peer outbox.
func (n *Node) Outbox() *Outbox { return n.outbox }

// Stats returns a snapshot of the counters.
func (n *Node) Stats() Stats {
	throttled := n.limits.throttled()
	members := n.mem.count() + 1
	urls, counts := n.outbox.Depth(TopicURLs)
	byPeer := make(map[string]int, len(counts))
	for p, c := range counts {
		byPeer[p.String()] = c
	}
	return Stats{
		URLsForwarded:        n.st.urlsForwarded.Load(),
		URLsReceived:         n.st.urlsReceived.Load(),
		URLsReforwarded:      n.st.urlsReforwarded.Load(),
		URLsDropped:          n.st.urlsDropped.Load(),
		URLsInvalid:          n.st.urlsInvalid.Load(),
		BatchesSent:          n.st.batchesSent.Load(),
		BatchesReceived:      n.st.batchesReceived.Load(),
		ForwardBytes:         n.st.forwardBytes.Load(),
		ReceivedBytes:        n.st.receivedBytes.Load(),
		MaxHopsSeen:          int(n.st.maxHops.Load()),
		SendFailures:         n.st.sendFailures.Load(),
		RejectedMessages:     n.st.rejected.Load(),
		ThrottledMessages:    n.st.throttledMessages.Load(),
		ThrottleEvents:       n.st.throttleEvents.Load(),
		ThrottledPeers:       throttled,
		StreamsRefused:       n.st.streamsRefused.Load(),
		StreamsTimedOut:      n.st.streamsTimedOut.Load(),
		URLBatchesRefused:    n.st.urlBatchesRefused.Load(),
		ClaimsRefused:        n.st.claimsRefused.Load(),
		NonMemberStreams:     n.st.nonMemberStreams.Load(),
		MembersRefused:       n.st.membersRefused.Load(),
		HeartbeatsIgnored:    n.st.heartbeatsIgnored.Load(),
		CandidateDialsFailed: n.st.candidateDialsFailed.Load(),
		ClaimsThrottled:      n.st.claimsThrottled.Load(),
		ClaimBatchesSent:     n.st.claimBatchesSent.Load(),
		ClaimsBatched:        n.st.claimsBatched.Load(),
		ClaimBatchesReceived: n.st.claimBatchesReceived.Load(),
		DeliveriesReceived:   n.st.deliveriesReceived.Load(),
		StaleConnsClosed:     n.st.staleConnsClosed.Load(),
		OutboxFull:           n.st.outboxFull.Load(),
		SearchesRefused:      n.st.searchesRefused.Load(),
		URLsFiltered:         n.st.urlsFiltered.Load(),
		RelayersBanned:       n.st.relayersBanned.Load(),
		GossipDrops:          n.st.gossip.total(),
		OutboxDepth:          urls,
		OutboxByPeer:         byPeer,
		OutboxByTopic:        n.outbox.depthByTopic(),
		Members:              members,
	}
}

// ---- identity ----------------------------------------------------------------

// loadOrCreateIdentity reads DataDir/identity.key or creates an Ed25519 key
// there (0600). An empty DataDir gives an ephemeral identity.
func loadOrCreateIdentity(dir string) (crypto.PrivKey, error) {
	if dir == "" {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("p2p: generate identity: %w", err)
		}
		return k, nil
	}
	path := filepath.Join(dir, "identity.key")
	raw, err := os.ReadFile(path)
	if err == nil {
		k, err := crypto.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, fmt.Errorf("p2p: identity %s: %w", path, err)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("p2p: read identity: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("p2p: create data dir: %w", err)
	}
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("p2p: generate identity: %w", err)
	}
	raw, err = crypto.MarshalPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("p2p: encode identity: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "identity.key.tmp*")
	if err != nil {
		return nil, fmt.Errorf("p2p: write identity: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("p2p: write identity: %w", err)
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("p2p: write identity: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("p2p: write identity: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("p2p: write identity: %w", err)
	}
	// Link fails if another process created the key meanwhile; then use theirs.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return loadOrCreateIdentity(dir)
		}
		return nil, fmt.Errorf("p2p: write identity: %w", err)
	}
	return k, nil
}

// ---- stream plumbing --------------------------------------------------------------

// streamHandler wraps a request handler with the common discipline: rate
// limit, per-peer concurrency cap, idle timeout and deadline, one capped
// frame in, one frame out. A malformed request resets the stream and is
// counted; a handler error is sent back as text. On a pipe (pipes.go) it
// then waits up to serveIdle for the next request, which passes the same
// checks (membership, rate, the URL batch cap) as a new stream's first.
func (n *Node) streamHandler(handle func(ctx context.Context, from peer.ID, msg []byte) ([]byte, error), pipe bool) network.StreamHandler {
	return func(s network.Stream) {
		from := s.Conn().RemotePeer()
		urls := s.Protocol() == n.protoURLs || s.Protocol() == n.pipeOf[n.protoURLs]
		if !n.admitMember(s, from) {
			return
		}
		if !n.limits.acquireStream(from) {
			_ = s.Reset()
			return
		}
		defer n.limits.releaseStream(from)
		stop := context.AfterFunc(n.ctx, func() { _ = s.Reset() })
		defer stop()
		r := &idleReader{s: s, idle: n.cfg.StreamIdleTimeout}
		br := bufio.NewReader(r)
		for first := true; ; first = false {
			if !first {
				r.idle = serveIdle(n.cfg.StreamIdleTimeout)
				if _, err := br.Peek(1); err != nil {
					// The sender closed its pipe, or left it idle too long.
					if errors.Is(err, io.EOF) {
						_ = s.Close()
					} else {
						_ = s.Reset()
					}
					return
				}
				r.idle = n.cfg.StreamIdleTimeout
				if !n.admitMember(s, from) {
					return
				}
			}
			if !n.serveRequest(s, br, from, urls, handle) {
				return
			}
			if !pipe {
				_ = s.Close()
				return
			}
		}
	}
}

// admitMember reports whether from is a member and resets s when it is
// not, before a frame is read or any per-peer state is made: an honest
// peer not admitted yet retries, a stranger gets nothing.
func (n *Node) admitMember(s network.Stream, from peer.ID) bool {
	if n.mem.isMember(from) {
		return true
	}
	n.st.nonMemberStreams.Add(1)
	if n.refusalLog.Allow() {
		n.log.Warn("stream from a non-member refused", "peer", from, "protocol", s.Protocol(), "refused_so_far", n.st.nonMemberStreams.Load())
	}
	_ = s.Reset()
	return false
}

// serveRequest reads one request from br, answers it on s, and reports
// whether the stream is still usable; when it is not, s has been reset.
func (n *Node) serveRequest(s network.Stream, br *bufio.Reader, from peer.ID, urls bool, handle func(ctx context.Context, from peer.ID, msg []byte) ([]byte, error)) bool {
	if !n.limits.allow(from) {
		_ = s.Reset()
		return false
	}
	if urls {
		if !n.limits.acquireURLBatch(from) {
			_ = s.Reset()
			return false
		}
		defer n.limits.releaseURLBatch(from)
	}
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Minute)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	msg, err := readFrame(br, n.cfg.MaxMessageBytes)
	if err != nil {
		if errors.Is(err, ErrMalformed) {
			n.limits.penalize(from, err)
		} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			n.st.streamsTimedOut.Add(1)
		}
		_ = s.Reset()
		return false
	}
	_ = s.SetReadDeadline(time.Time{})
	resp, err := handle(ctx, from, msg)
	var head, out []byte
	switch {
	case errors.Is(err, ErrMalformed):
		n.limits.penalize(from, fmt.Errorf("%s: %w", s.Protocol(), err))
		_ = s.Reset()
		return false
	case err != nil:
		text := err.Error()
		if len(text) > maxErrorBytes {
			text = text[:maxErrorBytes]
		}
		status := byte(statusError)
		if errors.Is(err, ErrRefused) {
			status = statusRefused
		}
		out = encodeResponse(status, []byte(text))
	default:
		head, out = responseHead(statusOK), resp
	}
	if len(head)+len(out) > n.cfg.MaxMessageBytes {
		head, out = nil, encodeResponse(statusError, []byte("response exceeds message cap"))
	}
	_ = s.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := writeFrameParts(s, head, out); err != nil {
		_ = s.Reset()
		return false
	}
	_ = s.SetWriteDeadline(time.Time{})
	return ctx.Err() == nil
}

// idleReader moves the read deadline forward before every read, so a
// stream is reset after idle of silence however long the whole request
// takes to arrive (the handler's overall deadline bounds that).
type idleReader struct {
	s    network.Stream
	idle time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	_ = r.s.SetReadDeadline(time.Now().Add(r.idle))
	return r.s.Read(p)
}

// RemoteError is an error reported by the remote handler (as opposed to a
// transport failure): retrying the same message is unlikely to help.
// Refused says the handler refused it by its rules (ErrRefused).
type RemoteError struct {
	Peer    peer.ID
	Msg     string
	Refused bool
}

// ErrRefused is what a handler's error wraps when it refuses a message by
// its rules (who may send what), not for a passing reason: the sender
// learns it as a RemoteError with Refused set.
var ErrRefused = errors.New("refused")

func (e *RemoteError) Error() string { return fmt.Sprintf("peer %s: %s", e.Peer, e.Msg) }

// call sends one framed request on a new stream and waits for the framed
// response, bounded by ctx (the stream is reset when ctx ends). wrote
// reports the bytes written.
func (n *Node) call(ctx context.Context, p peer.ID, proto protocol.ID, req []byte) (resp []byte, wrote int, err error) {
	return n.callParts(ctx, p, proto, nil, req)
}

// callParts is call for a request that is head then body, which it
// writes without copying them together. A protocol that has a pipe
// version goes on a pipe instead of a new stream (callPipe).
func (n *Node) callParts(ctx context.Context, p peer.ID, proto protocol.ID, head, body []byte) (resp []byte, wrote int, err error) {
	if n.closed.Load() {
		return nil, 0, errors.New("p2p: node closed")
	}
	size := len(head) + len(body)
	if size > n.cfg.MaxMessageBytes {
		return nil, 0, fmt.Errorf("p2p: request of %d bytes exceeds cap %d", size, n.cfg.MaxMessageBytes)
	}
	if pipe, ok := n.pipeOf[proto]; ok {
		return n.callPipe(ctx, p, proto, pipe, head, body)
	}
	s, err := n.h.NewStream(network.WithAllowLimitedConn(ctx, string(proto)), p, proto)
	if err != nil {
		return nil, 0, fmt.Errorf("p2p: open %s to %s: %w", proto, p, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := writeFrameParts(s, head, body); err != nil {
		_ = s.Reset()
		return nil, 0, fmt.Errorf("p2p: send to %s: %w", p, ctxErr(ctx, err))
	}
	wrote = size + uvarintLen(uint64(size))
	resp, err = n.response(ctx, s, p)
	return resp, wrote, err
}

// response ends the request written on s and reads its answer. The
// handler closes its stream as soon as it has answered, and over QUIC
// that stops this side's writing (STOP_SENDING): when it arrives before
// CloseWrite (this goroutine descheduled between the two on a busy
// machine), CloseWrite fails although the answer is on its way. So
// CloseWrite's error is not the request's; a stream that really failed
// fails the read.
func (n *Node) response(ctx context.Context, s network.Stream, p peer.ID) ([]byte, error) {
	_ = s.CloseWrite()
	frame, err := readFrame(bufio.NewReader(s), n.cfg.MaxMessageBytes)
	if err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("p2p: response from %s: %w", p, ctxErr(ctx, err))
	}
	_ = s.Close()
	status, body, err := decodeResponse(frame)
	if err != nil {
		n.st.rejected.Add(1)
		return nil, fmt.Errorf("p2p: response from %s: %w", p, err)
	}
	if status != statusOK {
		return nil, &RemoteError{Peer: p, Msg: string(body), Refused: status == statusRefused}
	}
	return body, nil
}

// ctxErr prefers the context's error, which explains a reset stream.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	// The stream deadline (set to ctx's) may fire a moment before ctx.
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
