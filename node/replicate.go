package node

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
	"sou/p2p"
)

// replicator pushes every page this node stores to the host's other
// replicas, in batches. A replica indexes the page but does not answer for
// its host until it owns it (the coordinator's host filter), so when the
// owner dies the next-closest member already holds its pages.
//
// The queue is in memory: a page stored just before this node is killed
// may miss its replica. The periodic rebalance does not repair that; the
// replica's takeover re-derives the frontier from the pages it holds, so
// such a page is refetched once by the new owner (counted as a duplicate
// fetch under churn).
type replicator struct {
	mu      sync.Mutex
	pending map[peer.ID][]*index.Document
	kick    chan struct{}
}

const maxPendingReplicas = 20000

func newReplicator() *replicator {
	return &replicator{pending: map[peer.ID][]*index.Document{}, kick: make(chan struct{}, 1)}
}

func (n *Node) replicate(d *index.Document) {
	self := n.net.ID()
	r := n.repl
	r.mu.Lock()
	for _, p := range n.net.Replicas(d.Host) {
		if p == self {
			continue
		}
		q := append(r.pending[p], d)
		if len(q) > maxPendingReplicas {
			q = q[len(q)-maxPendingReplicas:]
		}
		r.pending[p] = q
		if len(q) >= pagesPerMessage {
			select {
			case r.kick <- struct{}{}:
			default:
			}
		}
	}
	r.mu.Unlock()
}

func (n *Node) replicationLoop(ctx context.Context) {
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.repl.kick:
		}
		n.flushReplicas(ctx)
	}
}

func (n *Node) flushReplicas(ctx context.Context) {
	r := n.repl
	r.mu.Lock()
	work := r.pending
	r.pending = map[peer.ID][]*index.Document{}
	r.mu.Unlock()
	for p, docs := range work {
		for len(docs) > 0 && ctx.Err() == nil {
			k := min(len(docs), pagesPerMessage)
			b, err := encodeGob(pagesMsg{Docs: docs[:k]})
			if err == nil {
				err = n.net.Send(ctx, p, topicReplica, b)
			}
			if err != nil {
				// Put the rest back for the next round, unless p left.
				r.mu.Lock()
				if n.isMember(p) {
					r.pending[p] = append(docs, r.pending[p]...)
				}
				r.mu.Unlock()
				break
			}
			docs = docs[k:]
		}
	}
}

func (n *Node) isMember(p peer.ID) bool {
	for _, m := range n.net.Members() {
		if m.ID == p {
			return true
		}
	}
	return false
}

func (n *Node) receiveReplica(ctx context.Context, from peer.ID, payload []byte) error {
	var m pagesMsg
	if err := decodeGob(payload, &m); err != nil {
		return err
	}
	for _, d := range m.Docs {
		if d == nil || d.URL == "" || hostOf(d.URL) != d.Host {
			continue
		}
		if err := n.ix.Put(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// takeOver runs after a member left: for every host this node now owns and
// holds only as a replica, it marks the stored pages as fetched and rebuilds
// the frontier from their links, so the crawl of that host carries on here
// without waiting for the dead node. Links to other hosts are routed again,
// which also recovers what was in the dead node's outbox.
func (n *Node) takeOver(ctx context.Context) {
	hosts, err := n.crawler.Hosts(ctx)
	if err != nil {
		n.errs.add("takeover", err)
		return
	}
	known := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		known[h] = true
	}
	byHost := map[string][]*index.PageRecord{}
	err = n.ix.ForEachPage(ctx, "", func(r *index.PageRecord) error {
		if !known[r.Host] && n.net.IsOwner(r.Host) {
			byHost[r.Host] = append(byHost[r.Host], r)
		}
		return nil
	})
	if err != nil {
		n.errs.add("takeover", err)
		return
	}
	for host, recs := range byHost {
		urls := make([]string, len(recs))
		var links []crawl.Discovered
		for i, r := range recs {
			urls[i] = r.URL
			u, err := url.Parse(r.URL)
			if err != nil {
				continue
			}
			parsed, err := crawl.ParseHTML(r.Raw, r.ContentType, r.Header, u)
			if err != nil || parsed.NoFollow {
				continue
			}
			for _, l := range parsed.Links {
				if !l.NoFollow {
					links = append(links, crawl.Discovered{URL: l.URL, Anchor: l.Anchor, SourceHost: host, Depth: 1})
				}
			}
		}
		if err := n.crawler.MarkFetched(ctx, urls); err != nil {
			n.errs.add("takeover "+host, err)
			continue
		}
		var local []crawl.Discovered
		var remote []p2p.URLRecord
		for _, l := range links {
			if h := hostOf(l.URL); h != "" && n.net.IsOwner(h) {
				local = append(local, l)
			} else {
				remote = append(remote, p2p.URLRecord{URL: l.URL, Anchor: l.Anchor, SourceHost: l.SourceHost, Depth: l.Depth})
			}
		}
		if err := n.crawler.Add(ctx, local); err != nil {
			n.errs.add("takeover "+host, err)
		}
		if len(remote) > 0 {
			if err := n.net.Forward(ctx, remote); err != nil {
				n.errs.add("takeover "+host, err)
			}
		}
		n.log.Info("took over host", "host", host, "pages", len(recs), "links", len(links))
	}
}
