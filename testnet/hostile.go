package testnet

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/node"
	"sou/p2p"
	"sou/testnet/attack"
	"sou/testnet/simweb"
)

// The hostile testnet: `sou testnet run --hostile K` runs K attackers
// (testnet/attack) beside the honest nodes. They join once the honest
// network has formed (past the honest nodes' founding views: a network
// strangers join, not one they found) and attack through the crawl and
// the query phase. The report's hostile section and its checks come from
// what the simulated web and the honest nodes saw:
//
//   - poisoned_pages: pages the attackers forged (each carries the run's
//     token) that an honest node serves: as its cached copy, or as a
//     search result from an honest shard on a host honest nodes own.
//   - coverage, duplicates and rank consistency over the hosts honest
//     nodes own by the final membership (an attacker owns hosts and never
//     crawls them; that is what one member can always do).
//   - phantom_members: members an honest node counts that are neither
//     honest nodes nor attackers' members.
//   - honest_crashes: honest processes that exited without being told to.
//   - honest_rss_peak_mb: each honest node's peak resident memory.

// hostileFoundingGrace is how long after the last honest node started
// the attackers join: past the honest nodes' founding views (manifestWait
// after they met the network), so that no attacker counts as a member
// that owned hosts before them.
const hostileFoundingGrace = 17 * time.Second

// hostileMinRounds is how many rounds the attackers run before the crawl
// may count as finished, so that a small web is crawled under attack too.
const hostileMinRounds = 5

// HostileReport is the report's hostile section.
type HostileReport struct {
	Attackers int `json:"attackers"`
	// AttackersJoined counts the attackers' members the honest nodes see.
	AttackersJoined int `json:"attackers_joined"`
	// Attacks is what each class tried, summed over the attackers, and how
	// often the honest side refused it.
	Attacks map[string]attack.ClassStats `json:"attacks"`
	// ForgedURLs are the pages the attackers forged; PoisonedPages those
	// an honest node serves.
	ForgedURLs    int      `json:"forged_urls"`
	PoisonedPages int      `json:"poisoned_pages"`
	Poisoned      []string `json:"poisoned,omitempty"`
	HonestCrashes int      `json:"honest_crashes"`
	// HonestRSSPeakMB is each honest node's peak resident memory
	// (anonymous plus file-backed), in node order.
	HonestRSSPeakMB []float64 `json:"honest_rss_peak_mb"`
	PhantomMembers  int       `json:"phantom_members"`
	// HonestHosts is how many of the web's hosts honest nodes own at the
	// end; coverage and rank consistency are computed over them.
	HonestHosts int `json:"honest_hosts"`
	// Refused sums what the honest nodes counted as refused.
	Refused HonestRefusals `json:"refused"`
}

// HonestRefusals are the honest nodes' own counts of what they refused.
type HonestRefusals struct {
	NonMemberStreams  uint64 `json:"non_member_streams"`
	Malformed         uint64 `json:"malformed"`
	Throttled         uint64 `json:"throttled"`
	ItemsRefused      int64  `json:"items_refused"`
	MembersRefused    uint64 `json:"members_refused"`
	HeartbeatsIgnored uint64 `json:"heartbeats_ignored"`
	// CandidateDialsFailed counts heard-of origins that were dialled and
	// not there (phantoms); RelayersBanned the peers blacklisted in gossip
	// for relaying them, whose later heartbeats are dropped uncounted.
	CandidateDialsFailed uint64 `json:"candidate_dials_failed"`
	RelayersBanned       uint64 `json:"relayers_banned"`
	ClaimsRefused        uint64 `json:"claims_refused"`
	ClaimsThrottled      uint64 `json:"claims_throttled"`
	URLBatchesBusy       uint64 `json:"url_batches_busy"`
	URLsFiltered         uint64 `json:"urls_filtered"`
	SearchesRefused      uint64 `json:"searches_refused"`
	StreamsRefused       uint64 `json:"streams_refused"`
	StreamsTimedOut      uint64 `json:"streams_timed_out"`
}

// hostileRun is the attackers of one run.
type hostileRun struct {
	cfg     RunConfig
	token   string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	started []*attack.Attacker
	rounds  int
	err     error
}

// startHostile starts cfg.Hostile attackers once the honest network has
// formed, in the background; stop ends them.
func startHostile(ctx context.Context, cfg RunConfig, l *launcher, truth *simweb.Truth, logf func(string, ...any)) *hostileRun {
	ctx, cancel := context.WithCancel(ctx)
	h := &hostileRun{cfg: cfg, token: attack.NewToken(), cancel: cancel}
	var required []string
	for _, p := range truth.Pages {
		if p.Required {
			required = append(required, p.URL)
		}
	}
	honest := l.all()
	targets := func() attack.Targets {
		t := attack.Targets{URLs: required}
		for _, p := range honest {
			if id, err := peer.Decode(p.PeerID); err == nil {
				t.Nodes = append(t.Nodes, attack.Node{ID: id, HTTP: p.HTTP})
			}
		}
		return t
	}
	var last time.Time
	for _, p := range honest {
		if p.StartedAt.After(last) {
			last = p.StartedAt
		}
	}
	h.wg.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(last.Add(hostileFoundingGrace))):
		}
		for i := 0; i < cfg.Hostile; i++ {
			a, err := attack.Start(ctx, attack.Config{
				Network: l.network, Bootstrap: l.bootstrapAddrs(), IP: fmt.Sprintf("%s%d", l.ipPrefix, 200+i),
				Classes: cfg.HostileClasses, Token: h.token, Targets: targets, Log: cfg.Log,
			})
			if err != nil {
				h.mu.Lock()
				h.err = fmt.Errorf("attacker %d: %w", i, err)
				h.mu.Unlock()
				logf("attacker %d did not start: %v", i, err)
				continue
			}
			h.mu.Lock()
			h.started = append(h.started, a)
			h.mu.Unlock()
			logf("attacker %d joined as %s (stranger %s)", i, a.ID(), a.StrangerID())
			h.wg.Go(func() { a.Run(ctx) })
		}
		// Count rounds by time: every attacker runs one per round.
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.mu.Lock()
				h.rounds++
				h.mu.Unlock()
			}
		}
	})
	return h
}

// ready reports whether the attackers have been at it long enough for the
// crawl to count as finished.
func (h *hostileRun) ready() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.started) > 0 && h.rounds >= hostileMinRounds || h.err != nil && len(h.started) == 0
}

// stop ends the attacks and closes the attackers.
func (h *hostileRun) stop() {
	h.cancel()
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.started {
		_ = a.Close()
	}
	h.started = nil
}

func (h *hostileRun) attackers() []*attack.Attacker {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.started)
}

// honestView is who is who at the end of a hostile run.
type honestView struct {
	honest    map[string]bool // honest peer IDs
	attackers map[string]bool // attackers' member IDs
	members   []peer.ID       // node 0's view
}

// ownsHonestly reports whether host's owner in the final view is honest.
func (v *honestView) ownsHonestly(host string) bool {
	return v.honest[p2p.OwnerOf(v.members, host).String()]
}

func (h *hostileRun) view(ctx context.Context, l *launcher) (*honestView, error) {
	v := &honestView{honest: map[string]bool{}, attackers: map[string]bool{}}
	for _, p := range l.all() {
		v.honest[p.PeerID] = true
	}
	for _, a := range h.attackers() {
		v.attackers[a.ID().String()] = true
	}
	live := l.live()
	if len(live) == 0 {
		return nil, fmt.Errorf("no honest node alive")
	}
	peers, err := peersOf(ctx, live[0])
	if err != nil {
		return nil, err
	}
	for _, p := range peers {
		if id, err := peer.Decode(p.ID); err == nil {
			v.members = append(v.members, id)
		}
	}
	return v, nil
}

func peersOf(ctx context.Context, p *nodeProc) ([]node.PeerInfo, error) {
	var out struct {
		Peers []node.PeerInfo `json:"peers"`
	}
	if err := p.getJSON(ctx, "/api/peers", &out); err != nil {
		return nil, fmt.Errorf("peers of node %d: %w", p.Index, err)
	}
	return out.Peers, nil
}

// honestTruth is truth restricted to the hosts honest nodes own.
func honestTruth(truth *simweb.Truth, v *honestView) (*simweb.Truth, int) {
	cp := *truth
	cp.Pages = nil
	cp.Required = 0
	for _, p := range truth.Pages {
		if v.ownsHonestly(p.Host) {
			cp.Pages = append(cp.Pages, p)
			if p.Required {
				cp.Required++
			}
		}
	}
	hosts := 0
	for _, ht := range truth.Hosts {
		if v.ownsHonestly(ht.Host) {
			hosts++
		}
	}
	return &cp, hosts
}

// report builds the hostile section: what the attackers tried, and what
// the honest nodes serve, count and remember.
func (h *hostileRun) report(ctx context.Context, l *launcher, v *honestView, procs map[int]procFigures) *HostileReport {
	hr := &HostileReport{Attackers: h.cfg.Hostile, Attacks: map[string]attack.ClassStats{}}
	forged := map[string]bool{}
	for _, a := range h.attackers() {
		for c, s := range a.Stats() {
			t := hr.Attacks[c]
			t.Tried += s.Tried
			t.Refused += s.Refused
			hr.Attacks[c] = t
		}
		for _, u := range a.Forged() {
			forged[u] = true
		}
	}
	hr.ForgedURLs = len(forged)
	joined := map[string]bool{}
	for _, p := range l.all() {
		hr.HonestCrashes += int(p.crashes.Load())
		f := procs[p.Index]
		hr.HonestRSSPeakMB = append(hr.HonestRSSPeakMB, round3(f.RSSPeakMB))
	}
	for _, p := range l.live() {
		peers, err := peersOf(ctx, p)
		if err != nil {
			continue
		}
		for _, m := range peers {
			switch {
			case v.attackers[m.ID]:
				joined[m.ID] = true
			case !v.honest[m.ID]:
				hr.PhantomMembers++
			}
		}
		if st, err := p.status(ctx); err == nil {
			r := &hr.Refused
			r.NonMemberStreams += st.P2P.NonMemberStreams
			r.Malformed += st.P2P.RejectedMessages
			r.Throttled += st.P2P.ThrottledMessages
			r.ItemsRefused += st.HandoffRefused
			r.MembersRefused += st.P2P.MembersRefused
			r.HeartbeatsIgnored += st.P2P.HeartbeatsIgnored
			r.CandidateDialsFailed += st.P2P.CandidateDialsFailed
			r.RelayersBanned += st.P2P.RelayersBanned
			r.ClaimsRefused += st.P2P.ClaimsRefused
			r.ClaimsThrottled += st.P2P.ClaimsThrottled
			r.URLBatchesBusy += st.P2P.URLBatchesRefused
			r.URLsFiltered += st.P2P.URLsFiltered
			r.SearchesRefused += st.P2P.SearchesRefused
			r.StreamsRefused += st.P2P.StreamsRefused
			r.StreamsTimedOut += st.P2P.StreamsTimedOut
		}
	}
	hr.AttackersJoined = len(joined)
	hr.Poisoned = poisoned(ctx, l, v, forged, h.token)
	hr.PoisonedPages = len(hr.Poisoned)
	return hr
}

// poisoned returns the forged URLs an honest node serves with the token in
// them: its cached copy of the page, or a search result for the token from
// an honest shard on a host honest nodes own.
func poisoned(ctx context.Context, l *launcher, v *honestView, forged map[string]bool, token string) []string {
	bad := map[string]bool{}
	for u := range forged {
		for _, p := range l.live() {
			if body, err := p.getText(ctx, "/api/cache?"+url.Values{"url": {u}}.Encode()); err == nil && strings.Contains(body, token) {
				bad[u] = true
			}
		}
	}
	for _, p := range l.live() {
		var resp struct {
			Results []struct {
				URL, Host, Shard string
			} `json:"results"`
		}
		if err := p.getJSON(ctx, "/api/search?"+url.Values{"q": {token}, "n": {"100"}}.Encode(), &resp); err != nil {
			continue
		}
		for _, r := range resp.Results {
			if v.honest[r.Shard] && v.ownsHonestly(r.Host) {
				bad[r.URL] = true
			}
		}
	}
	out := make([]string, 0, len(bad))
	for u := range bad {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// judgeHostile adds the hostile checks to r's failures.
func (r *Report) judgeHostile(fail func(string)) {
	h := r.Hostile
	if h == nil {
		return
	}
	if h.AttackersJoined == 0 {
		fail("no attacker joined the network: nothing was attacked from inside")
	}
	if h.PoisonedPages > 0 {
		fail(fmt.Sprintf("%d forged pages served by honest nodes", h.PoisonedPages))
	}
	if h.HonestCrashes > 0 {
		fail(fmt.Sprintf("%d honest node crashes", h.HonestCrashes))
	}
	if h.PhantomMembers > 0 {
		fail(fmt.Sprintf("%d phantom members counted by honest nodes", h.PhantomMembers))
	}
}

// getText fetches path and returns its body (at most 4 MB).
func (p *nodeProc) getText(ctx context.Context, path string) (string, error) {
	resp, err := p.get(ctx, path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	return string(b), nil
}

// postSeeds submits seeds to a node in requests of at most 1,000 URLs
// (the API's cap).
func postSeeds(ctx context.Context, p *nodeProc, seeds []string) error {
	for start := 0; start < len(seeds); start += 1000 {
		if err := p.postJSON(ctx, "/api/crawl", map[string]any{"urls": seeds[start:min(start+1000, len(seeds))]}); err != nil {
			return err
		}
	}
	return nil
}

// idle says whether a node has nothing left to do for the crawl. In a
// hostile run what waits in its outboxes for attackers does not count: an
// attacker that floods URLs for its own hosts, which the node must pass on,
// and refuses them as busy can keep those outboxes full for ever.
func idle(st *node.Status, h *hostileRun) bool {
	if h == nil {
		return st.Idle
	}
	if !st.CrawlIdle {
		return false
	}
	attackers := map[string]bool{}
	for _, a := range h.attackers() {
		attackers[a.ID().String()] = true
	}
	for p, depth := range st.P2P.OutboxByPeer {
		if depth > 0 && !attackers[p] {
			return false
		}
	}
	return true
}
