package node

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"

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
	markers map[peer.ID][]fetchedMarker
	maps    map[peer.ID][]sitemapRecord
	anchors map[peer.ID]map[string][]string
	kick    chan struct{}
}

const maxPendingReplicas = 20000

func newReplicator() *replicator {
	return &replicator{pending: map[peer.ID][]*index.Document{}, markers: map[peer.ID][]fetchedMarker{}, maps: map[peer.ID][]sitemapRecord{}, anchors: map[peer.ID]map[string][]string{}, kick: make(chan struct{}, 1)}
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

// replicateFetched queues a marker for a URL settled without a stored page.
func (n *Node) replicateFetched(m fetchedMarker) {
	self := n.net.ID()
	r := n.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range n.net.Replicas(m.Host) {
		if p != self && len(r.markers[p]) < maxPendingReplicas {
			r.markers[p] = append(r.markers[p], m)
		}
	}
}

// replicateSitemap queues what a sitemap of one of this node's hosts listed.
func (n *Node) replicateSitemap(s sitemapRecord) {
	self := n.net.ID()
	r := n.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range n.net.Replicas(s.Host) {
		if p != self && len(r.maps[p]) < maxPendingReplicas {
			r.maps[p] = append(r.maps[p], s)
		}
	}
}

// addAnchors indexes anchor texts (URL -> texts, one page's links or one
// batch's) and queues them for each URL's other replicas, so the anchor
// field is the same wherever the page is indexed.
func (n *Node) addAnchors(ctx context.Context, byURL map[string][]string) error {
	if len(byURL) == 0 {
		return nil
	}
	if err := n.ix.AddAnchorsBatch(ctx, byURL); err != nil {
		return fmt.Errorf("anchors for %d URLs: %w", len(byURL), err)
	}
	self := n.net.ID()
	r := n.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	for u, texts := range byURL {
		for _, p := range n.net.Replicas(hostOf(u)) {
			if p == self {
				continue
			}
			m := r.anchors[p]
			if m == nil {
				m = map[string][]string{}
				r.anchors[p] = m
			}
			if len(m) < maxPendingReplicas {
				m[u] = append(m[u], texts...)
			}
		}
	}
	return nil
}

func (n *Node) replicationLoop(ctx context.Context) {
	runEvery(ctx, 300*time.Millisecond, n.repl.kick, n.flushReplicas)
}

func (n *Node) flushReplicas(ctx context.Context) {
	r := n.repl
	r.mu.Lock()
	work, markers, maps, anchors := r.pending, r.markers, r.maps, r.anchors
	r.pending, r.markers, r.maps, r.anchors = map[peer.ID][]*index.Document{}, map[peer.ID][]fetchedMarker{}, map[peer.ID][]sitemapRecord{}, map[peer.ID]map[string][]string{}
	r.mu.Unlock()
	// Pages go first: anchors for a page the replica does not hold yet are
	// kept by the index until the page arrives, so the order is not
	// essential, only cheaper.
	defer func() {
		for p, am := range anchors {
			b, err := encodeGob(pagesMsg{Anchors: am})
			if err == nil {
				err = n.net.Send(ctx, p, topicReplica, b)
			}
			if err != nil {
				r.mu.Lock()
				if n.isMember(p) {
					m := r.anchors[p]
					if m == nil {
						r.anchors[p] = am
					} else {
						for u, t := range am {
							m[u] = append(t, m[u]...)
						}
					}
				}
				r.mu.Unlock()
			}
		}
	}()
	// Fetch markers and sitemaps of one peer travel together.
	for p := range maps {
		if _, ok := markers[p]; !ok {
			markers[p] = nil
		}
	}
	for p, ms := range markers {
		ss := maps[p]
		b, err := encodeGob(pagesMsg{Fetched: ms, Sitemaps: ss})
		if err == nil {
			err = n.net.Send(ctx, p, topicReplica, b)
		}
		if err != nil {
			r.mu.Lock()
			if n.isMember(p) {
				r.markers[p] = append(ms, r.markers[p]...)
				r.maps[p] = append(ss, r.maps[p]...)
			}
			r.mu.Unlock()
		}
	}
	for p, docs := range work {
		for len(docs) > 0 && ctx.Err() == nil {
			k, size := 0, 0
			for k < len(docs) && k < pagesPerMessage && (k == 0 || size+docBytes(docs[k]) <= bytesPerMessage) {
				size += docBytes(docs[k])
				k++
			}
			batch := make([]*index.Document, k)
			for i := range batch {
				batch[i] = wireDoc(docs[i])
			}
			b, err := encodeGob(pagesMsg{Docs: batch})
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
	if err := n.intakeOK(); err != nil {
		return err
	}
	var m pagesMsg
	if err := decodeGob(payload, &m); err != nil {
		return err
	}
	if len(m.Fetched) > 100_000 {
		return fmt.Errorf("replica message with %d markers", len(m.Fetched))
	}
	for _, f := range m.Fetched {
		if f.URL == "" || hostOf(f.URL) != f.Host || n.net.IsOwner(f.Host) || !n.mayStore(from, f.Host) {
			continue
		}
		if err := n.noteReplica(f.Host); err != nil {
			return err
		}
		if err := n.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(prefixFetchedMarker+f.Host+"\x00"+f.URL), nil)
		}); err != nil {
			return err
		}
	}
	if len(m.Sitemaps) > 1000 {
		return fmt.Errorf("replica message with %d sitemaps", len(m.Sitemaps))
	}
	for _, s := range m.Sitemaps {
		if s.URL == "" || hostOf(s.URL) != s.Host || len(s.Listed) > maxSitemapListed || len(s.Children) > 1000 ||
			n.net.IsOwner(s.Host) || !n.mayStore(from, s.Host) {
			continue
		}
		if err := n.noteReplica(s.Host); err != nil {
			return err
		}
		b, err := encodeGob(s)
		if err != nil {
			return err
		}
		if err := n.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(prefixSitemap+s.Host+"\x00"+s.URL), b)
		}); err != nil {
			return err
		}
	}
	for _, d := range m.Docs {
		if d == nil || d.URL == "" || hostOf(d.URL) != d.Host || !n.mayStore(from, d.Host) {
			continue
		}
		if !n.net.IsOwner(d.Host) {
			if err := n.noteReplica(d.Host); err != nil {
				return err
			}
		}
		if err := n.ix.Put(ctx, d); err != nil {
			return err
		}
	}
	for u := range m.Anchors {
		if h := hostOf(u); h == "" || !n.mayStore(from, h) {
			delete(m.Anchors, u)
		}
	}
	return n.applyAnchors(ctx, m.Anchors)
}

// replicaHosts remembers the hosts this node holds pages of only as a
// replica ("n:r/<host>" keys, so it survives restarts). Such a host must be
// taken over before this node crawls it: its stored pages are marked
// fetched and the frontier is rebuilt from their links, so the crawl carries
// on here without fetching again what the dead owner already fetched. Links
// to other hosts are routed again, which also recovers what was in the dead
// node's outbox.
type replicaHosts struct {
	mu      sync.Mutex
	hosts   map[string]bool
	running bool
}

// Badger keys of the node: "n:r/<host>" marks a replica-only host;
// "n:f/<host>\x00<url>" a URL its owner settled without a page;
// "n:s/<host>\x00<sitemap url>" a sitemap its owner read (a gob
// sitemapRecord).
const (
	prefixReplicaHost   = "n:r/"
	prefixFetchedMarker = "n:f/"
	prefixSitemap       = "n:s/"
)

func (n *Node) loadReplicaHosts() error {
	n.replicas.hosts = map[string]bool{}
	return n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixReplicaHost)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n.replicas.hosts[string(it.Item().Key()[len(prefixReplicaHost):])] = true
		}
		return nil
	})
}

// noteReplica records that host's pages are held here as a replica.
func (n *Node) noteReplica(host string) error {
	r := &n.replicas
	r.mu.Lock()
	known := r.hosts[host]
	r.hosts[host] = true
	r.mu.Unlock()
	if known {
		return nil
	}
	return n.db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(prefixReplicaHost+host), nil)
	})
}

// needsTakeover reports whether host is held only as a replica; if this
// node now owns it, a takeover is started (one at a time).
func (n *Node) needsTakeover(ctx context.Context, host string) bool {
	r := &n.replicas
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.hosts[host] {
		return false
	}
	if !r.running {
		r.running = true
		go n.takeOver(ctx)
	}
	return true
}

// takeOver takes over every replica-only host this node now owns.
func (n *Node) takeOver(ctx context.Context) {
	r := &n.replicas
	defer func() {
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
	}()
	r.mu.Lock()
	var hosts []string
	for h := range r.hosts {
		if n.net.IsOwner(h) {
			hosts = append(hosts, h)
		}
	}
	r.mu.Unlock()
	for _, host := range hosts {
		if err := n.takeOverHost(ctx, host); err != nil {
			if ctx.Err() == nil {
				n.errs.add("takeover "+host, err)
			}
			continue
		}
		r.mu.Lock()
		delete(r.hosts, host)
		r.mu.Unlock()
		if err := n.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(prefixReplicaHost + host)) }); err != nil {
			n.errs.add("takeover "+host, err)
		}
	}
}

func (n *Node) takeOverHost(ctx context.Context, host string) error {
	var urls []string
	var links []crawl.Discovered
	err := n.ix.ForEachPage(ctx, host, func(r *index.PageRecord) error {
		urls = append(urls, r.URL)
		u, err := url.Parse(r.URL)
		if err != nil {
			return nil
		}
		parsed, err := crawl.ParseHTML(r.Raw, r.ContentType, r.Header, u)
		if err != nil || parsed.NoFollow {
			return nil
		}
		for _, l := range parsed.Links {
			if !l.NoFollow {
				links = append(links, crawl.Discovered{URL: l.URL, Anchor: l.Anchor, SourceHost: host, Depth: 1})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	markerPrefix := []byte(prefixFetchedMarker + host + "\x00")
	var markerKeys [][]byte
	err = n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: markerPrefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			markerKeys = append(markerKeys, k)
			urls = append(urls, string(k[len(markerPrefix):]))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := n.crawler.MarkFetched(ctx, urls); err != nil {
		return err
	}
	// The sitemaps the old owner read: their URLs join the frontier (those
	// already fetched are known by now) and they are not read again;
	// sitemaps it had not read yet are.
	read, pending, smKeys, err := n.replicaSitemaps(host, &links)
	if err != nil {
		return err
	}
	if err := n.crawler.NoteSitemaps(ctx, host, read, pending); err != nil {
		return err
	}
	markerKeys = append(markerKeys, smKeys...)
	for _, k := range markerKeys {
		if err := n.db.Update(func(txn *badger.Txn) error { return txn.Delete(k) }); err != nil {
			return err
		}
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
		return err
	}
	if len(remote) > 0 {
		if err := n.net.Forward(ctx, remote); err != nil && !errors.Is(err, p2p.ErrInvalidRecord) {
			return err
		}
	}
	n.log.Info("took over host", "host", host, "pages", len(urls), "links", len(links))
	return nil
}

// replicaSitemaps reads the sitemaps replicated for host: it appends the
// URLs they listed to links and returns the sitemaps read, the children
// still to read, and the keys to delete once the takeover is done.
func (n *Node) replicaSitemaps(host string, links *[]crawl.Discovered) (read, pending []string, keys [][]byte, err error) {
	prefix := []byte(prefixSitemap + host + "\x00")
	children := map[string]bool{}
	err = n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
			var s sitemapRecord
			if err := it.Item().Value(func(v []byte) error { return decodeGob(v, &s) }); err != nil {
				continue // a bad record costs a sitemap read, nothing else
			}
			read = append(read, s.URL)
			for _, u := range s.Listed {
				*links = append(*links, crawl.Discovered{URL: u, SourceHost: host, Depth: 1})
			}
			for _, c := range s.Children {
				children[c] = true
			}
		}
		return nil
	})
	for _, r := range read {
		delete(children, r)
	}
	for c := range children {
		pending = append(pending, c)
	}
	return read, pending, keys, err
}
