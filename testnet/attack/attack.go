package attack

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"sou/index"
	"sou/p2p"
)

// The attack classes.
const (
	DecodeBomb    = "decode-bomb"
	Garbage       = "garbage"
	Poison        = "poison"
	Manifest      = "manifest"
	Pull          = "pull"
	Phantoms      = "phantoms"
	Claims        = "claims"
	URLFlood      = "url-flood"
	SearchAmp     = "search-amp"
	IdleStreams   = "idle-streams"
	ForgedAnswers = "forged-answers"
	HTTP          = "http"
)

// Classes lists every class, in the order a round runs them.
var Classes = []string{DecodeBomb, Poison, Manifest, Pull, Phantoms, Claims, URLFlood, SearchAmp, IdleStreams, ForgedAnswers, HTTP, Garbage}

// Config describes one attacker.
type Config struct {
	// Network is the sou network to join; Bootstrap its members'
	// multiaddrs (with /p2p/ID).
	Network   string
	Bootstrap []string
	// IP is the loopback address the attacker's hosts listen on.
	IP string
	// Classes to run (nil or "all" = Classes).
	Classes []string
	// Token marks everything the attacker forges.
	Token string
	// Targets returns the honest nodes and the URLs to poison; asked at
	// every round.
	Targets func() Targets
	// Round is the time between rounds of attacks (0 = 2 s).
	Round time.Duration
	Log   *slog.Logger
}

// Targets are what the attacker aims at.
type Targets struct {
	Nodes []Node
	// URLs are pages of the web (the truth) to forge.
	URLs []string
}

// Node is one honest node.
type Node struct {
	ID   peer.ID
	HTTP string // host:port of its API
}

// ClassStats counts what one class tried and how often the honest side
// refused it (an error answer, a reset stream, a busy or 4xx reply).
type ClassStats struct {
	Tried   int64 `json:"tried"`
	Refused int64 `json:"refused"`
}

// Attacker is one hostile participant: a member and a stranger.
type Attacker struct {
	cfg      Config
	log      *slog.Logger
	db       *badger.DB
	member   *p2p.Node
	mhost    host.Host
	stranger host.Host
	phantomT *pubsub.Topic
	phantoms []crypto.PrivKey

	urls, search, deliver, claim, claims protocol.ID

	// analyzer is the analyzer version honest nodes announce: the
	// attacker's shard answers and requests carry it, so that they reach
	// the checks behind the version check.
	analyzer string

	mu    sync.Mutex
	stats map[string]*counter
	sent  map[string]bool // URLs forged so far
}

type counter struct{ tried, refused atomic.Int64 }

// Start brings the attacker's two hosts up and joins the member to the
// network.
func Start(ctx context.Context, cfg Config) (*Attacker, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Round <= 0 {
		cfg.Round = 2 * time.Second
	}
	if len(cfg.Classes) == 0 || slices.Contains(cfg.Classes, "all") {
		cfg.Classes = Classes
	}
	for _, c := range cfg.Classes {
		if !slices.Contains(Classes, c) {
			return nil, fmt.Errorf("attack class %q: want one of %v", c, Classes)
		}
	}
	a := &Attacker{cfg: cfg, log: cfg.Log, stats: map[string]*counter{}, sent: map[string]bool{}}
	for _, c := range Classes {
		a.stats[c] = &counter{}
	}
	a.urls, a.search, a.deliver, a.claim, a.claims = p2p.ProtocolIDs(cfg.Network)
	an, err := index.LoadAnalyzer()
	if err != nil {
		return nil, fmt.Errorf("attacker analyzer: %w", err)
	}
	a.analyzer = an.Version()
	listen := libp2p.ListenAddrStrings(fmt.Sprintf("/ip4/%s/tcp/0", cfg.IP))
	if a.mhost, err = libp2p.New(listen, libp2p.ResourceManager(&network.NullResourceManager{})); err != nil {
		return nil, fmt.Errorf("attacker host: %w", err)
	}
	if a.stranger, err = libp2p.New(listen, libp2p.ResourceManager(&network.NullResourceManager{})); err != nil {
		a.mhost.Close()
		return nil, fmt.Errorf("stranger host: %w", err)
	}
	if a.db, err = badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil)); err != nil {
		a.Close()
		return nil, fmt.Errorf("attacker store: %w", err)
	}
	pcfg := p2p.DefaultLANConfig()
	pcfg.Network = cfg.Network
	pcfg.Bootstrap = cfg.Bootstrap
	if a.member, err = p2p.New(ctx, a.db, pcfg, cfg.Log, p2p.WithHost(a.mhost)); err != nil {
		a.Close()
		return nil, fmt.Errorf("attacker member: %w", err)
	}
	// It takes whatever members send it, as a member that owns hosts and
	// never crawls them would.
	a.member.SetURLHandler(func(context.Context, peer.ID, []p2p.URLRecord) error { return nil })
	for _, topic := range []string{topicReplica, topicHandoffPages, topicHandoffHost, topicManifest, topicPull} {
		a.member.SetDeliverHandler(topic, func(context.Context, peer.ID, []byte) error { return nil })
	}
	a.member.SetSearchHandler(a.forgedAnswer)
	if err := a.joinGossipAsStranger(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// ID is the member's peer ID.
func (a *Attacker) ID() peer.ID { return a.mhost.ID() }

// StrangerID is the stranger's peer ID (never a member).
func (a *Attacker) StrangerID() peer.ID { return a.stranger.ID() }

// Members is the member's view of the network.
func (a *Attacker) Members() []peer.ID {
	var out []peer.ID
	for _, m := range a.member.Members() {
		out = append(out, m.ID)
	}
	return out
}

// Forged returns the URLs the attacker forged pages, markers or anchors
// for, sorted.
func (a *Attacker) Forged() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.sent))
	for u := range a.sent {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// Stats returns what each class tried and how often it was refused.
func (a *Attacker) Stats() map[string]ClassStats {
	out := map[string]ClassStats{}
	for _, c := range a.cfg.Classes {
		out[c] = ClassStats{Tried: a.stats[c].tried.Load(), Refused: a.stats[c].refused.Load()}
	}
	return out
}

// Close stops the member and both hosts.
func (a *Attacker) Close() error {
	var errs []error
	if a.member != nil {
		errs = append(errs, a.member.Close())
	}
	for _, h := range []host.Host{a.mhost, a.stranger} {
		if h != nil {
			errs = append(errs, h.Close())
		}
	}
	if a.db != nil {
		errs = append(errs, a.db.Close())
	}
	return errors.Join(errs...)
}

// Run attacks round after round until ctx ends.
func (a *Attacker) Run(ctx context.Context) {
	t := time.NewTicker(a.cfg.Round)
	defer t.Stop()
	for round := 0; ; round++ {
		a.round(ctx, round)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round runs every class once against the current targets, classes in
// parallel, each bounded by the round's length.
func (a *Attacker) round(ctx context.Context, round int) {
	tg := a.cfg.Targets()
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Round)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range a.cfg.Classes {
		if c == Garbage && round%5 != 4 {
			continue // it gets the member throttled: now and then only
		}
		if c == IdleStreams && round%2 == 0 {
			// Its streams hold the honest side's per-peer stream cap for
			// the whole round, and the other classes' streams would be
			// refused there, before any decoder or filter saw them: every
			// other round leaves the cap to them.
			continue
		}
		wg.Go(func() { a.run(ctx, c, tg) })
	}
	wg.Wait()
}

func (a *Attacker) run(ctx context.Context, class string, tg Targets) {
	switch class {
	case DecodeBomb:
		a.decodeBomb(ctx, tg)
	case Garbage:
		a.garbage(ctx, tg)
	case Poison:
		a.poison(ctx, tg)
	case Manifest:
		a.manifests(ctx, tg)
	case Pull:
		a.pulls(ctx, tg)
	case Phantoms:
		a.phantomHeartbeats(ctx)
	case Claims:
		a.claimFlood(ctx, tg)
	case URLFlood:
		a.urlFlood(ctx, tg)
	case SearchAmp:
		a.searchAmp(ctx, tg)
	case IdleStreams:
		a.idleStreams(ctx, tg)
	case ForgedAnswers:
		// Passive: the member's search handler answers every coordinator
		// with forgeries; counted there.
	case HTTP:
		a.httpAttacks(ctx, tg)
	}
}

// count records one attempt of class and whether it was refused.
func (a *Attacker) count(class string, refused bool) {
	c := a.stats[class]
	c.tried.Add(1)
	if refused {
		c.refused.Add(1)
	}
}

// exchange sends one framed request on a new stream and reads the answer.
// It reports whether the honest side accepted it (status OK).
func exchange(ctx context.Context, h host.Host, to peer.ID, proto protocol.ID, payload []byte) bool {
	s, err := h.NewStream(ctx, to, proto)
	if err != nil {
		return false
	}
	defer s.Reset()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	frame := append(binary.AppendUvarint(nil, uint64(len(payload))), payload...)
	if _, err := s.Write(frame); err != nil {
		return false
	}
	_ = s.CloseWrite()
	r := bufio.NewReader(s)
	n, err := binary.ReadUvarint(r)
	if err != nil || n < 2 || n > 16<<20 {
		return false
	}
	var head [2]byte
	if _, err := r.Read(head[:]); err != nil {
		return false
	}
	return head[0] == 1 && head[1] == 0 // version 1, status OK
}

// deliverPayload is a deliver-protocol request for topic.
func deliverPayload(topic string, payload []byte) []byte {
	b := p2p.AppendString([]byte{1}, topic)
	return append(b, payload...)
}

// sendDeliver sends payload on topic to every node from both hosts and
// counts each attempt under class.
func (a *Attacker) sendDeliver(ctx context.Context, class string, to []peer.ID, topic string, payload []byte) {
	msg := deliverPayload(topic, payload)
	for _, id := range to {
		for _, h := range []host.Host{a.mhost, a.stranger} {
			if ctx.Err() != nil {
				return
			}
			a.count(class, !exchange(ctx, h, id, a.deliver, msg))
		}
	}
}

func nodeIDs(tg Targets) []peer.ID {
	ids := make([]peer.ID, len(tg.Nodes))
	for i, n := range tg.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// holdersOf returns the honest nodes among host's R closest members by
// the attacker's view.
func (a *Attacker) holdersOf(tg Targets, host string) []peer.ID {
	var out []peer.ID
	for _, p := range a.member.Replicas(host) {
		if slices.ContainsFunc(tg.Nodes, func(n Node) bool { return n.ID == p }) {
			out = append(out, p)
		}
	}
	return out
}

// joinGossipAsStranger runs gossipsub on the stranger host on the
// membership topic, without validation, to relay phantom heartbeats; the
// stranger never announces itself, so it never becomes a member.
func (a *Attacker) joinGossipAsStranger(ctx context.Context) error {
	ps, err := pubsub.NewGossipSub(ctx, a.stranger)
	if err != nil {
		return fmt.Errorf("stranger gossipsub: %w", err)
	}
	if a.phantomT, err = ps.Join(p2p.MembershipTopic(a.cfg.Network)); err != nil {
		return fmt.Errorf("stranger joins the membership topic: %w", err)
	}
	for _, s := range a.cfg.Bootstrap {
		addr, err := ma.NewMultiaddr(s)
		if err != nil {
			continue
		}
		if ai, err := peer.AddrInfoFromP2pAddr(addr); err == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = a.stranger.Connect(cctx, *ai)
			cancel()
		}
	}
	for range phantomKeys {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return fmt.Errorf("phantom key: %w", err)
		}
		a.phantoms = append(a.phantoms, k)
	}
	return nil
}

// NewToken returns a random marker for forged content: a word no page of
// the simulated web contains.
func NewToken() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "zqpoison" + hex.EncodeToString(b[:])
}
