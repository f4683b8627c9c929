package testnet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sou/node"
)

// whyNotIdle says, for every live node that is not idle, what keeps it
// busy, from its status: the crawler's responses awaiting processing,
// hosts in flight or due soon (and whether the node holds them back),
// pages not yet searchable, and the URL outbox per peer, each peer named
// by its node when it is one of ours. A crawl that does not end is
// diagnosed from this line rather than from node logs.
func whyNotIdle(ctx context.Context, l *launcher, h *hostileRun, now time.Time) string {
	names := map[string]string{}
	for _, p := range l.all() {
		state := "dead"
		if p.alive() {
			state = "live"
		}
		names[p.PeerID] = fmt.Sprintf("node %d, %s", p.Index, state)
	}
	var lines []string
	for _, p := range l.live() {
		st, err := p.status(ctx)
		if err != nil {
			lines = append(lines, fmt.Sprintf("node %d: no status: %v", p.Index, err))
			continue
		}
		if idle(st, h) {
			continue
		}
		lines = append(lines, fmt.Sprintf("node %d: %s", p.Index, busyReasons(st, names, now)))
	}
	if len(lines) == 0 {
		return "every live node idle"
	}
	return strings.Join(lines, "; ")
}

// busyReasons lists what keeps one node from being idle; names maps peer
// IDs to how the run knows them.
func busyReasons(st *node.Status, names map[string]string, now time.Time) string {
	c := st.Crawl
	var why []string
	if !st.CrawlIdle {
		if c.Processing > 0 {
			why = append(why, fmt.Sprintf("%d responses awaiting processing (credits %d of %d)", c.Processing, c.Unsettled, c.UnsettledLimit))
		}
		if c.InFlight > 0 || c.SoonDue > 0 {
			why = append(why, fmt.Sprintf("%d hosts in flight, %d due within the idle horizon (frontier %d URLs, %d parked)", c.InFlight, c.SoonDue, c.Frontier, c.Parked))
		}
		for _, b := range c.Busy {
			var state string
			switch {
			case b.InFlight:
				state = "in flight"
			case b.ReadyAt.After(now):
				state = "due in " + b.ReadyAt.Sub(now).Round(time.Millisecond).String()
			default:
				state = "due since " + now.Sub(b.ReadyAt).Round(time.Millisecond).String()
			}
			if b.Gated {
				state += ", held back by the node"
			}
			why = append(why, fmt.Sprintf("host %s (%d queued): %s", b.Host, b.Queued, state))
		}
		if st.Index.Pending > 0 {
			why = append(why, fmt.Sprintf("%d pages not yet searchable", st.Index.Pending))
		}
		if st.HeldOwned > 0 {
			why = append(why, fmt.Sprintf("%d replica pages of hosts it now owns not yet indexed", st.HeldOwned))
		}
		if len(why) == 0 {
			why = append(why, "crawler not idle (its state moved while it was read)")
		}
		pl := st.Placement
		why = append(why, fmt.Sprintf("placement: %d hosts, %d owned, %d crawlable, %d waiting, %d awaited members, %d pulls, %d queued for handoff%s",
			pl.Hosts, pl.Owned, pl.Crawlable, pl.Waiting, pl.Awaiting, pl.Pulls, pl.HandoffQueue, handingNote(pl.Handing)))
	}
	if st.Outbox > 0 {
		peers := make([]string, 0, len(st.P2P.OutboxByPeer))
		for p := range st.P2P.OutboxByPeer {
			peers = append(peers, p)
		}
		slices.Sort(peers)
		for i, p := range peers {
			name, ok := names[p]
			if !ok {
				name = "not a node of this run"
			}
			peers[i] = fmt.Sprintf("%d to %s (%s)", st.P2P.OutboxByPeer[p], shortPeer(p), name)
		}
		why = append(why, fmt.Sprintf("outbox %d URLs: %s", st.Outbox, strings.Join(peers, ", ")))
	}
	for _, e := range st.Errors[max(0, len(st.Errors)-3):] {
		why = append(why, fmt.Sprintf("recent error at %s in %s: %s", e.At.Format("15:04:05.000"), e.Where, e.Error))
	}
	return strings.Join(why, "; ")
}

func handingNote(host string) string {
	if host == "" {
		return ""
	}
	return ", handing " + host
}

// shortPeer is the tail of a peer ID, enough to tell the run's nodes apart.
func shortPeer(id string) string {
	if len(id) <= 8 {
		return id
	}
	return "…" + id[len(id)-8:]
}
