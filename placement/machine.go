package placement

import (
	"maps"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Keyspace places hosts and members (node gives it p2p's ownership
// functions).
type Keyspace interface {
	// Replicas is up to k of members closest to host, closest first.
	Replicas(members []peer.ID, host string, k int) []peer.ID
	// Donors are the members p takes hosts from when it joins the others
	// of members, and more: for each of p's virtual keys, the depth
	// members other than p closest to it; never p itself.
	Donors(members []peer.ID, p peer.ID, depth int) []peer.ID
}

// Config is one node's placement. Start from DefaultConfig.
type Config struct {
	Self  peer.ID
	R     int // members holding each host, owner first
	Space Keyspace
	// Joining: the node was started to join a network (it has bootstrap
	// peers), so until it meets a member or ManifestWait passes it crawls
	// nothing: alone, it would own every host.
	Joining bool
	// ManifestWait bounds how long a joiner waits for its donors'
	// manifests, and how young a view is too young to name a joiner's
	// donors; HostWait how long a host named in a manifest waits for
	// its handoff.
	ManifestWait, HostWait time.Duration
	// Grace is how long a member that left, or one remembered from the
	// last run and not seen yet, still holds its hosts: a live member's
	// heartbeat arrives within it, and a restarted node is back within it.
	Grace time.Duration
	// KeepAway is how long a member that left still gets the items of the
	// hosts it would hold: a replica killed and restarted comes back with
	// what was stored while it was away.
	KeepAway time.Duration
	// WaitMax bounds a stored page's wait for its replicas (beyond an
	// Await's Grace).
	WaitMax time.Duration
	// List is how often the crawler's hosts are listed (new ones are
	// taken over); Rebalance how often all of them are looked at again (it
	// also catches pages that were in flight during a handoff).
	List, Rebalance time.Duration
	// Drain is how long a host that moved away waits before its handoff:
	// the requests to it that began before the view changed end within
	// it, so the crawl state handed over knows their URLs as fetched.
	Drain time.Duration
	// Resync is how often the owner of a host hints all its holders
	// again, so that a holder whose pull failed or died with it catches
	// up.
	Resync time.Duration
	// PullPeers is how many of the members closest to a host a takeover
	// asks for what they hold of it; PullParallel how many hosts are
	// pulled at once.
	PullPeers, PullParallel int
	// HandoffGiveUp is how long an owner may keep refusing a host's
	// handoff from this node before this node abandons the host (hostTable).
	HandoffGiveUp time.Duration
}

// DefaultConfig is the placement of a node with memberTimeout as its
// membership's timeout.
func DefaultConfig(self peer.ID, r int, space Keyspace, joining bool, memberTimeout time.Duration) Config {
	return Config{
		Self: self, R: r, Space: space, Joining: joining,
		ManifestWait: 15 * time.Second, HostWait: 2 * time.Minute,
		Grace: 2 * memberTimeout, KeepAway: 30 * time.Second,
		WaitMax: 500 * time.Millisecond, List: time.Second, Rebalance: 5 * time.Second, Drain: 6 * time.Second,
		Resync: 5 * time.Minute,
		// Items go to the holders of some view, which are among the
		// closest members of the full membership; with R = 2 two faults
		// deep is four.
		PullPeers: 4, PullParallel: 8,
		// Ten membership timeouts: the views have long agreed by then, so
		// the refusal is for good.
		HandoffGiveUp: max(30*time.Second, 10*memberTimeout),
	}
}

// Saved is what a machine keeps across restarts: the members it knew
// (those that left, until their Grace ends), its founders (settling) and
// the role of each host. The caller keeps it current from SaveMember,
// SaveFounder and SaveHost and hands it to New.
type Saved struct {
	Members  []peer.ID
	Founders []peer.ID
	Hosts    map[string]Role
}

// Role is what this node does with a host.
type Role byte

const (
	// None: nothing, or its crawl state came without a handoff or a
	// takeover (URLs forwarded to this node): it is taken over before it
	// is crawled.
	None Role = iota
	// Crawled: this node got the host by a handoff or a takeover and
	// crawls it while it owns it.
	Crawled
	// Replica: this node holds items of the host from its holders, no
	// crawl state.
	Replica
)

// Machine makes every decision about where hosts live. It is not safe for
// concurrent use: one goroutine steps it, takes its actions and asks its
// questions.
type Machine struct {
	cfg     Config
	now     time.Time
	started time.Time
	actions []Action

	joinedAt map[peer.ID]time.Time // members (self excluded): when they joined
	members  []peer.ID             // the view, self included, sorted
	// gone are members that left and may still be alive: until when they
	// hold their hosts (Saved keeps them until then, so that a restart
	// within it does not forget them). unseen are members remembered
	// from the last run and not seen yet; they hold their hosts until
	// Grace after this node met the network.
	gone   map[peer.ID]time.Time
	unseen map[peer.ID]bool

	settle settling
	hosts  hostTable
	repl   replication

	nextList, nextScan, nextResync time.Time
	viewChanged                    time.Time
}

// New starts a machine at now from what the last run saved.
func New(cfg Config, saved Saved, now time.Time) *Machine {
	m := &Machine{
		cfg: cfg, now: now, started: now,
		joinedAt: map[peer.ID]time.Time{}, members: []peer.ID{cfg.Self},
		gone: map[peer.ID]time.Time{}, unseen: map[peer.ID]bool{},
		settle: newSettling(),
		hosts:  newHostTable(),
		repl:   newReplication(),
	}
	for _, p := range saved.Members {
		if p != cfg.Self {
			m.unseen[p] = true
		}
	}
	for _, p := range saved.Founders {
		if p != cfg.Self {
			m.settle.founders[p] = true
		}
	}
	for h, r := range saved.Hosts {
		if r != None {
			m.hosts.role[h] = r
		}
	}
	return m
}

// Step takes one event at now.
func (m *Machine) Step(now time.Time, ev Event) {
	if now.After(m.now) {
		m.now = now
	}
	switch ev := ev.(type) {
	case Tick:
		m.tick()
	case Joined:
		m.joined(ev.Peer, ev.Holding)
	case Left:
		m.left(ev.Peer)
	case Hosts:
		m.listed(ev.Hosts)
	case Manifest:
		m.settle.manifest(m.cfg, ev.From, ev.Hosts, m.now)
	case HandedIn:
		m.settle.settleHost(ev.Host)
		m.hosts.handedIn[ev.Host] = handIn{from: ev.From, at: m.now}
		if m.hosts.role[ev.Host] != Replica { // else its pages are taken over too
			m.setRole(ev.Host, Crawled)
		}
	case HandedOff:
		m.handedOff(ev)
	case ReplicaStored:
		m.replicaStored(ev.Host)
	case Hinted:
		m.hinted(ev)
	case Pulled:
		m.pulled(ev.Host)
	case TookOver:
		m.tookOver(ev)
	case Await:
		m.await(ev)
	case Delivered:
		m.delivered(ev.Peer, ev.Seq)
	case Undelivered:
		m.suspect(ev.Peer)
	case OutboxHeld:
		m.outboxHeld(ev.Peers)
	}
}

// Ready returns the actions decided since the last call, in order.
func (m *Machine) Ready() []Action {
	a := m.actions
	m.actions = nil
	return a
}

func (m *Machine) emit(a Action) { m.actions = append(m.actions, a) }

// Members is the view, this node included, sorted.
func (m *Machine) Members() []peer.ID { return slices.Clone(m.members) }

func (m *Machine) isMember(p peer.ID) bool {
	_, ok := m.joinedAt[p]
	return ok || p == m.cfg.Self
}

// others is the view without this node.
func (m *Machine) others() []peer.ID {
	return slices.DeleteFunc(slices.Clone(m.members), func(p peer.ID) bool { return p == m.cfg.Self })
}

func (m *Machine) replicas(host string, k int) []peer.ID {
	return m.cfg.Space.Replicas(m.members, host, k)
}

func (m *Machine) owner(host string) peer.ID {
	if r := m.replicas(host, 1); len(r) > 0 {
		return r[0]
	}
	return ""
}

func (m *Machine) setView() {
	m.members = append(slices.Collect(maps.Keys(m.joinedAt)), m.cfg.Self)
	slices.Sort(m.members)
	m.viewChanged = m.now
	m.nextScan = m.now // ownership moved: look at the hosts
	if drained := m.now.Add(m.cfg.Drain); m.nextList.After(drained) {
		m.nextList = drained // the full pass after the drain
	}
}

func (m *Machine) joined(p peer.ID, holding []peer.ID) {
	if p == m.cfg.Self || m.isMember(p) {
		return
	}
	m.joinedAt[p] = m.now
	delete(m.gone, p)
	delete(m.unseen, p)
	delete(m.repl.left, p)
	m.setView()
	m.emit(SaveMember{Peer: p, In: true})
	for _, f := range m.settle.joined(m.cfg, m.others(), holding, m.now) {
		m.emit(SaveFounder{Peer: f})
	}
	m.sendManifest(p)
}

func (m *Machine) left(p peer.ID) {
	if p == m.cfg.Self || !m.isMember(p) {
		return
	}
	delete(m.joinedAt, p)
	m.gone[p] = m.now.Add(m.cfg.Grace)
	m.repl.left[p] = m.now
	m.setView()
	m.settle.left(p) // Saved keeps p until its Grace ends (tick)
	m.suspect(p)     // it will not acknowledge
}

func (m *Machine) tick() {
	m.settle.expire(m.cfg, m.now)
	for h, in := range m.hosts.handedIn {
		if m.now.Sub(in.at) >= m.cfg.Grace+m.cfg.Drain {
			delete(m.hosts.handedIn, h)
		}
	}
	for _, p := range sortedKeys(m.gone) {
		if !m.now.Before(m.gone[p]) {
			delete(m.gone, p)
			m.settle.gone(p)
			m.emit(SaveMember{Peer: p, In: false})
		}
	}
	if len(m.unseen) > 0 && !m.settle.firstSeen.IsZero() && !m.now.Before(m.unseenUntil()) {
		for _, p := range sortedKeys(m.unseen) {
			m.emit(SaveMember{Peer: p, In: false})
		}
		clear(m.unseen)
	}
	m.sendDeferredManifests()
	m.repl.tick(m)
	if !m.now.Before(m.nextList) {
		m.nextList = m.now.Add(m.cfg.List)
		m.emit(ListHosts{})
	}
	if !m.now.Before(m.nextScan) {
		m.nextScan = m.now.Add(time.Second)
		m.scanTakeovers()
	}
}

// unseenUntil is when members remembered from the last run and not seen
// since stop holding their hosts: Grace after this node met the network
// (a member alive is heard within it), or after its start if it met no
// one.
func (m *Machine) unseenUntil() time.Time {
	if m.settle.firstSeen.IsZero() {
		return m.started.Add(max(m.cfg.Grace, m.cfg.ManifestWait))
	}
	return m.settle.firstSeen.Add(m.cfg.Grace)
}

// MayCrawl reports whether this node may fetch pages of host now: it owns
// it by its view, and also when the members that may still be alive
// count; no manifest holds it back; and its role is Crawled (hostTable).
func (m *Machine) MayCrawl(now time.Time, host string) bool {
	return m.owner(host) == m.cfg.Self && m.hosts.role[host] == Crawled && m.gateOpen(now, host)
}

// gateOpen is MayCrawl but for ownership and role.
func (m *Machine) gateOpen(now time.Time, host string) bool {
	return m.ownsAmongRecent(now, host) && m.settle.mayCrawl(m.cfg, m.started, now, host)
}

// ownsAmongRecent reports whether this node owns host when the members
// that may still be alive count as members too, and none of the host's
// other holders among them is a member remembered from the last run and
// not seen yet (a page stored before it is seen would be replicated to
// nobody who would take the host over).
//
// Why: a node restarted after a crash sees only itself at first and would
// own, for a few heartbeats, the hosts of every member it has not heard
// from yet; and a member killed and restarted is declared gone by the
// others, whose replica would take its hosts over only to hand them back
// a second later. A member that is really gone costs its hosts one grace
// period of crawling.
func (m *Machine) ownsAmongRecent(now time.Time, host string) bool {
	var extra, unseen []peer.ID
	for p, until := range m.gone {
		if now.Before(until) {
			extra = append(extra, p)
		}
	}
	if len(m.unseen) > 0 && now.Before(m.unseenUntil()) {
		for p := range m.unseen {
			extra = append(extra, p)
			unseen = append(unseen, p)
		}
	}
	if len(extra) == 0 {
		return true
	}
	reps := m.cfg.Space.Replicas(append(slices.Clone(m.members), extra...), host, m.cfg.R)
	if len(reps) == 0 || reps[0] != m.cfg.Self {
		return false
	}
	for _, r := range reps[1:] {
		if slices.Contains(unseen, r) {
			return false
		}
	}
	return true
}

// sortedKeys returns the keys of a set in order, so that actions come out
// the same for the same events.
func sortedKeys[K ~string, V any](s map[K]V) []K {
	return slices.Sorted(maps.Keys(s))
}

// Summary is what a machine holds, counted, for an operator's status page.
type Summary struct {
	Members int `json:"members"`
	// Hosts are the crawler's hosts; Owned those this node owns by its
	// view; Crawlable those it may crawl now (MayCrawl).
	Hosts, Owned, Crawlable int
	// Crawled and Replica count hosts by role.
	Crawled, Replica int
	// Waiting are hosts a manifest holds back; Awaiting members whose
	// manifest a joiner waits for.
	Waiting, Awaiting   int
	Pulls, HandoffQueue int
	Handing             string `json:",omitempty"`
}

// Summarise counts what the machine holds at now.
func (m *Machine) Summarise(now time.Time) Summary {
	s := Summary{
		Members: len(m.members), Hosts: len(m.hosts.crawl), Awaiting: len(m.settle.awaiting),
		Pulls: len(m.hosts.pulls), HandoffQueue: len(m.hosts.queue), Handing: m.hosts.handing,
	}
	for h := range m.hosts.crawl {
		if m.owner(h) == m.cfg.Self {
			s.Owned++
		}
		if m.MayCrawl(now, h) {
			s.Crawlable++
		}
	}
	for _, r := range m.hosts.role {
		switch r {
		case Crawled:
			s.Crawled++
		case Replica:
			s.Replica++
		}
	}
	for h := range m.settle.pending {
		if m.Waiting(now, h) {
			s.Waiting++
		}
	}
	return s
}
