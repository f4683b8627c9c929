package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
)

// Handoff and replication ride on p2p's acknowledged delivery. Payloads
// are peermsg's bounded, versioned codecs; p2p caps their size, and one
// that does not decode is malformed (refused, counted, its sender
// throttled). What decodes is then authorised item by item by who sent it
// (authorised).
const (
	topicHandoffPages = "handoff-pages/1"
	topicHandoffHost  = "handoff-host/1"
	topicReplica      = "replica/1"
	topicManifest     = "handoff-manifest/1"
	pagesPerMessage   = 32
	// bytesPerMessage keeps a batch of pages well under p2p's message cap.
	bytesPerMessage = 2 << 20
)

// sendManifest tells a member that joined which hosts this node is about to
// hand over to it, so that it waits for their crawl state before crawling
// them. It sends nothing when it has nothing to hand over and either
// holds no host or is not one of the joiner's donors (sendsManifest), or
// when this node's view has not settled yet (watchMembers calls again
// once it has); see settling for why.
func (n *Node) sendManifest(ctx context.Context, to peer.ID) {
	hosts, err := n.crawler.Hosts(ctx)
	if err != nil {
		n.errs.add("handoff manifest", err)
		return
	}
	view := n.net.View()
	var moving []string
	for _, h := range hosts {
		if view.Owner(h) == to {
			moving = append(moving, h)
		}
	}
	if len(moving) == 0 && time.Now().Before(n.settle.viewSettledAt()) {
		return
	}
	if !sendsManifest(len(moving), len(hosts) > 0, n.isDonor(view, to)) {
		return
	}
	err = n.net.Send(ctx, to, topicManifest, peermsg.EncodeManifest(peermsg.Manifest{Hosts: moving}))
	if err != nil && ctx.Err() == nil {
		n.log.Warn("handoff manifest", "to", to, "err", err)
	}
}

// isDonor reports whether this node is among joiner's donors to
// manifestSendDepth in view (see settling).
func (n *Node) isDonor(view *p2p.Ring, joiner peer.ID) bool {
	return slices.Contains(view.Donors(joiner, manifestSendDepth), n.net.ID())
}

// sendSettledManifests looks again at the joiners met while this node's
// view was settling: those it is a donor of by the settled view may get
// their manifest now.
func (n *Node) sendSettledManifests(ctx context.Context, joiners []peer.ID) {
	view := n.net.View()
	for _, j := range joiners {
		if view.Has(j) && n.isDonor(view, j) {
			go n.sendManifest(ctx, j)
		}
	}
}

// receiveManifest records the hosts a member is about to hand over to
// this node. Only hosts the sender may hand over count
// (handoffAuthorised), so a member cannot hold back the crawl of hosts
// that are not its to give; and each host is held back at most once
// (settling).
func (n *Node) receiveManifest(_ context.Context, from peer.ID, payload []byte) error {
	m, err := peermsg.DecodeManifest(payload)
	if err != nil {
		return err
	}
	hosts := m.Hosts[:0]
	for _, h := range m.Hosts {
		if n.handoffAuthorised(from, h) {
			hosts = append(hosts, h)
		}
	}
	n.refuse(from, "manifest hosts", len(m.Hosts)-len(hosts))
	n.settle.manifest(from, hosts, time.Now())
	return nil
}

// applyAnchors adds anchor texts from a peer's message to the index.
func (n *Node) applyAnchors(ctx context.Context, anchors map[string][]string) error {
	if len(anchors) == 0 {
		return nil
	}
	if err := n.ix.AddAnchorsBatch(ctx, anchors); err != nil {
		return fmt.Errorf("anchors for %d URLs: %w", len(anchors), err)
	}
	return nil
}

// docBytes estimates a document's size on the wire.
func docBytes(d *index.Document) int {
	n := len(d.URL) + len(d.Title) + len(d.Body) + len(d.Raw) + 256
	for _, h := range d.Headings {
		n += len(h)
	}
	return n
}

// wireDoc returns d with its raw bytes cut to what one message may carry
// (the text and postings travel whole).
func wireDoc(d *index.Document) *index.Document {
	if len(d.Raw) <= peermsg.MaxRawBytes {
		return d
	}
	cp := *d
	cp.Raw = cp.Raw[:peermsg.MaxRawBytes]
	return &cp
}

// handoffState counts pages handed off and received.
type handoffState struct {
	sent     atomic.Int64
	received atomic.Int64
	// refused counts pages, fetch markers and host exports refused because
	// neither this node nor the sender holds their host.
	refused atomic.Int64
	mu      sync.Mutex // one rebalance at a time
	kick    chan struct{}
}

func docFromRecord(r *index.PageRecord) *index.Document {
	d := r.Document
	return &d
}

// rebalanceLoop hands off hosts this node no longer owns: after every
// membership change and every few seconds (which also catches pages that
// were in flight during the last handoff).
func (n *Node) rebalanceLoop(ctx context.Context) {
	runEvery(ctx, 5*time.Second, n.handoff.kick, n.rebalance)
}

// runEvery calls f every period and whenever kick fires, until ctx ends.
func runEvery(ctx context.Context, period time.Duration, kick <-chan struct{}, f func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		f(ctx)
	}
}

func (n *Node) kickRebalance() {
	select {
	case n.handoff.kick <- struct{}{}:
	default:
	}
}

func (n *Node) rebalance(ctx context.Context) {
	n.handoff.mu.Lock()
	defer n.handoff.mu.Unlock()
	hosts, err := n.crawler.Hosts(ctx)
	if err != nil {
		n.errs.add("handoff", err)
		return
	}
	self := n.net.ID()
	for _, h := range hosts {
		if ctx.Err() != nil {
			return
		}
		owner := n.net.Owner(h)
		if owner == self || owner == "" {
			continue
		}
		if err := n.handOff(ctx, h, owner); err != nil {
			n.errs.add("handoff "+h, err)
			n.log.Warn("handoff", "host", h, "to", owner, "err", err)
		}
	}
}

// handOff moves one host to its new owner: stored pages first (the new
// owner re-indexes them), then the crawl state (frontier, URL-seen, host
// state). Local state is dropped only after both were acknowledged; pages
// stay when this node is still one of the host's replicas.
func (n *Node) handOff(ctx context.Context, host string, to peer.ID) error {
	var batch []*index.Document
	anchors := map[string][]string{}
	sent, size := 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		b, err := peermsg.EncodePages(&peermsg.Pages{Docs: batch, Anchors: anchors})
		if err != nil {
			return err
		}
		if err := n.net.Send(ctx, to, topicHandoffPages, b); err != nil {
			return fmt.Errorf("send %d pages: %w", len(batch), err)
		}
		sent += len(batch)
		batch, size = batch[:0], 0
		anchors = map[string][]string{}
		return nil
	}
	var urls []string
	err := n.ix.ForEachPage(ctx, host, func(r *index.PageRecord) error {
		d := wireDoc(docFromRecord(r))
		if len(batch) > 0 && (len(batch) >= pagesPerMessage || size+docBytes(d) > bytesPerMessage) {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, d)
		size += docBytes(d)
		if len(r.Anchors) > 0 {
			anchors[r.URL] = r.Anchors
		}
		urls = append(urls, r.URL)
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	exp, err := n.crawler.ExportHost(ctx, host)
	if err != nil {
		return fmt.Errorf("export crawl state: %w", err)
	}
	for _, part := range splitExport(exp, bytesPerMessage) {
		if err := n.net.Send(ctx, to, topicHandoffHost, peermsg.EncodeHostState(part)); err != nil {
			return fmt.Errorf("send crawl state: %w", err)
		}
	}
	if err := n.crawler.DropHost(ctx, host); err != nil {
		return fmt.Errorf("drop crawl state: %w", err)
	}
	if n.isReplica(host) {
		// Still a replica: keep the pages and remember the host as held
		// only as a replica, so that if the new owner dies this node takes
		// the host over from them instead of fetching them all again (the
		// crawl state it had is gone with DropHost).
		if err := n.noteReplica(host); err != nil {
			return fmt.Errorf("note replica host: %w", err)
		}
	} else {
		for _, u := range urls {
			if err := n.ix.Delete(ctx, u); err != nil {
				return fmt.Errorf("delete handed-off page %s: %w", u, err)
			}
		}
	}
	n.settle.forget(host)
	n.handoff.sent.Add(int64(sent))
	n.coord.Invalidate()
	n.log.Info("handed off host", "host", host, "to", to, "pages", sent)
	return nil
}

func (n *Node) isReplica(host string) bool { return n.holds(n.net.ID(), host) }

// holds reports whether p is, by this node's view, the owner of host or one
// of its replicas.
func (n *Node) holds(p peer.ID, host string) bool {
	for _, r := range n.net.Replicas(host) {
		if r == p {
			return true
		}
	}
	return false
}

// Who may send this node data about a host, by its own view. Nothing is
// taken on the receiver's say alone (that it holds the host): each kind of
// message comes from the one member whose role makes it the source.
//
//   - Replica items (pages, fetch markers, anchors, sitemaps) flow from a
//     host's owner to its replicas: the sender is among the R members
//     closest to the host and closer to it than this node, and this node
//     among the R+1 closest (one more than R, for a view that knows a
//     joiner the sender's does not yet). A replica cannot write to its
//     owner, a member cannot write to hosts it does not hold, and no
//     member can make a node store hosts it does not hold. Answers to a
//     pull this node made are taken from the members it asked (pulls).
//   - Handoffs (pages, crawl state, manifests) flow from a host's previous
//     owner to a member that joined: the sender is a founder of this
//     node's view (met while it joined) and among the R closest to the
//     host of the founders still members, this node excluded; this node is
//     among the R+1 closest. A member that joined after this node never
//     owned a host before it, so it cannot hand it one.
//   - A pull comes from a member among the R closest to the host (its owner
//     after a takeover, or the replica about to become it).

// rank is the position of p among the members of view closest to host
// (0 for the closest), or -1 when p is not among the first k.
func rank(view *p2p.Ring, host string, k int, p peer.ID) int {
	return slices.Index(view.Replicas(host, k), p)
}

// replicaFrom says whether from may send self replica items of host in
// view (self and from among its members), with replication factor r.
func replicaFrom(view *p2p.Ring, self, from peer.ID, host string, r int) bool {
	if host == "" {
		return false
	}
	rf, rs := rank(view, host, r+1, from), rank(view, host, r+1, self)
	return rf >= 0 && rf < r && rs >= 0 && rf < rs
}

// handoffFrom says whether from may hand self host: founder says which
// members of view are founders of self's view.
func handoffFrom(view *p2p.Ring, founder func(peer.ID) bool, self, from peer.ID, host string, r int) bool {
	if host == "" || !view.Has(from) || !founder(from) {
		return false
	}
	prior := view.Only(func(p peer.ID) bool { return p != self && founder(p) })
	return rank(prior, host, r, from) >= 0 && rank(view, host, r+1, self) >= 0
}

// crawlsIn says whether from crawls host in view: it is the owner, or the
// second closest while the closest joined so recently that from may not
// have heard of it yet (newJoiner).
func crawlsIn(view *p2p.Ring, from peer.ID, host string, newJoiner func(peer.ID) bool) bool {
	closest := view.Replicas(host, 2)
	switch {
	case len(closest) > 0 && closest[0] == from:
		return true
	case len(closest) > 1 && closest[1] == from:
		return newJoiner(closest[0])
	}
	return false
}

// crawls is crawlsIn for this node's view; a member that joined within
// the recent grace (two membership timeouts) counts as new.
func (n *Node) crawls(view *p2p.Ring, from peer.ID, host string) bool {
	return crawlsIn(view, from, host, func(p peer.ID) bool { return n.joinedWithin(p, n.recent.grace) })
}

func (n *Node) replicaAuthorised(from peer.ID, host string) bool {
	if !n.net.IsMember(from) {
		return false
	}
	return replicaFrom(n.net.View(), n.net.ID(), from, host, n.net.ReplicationFactor()) || n.pulls.solicited(from, host)
}

func (n *Node) handoffAuthorised(from peer.ID, host string) bool {
	if !n.net.IsMember(from) || !n.settle.founder(from) {
		return false
	}
	return handoffFrom(n.net.View(), n.settle.founder, n.net.ID(), from, host, n.net.ReplicationFactor())
}

func (n *Node) pullAuthorised(from peer.ID, host string) bool {
	return n.net.IsMember(from) && host != "" && rank(n.net.View(), host, n.net.ReplicationFactor(), from) >= 0
}

// refuse counts and logs items refused from a peer.
func (n *Node) refuse(from peer.ID, what string, count int) {
	if count <= 0 {
		return
	}
	n.handoff.refused.Add(int64(count))
	if n.refusalLog.Allow() {
		n.log.Warn("refused items from a peer that does not hold their host", "peer", from, "what", what, "count", count, "refused_so_far", n.handoff.refused.Load())
	}
}

func (n *Node) receiveHandoffPages(ctx context.Context, from peer.ID, payload []byte) error {
	if err := n.intakeOK(); err != nil {
		return err // the sender keeps the pages until a Send succeeds
	}
	m, err := peermsg.DecodePages(payload)
	if err != nil {
		return err
	}
	refused := 0
	for _, d := range m.Docs {
		if hostOf(d.URL) != d.Host {
			return fmt.Errorf("%w: handoff page with inconsistent URL and host", p2p.ErrMalformed)
		}
		if !n.handoffAuthorised(from, d.Host) {
			refused++
			continue
		}
		if err := n.ix.Put(ctx, d); err != nil {
			return fmt.Errorf("index handed-off page: %w", err)
		}
		// The new owner's replicas need the page too: the old owner may
		// not be one of them any more, and this node may die next.
		n.replicate(d)
	}
	for u := range m.Anchors {
		if !n.handoffAuthorised(from, hostOf(u)) {
			delete(m.Anchors, u)
			refused++
		}
	}
	if err := n.addAnchors(ctx, m.Anchors); err != nil {
		return err
	}
	n.handoff.received.Add(int64(len(m.Docs)))
	n.coord.Invalidate()
	if refused > 0 {
		// Not acknowledged: an honest old owner whose view differs from
		// this node's sends again once the views agree, and deletes
		// nothing meanwhile.
		n.refuse(from, "handed-off pages and anchors", refused)
		return fmt.Errorf("%d handed-off items refused: %s does not hold their hosts by this node's view", refused, from)
	}
	return n.syncAcknowledged(ctx, len(m.Docs) > 0 || len(m.Anchors) > 0)
}

func (n *Node) receiveHandoffHost(ctx context.Context, from peer.ID, payload []byte) error {
	if err := n.intakeOK(); err != nil {
		return err // the sender keeps the pages until a Send succeeds
	}
	exp, err := peermsg.DecodeHostState(payload)
	if err != nil {
		return err
	}
	if !n.handoffAuthorised(from, exp.Host) {
		n.refuse(from, "crawl state", 1)
		return fmt.Errorf("crawl state of %s refused: %s does not hold it", exp.Host, from)
	}
	if err := n.crawler.ImportHost(ctx, exp); err != nil {
		return err
	}
	n.settle.settle(exp.Host)
	return n.syncAcknowledged(ctx, true)
}

// splitExport cuts a host's crawl state into parts of about maxBytes of URL
// records each; the first carries the host and robots records. Importing
// the parts one after the other merges them (crawl.ImportHost).
func splitExport(e *crawl.HostExport, maxBytes int) []*crawl.HostExport {
	first := &crawl.HostExport{Host: e.Host, State: e.State, Robots: e.Robots}
	parts := []*crawl.HostExport{first}
	cur, size := first, len(e.State)+len(e.Robots)
	for _, u := range e.URLs {
		if size+len(u) > maxBytes && len(cur.URLs) > 0 {
			cur = &crawl.HostExport{Host: e.Host}
			parts = append(parts, cur)
			size = 0
		}
		cur.URLs = append(cur.URLs, u)
		size += len(u) + 4
	}
	return parts
}
