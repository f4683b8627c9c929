package node

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
)

// Handoff and replication ride on p2p's acknowledged delivery. Payloads are
// gob-encoded structs of crawl and index types; p2p caps their size, and a
// payload that does not decode is refused (and so not acknowledged).
const (
	topicHandoffPages = "handoff-pages/1"
	topicHandoffHost  = "handoff-host/1"
	topicReplica      = "replica/1"
	topicManifest     = "handoff-manifest/1"
	pagesPerMessage   = 32
	// bytesPerMessage keeps a batch of pages well under p2p's message cap.
	bytesPerMessage = 2 << 20
	// maxRawInMessage bounds the raw bytes of one page on the wire; a larger
	// cached copy is cut (its text and postings travel whole).
	maxRawInMessage = 1536 << 10
)

type manifestMsg struct {
	Hosts []string
}

// sendManifest tells a member that joined which hosts this node is about to
// hand over to it, so that it waits for their crawl state before crawling
// them. It sends nothing when it has nothing to hand over and is not one
// of the joiner's XOR neighbours (sendsManifest), or when this node's view
// has not settled yet (watchMembers calls again once it has); see
// settling for why.
func (n *Node) sendManifest(ctx context.Context, to peer.ID) {
	hosts, err := n.crawler.Hosts(ctx)
	if err != nil {
		n.errs.add("handoff manifest", err)
		return
	}
	var moving []string
	for _, h := range hosts {
		if n.net.Owner(h) == to {
			moving = append(moving, h)
		}
	}
	if len(moving) == 0 && time.Now().Before(n.settle.viewSettledAt()) {
		return
	}
	if !sendsManifest(n.net.ID(), to, n.memberIDs(), len(moving)) {
		return
	}
	b, err := encodeGob(manifestMsg{Hosts: moving})
	if err == nil {
		err = n.net.Send(ctx, to, topicManifest, b)
	}
	if err != nil && ctx.Err() == nil {
		n.log.Warn("handoff manifest", "to", to, "err", err)
	}
}

// sendSettledManifests looks again at the joiners met while this node's
// view was settling: those it is a neighbour of by the settled view get
// their manifest now.
func (n *Node) sendSettledManifests(ctx context.Context, joiners []peer.ID) {
	members := n.memberIDs()
	for _, j := range joiners {
		if slices.Contains(members, j) && sendsManifest(n.net.ID(), j, members, 0) {
			go n.sendManifest(ctx, j)
		}
	}
}

// memberIDs is this node's view, itself included.
func (n *Node) memberIDs() []peer.ID {
	members := n.net.Members()
	ids := make([]peer.ID, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	return ids
}

func (n *Node) receiveManifest(_ context.Context, from peer.ID, payload []byte) error {
	var m manifestMsg
	if err := decodeGob(payload, &m); err != nil {
		return err
	}
	if len(m.Hosts) > 1_000_000 {
		return fmt.Errorf("manifest of %d hosts", len(m.Hosts))
	}
	n.settle.manifest(from, m.Hosts, time.Now())
	return nil
}

// maxAnchorURLs bounds the anchor entries of one message.
const maxAnchorURLs = 100_000

// applyAnchors adds anchor texts from a peer's message to the index.
func (n *Node) applyAnchors(ctx context.Context, anchors map[string][]string) error {
	if len(anchors) > maxAnchorURLs {
		return fmt.Errorf("message with anchors for %d URLs", len(anchors))
	}
	for u := range anchors {
		if hostOf(u) == "" {
			delete(anchors, u)
		}
	}
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

// wireDoc returns d with its raw bytes cut to what one message may carry.
func wireDoc(d *index.Document) *index.Document {
	if len(d.Raw) <= maxRawInMessage {
		return d
	}
	cp := *d
	cp.Raw = cp.Raw[:maxRawInMessage]
	return &cp
}

type pagesMsg struct {
	Docs []*index.Document
	// Fetched are URLs the owner settled without a page to store
	// (redirects, errors, unindexed pages): a replica that takes the host
	// over must not fetch them again either.
	Fetched []fetchedMarker
	// Anchors are anchor texts received for URLs of the host (URL ->
	// texts): the anchor field must be the same wherever a page is
	// indexed, or scores would change when a replica takes over.
	Anchors map[string][]string
	// Sitemaps are the sitemaps the owner read, with what they listed: a
	// replica taking the host over neither reads them again nor loses
	// the URLs only they listed.
	Sitemaps []sitemapRecord
}

type fetchedMarker struct {
	Host, URL string
}

// sitemapRecord is a sitemap its owner read: the host's URLs it listed and
// the host's child sitemaps it named.
type sitemapRecord struct {
	Host, URL        string
	Listed, Children []string
}

// maxSitemapListed caps one replicated sitemap (the sitemap protocol's
// limit is 50,000 URLs).
const maxSitemapListed = 50_000

type hostMsg struct {
	Export *crawl.HostExport
}

func encodeGob(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func decodeGob(b []byte, v any) error {
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
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
		b, err := encodeGob(pagesMsg{Docs: batch, Anchors: anchors})
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
	b, err := encodeGob(hostMsg{Export: exp})
	if err != nil {
		return err
	}
	if err := n.net.Send(ctx, to, topicHandoffHost, b); err != nil {
		return fmt.Errorf("send crawl state: %w", err)
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

// mayStore decides whether pages, fetch markers or crawl state of host sent
// by from are taken. A peer may only hand over what it holds or what this
// node holds: an old owner handing a host to a newcomer is, in the
// newcomer's view, the host's replica; an owner replicating its pages holds
// them. A peer that holds neither is claiming a host that is not its own
// and is refused. The check is against this node's view, which may lag the
// sender's by a heartbeat; when only the sender holds the host, the pages
// are stored and the rebalance moves them on to the host's owner.
func (n *Node) mayStore(from peer.ID, host string) bool {
	if n.isReplica(host) || n.holds(from, host) {
		return true
	}
	n.handoff.refused.Add(1)
	return false
}

func (n *Node) receiveHandoffPages(ctx context.Context, from peer.ID, payload []byte) error {
	if err := n.intakeOK(); err != nil {
		return err // the sender keeps the pages until a Send succeeds
	}
	var m pagesMsg
	if err := decodeGob(payload, &m); err != nil {
		return err
	}
	if len(m.Docs) > 4*pagesPerMessage {
		return fmt.Errorf("handoff message with %d pages, at most %d", len(m.Docs), 4*pagesPerMessage)
	}
	for _, d := range m.Docs {
		if d == nil || d.URL == "" || hostOf(d.URL) != d.Host {
			return fmt.Errorf("handoff page with inconsistent URL and host")
		}
		if !n.mayStore(from, d.Host) {
			continue
		}
		if err := n.ix.Put(ctx, d); err != nil {
			return fmt.Errorf("index handed-off page: %w", err)
		}
		// The new owner's replicas need the page too: the old owner may
		// not be one of them any more, and this node may die next.
		n.replicate(d)
	}
	if len(m.Anchors) > maxAnchorURLs {
		return fmt.Errorf("handoff with anchors for %d URLs", len(m.Anchors))
	}
	for u := range m.Anchors {
		if h := hostOf(u); h == "" || !n.mayStore(from, h) {
			delete(m.Anchors, u)
		}
	}
	if err := n.addAnchors(ctx, m.Anchors); err != nil {
		return err
	}
	n.handoff.received.Add(int64(len(m.Docs)))
	n.coord.Invalidate()
	return nil
}

func (n *Node) receiveHandoffHost(ctx context.Context, from peer.ID, payload []byte) error {
	if err := n.intakeOK(); err != nil {
		return err // the sender keeps the pages until a Send succeeds
	}
	var m hostMsg
	if err := decodeGob(payload, &m); err != nil {
		return err
	}
	if m.Export == nil {
		return fmt.Errorf("empty host handoff")
	}
	if !n.mayStore(from, m.Export.Host) {
		return fmt.Errorf("host handoff of %s from %s, which holds neither it nor this node", m.Export.Host, from)
	}
	if err := n.crawler.ImportHost(ctx, m.Export); err != nil {
		return err
	}
	n.settle.settle(m.Export.Host)
	return nil
}
