package node

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
)

// replicator pushes every page this node stores, and every URL it settles
// without a page, to the host's other replicas. A replica indexes the page
// but does not answer for its host until it owns it (the coordinator's host
// filter), so when the owner dies the next-closest member already holds its
// pages.
//
// Group commit. Store does not return until the message holding its page
// (or fetch marker) has been acknowledged by each of the host's other live
// replicas: a page counts as fetched once the member that would take its
// host over holds it, so a node killed during a long outage leaves its
// replica nothing to fetch again. A waiter kicks the sender, which sends
// at once; pages stored while a delivery to the peer is under way wait for
// it to end and then share the next message (there is no linger: with two
// storing workers a fixed delay would cost more than it could batch).
// Each peer has its own sender with at most one delivery under way, so a
// dead replica delays only the pages bound for it. The wait ends after
// ReplicaWaitMax at most; a peer whose acknowledgement took that long, or
// whose delivery failed, is marked slow and is not waited for until a
// delivery to it succeeds again (a killed replica costs one such wait per
// storing worker, not one per page). The page is durable here whatever
// happens: what the wait buys is that a crash of this node right after it
// cannot cost a refetch by the replica that takes over.
//
// Undelivered items stay queued for a peer while it is a member and for
// replicaKeepFor after it left, and a peer that left recently still gets
// the items of the hosts it would replicate: a replica killed and restarted
// comes back with what was stored while it was away. The queues are in
// memory, but what a peer nobody waits for has not acknowledged is also
// kept in Badger (the outbox, outbox.go): should this node be killed too,
// it sends those items again after its restart. With the queues in memory
// only, the two faults together (the owner killed while its replica was
// away) cost the replica a refetch of those pages when it later took the
// host over: TestSIGKILLs's occasional avoidable duplicates.
type replicator struct {
	mu     sync.Mutex
	queues map[peer.ID]*replQueue // waiting to be delivered
	busy   map[peer.ID]bool       // a delivery to the peer is under way
	slow   map[peer.ID]bool       // not waited for until a delivery succeeds
	seen   map[peer.ID]time.Time  // when each peer was last a member
	// durable are the outbox items (outboxItem.id) kept in Badger for
	// each peer and not acknowledged yet.
	durable map[peer.ID]map[string]bool
	// ownMarkers and ownMaps are this node's own fetch markers and sitemap
	// reads, written to its Badger in the next round (see keepOwn).
	ownMarkers []peermsg.Fetched
	ownMaps    []peermsg.Sitemap
	kick       chan struct{}
	// senders are the delivery goroutines, waited for when the loop ends.
	senders sync.WaitGroup
}

// replQueue is what waits to be delivered to one peer, and the commit its
// waiters wait for.
type replQueue struct {
	docs    []*index.Document
	markers []peermsg.Fetched
	maps    []peermsg.Sitemap
	anchors map[string][]string
	commit  *replCommit
}

// replCommit is closed once the delivery of one queue to peer ended, with
// its acknowledgement or with a failure (failed is set, and the peer is
// marked slow).
type replCommit struct {
	peer   peer.ID
	done   chan struct{}
	failed bool // written before done is closed
}

// replWait is what a Store waits for: the commits of the replicas it waits
// for, the replicas it does not (slow, or away), and its item, which the
// outbox keeps for those and for the ones whose delivery fails or times
// out.
type replWait struct {
	item     outboxItem
	commits  []*replCommit
	unwaited []peer.ID
}

func newReplCommit(p peer.ID) *replCommit { return &replCommit{peer: p, done: make(chan struct{})} }

func (q *replQueue) empty() bool {
	return len(q.docs) == 0 && len(q.markers) == 0 && len(q.maps) == 0 && len(q.anchors) == 0
}

const (
	maxPendingReplicas = 20000
	// replicaFlushEvery delivers what nobody waits for (anchors, sitemaps,
	// markers of the fetch workers).
	replicaFlushEvery = 300 * time.Millisecond
	// ReplicaWaitMax bounds how long Store waits for the replicas'
	// acknowledgement; the testnet's duplicate classifier counts on it.
	// Short, because a replica that was just killed looks alive until a
	// delivery to it fails or the membership drops it, and both storing
	// workers stall this long before it is marked slow (the fetch workers
	// stall with them once the processing queue is full); a healthy
	// replica acknowledges a few pages in tens of milliseconds.
	ReplicaWaitMax = 500 * time.Millisecond
	// replicaKeepFor is how long a member that left still gets the pages
	// of the hosts it would replicate (kept in its queue until it is back):
	// a node killed and restarted comes back as the same replica.
	replicaKeepFor = 30 * time.Second
	// replicaSendTimeout bounds one message of a delivery (p2p's Send
	// retries until its context ends, and a stream on the dead connection
	// of a killed peer hangs until then): short, so that a replica that
	// was killed and restarted gets its queue soon after it is back.
	// Longer than ReplicaWaitMax: a slow replica under load still gets a
	// full batch (at most pagesPerMessage pages), only nobody waits for it.
	replicaSendTimeout = 3 * time.Second
)

func newReplicator() *replicator {
	return &replicator{
		queues: map[peer.ID]*replQueue{}, busy: map[peer.ID]bool{}, slow: map[peer.ID]bool{},
		seen: map[peer.ID]time.Time{}, durable: map[peer.ID]map[string]bool{}, kick: make(chan struct{}, 1),
	}
}

// queue returns p's queue; r.mu must be held.
func (r *replicator) queue(p peer.ID) *replQueue {
	q := r.queues[p]
	if q == nil {
		q = &replQueue{anchors: map[string][]string{}, commit: newReplCommit(p)}
		r.queues[p] = q
	}
	return q
}

// kickNow asks the sender loop to deliver now.
func (r *replicator) kickNow() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// enqueueReplicas adds an item for each of host's other replicas with add
// and returns the commits to wait for (none for a slow peer) and the peers
// not waited for. Members that
// left in the last replicaKeepFor and would be among the replicas had they
// stayed get the item too, without being waited for: a replica killed and
// restarted must not miss what was stored while it was away, and nothing
// else would send it (a host whose owner did not change is not handed
// off).
func (n *Node) enqueueReplicas(host string, add func(q *replQueue)) replWait {
	self := n.net.ID()
	r := n.repl
	now := time.Now()
	members := n.net.Members()
	ids := make([]peer.ID, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	live := n.net.Replicas(host)
	var w replWait
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.seen[id] = now
	}
	for _, p := range live {
		if p == self {
			continue
		}
		q := r.queue(p)
		add(q)
		if r.slow[p] {
			w.unwaited = append(w.unwaited, p)
		} else {
			w.commits = append(w.commits, q.commit)
		}
	}
	away := r.away(now, ids)
	if len(away) == 0 {
		return w
	}
	k := len(live)
	if k == len(ids) {
		k += len(away) // every member is a replica: R may be larger
	}
	for _, p := range p2p.ReplicasOf(append(ids, away...), host, k) {
		if p != self && !slices.Contains(live, p) && slices.Contains(away, p) {
			add(r.queue(p))
			w.unwaited = append(w.unwaited, p)
		}
	}
	return w
}

// away returns the peers that were members in the last replicaKeepFor and
// are not now; r.mu must be held.
func (r *replicator) away(now time.Time, members []peer.ID) []peer.ID {
	var out []peer.ID
	for p, t := range r.seen {
		switch {
		case now.Sub(t) > replicaKeepFor:
			delete(r.seen, p)
		case !slices.Contains(members, p):
			out = append(out, p)
		}
	}
	return out
}

// keeps reports whether p's undelivered items are kept: it is a member or
// left less than replicaKeepFor ago; r.mu must be held.
func (n *Node) keeps(p peer.ID) bool {
	if t, ok := n.repl.seen[p]; ok && time.Since(t) <= replicaKeepFor {
		return true
	}
	return n.isMember(p)
}

// replicate queues a stored page for its host's other replicas.
func (n *Node) replicate(d *index.Document) replWait {
	w := n.enqueueReplicas(d.Host, func(q *replQueue) {
		q.docs = append(q.docs, d)
		if len(q.docs) > maxPendingReplicas {
			q.docs = q.docs[len(q.docs)-maxPendingReplicas:]
		}
	})
	w.item = outboxItem{kind: outboxPage, url: d.URL}
	return w
}

// replicateFetched queues a marker for a URL settled without a stored page.
func (n *Node) replicateFetched(m peermsg.Fetched) replWait {
	r := n.repl
	r.mu.Lock()
	if len(r.ownMarkers) < maxPendingReplicas {
		r.ownMarkers = append(r.ownMarkers, m)
	}
	r.mu.Unlock()
	w := n.enqueueReplicas(m.Host, func(q *replQueue) {
		if len(q.markers) < maxPendingReplicas {
			q.markers = append(q.markers, m)
		}
	})
	w.item = outboxItem{kind: outboxMarker, url: m.URL}
	return w
}

// replicateSitemap queues what a sitemap of one of this node's hosts listed.
func (n *Node) replicateSitemap(s peermsg.Sitemap) {
	r := n.repl
	r.mu.Lock()
	if len(r.ownMaps) < maxPendingReplicas {
		r.ownMaps = append(r.ownMaps, s)
	}
	r.mu.Unlock()
	n.enqueueReplicas(s.Host, func(q *replQueue) {
		if len(q.maps) < maxPendingReplicas {
			q.maps = append(q.maps, s)
		}
	})
}

// awaitReplicas waits until every commit of w is done, or ReplicaWaitMax
// has passed (the peers still pending are marked slow), or ctx ends. The
// outbox keeps w's item for every replica that did not acknowledge it and
// for those not waited for, before awaitReplicas returns: once Store
// returns, the page is settled even if this node dies next.
func (n *Node) awaitReplicas(ctx context.Context, w replWait) error {
	missed := w.unwaited
	if len(w.commits) > 0 {
		n.repl.kickNow()
		timer := time.NewTimer(ReplicaWaitMax)
		defer timer.Stop()
	wait:
		for _, c := range w.commits {
			select {
			case <-c.done:
			case <-ctx.Done():
				return fmt.Errorf("wait for replicas: %w", ctx.Err())
			case <-timer.C:
				break wait
			}
		}
		missed = append(missed, n.markSlow(w.commits)...)
	}
	if len(missed) == 0 {
		return nil
	}
	byPeer := make(map[peer.ID][]outboxItem, len(missed))
	for _, p := range missed {
		byPeer[p] = []outboxItem{w.item}
	}
	return n.writeOutbox(byPeer)
}

// markSlow marks the peers of the commits still pending as not to be
// waited for (their delivery took longer than ReplicaWaitMax) and returns
// them with the peers whose delivery failed.
func (n *Node) markSlow(commits []*replCommit) []peer.ID {
	r := n.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	var missed []peer.ID
	for _, c := range commits {
		select {
		case <-c.done:
			if c.failed {
				missed = append(missed, c.peer)
			}
		default:
			if !r.slow[c.peer] {
				n.log.Debug("replica slow to acknowledge; not waiting for it until a delivery succeeds", "peer", c.peer)
			}
			r.slow[c.peer] = true
			missed = append(missed, c.peer)
		}
	}
	return missed
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
	byHost := map[string][]string{}
	for u := range byURL {
		h := hostOf(u)
		byHost[h] = append(byHost[h], u)
	}
	for h, urls := range byHost {
		n.enqueueReplicas(h, func(q *replQueue) {
			for _, u := range urls {
				if len(q.anchors) < maxPendingReplicas {
					q.anchors[u] = append(q.anchors[u], byURL[u]...)
				}
			}
		})
	}
	return nil
}

// replicationLoop delivers the queues: every replicaFlushEvery, and at
// once when a page is waited for.
func (n *Node) replicationLoop(ctx context.Context) {
	defer n.repl.senders.Wait()
	runEvery(ctx, replicaFlushEvery, n.repl.kick, func(ctx context.Context) {
		n.flushReplicas(ctx)
		if err := n.keepOwn(); err != nil && ctx.Err() == nil {
			n.errs.add("keep own fetch markers", err)
		}
		if err := n.keepUnwaited(); err != nil && ctx.Err() == nil {
			n.errs.add("replication outbox", err)
		}
	})
}

// keepOwn writes this node's own fetch markers and sitemap reads under the
// keys a replica keeps them ("n:f/", "n:s/"). The crawler knows them while
// it owns the host; but when the host is handed back to a returning owner,
// the crawl state goes with it and this node keeps only the pages, as a
// replica. Should it take the host over again, these keys tell it the URLs
// it settled without a page and the sitemaps it read itself, which it
// would otherwise fetch again.
func (n *Node) keepOwn() error {
	r := n.repl
	r.mu.Lock()
	markers, maps := r.ownMarkers, r.ownMaps
	r.ownMarkers, r.ownMaps = nil, nil
	r.mu.Unlock()
	if len(markers) == 0 && len(maps) == 0 {
		return nil
	}
	wb := n.db.NewWriteBatch()
	defer wb.Cancel()
	for _, m := range markers {
		if err := wb.Set([]byte(prefixFetchedMarker+m.Host+"\x00"+m.URL), nil); err != nil {
			return fmt.Errorf("fetch marker %s: %w", m.URL, err)
		}
	}
	for _, s := range maps {
		if err := wb.Set([]byte(prefixSitemap+s.Host+"\x00"+s.URL), peermsg.EncodeSitemap(s)); err != nil {
			return fmt.Errorf("sitemap %s: %w", s.URL, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("write %d fetch markers and %d sitemaps: %w", len(markers), len(maps), err)
	}
	return nil
}

// flushReplicas starts a delivery for every peer with a queue and none
// under way.
func (n *Node) flushReplicas(ctx context.Context) {
	r := n.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, q := range r.queues {
		if r.busy[p] {
			continue
		}
		delete(r.queues, p)
		if q.empty() {
			close(q.commit.done)
			continue
		}
		r.busy[p] = true
		r.senders.Add(1)
		go func() {
			defer r.senders.Done()
			n.deliverReplicas(ctx, p, q)
		}()
	}
}

// deliverReplicas sends q to p and settles its commit. What p did not
// acknowledge goes back to the front of p's queue, unless p left more than
// replicaKeepFor ago (then its outbox goes too). What p acknowledged
// leaves the outbox.
func (n *Node) deliverReplicas(ctx context.Context, p peer.ID, q *replQueue) {
	sent := *q // sendReplicaQueue empties q as it goes
	err := n.sendReplicaQueue(ctx, p, q)
	r := n.repl
	r.mu.Lock()
	r.busy[p] = false
	more := false
	var delivered [][]byte
	if err == nil {
		delete(r.slow, p)
		delivered = n.takeDelivered(p, &sent)
	} else {
		// Not waited for until a delivery succeeds: it is unreachable or
		// refuses, and the next attempt comes with the next round.
		r.slow[p] = true
		q.commit.failed = true
		if ctx.Err() == nil && !n.keeps(p) {
			delivered = n.takeAll(p)
		}
	}
	if err != nil && ctx.Err() == nil && n.keeps(p) {
		next := r.queue(p)
		next.docs = append(q.docs, next.docs...)
		next.markers = append(q.markers, next.markers...)
		next.maps = append(q.maps, next.maps...)
		for u, t := range q.anchors {
			next.anchors[u] = append(t, next.anchors[u]...)
		}
	}
	if next := r.queues[p]; err == nil && next != nil && !next.empty() {
		more = true // pages stored during this delivery; a failure waits for the next round
	}
	close(q.commit.done)
	r.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		n.log.Debug("replica delivery failed; kept for the next round", "peer", p, "err", err)
	}
	if err := n.deleteOutbox(delivered); err != nil && ctx.Err() == nil {
		n.errs.add("replication outbox", err)
	}
	if more {
		r.kickNow()
	}
}

// sendReplicaQueue sends q to p: the pages in batches, the first with the
// fetch markers, sitemaps and anchors (the replica indexes a message's
// pages before its anchors; anchors for a page it does not hold yet are
// kept by its index until the page arrives). Sent parts are removed from
// q, so that on error q holds what p has not acknowledged.
func (n *Node) sendReplicaQueue(ctx context.Context, p peer.ID, q *replQueue) error {
	send := func(m peermsg.Pages) error {
		b, err := peermsg.EncodePages(&m)
		if err != nil {
			return fmt.Errorf("encode replica message: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, replicaSendTimeout)
		defer cancel()
		if err := n.net.Send(ctx, p, topicReplica, b); err != nil {
			return fmt.Errorf("replica message to %s: %w", p, err)
		}
		return nil
	}
	// The first message carries the markers, sitemaps and (unless large)
	// anchors with the first pages: a waiting Store pays one round trip.
	first := true
	for first || len(q.docs) > 0 {
		var m peermsg.Pages
		anchorsToo := false
		if first {
			m.Fetched, m.Sitemaps = q.markers, q.maps
			anchorsToo = anchorBytes(q.anchors) <= bytesPerMessage/4
			if anchorsToo {
				m.Anchors = q.anchors
			}
		}
		k, size := 0, 0
		for k < len(q.docs) && k < pagesPerMessage && (k == 0 || size+docBytes(q.docs[k]) <= bytesPerMessage) {
			size += docBytes(q.docs[k])
			k++
		}
		for _, d := range q.docs[:k] {
			m.Docs = append(m.Docs, wireDoc(d))
		}
		if len(m.Docs) > 0 || len(m.Fetched) > 0 || len(m.Sitemaps) > 0 || len(m.Anchors) > 0 {
			if err := send(m); err != nil {
				return err
			}
		}
		q.docs = q.docs[k:]
		if first {
			q.markers, q.maps = nil, nil
			if anchorsToo {
				q.anchors = map[string][]string{}
			}
		}
		first = false
	}
	if len(q.anchors) > 0 {
		if err := send(peermsg.Pages{Anchors: q.anchors}); err != nil {
			return err
		}
		q.anchors = map[string][]string{}
	}
	return nil
}

// anchorBytes estimates the wire size of anchor texts.
func anchorBytes(anchors map[string][]string) int {
	size := 0
	for u, texts := range anchors {
		size += len(u) + 8
		for _, t := range texts {
			size += len(t) + 4
		}
	}
	return size
}

func (n *Node) isMember(p peer.ID) bool { return n.net.IsMember(p) }

// receiveReplica stores what a holder of a host sends its other holders.
// Items the sender may not send (replicaAuthorised) are dropped and
// counted; the rest is acknowledged.
func (n *Node) receiveReplica(ctx context.Context, from peer.ID, payload []byte) error {
	if err := n.intakeOK(); err != nil {
		return err
	}
	m, err := peermsg.DecodePages(payload)
	if err != nil {
		return err
	}
	refused := 0
	defer func() { n.refuse(from, "replica items", refused) }()
	// Markers and sitemaps are kept even for a host this node believes it
	// owns: its view may lag the sender's (a node just restarted sees few
	// members), and a marker dropped here is a refetch at the next
	// takeover. The host is marked replica-only only if it is not owned.
	for _, f := range m.Fetched {
		if hostOf(f.URL) != f.Host || !n.replicaAuthorised(from, f.Host) {
			refused++
			continue
		}
		if err := n.noteReplicaUnlessOwner(f.Host); err != nil {
			return err
		}
		if err := n.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(prefixFetchedMarker+f.Host+"\x00"+f.URL), nil)
		}); err != nil {
			return err
		}
	}
	for _, s := range m.Sitemaps {
		if hostOf(s.URL) != s.Host || !n.replicaAuthorised(from, s.Host) {
			refused++
			continue
		}
		if err := n.noteReplicaUnlessOwner(s.Host); err != nil {
			return err
		}
		if err := n.db.Update(func(txn *badger.Txn) error {
			return txn.Set([]byte(prefixSitemap+s.Host+"\x00"+s.URL), peermsg.EncodeSitemap(s))
		}); err != nil {
			return err
		}
	}
	docs := make([]*index.Document, 0, len(m.Docs))
	for _, d := range m.Docs {
		if hostOf(d.URL) != d.Host || !n.replicaAuthorised(from, d.Host) {
			refused++
			continue
		}
		if err := n.noteReplicaUnlessOwner(d.Host); err != nil {
			return err
		}
		docs = append(docs, d)
	}
	// The sender's Store waits for this answer (group commit).
	if err := n.ix.PutBatch(ctx, docs); err != nil {
		return fmt.Errorf("replica pages: %w", err)
	}
	for u := range m.Anchors {
		if !n.replicaAuthorised(from, hostOf(u)) {
			delete(m.Anchors, u)
			refused++
		}
	}
	if err := n.applyAnchors(ctx, m.Anchors); err != nil {
		return err
	}
	return n.syncAcknowledged(ctx, len(docs) > 0)
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
// "n:s/<host>\x00<sitemap url>" a sitemap its owner read
// (peermsg.EncodeSitemap). The owner keeps its own "n:f/" and "n:s/" keys too (see
// keepOwn); a takeover reads and deletes the host's.
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

func (n *Node) noteReplicaUnlessOwner(host string) error {
	if n.net.IsOwner(host) {
		return nil
	}
	return n.noteReplica(host)
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
	n.pullHosts(ctx, hosts)
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
				links = append(links, crawl.Discovered{URL: l.URL, Anchor: l.Anchor, SourceHost: host, Depth: 1, Base: l.Base})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	markers, err := n.hostKeys(prefixFetchedMarker, host)
	if err != nil {
		return err
	}
	markerKeys := make([][]byte, 0, len(markers))
	for _, u := range markers {
		markerKeys = append(markerKeys, []byte(prefixFetchedMarker+host+"\x00"+u))
	}
	urls = append(urls, markers...)
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
			var s peermsg.Sitemap
			if err := it.Item().Value(func(v []byte) (err error) { s, err = peermsg.DecodeSitemap(v); return err }); err != nil {
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
