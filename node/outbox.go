package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/index"
	"sou/node/peermsg"
)

// The replication outbox keeps in Badger what a replica has not
// acknowledged and nobody waited for, so that it survives this node's
// death. Without it, two faults at once cost a refetch: a replica that is
// away (killed, restarting, unreachable) misses the pages stored meanwhile,
// the in-memory queue holding them dies with the owner, and when the
// replica later takes the host over it fetches them again. The outbox is
// written only for peers that are not waited for (slow, away, or whose
// delivery failed or timed out), so a healthy network pays nothing for it;
// a successful delivery deletes what it carried, and a restart queues the
// rest again (see loadOutbox).
//
// Badger keys: "n:o/<peer>\x00<kind><url>", peer in its text form. Kind
// 'd' is a page (empty value: the page is read back from the index), 'f'
// a fetch marker (empty value), 's' a sitemap read
// (peermsg.EncodeSitemap). Anchor texts are not kept: losing them changes
// an anchor field, not what is fetched.
//
// Each peer's outbox holds at most maxOutboxPerPeer items, and nothing is
// written while the disk guard has stopped intake: an item not kept costs
// a refetch only if this node dies before the peer acknowledges it, while
// an outbox without bounds lets a replica that never acknowledges grow
// this node's store without end.
const prefixOutbox = "n:o/"

const (
	outboxPage    = 'd'
	outboxMarker  = 'f'
	outboxSitemap = 's'
)

// maxOutboxPerPeer caps the items kept for one peer.
const maxOutboxPerPeer = 200_000

// outboxItem is one queued item as the outbox names it; sitemap is set
// for kind 's'.
type outboxItem struct {
	kind    byte
	url     string
	sitemap *peermsg.Sitemap
}

func (it outboxItem) id() string { return string(it.kind) + it.url }

func outboxKey(p peer.ID, id string) []byte {
	return []byte(prefixOutbox + p.String() + "\x00" + id)
}

// queueItems lists what q holds, as outbox items (anchors excepted).
func queueItems(q *replQueue) []outboxItem {
	items := make([]outboxItem, 0, len(q.docs)+len(q.markers)+len(q.maps))
	for _, d := range q.docs {
		items = append(items, outboxItem{kind: outboxPage, url: d.URL})
	}
	for _, m := range q.markers {
		items = append(items, outboxItem{kind: outboxMarker, url: m.URL})
	}
	for i := range q.maps {
		items = append(items, outboxItem{kind: outboxSitemap, url: q.maps[i].URL, sitemap: &q.maps[i]})
	}
	return items
}

// writeOutbox keeps items for each peer of byPeer.
func (n *Node) writeOutbox(byPeer map[peer.ID][]outboxItem) error {
	if len(byPeer) == 0 || n.disk.Low() {
		return nil
	}
	r := n.repl
	r.mu.Lock()
	dropped := 0
	for p, items := range byPeer {
		if room := maxOutboxPerPeer - len(r.durable[p]); len(items) > room {
			dropped += len(items) - max(room, 0)
			byPeer[p] = items[:max(room, 0)]
		}
	}
	r.mu.Unlock()
	if dropped > 0 && n.refusalLog.Allow() {
		n.log.Warn("replication outbox full: items not kept", "items", dropped, "cap_per_peer", maxOutboxPerPeer)
	}
	wb := n.db.NewWriteBatch()
	defer wb.Cancel()
	count := 0
	for p, items := range byPeer {
		for _, it := range items {
			var v []byte
			if it.kind == outboxSitemap {
				v = peermsg.EncodeSitemap(*it.sitemap)
			}
			if err := wb.Set(outboxKey(p, it.id()), v); err != nil {
				return fmt.Errorf("outbox item %s for %s: %w", it.url, p, err)
			}
			count++
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("write %d replication outbox items: %w", count, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, items := range byPeer {
		set := r.durable[p]
		if set == nil {
			set = map[string]bool{}
			r.durable[p] = set
		}
		for _, it := range items {
			set[it.id()] = true
		}
	}
	return nil
}

// keepUnwaited writes to the outbox what is queued for peers nobody waits
// for (slow or away) and is not kept yet: fetch markers, sitemaps and
// handed-off pages, which no Store waits for, and items put back after a
// failed delivery.
func (n *Node) keepUnwaited() error {
	r := n.repl
	r.mu.Lock()
	byPeer := map[peer.ID][]outboxItem{}
	for p, q := range r.queues {
		if !r.slow[p] && n.isMember(p) {
			continue
		}
		for _, it := range queueItems(q) {
			if !r.durable[p][it.id()] {
				byPeer[p] = append(byPeer[p], it)
			}
		}
	}
	r.mu.Unlock()
	return n.writeOutbox(byPeer)
}

// takeDelivered returns the outbox keys of what q carried to p, now
// acknowledged, and forgets them; r.mu must be held. The caller deletes
// the keys once it released the lock.
func (n *Node) takeDelivered(p peer.ID, q *replQueue) [][]byte {
	set := n.repl.durable[p]
	if len(set) == 0 {
		return nil
	}
	var keys [][]byte
	for _, it := range queueItems(q) {
		if id := it.id(); set[id] {
			delete(set, id)
			keys = append(keys, outboxKey(p, id))
		}
	}
	return keys
}

// takeAll returns every outbox key of p and forgets them: p left too long
// ago to be kept for; r.mu must be held.
func (n *Node) takeAll(p peer.ID) [][]byte {
	set := n.repl.durable[p]
	delete(n.repl.durable, p)
	keys := make([][]byte, 0, len(set))
	for id := range set {
		keys = append(keys, outboxKey(p, id))
	}
	return keys
}

// deleteOutbox deletes outbox keys.
func (n *Node) deleteOutbox(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	wb := n.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return fmt.Errorf("delete outbox item: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("delete %d replication outbox items: %w", len(keys), err)
	}
	return nil
}

// loadOutbox queues again, after a restart, what the outbox kept: each
// peer is treated as a member that just left (kept for replicaKeepFor)
// and slow (not waited for until a delivery succeeds). Pages are read back
// from the index; one no longer stored there is dropped. At most
// maxPendingReplicas items of each kind are queued per peer; the rest stay
// in Badger for a later restart.
func (n *Node) loadOutbox(ctx context.Context) error {
	type kept struct {
		p  peer.ID
		it outboxItem
	}
	var items []kept
	var stale [][]byte
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixOutbox), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().KeyCopy(nil)
			peerText, id, ok := strings.Cut(string(key[len(prefixOutbox):]), "\x00")
			p, err := peer.Decode(peerText)
			if !ok || err != nil || len(id) < 2 || p == n.net.ID() {
				stale = append(stale, key)
				continue
			}
			item := outboxItem{kind: id[0], url: id[1:]}
			switch item.kind {
			case outboxPage, outboxMarker:
			case outboxSitemap:
				var s peermsg.Sitemap
				if err := it.Item().Value(func(v []byte) (err error) { s, err = peermsg.DecodeSitemap(v); return err }); err != nil {
					stale = append(stale, key)
					continue
				}
				item.sitemap = &s
			default:
				stale = append(stale, key)
				continue
			}
			items = append(items, kept{p, item})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read replication outbox: %w", err)
	}
	r := n.repl
	now := time.Now()
	queued := map[peer.ID]int{}
	for _, k := range items {
		var doc *index.Document
		if k.it.kind == outboxPage {
			rec, err := n.ix.Get(ctx, k.it.url)
			if errors.Is(err, index.ErrNotFound) {
				stale = append(stale, outboxKey(k.p, k.it.id()))
				continue
			}
			if err != nil {
				return fmt.Errorf("replication outbox page %s: %w", k.it.url, err)
			}
			doc = &rec.Document
		}
		r.mu.Lock()
		q := r.queue(k.p)
		switch {
		case doc != nil && len(q.docs) < maxPendingReplicas:
			q.docs = append(q.docs, doc)
		case k.it.kind == outboxMarker && len(q.markers) < maxPendingReplicas:
			q.markers = append(q.markers, peermsg.Fetched{Host: hostOf(k.it.url), URL: k.it.url})
		case k.it.kind == outboxSitemap && len(q.maps) < maxPendingReplicas:
			q.maps = append(q.maps, *k.it.sitemap)
		default:
			r.mu.Unlock()
			continue
		}
		if r.durable[k.p] == nil {
			r.durable[k.p] = map[string]bool{}
		}
		r.durable[k.p][k.it.id()] = true
		r.seen[k.p] = now
		r.slow[k.p] = true
		queued[k.p]++
		r.mu.Unlock()
	}
	for p, c := range queued {
		n.log.Info("replication outbox queued again", "peer", p, "items", c)
	}
	return n.deleteOutbox(stale)
}
