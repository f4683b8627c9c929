package placement

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

var t0 = time.Unix(1700000000, 0)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// ready returns the actions of type A among m's ready ones.
func ready[A Action](m *Machine) []A {
	var out []A
	for _, a := range m.Ready() {
		if x, ok := a.(A); ok {
			out = append(out, x)
		}
	}
	return out
}

// hostRanked finds a host whose closest members among members are want,
// in that order.
func hostRanked(t *testing.T, members []peer.ID, want ...peer.ID) string {
	t.Helper()
	h, ok := findRanked(members, want...)
	if !ok {
		t.Fatalf("no host with closest members %v", want)
	}
	return h
}

func findRanked(members []peer.ID, want ...peer.ID) (string, bool) {
	for i := 0; i < 1000; i++ {
		h := fmt.Sprintf("host-%d.test", i)
		if slices.Equal(ringSpace{}.Replicas(members, h, len(want)), want) {
			return h, true
		}
	}
	return "", false
}

// TestRecentMembersHoldTheirHosts: a member remembered from the last run,
// or one that just left, keeps its hosts from being crawled here until it
// is seen again or its grace ends; a host whose other holder is a
// remembered member not seen yet waits for it too.
func TestRecentMembersHoldTheirHosts(t *testing.T) {
	self, other := peer.ID("self"), peer.ID("other")
	pair := []peer.ID{self, other}
	theirs := hostRanked(t, pair, other, self)
	mine := hostRanked(t, pair, self, other)
	crawled := Saved{Hosts: map[string]Role{theirs: Crawled, mine: Crawled}}
	tests := []struct {
		name  string
		saved Saved
		steps func(m *Machine)
		at    float64
		host  string
		want  bool
	}{
		{"alone, every host is this node's", crawled, nil, 0, theirs, true},
		{"a member that just left holds its hosts", crawled, func(m *Machine) {
			m.Step(at(0), Joined{Peer: other})
			m.Step(at(1), Left{Peer: other})
		}, 2, theirs, false},
		{"until its grace ends", crawled, func(m *Machine) {
			m.Step(at(0), Joined{Peer: other})
			m.Step(at(1), Left{Peer: other})
		}, 8, theirs, true},
		{"a remembered member holds its hosts after a restart", Saved{Members: []peer.ID{other}, Hosts: crawled.Hosts}, nil, 2, theirs, false},
		{"and the hosts whose other holder it is", Saved{Members: []peer.ID{other}, Hosts: crawled.Hosts}, nil, 2, mine, false},
		{"until it is seen", Saved{Members: []peer.ID{other}, Hosts: crawled.Hosts}, func(m *Machine) {
			m.Step(at(1), Joined{Peer: other})
			m.Step(at(1), Manifest{From: other})
		}, 2, mine, true},
		{"or this node met the network and its grace ended", Saved{Members: []peer.ID{other}, Hosts: crawled.Hosts}, func(m *Machine) {
			m.Step(at(1), Joined{Peer: "third"})
			m.Step(at(2), Left{Peer: "third"})
		}, 20, theirs, true},
		{"a host not adopted is not crawled", Saved{}, nil, 0, mine, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(testConfig(self, false), tc.saved, t0)
			if tc.steps != nil {
				tc.steps(m)
			}
			m.Step(at(tc.at), Tick{})
			if got := m.MayCrawl(at(tc.at), tc.host); got != tc.want {
				t.Fatalf("MayCrawl(%s) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
}

// TestHandoff: a host that moves to a joiner is handed off once the view
// drained; afterwards its pages stay if this node still holds it, else
// they are forgotten; a handoff the owner keeps refusing is abandoned.
func TestHandoff(t *testing.T) {
	// In the keyspace one of three members is never between the other
	// two: names where that one is the joiner.
	self := peer.ID("self")
	var joiner, third peer.ID
	var stays, goes string
	for i := 0; stays == "" || goes == ""; i++ {
		joiner, third = peer.ID(fmt.Sprint("joiner-", i)), peer.ID(fmt.Sprint("third-", i))
		all := []peer.ID{self, joiner, third}
		stays, _ = findRanked(all, joiner, self)
		goes, _ = findRanked(all, joiner, third, self)
	}
	m := New(testConfig(self, false), Saved{Hosts: map[string]Role{stays: Crawled, goes: Crawled}}, t0)
	m.Step(at(0), Joined{Peer: third})
	m.Step(at(0), Hosts{Hosts: []string{stays, goes}})
	m.Step(at(30), Joined{Peer: joiner})
	manifests := ready[SendManifest](m)
	if len(manifests) != 1 || manifests[0].To != joiner || !slices.Equal(manifests[0].Hosts, slices.Sorted(slices.Values([]string{goes, stays}))) {
		t.Fatalf("manifests %v, want one to the joiner naming both hosts", manifests)
	}
	m.Step(at(31), Hosts{Hosts: []string{stays, goes}})
	if h := ready[HandOff](m); len(h) > 0 {
		t.Fatalf("handoff %v before the view drained", h)
	}
	m.Step(at(37), Hosts{Hosts: []string{stays, goes}})
	h := ready[HandOff](m)
	if len(h) != 1 || h[0].To != joiner {
		t.Fatalf("handoffs %v, want one (one at a time) to the joiner", h)
	}
	first := h[0].Host
	m.Step(at(38), HandedOff{Host: first, To: joiner})
	acts := m.Ready()
	second := stays
	if first == stays {
		second = goes
	}
	var next []HandOff
	var forgot []ForgetHost
	for _, a := range acts {
		switch a := a.(type) {
		case HandOff:
			next = append(next, a)
		case ForgetHost:
			forgot = append(forgot, a)
		}
	}
	if len(next) != 1 || next[0].Host != second {
		t.Fatalf("after the first handoff: %v, want the handoff of %s", acts, second)
	}
	if (first == goes) != (len(forgot) == 1) {
		t.Fatalf("after handing off %s: %v (forget only what this node does not hold)", first, acts)
	}
	m.Step(at(39), HandedOff{Host: second, To: joiner, Err: errors.New("refused"), Refused: true})
	m.Step(at(45), Hosts{Hosts: []string{second}})
	if h := ready[HandOff](m); len(h) != 1 {
		t.Fatalf("a refused handoff is tried again: %v", h)
	}
	m.Step(at(60), HandedOff{Host: second, To: joiner, Err: errors.New("refused"), Refused: true})
	if a := ready[Abandon](m); len(a) != 0 {
		t.Fatalf("abandoned %v before HandoffGiveUp", a)
	}
	m.Step(at(65), Hosts{Hosts: []string{second}})
	if h := ready[HandOff](m); len(h) != 1 {
		t.Fatalf("a refused handoff is tried again: %v", h)
	}
	m.Step(at(70), HandedOff{Host: second, To: joiner, Err: errors.New("refused"), Refused: true})
	if a := ready[Abandon](m); len(a) != 1 || a[0].Host != second || !a[0].Refused {
		t.Fatalf("a handoff refused for HandoffGiveUp is abandoned: %v", a)
	}
	if m.MayCrawl(at(70), stays) || m.MayCrawl(at(70), goes) {
		t.Fatal("a host handed off may be crawled")
	}
}

// TestManifestNamesOnlyHandoffs: a host the crawler holds but never
// crawled here (URLs forwarded to this node while its owner was away) is
// abandoned, not handed off, so the manifest to its returning owner does
// not name it: the owner, which waits for the handoff of every host a
// manifest names, would hold that host back for HostWait.
func TestManifestNamesOnlyHandoffs(t *testing.T) {
	donor, owner := peer.ID("donor"), peer.ID("owner")
	pair := []peer.ID{donor, owner}
	forwarded := hostRanked(t, pair, owner, donor)
	crawled := hostRanked(t, pair, donor, owner)
	d := New(testConfig(donor, false), Saved{Hosts: map[string]Role{crawled: Crawled}}, t0)
	o := New(testConfig(owner, false), Saved{Members: []peer.ID{donor}, Hosts: map[string]Role{forwarded: Crawled}}, t0)
	o.Step(at(1), Joined{Peer: donor})
	d.Step(at(1), Joined{Peer: owner})
	d.Step(at(1), Hosts{Hosts: []string{crawled}})
	d.Ready()
	o.Ready()
	// The owner is killed and away for longer than the membership
	// timeout; meanwhile the donor's view gives it the owner's hosts, and
	// URLs of one of them are forwarded to it.
	d.Step(at(20), Left{Peer: owner})
	d.Step(at(21), Hosts{Hosts: []string{crawled, forwarded}})
	if d.MayCrawl(at(21), forwarded) {
		t.Fatal("the donor crawls the host of a member within its grace")
	}
	d.Ready()
	// The owner is back and rejoins.
	o = New(testConfig(owner, false), Saved{Members: []peer.ID{donor}, Hosts: map[string]Role{forwarded: Crawled}, Founders: []peer.ID{donor}}, at(24))
	o.Step(at(25), Joined{Peer: donor})
	d.Step(at(25), Joined{Peer: owner})
	for _, mf := range ready[SendManifest](d) {
		if mf.To != owner {
			t.Fatalf("manifest %v to a member that did not join", mf)
		}
		if slices.Contains(mf.Hosts, forwarded) {
			t.Errorf("manifest names %s, which the donor never crawled and will abandon", forwarded)
		}
		o.Step(at(25), Manifest{From: donor, Hosts: mf.Hosts})
	}
	// After the drain the donor gives the host up: its URLs go to the
	// owner as links, and no handoff follows.
	d.Step(at(32), Hosts{Hosts: []string{crawled, forwarded}})
	ab := ready[Abandon](d)
	if len(ab) != 1 || ab[0].Host != forwarded {
		t.Fatalf("donor's abandons %v, want %s", ab, forwarded)
	}
	d.Step(at(32), HandedOff{Host: forwarded})
	o.Step(at(33), Tick{})
	if !o.MayCrawl(at(33), forwarded) {
		t.Fatalf("the owner holds its own host %s back after the donor abandoned it (status %+v)", forwarded, o.Summarise(at(33)))
	}
}

// TestTakeover: a replica host this node comes to own is pulled from the
// members closest to it, then taken over, then crawled; its new replica
// is hinted.
func TestTakeover(t *testing.T) {
	owner, self, third := peer.ID("owner"), peer.ID("self"), peer.ID("third")
	all := []peer.ID{owner, self, third}
	host := hostRanked(t, all, owner, self, third)
	m := New(testConfig(self, false), Saved{Hosts: map[string]Role{host: Replica}}, t0)
	m.Step(at(0), Joined{Peer: owner})
	m.Step(at(0), Joined{Peer: third})
	m.Step(at(20), Left{Peer: owner})
	m.Step(at(21), Tick{})
	if p := ready[Pull](m); len(p) > 0 {
		t.Fatalf("pull %v within the grace of the owner that left", p)
	}
	m.Step(at(27), Tick{})
	p := ready[Pull](m)
	if len(p) != 1 || p[0].Host != host || !slices.Equal(p[0].From, []peer.ID{third}) {
		t.Fatalf("pulls %v, want one of %s from %s", p, host, third)
	}
	if m.MayCrawl(at(27), host) {
		t.Fatal("crawled before the takeover")
	}
	m.Step(at(28), Pulled{Host: host})
	if to := ready[TakeOver](m); len(to) != 1 {
		t.Fatalf("takeovers %v after the pull", to)
	}
	m.Step(at(29), TookOver{Host: host})
	if !m.MayCrawl(at(29), host) {
		t.Fatal("not crawled after the takeover")
	}
	m.Step(at(30), Hosts{Hosts: []string{host}})
	if h := ready[Hint](m); len(h) != 1 || h[0].To != third || !slices.Equal(h[0].Hosts, []string{host}) {
		t.Fatalf("hints %v, want the new replica hinted", h)
	}
}

// TestTakeoverWhenEveryMemberIsSuspected: a takeover asks the suspected
// members when no other is left to ask, rather than taking the host over
// from nothing.
func TestTakeoverWhenEveryMemberIsSuspected(t *testing.T) {
	owner, self, third := peer.ID("owner"), peer.ID("self"), peer.ID("third")
	host := hostRanked(t, []peer.ID{owner, self, third}, owner, self, third)
	m := New(testConfig(self, false), Saved{Hosts: map[string]Role{host: Replica}}, t0)
	m.Step(at(0), Joined{Peer: owner})
	m.Step(at(0), Joined{Peer: third})
	m.Step(at(19), Undelivered{Peer: third})
	m.Step(at(20), Left{Peer: owner})
	m.Step(at(27), Tick{})
	p := ready[Pull](m)
	if len(p) != 1 || p[0].Host != host || !slices.Equal(p[0].From, []peer.ID{third}) {
		t.Fatalf("pulls %v, want one of %s from the suspected %s", p, host, third)
	}
}

// TestHandoffLostWithItsSender: a joiner whose donor named a host in its
// manifest and died before handing it over takes the host over from its
// replica once the donor's grace ends, not after HostWait.
func TestHandoffLostWithItsSender(t *testing.T) {
	joiner, donor, replica := peer.ID("joiner"), peer.ID("donor"), peer.ID("replica")
	host := hostRanked(t, []peer.ID{joiner, donor, replica}, joiner, donor, replica)
	cfg := testConfig(joiner, true)
	m := New(cfg, Saved{}, t0)
	m.Step(at(1), Joined{Peer: donor, Holding: []peer.ID{donor}})
	m.Step(at(1), Joined{Peer: replica})
	m.Step(at(2), Manifest{From: donor, Hosts: []string{host}})
	m.Step(at(3), Hosts{Hosts: []string{host}}) // URLs of it forwarded here
	m.Step(at(10), Left{Peer: donor})
	m.Step(at(11), Tick{})
	if p := ready[Pull](m); len(p) > 0 {
		t.Fatalf("pull %v within the grace of the donor that left", p)
	}
	gone := at(10).Add(cfg.Grace + time.Second)
	if !gone.Before(at(2).Add(cfg.HostWait)) {
		t.Fatalf("grace %v not shorter than HostWait %v: the test shows nothing", cfg.Grace, cfg.HostWait)
	}
	m.Step(gone, Tick{})
	p := ready[Pull](m)
	if len(p) != 1 || p[0].Host != host || !slices.Contains(p[0].From, replica) {
		t.Fatalf("pulls %v once the donor is gone, want one of %s from %s", p, host, replica)
	}
}

// TestItemsBeforeAHandoffReachTheJoiner: a member that crawled a host a
// joiner now owns stores what it fetched before it heard of the join
// until its handoff; those items go to the joiner, which takes them from
// the member whose manifest named the host while it awaits the handoff,
// so that a kill before the handoff loses none.
func TestItemsBeforeAHandoffReachTheJoiner(t *testing.T) {
	joiner, donor, replica, far := peer.ID("joiner"), peer.ID("donor"), peer.ID("replica"), peer.ID("far")
	host := hostRanked(t, []peer.ID{joiner, donor, replica, far}, joiner, donor, replica, far)
	d := New(testConfig(donor, false), Saved{Hosts: map[string]Role{host: Crawled}}, t0)
	d.Step(at(0), Joined{Peer: replica})
	if got := d.Targets(at(1), host); len(got) != 1 || got[0].Peer != replica {
		t.Fatalf("targets before the join %v, want the replica", got)
	}
	d.Step(at(5), Joined{Peer: joiner})
	got := d.Targets(at(6), host)
	if !slices.Contains(got, Target{Peer: joiner, Wait: true, NewOwner: true}) {
		t.Fatalf("targets after the join %v, want the joiner waited for", got)
	}
	d.Step(at(20), Hosts{Hosts: []string{host}}) // after the drain
	handoffs := ready[HandOff](d)
	if len(handoffs) != 1 || handoffs[0].To != joiner {
		t.Fatalf("handoffs %v, want %s to the joiner", handoffs, host)
	}
	d.Step(at(21), HandedOff{Host: host, To: joiner})
	if got := d.Targets(at(22), host); slices.ContainsFunc(got, func(tg Target) bool { return tg.Peer == joiner }) {
		t.Fatalf("targets after the handoff %v: a replica writes to its owner", got)
	}

	j := New(testConfig(joiner, true), Saved{}, t0)
	j.Step(at(5), Joined{Peer: donor, Holding: []peer.ID{donor}})
	j.Step(at(5), Joined{Peer: replica})
	j.Step(at(5), Joined{Peer: far})
	if j.Allowed(at(6), KindReplica, donor, host) {
		t.Error("the joiner takes items of a host no manifest named")
	}
	j.Step(at(6), Manifest{From: donor, Hosts: []string{host}})
	if !j.Allowed(at(7), KindReplica, donor, host) {
		t.Error("the joiner refuses the items of the member that will hand it the host")
	}
	for _, p := range []peer.ID{replica, far} {
		if j.Allowed(at(7), KindReplica, p, host) {
			t.Errorf("the joiner takes items from %s, which did not name the host", p)
		}
	}
	j.Step(at(8), HandedIn{Host: host})
	if j.Allowed(at(9), KindReplica, donor, host) {
		t.Error("the joiner takes the previous owner's items after the handoff")
	}
}

// TestLinksOfALateHandoff: a previous owner whose handoff comes late (it
// restarted, or its first tries were refused) crawls the host until it
// hands it over; the owner takes the links it found on the host while it
// awaits the handoff and for Grace + Drain after it, and from no one else.
func TestLinksOfALateHandoff(t *testing.T) {
	joiner, donor, replica := peer.ID("joiner"), peer.ID("donor"), peer.ID("replica")
	host := hostRanked(t, []peer.ID{joiner, donor, replica}, joiner, donor, replica)
	cfg := testConfig(joiner, true)
	newJoiner := func() *Machine {
		j := New(cfg, Saved{}, t0)
		j.Step(at(5), Joined{Peer: donor, Holding: []peer.ID{donor}})
		j.Step(at(5), Joined{Peer: replica})
		return j
	}
	late := at(5).Add(cfg.Grace + cfg.Drain + time.Second) // the joiner's own join no longer explains the donor's links
	if j := newJoiner(); j.Allowed(late, KindLink, donor, host) {
		t.Error("links from a member that neither crawls the host nor hands it over")
	}
	j := newJoiner()
	type linkCase struct {
		name string
		at   time.Time
		from peer.ID
		want bool
	}
	check := func(cases []linkCase) {
		t.Helper()
		for _, tc := range cases {
			if got := j.Allowed(tc.at, KindLink, tc.from, host); got != tc.want {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
	}
	j.Step(at(6), Manifest{From: donor, Hosts: []string{host}})
	check([]linkCase{
		{"the donor while its handoff is awaited", late, donor, true},
		{"the replica while the donor's handoff is awaited", late, replica, false},
	})
	handedIn := late.Add(10 * time.Second)
	j.Step(handedIn, HandedIn{Host: host, From: donor})
	window := cfg.Grace + cfg.Drain
	check([]linkCase{
		{"the donor right after it handed the host in", handedIn.Add(time.Second), donor, true},
		{"the replica right after the handoff", handedIn.Add(time.Second), replica, false},
		{"the donor Grace + Drain after the handoff", handedIn.Add(window), donor, false},
	})
	j.Step(handedIn.Add(window), Tick{})
	if len(j.hosts.handedIn) != 0 {
		t.Errorf("hand-ins kept past their window: %v", j.hosts.handedIn)
	}
}

// TestTakeoversKeepGoing: a node that meets many new hosts at once takes
// them over as fast as the pulls end, PullParallel at a time, not
// PullParallel per scan; a host handed in meanwhile is not taken over.
func TestTakeoversKeepGoing(t *testing.T) {
	self := peer.ID("self")
	cfg := testConfig(self, false)
	m := New(cfg, Saved{}, t0)
	var hosts []string
	for i := range 5 * cfg.PullParallel {
		hosts = append(hosts, fmt.Sprintf("host-%03d.test", i))
	}
	handedIn := hosts[len(hosts)-1]
	m.Step(at(1), Hosts{Hosts: hosts})
	now := at(1)
	took := map[string]bool{}
	for step := 0; ; step++ {
		var events []Event
		pulls := 0
		for _, a := range m.Ready() {
			switch a := a.(type) {
			case Pull:
				pulls++
				events = append(events, Pulled{Host: a.Host})
			case TakeOver:
				events = append(events, TookOver{Host: a.Host})
				took[a.Host] = true
			}
		}
		if pulls > cfg.PullParallel {
			t.Fatalf("%d pulls started at once, want at most %d", pulls, cfg.PullParallel)
		}
		if step == 0 {
			m.Step(now, HandedIn{Host: handedIn})
		}
		if len(events) == 0 {
			break
		}
		now = now.Add(time.Millisecond)
		for _, ev := range events {
			m.Step(now, ev)
		}
	}
	if now.After(at(2)) {
		t.Fatalf("takeovers waited for a scan: the last at %v", now.Sub(t0))
	}
	for _, h := range hosts {
		if !m.MayCrawl(now, h) {
			t.Fatalf("%s not crawled after the takeovers", h)
		}
		if took[h] == (h == handedIn) {
			t.Fatalf("%s taken over: %v", h, took[h])
		}
	}
}

// TestReplicationWaits: a stored item waits for the host's other holder;
// a holder that misses the wait is suspected, and the item goes to a
// stand-in, waited for in its place; while suspected, new items go to the
// stand-in at once; a delivery clears the suspicion.
func TestReplicationWaits(t *testing.T) {
	self, replica, stand := peer.ID("self"), peer.ID("replica"), peer.ID("stand-in")
	all := []peer.ID{self, replica, stand}
	host := hostRanked(t, all, self, replica, stand)
	m := New(testConfig(self, false), Saved{}, t0)
	m.Step(at(0), Joined{Peer: replica})
	m.Step(at(0), Joined{Peer: stand})
	m.Ready()
	if got, want := m.Targets(at(1), host), []Target{{Peer: replica, Wait: true}}; !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	m.Step(at(1), Await{ID: 1, Host: host, Pending: map[peer.ID]uint64{replica: 5}})
	m.Step(at(1.1), Delivered{Peer: replica, Seq: 5})
	if r := ready[Release](m); len(r) != 1 || r[0].ID != 1 || len(r[0].Missed) > 0 {
		t.Fatalf("releases %v, want 1 with nothing missed", r)
	}
	// A delivery that overtakes its Await releases at once.
	m.Step(at(2), Delivered{Peer: replica, Seq: 9})
	m.Step(at(2), Await{ID: 2, Host: host, Pending: map[peer.ID]uint64{replica: 8}})
	if r := ready[Release](m); len(r) != 1 || r[0].ID != 2 {
		t.Fatalf("releases %v, want 2 at once", r)
	}
	m.Step(at(3), Await{ID: 3, Host: host, Pending: map[peer.ID]uint64{replica: 10}})
	m.Step(at(3.6), Tick{})
	c := ready[Copy](m)
	if len(c) != 1 || c[0].ID != 3 || c[0].To != stand {
		t.Fatalf("copies %v, want item 3 to the stand-in", c)
	}
	m.Step(at(3.6), Await{ID: 3, Host: host, Pending: map[peer.ID]uint64{stand: 11}})
	m.Step(at(3.7), Delivered{Peer: stand, Seq: 11})
	if r := ready[Release](m); len(r) != 1 || !slices.Equal(r[0].Missed, []peer.ID{replica}) {
		t.Fatalf("releases %v, want 3, the replica missed", r)
	}
	if got, want := m.Targets(at(4), host), []Target{{Peer: replica, Wait: false}, {Peer: stand, Wait: true}}; !slices.Equal(got, want) {
		t.Fatalf("targets while the replica is suspected: %v, want %v", got, want)
	}
	m.Step(at(5), Delivered{Peer: replica, Seq: 12})
	if got, want := m.Targets(at(5), host), []Target{{Peer: replica, Wait: true}}; !slices.Equal(got, want) {
		t.Fatalf("targets once the replica delivered again: %v, want %v", got, want)
	}
	// An item that lingers in the outbox first (Grace) is waited for that
	// much longer before its holder is suspected.
	m.Step(at(6), Await{ID: 4, Host: host, Pending: map[peer.ID]uint64{replica: 13}, Grace: 300 * time.Millisecond})
	m.Step(at(6.6), Tick{})
	if c := ready[Copy](m); len(c) != 0 {
		t.Fatalf("copies %v within WaitMax and the grace", c)
	}
	m.Step(at(6.81), Tick{})
	if c := ready[Copy](m); len(c) != 1 || c[0].ID != 4 || c[0].To != stand {
		t.Fatalf("copies %v after WaitMax and the grace, want item 4 to the stand-in", c)
	}
	m.Step(at(6.81), Await{ID: 4, Host: host, Pending: map[peer.ID]uint64{stand: 14}})
	m.Step(at(6.9), Delivered{Peer: stand, Seq: 14})
	m.Step(at(7), Delivered{Peer: replica, Seq: 15})
	if r := ready[Release](m); len(r) != 1 || r[0].ID != 4 {
		t.Fatalf("releases %v, want 4", r)
	}
	// A holder that left gets the items without a wait for KeepAway,
	// then its outbox is dropped.
	m.Step(at(10), Left{Peer: replica})
	if got, want := m.Targets(at(11), host), []Target{{Peer: stand, Wait: true}, {Peer: replica, Wait: false}}; !slices.Equal(got, want) {
		t.Fatalf("targets after the replica left: %v, want %v", got, want)
	}
	m.Step(at(41), Tick{})
	if d := ready[DropOutbox](m); len(d) != 1 || d[0].Peer != replica {
		t.Fatalf("drops %v, want the outbox of the replica that left", d)
	}
}

// TestFoundersSurviveRestart: a member met while this node joined may
// still hand it hosts after this node restarts, though it is met again
// only after the new run's first ManifestWait (it was restarting too).
func TestFoundersSurviveRestart(t *testing.T) {
	self, founder, late := peer.ID("self"), peer.ID("founder"), peer.ID("late")
	first := New(testConfig(self, true), Saved{}, t0)
	first.Step(at(1), Joined{Peer: founder})
	saved := Saved{}
	for _, a := range first.Ready() {
		if f, ok := a.(SaveFounder); ok {
			saved.Founders = append(saved.Founders, f.Peer)
		}
	}
	if !slices.Equal(saved.Founders, []peer.ID{founder}) {
		t.Fatalf("founders saved %v, want %v", saved.Founders, founder)
	}
	tests := []struct {
		name  string
		saved Saved
		want  bool
	}{
		{"a founder of the last run hands hosts after a restart", saved, true},
		{"a member met late in a run without saved founders does not", Saved{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(testConfig(self, true), tc.saved, at(100))
			m.Step(at(101), Joined{Peer: late})
			m.Step(at(130), Joined{Peer: founder}) // after ManifestWait
			host := "any.test"
			if got := m.Allowed(at(130), KindHandoff, founder, host); got != tc.want {
				t.Fatalf("handoff from the founder allowed: %v, want %v", got, tc.want)
			}
			for _, a := range m.Ready() {
				if f, ok := a.(SaveFounder); ok && f.Peer == founder {
					t.Fatal("a member met after ManifestWait saved as a founder")
				}
			}
		})
	}
}
