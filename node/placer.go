package node

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"

	"sou/node/peermsg"
	"sou/p2p"
	"sou/placement"
)

// placer drives the placement machine: one goroutine (run) owns it, steps
// it with the membership's events, the clock and what the rest of the
// node reports, and carries out its actions through the messenger (the
// network) and the host store (Badger, the index, the crawler). Actions
// that take long (handoffs, pulls, takeovers, messages) run on worker
// goroutines the loop owns; their outcomes come back as events. Other
// goroutines reach the machine only through do, which runs a function on
// the loop.
type placer struct {
	m     *placement.Machine // the loop's alone
	net   messenger
	store hostStore
	log   *slog.Logger
	errs  *errorRing
	// member is the rest of the node's reaction to a membership event,
	// run on the loop; intakeLow says the disk guard stopped intake.
	member    func(p2p.MemberEvent)
	intakeLow func() bool

	inbox   chan func()
	stopped chan struct{} // closed once the loop has ended
	// idle guards the machine while the loop does not run (before Run,
	// after it): do then runs f on the caller's goroutine. looping says
	// the loop owns the machine.
	idle    sync.Mutex
	looping bool
	// life is the context of the actions' workers: it ends with Run's, or
	// with close for a node never Run.
	life context.Context
	stop context.CancelFunc
	work sync.WaitGroup
	// waits are the Stores waiting for their replicas, by Await ID, and
	// detached the waits of Stores that returned first (the loop's alone);
	// nextWait numbers them.
	waits    map[uint64]chan placement.Action
	detached map[uint64]detachedItem
	nextWait atomic.Uint64
	// maxDetached bounds detached (the loop's; DetachedStores);
	// storesDetached counts the Stores that returned first.
	maxDetached    int
	storesDetached atomic.Int64
	// mail are events posted without waiting for the loop (post).
	mailMu     sync.Mutex
	mail       []placement.Event
	mailSignal chan struct{}
	items      itemBuffer

	// handed-off pages, handed-in pages, refused items; hosts abandoned
	// after their owner kept refusing them
	sent, received, refused, abandoned atomic.Int64
	refusalLog                         *rate.Limiter
}

// messenger is the network as placement's actions use it (*p2p.Node).
type messenger interface {
	ID() peer.ID
	Events() <-chan p2p.MemberEvent
	Members() []p2p.Member
	Send(ctx context.Context, to peer.ID, topic string, payload []byte) error
	Forward(ctx context.Context, recs []p2p.URLRecord) error
	IsOwner(host string) bool
	Outbox() *p2p.Outbox
}

// hostStore is what this node holds of hosts, as placement's actions use
// it (hostData: Badger, the index, the crawler).
type hostStore interface {
	saved() (placement.Saved, error)
	save(placement.Action) error
	crawlerHosts(ctx context.Context) ([]string, error)
	handOff(ctx context.Context, net messenger, host string, to peer.ID) (pages int, err error)
	abandon(ctx context.Context, net messenger, host string, refused bool) error
	forget(ctx context.Context, host string) error
	pull(ctx context.Context, net messenger, host string, from []peer.ID) error
	takeOver(ctx context.Context, net messenger, host string) error
}

// keyspace is p2p's ownership (its Ring) as placement asks for it. The
// machine asks about a handful of member lists (its view, the view with
// members that may still be alive, the founders), each many times, so the
// rings of the last few are kept.
type keyspace struct {
	mu    sync.Mutex
	rings []keyedRing // most recently used first
}

type keyedRing struct {
	members []peer.ID // sorted, distinct
	ring    *p2p.Ring
}

const keyspaceRings = 4

func (k *keyspace) ring(members []peer.ID) *p2p.Ring {
	key := slices.Compact(slices.Sorted(slices.Values(members)))
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, kr := range k.rings {
		if slices.Equal(kr.members, key) {
			copy(k.rings[1:i+1], k.rings[:i])
			k.rings[0] = kr
			return kr.ring
		}
	}
	kr := keyedRing{key, p2p.NewRing(key)}
	k.rings = append([]keyedRing{kr}, k.rings[:min(len(k.rings), keyspaceRings-1)]...)
	return kr.ring
}

func (k *keyspace) Replicas(members []peer.ID, host string, n int) []peer.ID {
	return k.ring(members).Replicas(host, n)
}

func (k *keyspace) Donors(members []peer.ID, p peer.ID, depth int) []peer.ID {
	return k.ring(members).Donors(p, depth)
}

// ReplicaWaitMax bounds how long Store waits for the replicas'
// acknowledgement of a page (placement's WaitMax); the testnet's duplicate
// classifier counts on it. Short, because a replica that was just killed
// looks alive until a delivery to it fails or the membership drops it; a
// healthy replica acknowledges a few pages in tens of milliseconds.
const ReplicaWaitMax = 500 * time.Millisecond

// placerTick is how often the machine's clock goes on.
const placerTick = 100 * time.Millisecond

var errStopped = errors.New("placement stopped")

func newPlacer(cfg placement.Config, net messenger, store hostStore, log *slog.Logger, errs *errorRing) (*placer, error) {
	saved, err := store.saved()
	if err != nil {
		return nil, err
	}
	p := &placer{
		m: placement.New(cfg, saved, time.Now()), net: net, store: store, log: log, errs: errs,
		inbox: make(chan func()), stopped: make(chan struct{}), waits: map[uint64]chan placement.Action{},
		detached: map[uint64]detachedItem{}, maxDetached: DetachedStores(),
		mailSignal: make(chan struct{}, 1), intakeLow: func() bool { return false },
		refusalLog: rate.NewLimiter(rate.Every(10*time.Second), 1),
	}
	p.life, p.stop = context.WithCancel(context.Background())
	return p, nil
}

// close ends the actions' workers and waits for them (they were started
// by a node that was never Run, or Run has waited for them already).
func (p *placer) close() {
	p.stop()
	p.work.Wait()
}

// run is the loop: it ends with ctx, once every worker it started has.
func (p *placer) run(ctx context.Context) {
	p.idle.Lock()
	p.looping = true
	p.idle.Unlock()
	defer close(p.stopped)
	defer p.work.Wait()
	defer p.stop()
	defer func() {
		p.idle.Lock()
		p.looping = false
		p.idle.Unlock()
	}()
	defer context.AfterFunc(ctx, p.stop)()
	t := time.NewTicker(placerTick)
	defer t.Stop()
	p.step(placement.OutboxHeld{Peers: p.net.Outbox().Peers(topicReplica)})
	events := p.net.Events()
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-p.inbox:
			f()
		case <-p.mailSignal:
			for _, ev := range p.takeMail() {
				p.step(ev)
			}
		case <-t.C:
			p.step(placement.Tick{})
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			p.membership(ctx, ev)
		}
	}
}

// membership steps a membership change, after the crawler's hosts (a
// joiner's manifest names the hosts moving to it now).
func (p *placer) membership(ctx context.Context, ev p2p.MemberEvent) {
	p.log.Info("membership", "event", ev.Kind.String(), "member", ev.Member.ID)
	if hosts, err := p.store.crawlerHosts(ctx); err == nil {
		p.step(placement.Hosts{Hosts: hosts})
	}
	switch ev.Kind {
	case p2p.Joined:
		p.step(placement.Joined{Peer: ev.Member.ID, Holding: p.holding()})
	case p2p.Left:
		p.step(placement.Left{Peer: ev.Member.ID})
	}
	if p.member != nil {
		p.member(ev)
	}
}

// summary is the machine's Summary now (zero if the loop does not answer
// within ctx).
func (p *placer) summary(ctx context.Context) placement.Summary {
	return ask(ctx, p, placement.Summary{}, func(m *placement.Machine) placement.Summary { return m.Summarise(time.Now()) })
}

// ask returns what q answers on the loop, or zero when the loop does not
// run q within ctx (q may still run later: its answer is dropped).
func ask[T any](ctx context.Context, p *placer, zero T, q func(*placement.Machine) T) T {
	answer := make(chan T, 1)
	if err := p.do(ctx, func() { answer <- q(p.m) }); err != nil {
		return zero
	}
	return <-answer
}

// holding are the members whose last heartbeat announced a host.
func (p *placer) holding() []peer.ID {
	var out []peer.ID
	for _, m := range p.net.Members() {
		if m.Load.Hosts > 0 {
			out = append(out, m.ID)
		}
	}
	return out
}

// do runs f on the loop and returns once it has, or when ctx ends or the
// loop has stopped first (then f may not run). While the loop does not
// run (a node opened and not Run, or one whose Run ended), f runs here,
// under idle.
func (p *placer) do(ctx context.Context, f func()) error {
	p.idle.Lock()
	if !p.looping {
		defer p.idle.Unlock()
		for _, ev := range p.takeMail() {
			p.step(ev)
		}
		f()
		return nil
	}
	p.idle.Unlock()
	done := make(chan struct{})
	select {
	case p.inbox <- func() { f(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.stopped:
		return errStopped
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.stopped:
		return errStopped
	}
}

// stepIn steps ev from another goroutine.
func (p *placer) stepIn(ctx context.Context, ev placement.Event) error {
	return p.do(ctx, func() { p.step(ev) })
}

// step steps ev on the loop and carries out what the machine decides.
// The actions run under the placer's own context, never a caller's: a
// worker started while a peer's message was handled outlives the handler.
func (p *placer) step(ev placement.Event) {
	ctx := p.life
	p.m.Step(time.Now(), ev)
	for acts := p.m.Ready(); len(acts) > 0; acts = p.m.Ready() {
		for _, a := range acts {
			p.act(ctx, a)
		}
	}
}

// act carries out one action: the quick ones here, the others on a worker
// that steps their outcome.
func (p *placer) act(ctx context.Context, a placement.Action) {
	switch a := a.(type) {
	case placement.SaveMember, placement.SaveFounder, placement.SaveHost:
		if err := p.store.save(a); err != nil {
			p.errs.add("save placement state", err)
		}
	case placement.ListHosts:
		hosts, err := p.store.crawlerHosts(ctx)
		if err != nil {
			p.errs.add("list hosts", err)
			return
		}
		p.m.Step(time.Now(), placement.Hosts{Hosts: hosts})
	case placement.Release:
		if !p.endDetached(a.ID, a) {
			p.notify(a.ID, a)
			delete(p.waits, a.ID)
		}
	case placement.Copy:
		if !p.endDetached(a.ID, a) {
			p.notify(a.ID, a)
		}
	case placement.SendManifest:
		p.goSend(ctx, a.To, topicManifest, peermsg.EncodeManifest(peermsg.Manifest{Hosts: a.Hosts}))
	case placement.Hint:
		p.goSend(ctx, a.To, topicHint, peermsg.EncodeManifest(peermsg.Manifest{Hosts: a.Hosts}))
	case placement.HandOff:
		p.goWork(ctx, func(ctx context.Context) placement.Event {
			pages, err := p.store.handOff(ctx, p.net, a.Host, a.To)
			var remote *p2p.RemoteError
			if err != nil {
				p.log.Warn("handoff", "host", a.Host, "to", a.To, "err", err)
			} else {
				p.sent.Add(int64(pages))
				p.log.Info("handed off host", "host", a.Host, "to", a.To, "pages", pages)
			}
			refused := errors.As(err, &remote) && remote.Refused
			return placement.HandedOff{Host: a.Host, To: a.To, Err: err, Refused: refused}
		})
	case placement.Abandon:
		p.goWork(ctx, func(ctx context.Context) placement.Event {
			err := p.store.abandon(ctx, p.net, a.Host, a.Refused)
			if a.Refused {
				if err == nil {
					p.abandoned.Add(1)
				}
				p.log.Warn("host abandoned: its owner refused the handoff", "host", a.Host, "err", err)
			} else {
				p.log.Info("gave up a host never crawled here", "host", a.Host, "err", err)
			}
			return placement.HandedOff{Host: a.Host, Err: err}
		})
	case placement.ForgetHost:
		p.goWork(ctx, func(ctx context.Context) placement.Event {
			if err := p.store.forget(ctx, a.Host); err != nil && ctx.Err() == nil {
				p.errs.add("forget "+a.Host, err)
			}
			return nil
		})
	case placement.Pull:
		p.goWork(ctx, func(ctx context.Context) placement.Event {
			if err := p.store.pull(ctx, p.net, a.Host, a.From); err != nil && ctx.Err() == nil {
				p.errs.add("pull "+a.Host, err)
			}
			return placement.Pulled{Host: a.Host}
		})
	case placement.TakeOver:
		p.goWork(ctx, func(ctx context.Context) placement.Event {
			err := p.store.takeOver(ctx, p.net, a.Host)
			if err != nil && ctx.Err() == nil {
				p.errs.add("takeover "+a.Host, err)
			}
			return placement.TookOver{Host: a.Host, Err: err}
		})
	case placement.DropOutbox:
		p.goWork(ctx, func(context.Context) placement.Event {
			if err := p.net.Outbox().Drop(a.Peer, topicReplica); err != nil {
				p.errs.add("drop replica outbox", err)
			}
			return nil
		})
	}
}

// goWork runs f on a worker the loop owns, and steps what it returns.
func (p *placer) goWork(ctx context.Context, f func(context.Context) placement.Event) {
	p.work.Add(1)
	go func() {
		defer p.work.Done()
		if ev := f(ctx); ev != nil {
			_ = p.stepIn(ctx, ev) // fails only once the loop stops
		}
	}()
}

// goSend delivers a message on a worker, once, within a few seconds.
func (p *placer) goSend(ctx context.Context, to peer.ID, topic string, payload []byte) {
	p.goWork(ctx, func(ctx context.Context) placement.Event {
		ctx, cancel := context.WithTimeout(ctx, messageTimeout)
		defer cancel()
		if err := p.net.Send(ctx, to, topic, payload); err != nil && ctx.Err() == nil {
			p.log.Warn("message not delivered", "topic", topic, "to", to, "err", err)
		}
		return nil
	})
}

// messageTimeout bounds one manifest, hint or handoff message.
const messageTimeout = 30 * time.Second

// notify passes an action to the Store waiting for it (never blocking the
// loop: a Store that gave up reads nothing).
func (p *placer) notify(id uint64, a placement.Action) {
	select {
	case p.waits[id] <- a:
	default:
	}
}

// refuse counts and logs items refused from a peer.
func (p *placer) refuse(from peer.ID, what string, count int) {
	if count <= 0 {
		return
	}
	p.refused.Add(int64(count))
	if p.refusalLog.Allow() {
		p.log.Warn("refused items from a peer that does not hold their host", "peer", from, "what", what, "count", count, "refused_so_far", p.refused.Load())
	}
}
