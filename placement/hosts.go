package placement

import (
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// hostTable is what this node holds of hosts, and what is under way.
//
// Each host has a Role here, kept in Saved. A node crawls a host only in
// role Crawled: it got it by a handoff from the previous owner, or by a
// takeover. A takeover first pulls what the members closest to the host
// hold of it (Pull: pages, fetch markers, sitemap reads, URLs queued at
// the owner), then marks all that fetched and queues the links of the
// pages (TakeOver). Every host the crawler holds and this node owns is
// taken over so, unless it was handed in: a host new to this node may
// have been crawled before, by an owner that died before it could hand
// it over or while this node was not yet a member, and its holders know.
// A host held as a Replica (items from its holders, no crawl state) is
// taken over once this node owns it.
//
// A host the crawler holds and this node no longer owns is handed to its
// owner (HandOff), one host at a time, Drain after the view changed;
// afterwards its pages stay if this node still holds the host (as a
// replica), else they are forgotten.
//
// The owner of a host tells each member that becomes one of its holders
// (Hint) so that it pulls the host: replication only carries what is
// stored from then on, and a holder that lacks the older pages would
// fetch them again should it take the host over. Every Resync it hints
// them all again, for a pull that failed.
type hostTable struct {
	crawl map[string]bool // the crawler's hosts (last Hosts event)
	role  map[string]Role // Saved.Hosts
	// queue are the crawler's hosts to hand off, in order; handing is
	// the one under way ("" for none).
	queue   []string
	handing string
	// holders are the other holders of each crawled host this node owns,
	// hinted.
	holders map[string][]peer.ID
	// pulls are the hosts being pulled (and then taken over, if takeover).
	pulls map[string]*pull
	// takeovers are the hosts of the last scan (scanTakeovers) not yet
	// looked at by startTakeovers, in order.
	takeovers []string
	// asked counts the pulls under way per member and host: their
	// answers come as replica items from members that need not be among
	// the host's holders, and are taken because they were asked for.
	asked map[ask]int
	// swept is when the last full pass over the crawler's hosts ran.
	swept time.Time
	// refused are the hosts whose owner refused their handoff: since
	// when. A member that crawled a host under a view that lacked
	// members (one that just restarted, say) holds crawl state its owner
	// takes from founders only; it gives up after HandoffGiveUp, when
	// the views have long agreed and the refusal is for good. The owner
	// then crawls the host on its own, with the URLs queued for it here.
	// Other failures (an owner that cannot take data in now, an
	// unreachable one) are retried without end: giving up would lose
	// crawl state the owner never had.
	refused map[string]time.Time
	// handedIn are the hosts handed in within the last Grace + Drain:
	// from whom, and when. The previous owner's last pages were
	// processed around its handoff, and their links to the host reach
	// this node afterwards (Allowed, KindLink).
	handedIn map[string]handIn
}

type handIn struct {
	from peer.ID
	at   time.Time
}

type pull struct {
	from     []peer.ID
	takeover bool
	taking   bool // TakeOver under way
}

type ask struct {
	peer peer.ID
	host string
}

func newHostTable() hostTable {
	return hostTable{
		crawl: map[string]bool{}, role: map[string]Role{}, holders: map[string][]peer.ID{}, pulls: map[string]*pull{}, asked: map[ask]int{},
		refused: map[string]time.Time{}, handedIn: map[string]handIn{},
	}
}

// listed takes the crawler's hosts. Hosts seen for the first time are
// looked at at once (taken over, or their holders hinted); every Rebalance,
// and once the view changed and drained, all of them: hosts not owned
// any more are queued for handoff, new holders of hosts owned hinted.
func (m *Machine) listed(hosts []string) {
	t := &m.hosts
	fresh := map[string]bool{}
	for _, h := range hosts {
		if !t.crawl[h] {
			fresh[h] = true
		}
	}
	clear(t.crawl)
	for _, h := range hosts {
		t.crawl[h] = true
	}
	drained := !m.now.Before(m.viewChanged.Add(m.cfg.Drain))
	full := drained && (!m.now.Before(t.swept.Add(m.cfg.Rebalance)) || t.swept.Before(m.viewChanged))
	if !m.now.Before(m.nextResync) {
		m.nextResync = m.now.Add(m.cfg.Resync)
		clear(t.holders)
		full = true
	}
	if full {
		t.swept = m.now
		t.queue = t.queue[:0]
		for h := range t.holders {
			if !t.crawl[h] {
				delete(t.holders, h)
			}
		}
	}
	for _, h := range sortedKeys(t.crawl) {
		if !full && !fresh[h] {
			continue
		}
		switch o := m.owner(h); {
		case o == m.cfg.Self:
			m.checkHolders(h)
		case full && o != "" && h != t.handing:
			t.queue = append(t.queue, h)
		}
	}
	m.nextHandoff()
	m.scanTakeovers()
}

// checkHolders hints the holders of h (owned) that did not hold it when
// it was looked at before (all of them the first time: pages stored
// before there were holders reached no one).
func (m *Machine) checkHolders(h string) {
	now := m.replicas(h, m.cfg.R)[1:]
	before := m.hosts.holders[h]
	m.hosts.holders[h] = now
	for _, p := range now {
		if !slices.Contains(before, p) {
			m.emitHint(p, h)
		}
	}
}

// emitHint adds h to the Hint for p among this step's actions.
func (m *Machine) emitHint(p peer.ID, h string) {
	for i, a := range m.actions {
		if hint, ok := a.(Hint); ok && hint.To == p {
			hint.Hosts = append(hint.Hosts, h)
			m.actions[i] = hint
			return
		}
	}
	m.emit(Hint{To: p, Hosts: []string{h}})
}

// nextHandoff starts the next handoff in the queue, if none is under way.
func (m *Machine) nextHandoff() {
	t := &m.hosts
	if m.now.Before(m.viewChanged.Add(m.cfg.Drain)) {
		return // the queue is made again after the drain
	}
	for t.handing == "" && len(t.queue) > 0 {
		h := t.queue[0]
		t.queue = t.queue[1:]
		if o := m.owner(h); o != m.cfg.Self && o != "" && t.crawl[h] {
			t.handing = h
			if t.role[h] != Crawled {
				// Never crawled here (URLs forwarded to this node): its
				// crawl state knows nothing fetched, and a handoff would
				// let the owner crawl it before the member that did
				// hands it over. Its URLs go to the owner as links.
				m.emit(Abandon{Host: h})
			} else {
				m.emit(HandOff{Host: h, To: o})
			}
		}
	}
}

func (m *Machine) handedOff(ev HandedOff) {
	t := &m.hosts
	if ev.Host != t.handing {
		return
	}
	t.handing = ""
	switch {
	case ev.Err == nil:
		delete(t.crawl, ev.Host)
		delete(t.holders, ev.Host)
		delete(t.refused, ev.Host)
		m.settle.forget(ev.Host)
		switch {
		case slices.Contains(m.replicas(ev.Host, m.cfg.R), m.cfg.Self):
			// Still a holder: the pages stay, and should the new owner
			// die this node takes the host over from them.
			m.setRole(ev.Host, Replica)
		case ev.To == "":
			// Abandoned: the owner took none of it from this node, so
			// the pages may be stored nowhere else. They stay for the
			// owner's pull (its takeover asks PullPeers members).
			m.setRole(ev.Host, None)
		default:
			m.setRole(ev.Host, None)
			m.emit(ForgetHost{Host: ev.Host})
		}
	case ev.Refused:
		since, ok := t.refused[ev.Host]
		if !ok {
			t.refused[ev.Host] = m.now
		} else if m.now.Sub(since) >= m.cfg.HandoffGiveUp {
			t.handing = ev.Host
			m.emit(Abandon{Host: ev.Host, Refused: true})
			return
		}
	}
	m.nextHandoff()
}

// setRole changes the role of h, and Saved.
func (m *Machine) setRole(h string, r Role) {
	if m.hosts.role[h] == r {
		return
	}
	if r == None {
		delete(m.hosts.role, h)
	} else {
		m.hosts.role[h] = r
	}
	m.emit(SaveHost{Host: h, Role: r})
}

// noteReplica makes h a replica host unless it has a role.
func (m *Machine) noteReplica(h string) {
	if m.hosts.role[h] == None {
		m.setRole(h, Replica)
	}
}

// replicaStored: items of h came from a holder. Unless this node owns h
// (its view may lag the sender's), it holds h as a replica.
func (m *Machine) replicaStored(h string) {
	if m.owner(h) != m.cfg.Self {
		m.noteReplica(h)
	}
}

// hinted: a holder says this node holds hosts too; each one this node
// holds by its own view and does not crawl is pulled from it.
func (m *Machine) hinted(ev Hinted) {
	for _, h := range ev.Hosts {
		reps := m.replicas(h, m.cfg.R)
		if m.hosts.pulls[h] != nil || reps[0] == m.cfg.Self || !slices.Contains(reps, m.cfg.Self) {
			continue
		}
		m.noteReplica(h)
		m.startPull(h, []peer.ID{ev.From}, false)
	}
}

func (m *Machine) startPull(h string, from []peer.ID, takeover bool) {
	m.hosts.pulls[h] = &pull{from: from, takeover: takeover}
	for _, p := range from {
		m.hosts.asked[ask{p, h}]++
	}
	m.emit(Pull{Host: h, From: from})
}

// scanTakeovers lists, in order, the hosts this node owns and may crawl
// but for its role: replica hosts, and hosts of the crawler that were not
// handed in; startTakeovers starts them.
func (m *Machine) scanTakeovers() {
	t := &m.hosts
	t.takeovers = t.takeovers[:0]
	for h, r := range t.role {
		if r == Replica {
			t.takeovers = append(t.takeovers, h)
		}
	}
	for h := range t.crawl {
		if t.role[h] == None {
			t.takeovers = append(t.takeovers, h)
		}
	}
	slices.Sort(t.takeovers)
	m.startTakeovers()
}

// startTakeovers starts the takeovers the last scan listed, while fewer
// than PullParallel pulls run. It runs again whenever a pull ends, so a
// node that meets many new hosts at once takes them over as fast as the
// pulls go, not PullParallel per scan. Suspected members are not asked,
// unless every member is.
func (m *Machine) startTakeovers() {
	t := &m.hosts
	for len(t.takeovers) > 0 && len(t.pulls) < m.cfg.PullParallel {
		h := t.takeovers[0]
		t.takeovers = t.takeovers[1:]
		if r := t.role[h]; r != Replica && (r != None || !t.crawl[h]) {
			continue // handed in or taken over since the scan
		}
		if t.pulls[h] != nil || m.owner(h) != m.cfg.Self || !m.gateOpen(m.now, h) {
			continue
		}
		others := slices.DeleteFunc(m.others(), func(p peer.ID) bool { return m.repl.suspect[p] })
		if len(others) == 0 {
			// Every member is suspected (this node was cut off, and no
			// delivery has succeeded since): asking them may cost a
			// PullTimeout, taking the host over from nothing costs its
			// pages.
			others = m.others()
		}
		m.startPull(h, m.cfg.Space.Replicas(others, h, m.cfg.PullPeers), true)
	}
}

func (m *Machine) pulled(h string) {
	p := m.hosts.pulls[h]
	if p == nil || p.taking {
		return
	}
	for _, q := range p.from {
		k := ask{q, h}
		if m.hosts.asked[k]--; m.hosts.asked[k] <= 0 {
			delete(m.hosts.asked, k)
		}
	}
	if !p.takeover {
		delete(m.hosts.pulls, h)
		m.startTakeovers()
		return
	}
	p.taking = true
	m.emit(TakeOver{Host: h})
}

func (m *Machine) tookOver(ev TookOver) {
	if p := m.hosts.pulls[ev.Host]; p == nil || !p.taking {
		return
	}
	delete(m.hosts.pulls, ev.Host)
	defer m.startTakeovers()
	if ev.Err != nil {
		return // the next scan tries again
	}
	m.hosts.crawl[ev.Host] = true
	m.setRole(ev.Host, Crawled)
	delete(m.hosts.holders, ev.Host) // hinted at the next full pass
}
