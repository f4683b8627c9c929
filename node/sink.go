package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sou/crawl"
	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
	"sou/placement"
)

// sink is the crawler's view of the node: ownership from p2p, the gate
// and replication from placement, forwarding through p2p's outbox,
// storage into the index.
type sink struct{ n *Node }

func (s *sink) Owns(hostKey string) bool { return s.n.net.IsOwner(hostKey) }

// MayFetch is placement's MayCrawl (owned, adopted, not held back by a
// handoff or a member that may still be alive), and false while the disk
// is low.
func (s *sink) MayFetch(hostKey string) bool {
	n := s.n
	if n.disk.Low() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ask(ctx, n.place, false, func(m *placement.Machine) bool { return m.MayCrawl(time.Now(), hostKey) })
}

func (s *sink) Forward(ctx context.Context, links []crawl.Discovered) error {
	recs := make([]p2p.URLRecord, len(links))
	for i, l := range links {
		recs[i] = p2p.URLRecord{URL: l.URL, Anchor: l.Anchor, SourceHost: l.SourceHost, Cash: l.Cash, Depth: l.Depth}
	}
	if err := s.n.net.Forward(ctx, recs); err != nil {
		return fmt.Errorf("forward %d links: %w", len(links), err)
	}
	s.n.metrics.forwarded.Add(float64(len(links)))
	return nil
}

// Store indexes a fetched page unless it duplicates one already claimed,
// here (the crawler's content-seen set) or anywhere in the network (the
// fingerprint's owner keeps the shortest URL claimed, so that the copy
// kept is the same whichever copy was crawled first: a mirror's URLs are
// usually the longer ones). Anchor text of links to hosts this node owns
// becomes the anchor field of their targets; links to other hosts carry
// their anchors with the forwarded URL. Same-host anchors count too: on
// documentation sites they are the best description of a page.
//
// Store returns once the page (or the marker of a page not indexed) is
// stored here and in the replica outboxes, and, unless a slot for a
// detached wait was free (storeItem), once the replicas placement waits
// for hold it, or after its WaitMax: group commit. It runs on the
// crawler's processing workers, which may block (the crawler's Sink
// contract asks Store to be durable when it returns); a cancelled ctx
// ends a wait with an error, and the crawler then processes the page
// again after a restart (Store is idempotent).
func (s *sink) Store(ctx context.Context, p *crawl.Page) error {
	n := s.n
	n.metrics.observeFetch(p)
	if p.Status != http.StatusOK || p.NoIndex || p.DuplicateOf != "" {
		// Not indexed, but fetched: the replicas must know, or a takeover
		// would fetch it again.
		return s.storeUnindexed(ctx, p)
	}
	if len(n.net.Members()) > 1 {
		winner, err := n.net.Claim(ctx, p.ContentHash[:], p.URL)
		var refused *p2p.RemoteError
		switch {
		case errors.As(err, &refused):
			// The registry's view of who holds the host differs from ours
			// (a view changing under churn): index the page without the
			// network-wide duplicate check rather than retry forever; the
			// coordinator still collapses duplicates at query time.
			n.log.Debug("content claim refused; indexing without it", "url", p.URL, "err", err)
			winner = p.URL
		case err != nil:
			return fmt.Errorf("claim content fingerprint of %s: %w", p.URL, err)
		}
		if winner != p.URL {
			return s.storeUnindexed(ctx, p)
		}
	}
	doc := DocumentFromPage(p)
	return n.place.storeItem(ctx, p.Host, [][]byte{record(recPage, p.URL)}, func() error {
		if err := n.ix.Put(ctx, doc); err != nil {
			return fmt.Errorf("index %s: %w", p.URL, err)
		}
		if err := n.data.keep(nil, nil, nil, []peermsg.Fetched{{Host: p.Host, URL: p.URL}}); err != nil {
			return err
		}
		anchors := map[string][]string{}
		for _, l := range p.Links {
			if l.Anchor == "" || l.NoFollow || l.URL == p.URL {
				continue
			}
			if h := crawl.HostKeyOf(l.URL); h != "" && n.net.IsOwner(h) {
				anchors[l.URL] = append(anchors[l.URL], l.Anchor)
			}
		}
		return n.inbound.addAnchors(ctx, anchors)
	}, true)
}

// storeUnindexed keeps a fetched page that is not indexed here as a fetch
// marker. Its links to this node's hosts are queued here by the crawler,
// and a takeover, which finds links in the pages it holds, would not see
// them: they are kept as queued URLs (replicated) first.
func (s *sink) storeUnindexed(ctx context.Context, p *crawl.Page) error {
	var owned []string
	links := p.Links
	if s.n.crawler.BeyondDepth(p.Depth + 1) {
		links = nil
	}
	for _, l := range links {
		if l.NoFollow || l.Base != "" {
			continue
		}
		if h := crawl.HostKeyOf(l.URL); h != "" && s.n.net.IsOwner(h) {
			owned = append(owned, l.URL)
		}
	}
	if err := s.n.inbound.keepQueued(ctx, owned); err != nil {
		return err
	}
	return s.storeMarker(ctx, p.Host, p.URL)
}

// Queue keeps the links to this node's hosts of a URL settled without a
// page (a redirect's target, the links a script names) as queued URLs,
// replicated, before the crawler queues them: a takeover finds a page's
// links in the page, and these in no page. Script entries (links with a
// base) are left out: a takeover finds them again in the pages that
// include them.
func (s *sink) Queue(ctx context.Context, _, _ string, links []crawl.Discovered) error {
	var urls []string
	for _, l := range links {
		if l.Base == "" && !s.n.crawler.BeyondDepth(l.Depth) {
			urls = append(urls, l.URL)
		}
	}
	return s.n.inbound.keepQueued(ctx, urls)
}

// storeMarker keeps a fetch marker for a URL settled without a page and
// replicates it as Store does a page.
func (s *sink) storeMarker(ctx context.Context, host, u string) error {
	n := s.n
	marker := []peermsg.Fetched{{Host: host, URL: u}}
	return n.place.storeItem(ctx, host, [][]byte{record(recMarker, u)}, func() error {
		return n.data.keep(marker, nil, nil, marker)
	}, true)
}

// Fetched tells the host's replicas about a URL settled without a page.
// Sitemaps come through SitemapRead, with what they listed. The crawler
// calls it from its fetch workers and it must not block, so it does not
// wait like Store: the marker is kept and replicated within
// ReplicaLinger, with what else was settled meanwhile.
func (s *sink) Fetched(host, url string, sitemap bool) {
	if sitemap {
		return
	}
	b := &s.n.place.items
	b.mu.Lock()
	if len(b.markers) < maxBufferedItems {
		b.markers = append(b.markers, peermsg.Fetched{Host: host, URL: url})
	}
	b.mu.Unlock()
}

// SitemapRead tells the host's replicas what one of its sitemaps listed.
func (s *sink) SitemapRead(host, url string, listed, children []string) {
	if len(listed) > peermsg.MaxSitemapListed {
		listed = listed[:peermsg.MaxSitemapListed]
	}
	if len(children) > peermsg.MaxSitemapKids {
		children = children[:peermsg.MaxSitemapKids]
	}
	b := &s.n.place.items
	b.mu.Lock()
	if len(b.maps) < maxBufferedItems {
		b.maps = append(b.maps, peermsg.Sitemap{Host: host, URL: url, Listed: listed, Children: children})
	}
	b.mu.Unlock()
}

// DocumentFromPage is what the index stores of a crawled page; the OPIC
// cash the page had gathered is its static rank.
func DocumentFromPage(p *crawl.Page) *index.Document {
	return &index.Document{
		URL: p.URL, Host: p.Host, Title: p.Title, Headings: p.Headings, Body: p.Text, Lang: p.Lang,
		Status: p.Status, FetchedAt: p.FetchedAt, ContentType: p.ContentType, Charset: p.Charset,
		Header: p.Header, Raw: p.Raw, RawS2: p.RawS2, StaticRank: p.Cash, ContentHash: p.ContentHash, SimHash: p.SimHash,
	}
}
