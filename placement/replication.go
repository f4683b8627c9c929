package placement

import (
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// replication decides where a stored item goes and how long its Store
// waits (group commit). Every item a node stores for a host it holds
// (page, fetch marker, sitemap read, anchors) goes into a durable
// per-peer outbox for each Target; the outbox delivers it and reports
// Delivered. An item's wait (Await) lasts until the targets it was told
// to wait for delivered it, or WaitMax (and the Await's Grace) passed;
// whatever happens the item is in the outbox before the wait begins.
// Whether the Store blocks for the wait is the caller's choice: one that
// does makes its page count as fetched only once the member that would
// take its host over holds it, so a node killed right after it leaves
// that member nothing to fetch again; one that returns first leaves the
// page to be fetched again should this node die before the delivery (the
// caller bounds how many return first).
//
// A target that did not deliver within its wait, or whose delivery failed,
// is suspected: it is not waited for until a delivery to it succeeds (a
// killed replica costs one wait per storing worker, not one per page).
// In its place the next member in line (one beyond the R closest) gets
// the item and is waited for: at once for an item stored while the
// holder is suspected (Targets), by a Copy for one whose wait it missed,
// so that R members hold the item even then. Members that left in the last KeepAway and
// would hold the host get the items too, without a wait: a replica killed
// and restarted comes back with what was stored while it was away. After
// KeepAway their outbox is dropped.
type replication struct {
	suspect map[peer.ID]bool
	left    map[peer.ID]time.Time // members that left (or held outboxes at start): when
	mark    map[peer.ID]uint64    // highest outbox sequence delivered per peer
	waits   map[uint64]*wait
}

type wait struct {
	host     string
	deadline time.Time
	pending  map[peer.ID]uint64
	missed   []peer.ID
	copying  bool // a Copy is out, its Await not in yet
	copied   bool
}

func newReplication() replication {
	return replication{
		suspect: map[peer.ID]bool{}, left: map[peer.ID]time.Time{},
		mark: map[peer.ID]uint64{}, waits: map[uint64]*wait{},
	}
}

// Target is one member a stored item goes to, and whether its Store
// waits for it. NewOwner marks a holder before this node of a host this
// node still crawls until its handoff (the joiner that owns it now): it
// takes the item only while it awaits a handoff this node's manifest
// named (it may have missed the manifest), so it may refuse it, and a
// refusal is no fault of either side.
type Target struct {
	Peer     peer.ID
	Wait     bool
	NewOwner bool
}

// Targets says where an item stored now for host goes: the holders
// after this node (a holder closer to the host refuses items from
// farther ones: a replica cannot write to its owner), a stand-in for each
// suspected one, and the members that left within KeepAway and would
// come after this node among the holders. A host this node still crawls
// but no longer owns (a member closer to it joined, and the handoff is
// to come) sends its items to the holders before this node too: what
// was fetched before this node heard of the join is stored until the
// handoff, and the new owner, which awaits the handoff named in this
// node's manifest, takes it (KindReplica), so that a kill before the
// handoff leaves it held.
func (m *Machine) Targets(now time.Time, host string) []Target {
	r := &m.repl
	pref := m.replicas(host, m.cfg.R+1)
	self := slices.Index(pref, m.cfg.Self)
	if self < 0 {
		return nil
	}
	var out []Target
	if self > 0 && m.hosts.role[host] == Crawled {
		for _, p := range pref[:self] {
			out = append(out, Target{Peer: p, Wait: !r.suspect[p], NewOwner: true})
		}
	}
	waited, want := 0, max(m.cfg.R-1-self, 0)
	for i, p := range pref[self+1:] {
		switch holder := self+1+i < m.cfg.R; {
		case holder:
			out = append(out, Target{Peer: p, Wait: !r.suspect[p]})
			if !r.suspect[p] {
				waited++
			}
		case waited < want && !r.suspect[p]:
			out = append(out, Target{Peer: p, Wait: true}) // a stand-in
			waited++
		}
	}
	var away []peer.ID
	for p, t := range r.left {
		if now.Sub(t) <= m.cfg.KeepAway && !m.isMember(p) {
			away = append(away, p)
		}
	}
	if len(away) == 0 {
		return out
	}
	slices.Sort(away)
	k := m.cfg.R
	if k >= len(m.members) {
		k += len(away) // every member is a holder: so would they be
	}
	all := m.cfg.Space.Replicas(append(slices.Clone(m.members), away...), host, k)
	for i, p := range all {
		if i > slices.Index(all, m.cfg.Self) && slices.Index(all, m.cfg.Self) >= 0 && slices.Contains(away, p) {
			out = append(out, Target{Peer: p})
		}
	}
	return out
}

func (m *Machine) await(ev Await) {
	r := &m.repl
	w := r.waits[ev.ID]
	if w == nil {
		w = &wait{host: ev.Host, pending: map[peer.ID]uint64{}}
		r.waits[ev.ID] = w
	}
	w.deadline = m.now.Add(m.cfg.WaitMax + max(ev.Grace, 0))
	w.copying = false
	for p, seq := range ev.Pending {
		if r.mark[p] < seq {
			w.pending[p] = seq
		}
	}
	m.release(ev.ID, w)
}

// release ends w if nothing is pending for it any more.
func (m *Machine) release(id uint64, w *wait) {
	if len(w.pending) > 0 || w.copying {
		return
	}
	delete(m.repl.waits, id)
	slices.Sort(w.missed)
	m.emit(Release{ID: id, Missed: w.missed})
}

// standIn is the member that takes a missed copy of an item of host: the
// next in line after this node among the R+1 closest, not suspected and
// not tried yet.
func (m *Machine) standIn(host string, tried func(peer.ID) bool) peer.ID {
	pref := m.replicas(host, m.cfg.R+1)
	self := slices.Index(pref, m.cfg.Self)
	if self < 0 {
		return ""
	}
	for _, p := range pref[self+1:] {
		if !m.repl.suspect[p] && !tried(p) {
			return p
		}
	}
	return ""
}

func (m *Machine) delivered(p peer.ID, seq uint64) {
	r := &m.repl
	r.mark[p] = max(r.mark[p], seq)
	delete(r.suspect, p)
	m.settleWaits(func(q peer.ID, s uint64) (done, missed bool) { return q == p && s <= seq, false })
}

// suspect marks p as not to be waited for until a delivery succeeds, and
// ends the waits for it.
func (m *Machine) suspect(p peer.ID) {
	m.repl.suspect[p] = true
	m.settleWaits(func(q peer.ID, _ uint64) (done, missed bool) { return q == p, q == p })
}

// settleWaits drops the pending peers f says are done, sends a copy to a
// stand-in for a wait that missed one (once), and releases the waits left
// with nothing pending, in ID order.
func (m *Machine) settleWaits(f func(p peer.ID, seq uint64) (done, missed bool)) {
	r := &m.repl
	for _, id := range sortedIDs(r.waits) {
		w := r.waits[id]
		for p, seq := range w.pending {
			if done, missed := f(p, seq); done {
				delete(w.pending, p)
				if missed {
					w.missed = append(w.missed, p)
				}
			}
		}
		if len(w.missed) > 0 && !w.copied {
			w.copied = true
			tried := func(p peer.ID) bool { _, ok := w.pending[p]; return ok || slices.Contains(w.missed, p) }
			if to := m.standIn(w.host, tried); to != "" {
				w.copying = true
				m.emit(Copy{ID: id, To: to})
			}
		}
		m.release(id, w)
	}
}

func (r *replication) tick(m *Machine) {
	var late []peer.ID
	for _, w := range r.waits {
		if !m.now.Before(w.deadline) {
			for p := range w.pending {
				if !slices.Contains(late, p) {
					late = append(late, p)
				}
			}
		}
	}
	slices.Sort(late)
	for _, p := range late {
		m.suspect(p)
	}
	for _, p := range sortedKeys(r.left) {
		if m.now.Sub(r.left[p]) > m.cfg.KeepAway {
			delete(r.left, p)
			delete(r.suspect, p)
			m.emit(DropOutbox{Peer: p})
		}
	}
}

// outboxHeld treats the peers the outbox held items for at start as
// members that just left, suspected until a delivery succeeds.
func (m *Machine) outboxHeld(peers []peer.ID) {
	for _, p := range peers {
		if p == m.cfg.Self {
			continue
		}
		m.repl.suspect[p] = true
		if !m.isMember(p) {
			m.repl.left[p] = m.now
		}
	}
}

func sortedIDs(w map[uint64]*wait) []uint64 {
	ids := make([]uint64, 0, len(w))
	for id := range w {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
