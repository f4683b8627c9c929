package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"

	"sou/crawl"
	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
	"sou/placement"
)

// peerData takes what members send about hosts: URL records, replica
// items, handoffs, manifests, hints and pulls. Every payload is decoded
// by peermsg's bounded codecs (one that does not decode is malformed:
// refused, counted, its sender throttled), then authorised item by item
// by who sent it (placement's Allowed, asked on the placer's loop), then
// stored. What is refused is counted (Status.HandoffRefused) and logged
// at a bounded rate.
type peerData struct {
	place   *placer
	data    *hostData
	net     messenger
	ix      *index.Index
	crawler *crawl.Crawler
	// intake is the disk guard's door; acked syncs what a message stored
	// before it is acknowledged; changed says the index changed (the
	// search cache goes).
	intake  func() error
	acked   func(ctx context.Context, wrote bool) error
	changed func()
	seeds   seedBudget
}

// register installs the handlers on p2p.
func (d *peerData) register(net *p2p.Node) {
	net.SetURLHandler(d.receiveURLs)
	net.SetURLFilter(d.urlsFrom)
	net.SetDeliverHandler(topicHandoffPages, d.receiveHandoffPages)
	net.SetDeliverHandler(topicHandoffHost, d.receiveHandoffHost)
	net.SetDeliverHandler(topicReplica, d.receiveReplica)
	net.SetDeliverHandler(topicReplicaPull, d.receivePull)
	net.SetDeliverHandler(topicManifest, d.receiveManifest)
	net.SetDeliverHandler(topicHint, d.receiveHint)
}

// allowed asks placement which of hosts from may send this node a
// message of kind about.
func (d *peerData) allowed(ctx context.Context, kind placement.Kind, from peer.ID, hosts map[string]bool) (map[string]bool, error) {
	ok := make(map[string]bool, len(hosts))
	err := d.place.do(ctx, func() {
		now := time.Now()
		for h := range hosts {
			ok[h] = d.place.m.Allowed(now, kind, from, h)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("authorise: %w", err)
	}
	return ok, nil
}

// stored steps ReplicaStored for hosts (their items are stored here).
func (d *peerData) stored(ctx context.Context, hosts map[string]bool) error {
	return d.place.do(ctx, func() {
		for _, h := range sortedHosts(hosts) {
			d.place.step(placement.ReplicaStored{Host: h})
		}
	})
}

// receiveURLs takes a batch forwarded by a member: p2p has re-routed what
// this node does not own, and checked each record where it first arrived
// (urlsFrom), so everything here is this node's. The URLs are queued,
// kept under "n:u/" and replicated, so that a takeover queues them again
// should this node die before fetching them.
func (d *peerData) receiveURLs(ctx context.Context, _ peer.ID, recs []p2p.URLRecord) error {
	if err := d.intake(); err != nil {
		return err // the sender keeps the batch in its outbox
	}
	ds := make([]crawl.Discovered, 0, len(recs))
	anchors := map[string][]string{}
	urls := make([]string, 0, len(recs))
	for _, r := range recs {
		ds = append(ds, crawl.Discovered{URL: r.URL, Anchor: r.Anchor, SourceHost: r.SourceHost, Cash: r.Cash, Depth: r.Depth})
		if r.Anchor != "" && r.SourceHost != "" {
			anchors[r.URL] = append(anchors[r.URL], r.Anchor)
		}
		if !d.crawler.BeyondDepth(r.Depth) {
			urls = append(urls, r.URL)
		}
	}
	if err := d.crawler.Add(ctx, ds); err != nil {
		return err
	}
	if err := d.keepQueued(ctx, urls); err != nil {
		return err
	}
	if err := d.addAnchors(ctx, anchors); err != nil {
		return err
	}
	return d.acked(ctx, len(recs) > 0)
}

// keepQueued keeps URLs queued here under "n:u/" and replicates them, so
// that a takeover queues them again should this node die before fetching
// them. Callers leave out the URLs past the crawler's depth bound: it
// refuses them, and a takeover, which does not know their depth, would
// queue them again and carry a trap on where this node stopped it. It
// returns once the replicas placement waits for hold them (as Store does
// for a page): the sender of a URL forgets it once this node acknowledges
// it, and a URL known only here is lost with this node. A URL it kept
// before is left out (keptQueued): a page not indexed keeps its links,
// and a mirror's copies link to the navigation kept already.
func (d *peerData) keepQueued(ctx context.Context, urls []string) error {
	urls, hashes, gen := d.data.kept.fresh(urls)
	var queued []peermsg.Fetched
	byHost := map[string][][]byte{}
	for _, u := range urls {
		if h := crawl.HostKeyOf(u); h != "" {
			queued = append(queued, peermsg.Fetched{Host: h, URL: u})
			byHost[h] = append(byHost[h], record(recQueued, u))
		}
	}
	if len(queued) == 0 {
		return nil
	}
	if err := d.data.keep(nil, nil, queued, nil); err != nil {
		return err
	}
	if err := d.place.replicateWaiting(ctx, byHost); err != nil {
		return err
	}
	d.data.kept.mark(hashes, gen)
	return nil
}

// addAnchors indexes anchor texts (URL -> texts) and replicates them, so
// the anchor field is the same wherever the page is indexed.
func (d *peerData) addAnchors(ctx context.Context, byURL map[string][]string) error {
	if len(byURL) == 0 {
		return nil
	}
	if err := d.ix.AddAnchorsBatch(ctx, byURL); err != nil {
		return fmt.Errorf("anchors for %d URLs: %w", len(byURL), err)
	}
	byHost := anchorsByHost(byURL)
	return d.place.replicate(ctx, slices.Collect(maps.Keys(byHost)), func(h string) ([][]byte, error) {
		rec, err := anchorRecord(byHost[h])
		return [][]byte{rec}, err
	})
}

// urlsFrom is the URL filter (p2p.SetURLFilter): which records of a batch
// a member may send. A link it found itself (Hops 0) must come from a page
// of a host it crawls (placement.KindLink). A record without a source
// host is a seed a user submitted at the sender, and seeds are budgeted
// per sender (seedBudget). A record passed on by a member on the way
// (Hops > 0) must come from a member among the R+1 closest to its host
// (placement.KindRelay). Each host is judged once per batch.
func (d *peerData) urlsFrom(from peer.ID, recs []p2p.URLRecord) []bool {
	keep := make([]bool, len(recs))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = d.place.do(ctx, func() { // refused all when the loop does not answer
		now := time.Now()
		crawled, near := map[string]bool{}, map[string]bool{}
		for i, rec := range recs {
			switch {
			case rec.Hops > 0:
				h := crawl.HostKeyOf(rec.URL)
				ok, seen := near[h]
				if !seen {
					ok = d.place.m.Allowed(now, placement.KindRelay, from, h)
					near[h] = ok
				}
				keep[i] = ok
			case rec.SourceHost == "":
				keep[i] = d.seeds.allow(from)
			default:
				ok, seen := crawled[rec.SourceHost]
				if !seen {
					ok = d.place.m.Allowed(now, placement.KindLink, from, rec.SourceHost)
					crawled[rec.SourceHost] = ok
				}
				keep[i] = ok
			}
		}
	})
	return keep
}

// receiveReplica stores what a holder of a host sends its other holders,
// or what a member asked in a pull answers. Items the sender may not
// send are dropped and counted; the rest is acknowledged. Markers and
// sitemaps are kept even for a host this node believes it owns: its view
// may lag the sender's, and a marker dropped here is a refetch at the
// next takeover.
func (d *peerData) receiveReplica(ctx context.Context, from peer.ID, payload []byte) error {
	if err := d.intake(); err != nil {
		return err
	}
	m, err := peermsg.DecodePages(payload)
	if err != nil {
		return err
	}
	hosts := map[string]bool{}
	for _, doc := range m.Docs {
		hosts[doc.Host] = true
	}
	// A stored page is checked once, here, and its URL and host read;
	// one that fails is malformed.
	checked := make([]index.CheckedPage, len(m.Stored))
	for i, p := range m.Stored {
		if checked[i], err = d.ix.CheckStored(p); err != nil {
			return fmt.Errorf("%w: %v", p2p.ErrMalformed, err)
		}
		hosts[checked[i].Summary().Host] = true
	}
	for _, f := range append(m.Fetched, m.Queued...) {
		hosts[f.Host] = true
	}
	for _, s := range m.Sitemaps {
		hosts[s.Host] = true
	}
	for u := range m.Anchors {
		hosts[crawl.HostKeyOf(u)] = true
	}
	ok, err := d.allowed(ctx, placement.KindReplica, from, hosts)
	if err != nil {
		return err
	}
	refused := 0
	defer func() { d.place.refuse(from, "replica items", refused) }()
	take := func(host, u string) bool {
		if host == "" || crawl.HostKeyOf(u) != host || !ok[host] {
			refused++
			return false
		}
		return true
	}
	// Pages of hosts this node owns (a takeover's pull) are indexed; the
	// others are held, unindexed, until this node owns their host
	// (index.HoldStoredBatch and HoldBatch, indexOwned).
	var own, held pagesWithForms
	var settled, markers, queued []peermsg.Fetched
	var maps []peermsg.Sitemap
	for i, doc := range m.Docs {
		if take(doc.Host, doc.URL) {
			var form []byte
			if i < len(m.Forms) {
				form = m.Forms[i]
			}
			if d.net.IsOwner(doc.Host) {
				own.add(doc, form)
			} else {
				held.add(doc, form)
			}
			settled = append(settled, peermsg.Fetched{Host: doc.Host, URL: doc.URL})
		}
	}
	var heldStored []index.CheckedPage
	for i, p := range m.Stored {
		host, u := checked[i].Summary().Host, checked[i].Summary().URL
		if !take(host, u) {
			continue
		}
		settled = append(settled, peermsg.Fetched{Host: host, URL: u})
		if !d.net.IsOwner(host) {
			heldStored = append(heldStored, checked[i])
			continue
		}
		doc, err := d.ix.Decode(checked[i])
		if err != nil {
			return fmt.Errorf("%w: %v", p2p.ErrMalformed, err)
		}
		own.add(doc, p.Form)
	}
	for _, f := range m.Fetched {
		if take(f.Host, f.URL) {
			markers = append(markers, f)
		}
	}
	for _, f := range m.Queued {
		if take(f.Host, f.URL) {
			queued = append(queued, f)
		}
	}
	for _, s := range m.Sitemaps {
		if take(s.Host, s.URL) {
			maps = append(maps, s)
		}
	}
	for u := range m.Anchors {
		if !take(crawl.HostKeyOf(u), u) {
			delete(m.Anchors, u)
		}
	}
	// The sender's Store may wait for this answer (group commit). The
	// owner's analysed forms are trusted as its pages' text is: it was
	// authorised for their hosts just above.
	if err := d.ix.PutAnalysedBatch(ctx, own.docs, own.forms); err != nil {
		return fmt.Errorf("replica pages: %w", err)
	}
	if err := d.ix.HoldBatch(ctx, held.docs, held.forms); err != nil {
		return fmt.Errorf("replica pages: %w", err)
	}
	if err := d.ix.HoldStoredBatch(ctx, heldStored); err != nil {
		return fmt.Errorf("replica pages: %w", err)
	}
	if err := d.data.keep(markers, maps, queued, append(settled, markers...)); err != nil {
		return err
	}
	if len(m.Anchors) > 0 {
		if err := d.ix.AddAnchorsBatch(ctx, m.Anchors); err != nil {
			return fmt.Errorf("anchors for %d URLs: %w", len(m.Anchors), err)
		}
	}
	for h, allowed := range ok {
		if !allowed {
			delete(ok, h)
		}
	}
	if err := d.stored(ctx, ok); err != nil {
		return err
	}
	return d.acked(ctx, len(settled)+len(markers)+len(maps)+len(queued) > 0)
}

// pagesWithForms is pages with their analysed forms (nil: none).
type pagesWithForms struct {
	docs  []*index.Document
	forms [][]byte
}

func (p *pagesWithForms) add(d *index.Document, form []byte) {
	p.docs = append(p.docs, d)
	p.forms = append(p.forms, form)
}

// receiveHandoffPages takes the pages (and the URLs queued) of hosts a
// member hands this node. They are replicated at once: the old owner may
// not be a holder any more, and this node may die next. Items the sender
// may not hand over are refused (ErrRefused): an honest old owner whose
// view differs sends again once the views agree, and deletes nothing
// meanwhile.
func (d *peerData) receiveHandoffPages(ctx context.Context, from peer.ID, payload []byte) error {
	if err := d.intake(); err != nil {
		return err // the sender keeps the pages until a Send succeeds
	}
	m, err := peermsg.DecodePages(payload)
	if err != nil {
		return err
	}
	hosts := map[string]bool{}
	for _, doc := range m.Docs {
		if crawl.HostKeyOf(doc.URL) != doc.Host {
			return fmt.Errorf("%w: handoff page with inconsistent URL and host", p2p.ErrMalformed)
		}
		hosts[doc.Host] = true
	}
	for _, q := range m.Queued {
		hosts[q.Host] = true
	}
	for u := range m.Anchors {
		hosts[crawl.HostKeyOf(u)] = true
	}
	ok, err := d.allowed(ctx, placement.KindHandoff, from, hosts)
	if err != nil {
		return err
	}
	refused, took := 0, 0
	byHost := map[string][][]byte{}
	var queued []peermsg.Fetched
	for _, doc := range m.Docs {
		if !ok[doc.Host] {
			refused++
			continue
		}
		if err := d.ix.Put(ctx, doc); err != nil {
			return fmt.Errorf("index handed-off page: %w", err)
		}
		took++
		byHost[doc.Host] = append(byHost[doc.Host], record(recPage, doc.URL))
	}
	for _, q := range m.Queued {
		if !ok[q.Host] || crawl.HostKeyOf(q.URL) != q.Host {
			refused++
			continue
		}
		queued = append(queued, q)
		byHost[q.Host] = append(byHost[q.Host], record(recQueued, q.URL))
	}
	for u := range m.Anchors {
		if !ok[crawl.HostKeyOf(u)] {
			delete(m.Anchors, u)
			refused++
		}
	}
	if err := d.data.keep(nil, nil, queued, nil); err != nil {
		return err
	}
	if err := d.place.replicateWaiting(ctx, byHost); err != nil {
		return err
	}
	if err := d.addAnchors(ctx, m.Anchors); err != nil {
		return err
	}
	d.place.received.Add(int64(took))
	d.changed()
	if refused > 0 {
		d.place.refuse(from, "handed-off pages and anchors", refused)
		return fmt.Errorf("%d handed-off items: %w: %s does not hold their hosts by this node's view", refused, p2p.ErrRefused, from)
	}
	return d.acked(ctx, len(m.Docs) > 0 || len(m.Anchors) > 0 || len(queued) > 0)
}

// receiveHandoffHost imports the crawl state of a host a member hands
// this node: the host may be crawled here from now on.
func (d *peerData) receiveHandoffHost(ctx context.Context, from peer.ID, payload []byte) error {
	if err := d.intake(); err != nil {
		return err // the sender keeps the state until a Send succeeds
	}
	exp, err := peermsg.DecodeHostState(payload)
	if err != nil {
		return err
	}
	ok, err := d.allowed(ctx, placement.KindHandoff, from, map[string]bool{exp.Host: true})
	if err != nil {
		return err
	}
	if !ok[exp.Host] {
		d.place.refuse(from, "crawl state", 1)
		return fmt.Errorf("crawl state of %s: %w: %s does not hold it", exp.Host, p2p.ErrRefused, from)
	}
	if err := d.crawler.ImportHost(ctx, exp); err != nil {
		return err
	}
	if err := d.place.stepIn(ctx, placement.HandedIn{Host: exp.Host, From: from}); err != nil {
		return err
	}
	return d.acked(ctx, true)
}

// receiveManifest records the hosts a member is about to hand over to
// this node. Only hosts the sender may hand over count, so a member
// cannot hold back the crawl of hosts that are not its to give; and each
// host is held back at most once (placement's settling).
func (d *peerData) receiveManifest(ctx context.Context, from peer.ID, payload []byte) error {
	m, err := peermsg.DecodeManifest(payload)
	if err != nil {
		return err
	}
	return d.hostsFrom(ctx, from, placement.KindHandoff, "manifest hosts", m.Hosts, func(hosts []string) placement.Event {
		return placement.Manifest{From: from, Hosts: hosts}
	})
}

// receiveHint takes a holder's word that this node now holds hosts too:
// placement pulls them from it.
func (d *peerData) receiveHint(ctx context.Context, from peer.ID, payload []byte) error {
	m, err := peermsg.DecodeManifest(payload)
	if err != nil {
		return err
	}
	return d.hostsFrom(ctx, from, placement.KindReplica, "hinted hosts", m.Hosts, func(hosts []string) placement.Event {
		return placement.Hinted{From: from, Hosts: hosts}
	})
}

// hostsFrom steps the event of the hosts of a list from may send, and
// counts the others as refused.
func (d *peerData) hostsFrom(ctx context.Context, from peer.ID, kind placement.Kind, what string, list []string, ev func([]string) placement.Event) error {
	set := map[string]bool{}
	for _, h := range list {
		set[h] = true
	}
	ok, err := d.allowed(ctx, kind, from, set)
	if err != nil {
		return err
	}
	var hosts []string
	for _, h := range list {
		if ok[h] {
			hosts = append(hosts, h)
		}
	}
	d.place.refuse(from, what, len(list)-len(hosts))
	return d.place.stepIn(ctx, ev(hosts))
}

// receivePull answers a pull: what this node holds of the host and the
// puller does not goes to it as replica messages, stored there before
// this returns. Only a member that holds the host by this node's view
// may pull it.
func (d *peerData) receivePull(ctx context.Context, from peer.ID, payload []byte) error {
	m, err := peermsg.DecodePull(payload)
	if err != nil {
		return err
	}
	ok, err := d.allowed(ctx, placement.KindPull, from, map[string]bool{m.Host: true})
	if err != nil {
		return err
	}
	if !ok[m.Host] {
		d.place.refuse(from, "pull", 1)
		return fmt.Errorf("pull of %s: %w: the peer does not hold it", m.Host, p2p.ErrRefused)
	}
	sent, err := d.data.answerPull(ctx, d.net, from, m)
	if err != nil {
		return fmt.Errorf("answer pull of %s: %w", m.Host, err)
	}
	if sent > 0 {
		d.place.log.Info("sent a member what it lacked of a host", "host", m.Host, "peer", from, "items", sent)
	}
	return nil
}

// seedBudget bounds the seeds each member may submit through this node:
// seedsPerSecond, saved up to seedBurst (a user's batch of seeds).
type seedBudget struct {
	mu  sync.Mutex
	per map[peer.ID]*rate.Limiter
}

const (
	seedsPerSecond = 10
	seedBurst      = 10_000
)

func (b *seedBudget) allow(p peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.per == nil {
		b.per = map[peer.ID]*rate.Limiter{}
	}
	l := b.per[p]
	if l == nil {
		l = rate.NewLimiter(seedsPerSecond, seedBurst)
		b.per[p] = l
	}
	return l.Allow()
}

// forget drops p's budget (it left).
func (b *seedBudget) forget(p peer.ID) {
	b.mu.Lock()
	delete(b.per, p)
	b.mu.Unlock()
}

func sortedHosts(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for h := range set {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}
