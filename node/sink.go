package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
)

type p2pPeer = peer.ID

// sink is the crawler's view of the node: ownership from p2p, forwarding
// through the p2p outbox, storage into the index.
type sink struct{ n *Node }

func (s *sink) Owns(hostKey string) bool { return s.n.net.IsOwner(hostKey) }

// MayFetch is false while ownership of hostKey is moving to this node (see
// settling), when the host is not ours, and while the disk is low.
func (s *sink) MayFetch(hostKey string) bool {
	n := s.n
	return !n.disk.Low() && n.net.IsOwner(hostKey) && n.ownsAmongRecent(hostKey) && n.settle.mayCrawl(hostKey, time.Now()) && !n.needsTakeover(n.runCtx(), hostKey)
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
// usually the longer ones). Anchor text of links to hosts
// this node owns becomes the anchor field of their targets; links to other
// hosts carry their anchors with the forwarded URL. Same-host anchors count
// too: on documentation sites they are the best description of a page.
//
// Store returns once the host's other live replicas acknowledged the page
// (or the marker of a page not indexed), or after ReplicaWaitMax: group
// commit, see replicator. It runs on the crawler's processing workers,
// which may block (the crawler's Sink contract asks Store to be durable
// when it returns); a cancelled ctx ends the wait with an error, and the
// crawler then processes the page again after a restart (Store is
// idempotent).
func (s *sink) Store(ctx context.Context, p *crawl.Page) error {
	n := s.n
	n.metrics.observeFetch(p)
	if p.Status != http.StatusOK || p.NoIndex || p.DuplicateOf != "" {
		// Not indexed, but fetched: the replicas must know, or a takeover
		// would fetch it again.
		return n.awaitReplicas(ctx, n.replicateFetched(peermsg.Fetched{Host: p.Host, URL: p.URL}))
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
			return n.awaitReplicas(ctx, n.replicateFetched(peermsg.Fetched{Host: p.Host, URL: p.URL}))
		}
	}
	doc := DocumentFromPage(p)
	// Queued (and the sender kicked) before indexing here, so that the
	// delivery to the replicas overlaps the local write. Should that write
	// fail, the crawler calls Store again, and the replicas take the page
	// twice (Put is idempotent).
	wait := n.replicate(doc)
	if len(wait.commits) > 0 {
		n.repl.kickNow()
	}
	if err := n.ix.Put(ctx, doc); err != nil {
		return fmt.Errorf("index %s: %w", p.URL, err)
	}
	anchors := map[string][]string{}
	for _, l := range p.Links {
		if l.Anchor == "" || l.NoFollow {
			continue
		}
		if l.URL == p.URL {
			continue
		}
		if h := hostOf(l.URL); h != "" && n.net.IsOwner(h) {
			anchors[l.URL] = append(anchors[l.URL], l.Anchor)
		}
	}
	if err := n.addAnchors(ctx, anchors); err != nil {
		return err
	}
	// Group commit: the page counts as stored once the replica that would
	// take its host over holds it (see replicator).
	return n.awaitReplicas(ctx, wait)
}

// Fetched tells the host's replicas about a URL settled without a page.
// Sitemaps come through SitemapRead, with what they listed. The crawler
// calls it from its fetch workers and it must not block, so it does not
// wait for the acknowledgement like Store; the marker leaves with the next
// page stored or within replicaFlushEvery (300 ms, well inside the
// testnet's settleBound). It does not kick the sender: nobody waits for
// the marker, and half the requests of a crawl can end without a page
// (redirects, 404s), so a message each would double the messages.
func (s *sink) Fetched(host, url string, sitemap bool) {
	if !sitemap {
		s.n.replicateFetched(peermsg.Fetched{Host: host, URL: url})
	}
}

// SitemapRead tells the host's replicas what one of its sitemaps listed.
func (s *sink) SitemapRead(host, url string, listed, children []string) {
	if len(listed) > peermsg.MaxSitemapListed {
		listed = listed[:peermsg.MaxSitemapListed]
	}
	if len(children) > peermsg.MaxSitemapKids {
		children = children[:peermsg.MaxSitemapKids]
	}
	s.n.replicateSitemap(peermsg.Sitemap{Host: host, URL: url, Listed: listed, Children: children})
}

// DocumentFromPage is what the index stores of a crawled page; the OPIC
// cash the page had gathered is its static rank.
func DocumentFromPage(p *crawl.Page) *index.Document {
	return &index.Document{
		URL: p.URL, Host: p.Host, Title: p.Title, Headings: p.Headings, Body: p.Text, Lang: p.Lang,
		Status: p.Status, FetchedAt: p.FetchedAt, ContentType: p.ContentType, Charset: p.Charset,
		Header: p.Header, Raw: p.Raw, StaticRank: p.Cash, ContentHash: p.ContentHash, SimHash: p.SimHash,
	}
}
