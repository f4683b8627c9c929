package node

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
)

// Before a replica takes a host over it asks the members closest to the
// host for what they hold of it and it does not: pages, fetch markers,
// sitemap reads. Replication reaches the replicas of the owner's view at
// the time, and views differ: pages stored while the network was forming,
// or while the replica was away longer than replicaKeepFor, went to
// whichever members were replicas then. Without the pull the new owner
// fetches those pages again (TestSIGKILLs on a loaded machine: pages
// stored in the first seconds of the crawl, fetched again by the replica
// that took the host over three minutes later).
//
// The request carries a 64-bit FNV-1a hash of every URL held here; each
// asked member answers with replica messages (topicReplica, stored by
// receiveReplica before they are acknowledged) for the URLs not among
// them, then acknowledges the request, so when the pull returns, what the
// members sent is stored. A member that does not answer within
// pullTimeout costs refetches, not the takeover.
const topicReplicaPull = "replica-pull/1"

const (
	// pullPeers is how many of the members closest to the host are asked.
	// Items go to the replicas of some view, which are among the closest
	// members of the full membership; with R = 2 two faults deep is four.
	pullPeers = 4
	// pullTimeout bounds one member's answer. A takeover waits for it, so
	// it is short; a longer answer (a whole host for a new owner that holds
	// nothing of it) is cut, and what did not arrive is fetched again.
	pullTimeout = 10 * time.Second
	// pullParallel is how many hosts are pulled at once.
	pullParallel = 8
)

// pulls are the pulls under way: the members asked for each host. Their
// answers come as replica messages from members that need not be among
// the host's R closest (a former replica is asked because it may hold
// what the current replicas lack), and are taken because they were asked
// for (solicited).
type pulls struct {
	mu    sync.Mutex
	asked map[pullKey]int
}

type pullKey struct {
	peer peer.ID
	host string
}

// ask records that p is being asked for host until done is called.
func (ps *pulls) ask(p peer.ID, host string) (done func()) {
	k := pullKey{p, host}
	ps.mu.Lock()
	if ps.asked == nil {
		ps.asked = map[pullKey]int{}
	}
	ps.asked[k]++
	ps.mu.Unlock()
	return func() {
		ps.mu.Lock()
		if ps.asked[k]--; ps.asked[k] <= 0 {
			delete(ps.asked, k)
		}
		ps.mu.Unlock()
	}
}

// solicited reports whether p is being asked for host now.
func (ps *pulls) solicited(p peer.ID, host string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.asked[pullKey{p, host}] > 0
}

func urlHash(u string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(u))
	return h.Sum64()
}

// pullHosts pulls hosts, up to pullParallel at a time: a member that does
// not answer delays the takeovers by pullTimeout once, not once per host.
func (n *Node) pullHosts(ctx context.Context, hosts []string) {
	sem := make(chan struct{}, pullParallel)
	var wg sync.WaitGroup
	for _, h := range hosts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := n.pullHost(ctx, h); err != nil && ctx.Err() == nil {
				n.errs.add("pull before takeover of "+h, err)
			}
		})
	}
	wg.Wait()
}

// pullHost asks the members closest to host for what they hold of it and
// this node does not, and returns once each answered or timed out.
func (n *Node) pullHost(ctx context.Context, host string) error {
	urls, err := n.ix.HostURLs(ctx, host)
	if err != nil {
		return fmt.Errorf("pages of %s: %w", host, err)
	}
	for _, prefix := range []string{prefixFetchedMarker, prefixSitemap} {
		keys, err := n.hostKeys(prefix, host)
		if err != nil {
			return err
		}
		urls = append(urls, keys...)
	}
	// A host larger than a request's hashes sends the first ones and gets
	// some pages it holds again (storing a page twice is harmless).
	have := make([]uint64, 0, min(len(urls), peermsg.MaxPullHave))
	for _, u := range urls[:min(len(urls), peermsg.MaxPullHave)] {
		have = append(have, urlHash(u))
	}
	b := peermsg.EncodePull(peermsg.Pull{Host: host, Have: have})
	self := n.net.ID()
	var others []peer.ID
	for _, m := range n.net.Members() {
		if m.ID != self {
			others = append(others, m.ID)
		}
	}
	var wg sync.WaitGroup
	for _, p := range p2p.ReplicasOf(others, host, pullPeers) {
		wg.Go(func() {
			done := n.pulls.ask(p, host)
			defer done()
			sendCtx, cancel := context.WithTimeout(ctx, pullTimeout)
			defer cancel()
			if err := n.net.Send(sendCtx, p, topicReplicaPull, b); err != nil && ctx.Err() == nil {
				n.log.Debug("pull before takeover failed; what only that member holds may be fetched again", "host", host, "peer", p, "err", err)
			}
		})
	}
	wg.Wait()
	return nil
}

// hostKeys returns the URLs of host's keys under prefix ("n:f/", "n:s/").
func (n *Node) hostKeys(prefix, host string) ([]string, error) {
	p := []byte(prefix + host + "\x00")
	var urls []string
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			urls = append(urls, string(it.Item().Key()[len(p):]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s keys of %s: %w", prefix, host, err)
	}
	return urls, nil
}

// receivePull answers a pull: what this node holds of the host and the
// requester does not goes to it as replica messages, stored there before
// this returns. Only a member that holds the host by this node's view (its
// owner, or a replica about to take it over) may pull it.
func (n *Node) receivePull(ctx context.Context, from peer.ID, payload []byte) error {
	m, err := peermsg.DecodePull(payload)
	if err != nil {
		return err
	}
	if !n.pullAuthorised(from, m.Host) {
		n.refuse(from, "pull", 1)
		return fmt.Errorf("pull of %s refused: the peer does not hold it", m.Host)
	}
	have := make(map[uint64]struct{}, len(m.Have))
	for _, h := range m.Have {
		have[h] = struct{}{}
	}
	missing := func(u string) bool { _, ok := have[urlHash(u)]; return !ok }
	q := &replQueue{anchors: map[string][]string{}}
	markers, err := n.hostKeys(prefixFetchedMarker, m.Host)
	if err != nil {
		return err
	}
	for _, u := range markers {
		if missing(u) {
			q.markers = append(q.markers, peermsg.Fetched{Host: m.Host, URL: u})
		}
	}
	if err := n.pullSitemaps(m.Host, missing, q); err != nil {
		return err
	}
	sent := 0
	send := func() error {
		sent += len(q.docs) + len(q.markers) + len(q.maps)
		return n.sendReplicaQueue(ctx, from, q)
	}
	// The URLs first: the requester usually lacks few of the pages, and
	// only those are read whole.
	urls, err := n.ix.HostURLs(ctx, m.Host)
	if err != nil {
		return err
	}
	for _, u := range urls {
		if !missing(u) {
			continue
		}
		r, err := n.ix.Get(ctx, u)
		if errors.Is(err, index.ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("answer pull of %s: %w", m.Host, err)
		}
		q.docs = append(q.docs, wireDoc(docFromRecord(r)))
		if len(r.Anchors) > 0 {
			q.anchors[r.URL] = r.Anchors
		}
		if len(q.docs) >= pagesPerMessage {
			if err := send(); err != nil {
				return fmt.Errorf("answer pull of %s: %w", m.Host, err)
			}
		}
	}
	if !q.empty() {
		if err := send(); err != nil {
			return fmt.Errorf("answer pull of %s: %w", m.Host, err)
		}
	}
	if sent > 0 {
		n.log.Info("sent a taking-over member what it lacked of a host", "host", m.Host, "peer", from, "items", sent)
	}
	return nil
}

// pullSitemaps adds to q the sitemap reads of host kept here whose URL is
// missing at the requester.
func (n *Node) pullSitemaps(host string, missing func(string) bool, q *replQueue) error {
	prefix := []byte(prefixSitemap + host + "\x00")
	return n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if !missing(string(it.Item().Key()[len(prefix):])) {
				continue
			}
			var s peermsg.Sitemap
			if err := it.Item().Value(func(v []byte) (err error) { s, err = peermsg.DecodeSitemap(v); return err }); err != nil {
				continue // a bad record costs the requester a sitemap read
			}
			q.maps = append(q.maps, s)
		}
		return nil
	})
}
