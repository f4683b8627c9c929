package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
	"sou/node/peermsg"
	"sou/p2p"
	"sou/placement"
)

// Replication: every item this node stores for a host it holds goes into
// p2p's durable outbox under topicReplica for each placement.Target, and
// the outbox delivers it (placement's replication says where and how long
// a Store waits). Records, one item each:
//
//	'd' URL            a page, read back from the index when sent (gone:
//	                   dropped), with its analysed form while the index's
//	                   form cache holds it (index.Index.Form)
//	'f' URL            a fetch marker: a URL settled without a page
//	's' sitemap        a sitemap read (peermsg.EncodeSitemap)
//	'a' pages message  anchor texts of URLs of one host (peermsg.EncodePages)
//	'u' URL            a URL members sent the owner, queued here
//
// Nothing is written for a peer while the disk guard has stopped intake
// (an item not kept costs a refetch only if this node dies before the
// peer has it), and a peer's queue is capped by p2p (MaxOutboxPerPeer).
const (
	recPage    = 'd'
	recMarker  = 'f'
	recSitemap = 's'
	recAnchors = 'a'
	recQueued  = 'u'
)

const (
	// ReplicaLinger is how long an item nobody waits for (markers,
	// sitemaps, anchors, queued URLs, the pages of Stores that returned
	// first) waits for company, before a replica queue's first message
	// and between its messages (p2p.OutboxTopic): half the requests of a
	// crawl end without a page, and the pages of one host reach its
	// replica a few a second, so a message each would multiply the
	// messages, and each pays a stream write, the replica's transactions
	// and its sync.
	ReplicaLinger = 300 * time.Millisecond
	// replicaSendTimeout bounds one replica message (a stream on the dead
	// connection of a killed peer hangs until then): short, so that a
	// replica that was killed and restarted gets its queue soon after it
	// is back.
	replicaSendTimeout = 3 * time.Second
	// replicaBatchRecords caps the records read for one message (pages
	// are further capped at pagesPerMessage).
	replicaBatchRecords = 512
)

func record(kind byte, body string) []byte { return append([]byte{kind}, body...) }

// replicaTopic is the outbox topic of replication: its messages, and what
// it hears back goes to the placement machine.
func (p *placer) replicaTopic(ix *index.Index) p2p.OutboxTopic {
	return p2p.OutboxTopic{
		Batch: func(ctx context.Context, _ peer.ID, recs [][]byte) ([]byte, int, error) {
			return replicaBatch(ctx, ix, recs)
		},
		Delivered:   func(to peer.ID, seq uint64) { p.post(placement.Delivered{Peer: to, Seq: seq}) },
		Failed:      func(to peer.ID, _ error) { p.post(placement.Undelivered{Peer: to}) },
		Linger:      ReplicaLinger,
		MaxRecords:  replicaBatchRecords,
		SendTimeout: replicaSendTimeout,
	}
}

// replicaBatch makes one replica message of the oldest records: pages
// (at most pagesPerMessage, bytesPerMessage), markers, sitemaps, anchors
// and queued URLs, within peermsg's caps.
func replicaBatch(ctx context.Context, ix *index.Index, recs [][]byte) ([]byte, int, error) {
	var m peermsg.Pages
	size, used := 0, 0
	full := false
	for _, rec := range recs {
		if len(rec) < 2 {
			used++
			continue
		}
		body := string(rec[1:])
		switch rec[0] {
		case recPage:
			if len(m.Docs)+len(m.Stored) >= pagesPerMessage {
				full = true
				break
			}
			// The page as the index stores it, compressed, with its
			// analysed form while the index still has it: the replica
			// holds it as it is, neither compressing nor analysing it.
			p, err := ix.Stored(ctx, body)
			if errors.Is(err, index.ErrNotFound) {
				break // deleted meanwhile
			}
			if err != nil {
				return nil, 0, fmt.Errorf("replica page %s: %w", body, err)
			}
			if len(p.Form) > peermsg.MaxFormBytes {
				p.Form = nil
			}
			n := len(p.Record) + len(p.Raw) + len(p.Form) + 64
			if len(m.Docs)+len(m.Stored) > 0 && size+n > bytesPerMessage {
				full = true
				break
			}
			if len(p.Record) <= peermsg.MaxStoredRecordBytes && len(p.Raw) <= peermsg.MaxRawBytes {
				m.Stored = append(m.Stored, p)
				size += n
				break
			}
			// Too large for a message as stored: the page itself, its
			// raw bytes cut.
			r, err := ix.Get(ctx, body)
			if errors.Is(err, index.ErrNotFound) {
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("replica page %s: %w", body, err)
			}
			d := wireDoc(docFromRecord(r))
			if len(m.Docs)+len(m.Stored) > 0 && size+docBytes(d) > bytesPerMessage {
				full = true
				break
			}
			m.Forms = append(m.Forms, nil)
			m.Docs = append(m.Docs, d)
			size += docBytes(d)
		case recMarker:
			m.Fetched = append(m.Fetched, peermsg.Fetched{Host: crawl.HostKeyOf(body), URL: body})
		case recQueued:
			m.Queued = append(m.Queued, peermsg.Fetched{Host: crawl.HostKeyOf(body), URL: body})
		case recSitemap:
			if sm, err := peermsg.DecodeSitemap(rec[1:]); err == nil {
				m.Sitemaps = append(m.Sitemaps, sm)
			}
		case recAnchors:
			a, err := peermsg.DecodePages(rec[1:])
			if err != nil || len(m.Anchors)+len(a.Anchors) > peermsg.MaxAnchorURLs {
				break
			}
			if m.Anchors == nil {
				m.Anchors = map[string][]string{}
			}
			for u, texts := range a.Anchors {
				m.Anchors[u] = append(m.Anchors[u], texts...)
			}
		}
		if full {
			break
		}
		used++
		if len(m.Fetched) >= peermsg.MaxMarkers || len(m.Queued) >= peermsg.MaxMarkers || len(m.Sitemaps) >= peermsg.MaxSitemaps {
			break
		}
	}
	if len(m.Docs)+len(m.Stored)+len(m.Fetched)+len(m.Queued)+len(m.Sitemaps)+len(m.Anchors) == 0 {
		return nil, max(used, 1), nil
	}
	b, err := peermsg.EncodePages(&m)
	return b, max(used, 1), err
}

// storeItem replicates the records of one item stored here for host and
// waits for the replicas placement says to wait for (group commit): write
// (if any) stores it here first (the outbox reads pages back from the
// index), then the records go into the outbox of every target, then the
// wait. A replica that missed them gets a stand-in (placement's Copy)
// before the wait ends.
//
// A detachable Store (a page or a fetch marker, which a replica that
// takes the host over can fetch again) returns before the wait ends
// while fewer than DetachedStores others have: its records linger in the
// outbox for company (ReplicaLinger) and the loop sees the wait through.
// A Store that waits sends its records at once, and since one host's
// pages come a few a second, its message carries them alone; so the
// pages travel in bulk, and the bound keeps what a kill leaves to fetch
// again, and how far the crawl runs ahead of its replicas, to a few
// times the processing workers. Queued URLs always wait: the member that
// forwarded them forgets them once this node acknowledges them, so they
// cannot be fetched again from anywhere else.
func (p *placer) storeItem(ctx context.Context, host string, recs [][]byte, write func() error, detachable bool) error {
	id := p.nextWait.Add(1)
	ch := make(chan placement.Action, 2)
	var targets []placement.Target
	detach := false
	// A detached wait is registered and stepped whatever happens to ctx
	// (only the loop's end stops it), so that its slot is freed.
	loopCtx := ctx
	if detachable {
		loopCtx = context.WithoutCancel(ctx)
	}
	if err := p.do(loopCtx, func() {
		targets = p.m.Targets(time.Now(), host)
		if detachable && len(p.detached) < p.maxDetached {
			detach = true
			p.detached[id] = detachedItem{host: host, recs: recs}
			p.storesDetached.Add(1)
			return
		}
		p.waits[id] = ch
	}); err != nil {
		return fmt.Errorf("replica targets of %s: %w", host, err)
	}
	var werr error
	if write != nil {
		werr = write()
	}
	pending := map[peer.ID]uint64{}
	if werr == nil {
		for _, t := range targets {
			seq, err := p.append(t.Peer, recs, t.Wait && !detach)
			if err == nil && t.Wait {
				pending[t.Peer] = seq
			}
		}
	}
	await := placement.Await{ID: id, Host: host, Pending: pending}
	if detach {
		await.Grace = ReplicaLinger
	}
	if err := p.stepIn(loopCtx, await); err != nil {
		return fmt.Errorf("wait for replicas: %w", err)
	}
	if werr != nil || detach {
		return werr
	}
	for {
		select {
		case a := <-ch:
			c, ok := a.(placement.Copy)
			if !ok {
				return nil // Release
			}
			if err := p.stepIn(ctx, p.copyTo(c, host, recs)); err != nil {
				return fmt.Errorf("wait for replicas: %w", err)
			}
		case <-ctx.Done():
			return fmt.Errorf("wait for replicas: %w", ctx.Err())
		}
	}
}

// detachedItem is what the loop keeps of a Store that returned before
// its wait ended: enough to give a stand-in a copy.
type detachedItem struct {
	host string
	recs [][]byte
}

// DetachedStores bounds the Stores whose wait goes on after they
// returned, and so the pages a node killed leaves its replicas to fetch
// again beyond those it was processing (the testnet's orphansPerKill
// counts both). It has to hold the pages stored while a message lingers
// and travels (ReplicaLinger and a round trip, at a few hundred pages a
// second), or Stores find no slot and wait, and messages are small again.
func DetachedStores() int { return 4 * ProcessWorkers() }

// endDetached ends a detached Store's wait on the loop: a Release frees
// its slot, a Copy puts its records into the stand-in's outbox and adds
// that to the wait. It reports whether id was a detached Store's.
func (p *placer) endDetached(id uint64, a placement.Action) bool {
	it, ok := p.detached[id]
	if !ok {
		return false
	}
	c, ok := a.(placement.Copy)
	if !ok {
		delete(p.detached, id)
		return true
	}
	p.post(p.copyTo(c, it.host, it.recs))
	return true
}

// copyTo puts an item's records into the outbox of the stand-in c names
// and returns the Await that adds the stand-in to the item's wait (with
// sequence 0, nothing to wait for, when the outbox did not keep them).
func (p *placer) copyTo(c placement.Copy, host string, recs [][]byte) placement.Await {
	seq, err := p.append(c.To, recs, true)
	if err != nil {
		seq = 0
	}
	return placement.Await{ID: c.ID, Host: host, Pending: map[peer.ID]uint64{c.To: seq}}
}

// append keeps records for to; the error is logged.
func (p *placer) append(to peer.ID, recs [][]byte, urgent bool) (uint64, error) {
	if p.intakeLow() {
		return 0, ErrDiskLow
	}
	seq, err := p.net.Outbox().Append(to, topicReplica, recs, urgent)
	if err != nil && p.refusalLog.Allow() {
		p.log.Warn("replica item not kept", "peer", to, "err", err)
	}
	return seq, err
}

// replicateWaiting is storeItem for the records of several hosts,
// already stored here: the waits run at once, and it returns once all
// have ended.
func (p *placer) replicateWaiting(ctx context.Context, byHost map[string][][]byte) error {
	errs := make(chan error, len(byHost))
	for h, recs := range byHost {
		go func() { errs <- p.storeItem(ctx, h, recs, nil, false) }()
	}
	all := make([]error, 0, len(byHost))
	for range byHost {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// replicate queues the records of several hosts for their targets,
// without a wait. recordsOf makes a host's records; it is called only for
// hosts that have a target, so a node without replicas (a network of one)
// encodes nothing.
func (p *placer) replicate(ctx context.Context, hosts []string, recordsOf func(host string) ([][]byte, error)) error {
	if len(hosts) == 0 || p.intakeLow() {
		return nil
	}
	targets := map[string][]placement.Target{}
	if err := p.do(ctx, func() {
		now := time.Now()
		for _, h := range hosts {
			if t := p.m.Targets(now, h); len(t) > 0 {
				targets[h] = t
			}
		}
	}); err != nil {
		return fmt.Errorf("replica targets: %w", err)
	}
	byPeer := map[peer.ID][][]byte{}
	for h, ts := range targets {
		recs, err := recordsOf(h)
		if err != nil {
			return err
		}
		for _, t := range ts {
			byPeer[t.Peer] = append(byPeer[t.Peer], recs...)
		}
	}
	var errs []error
	for to, recs := range byPeer {
		if _, err := p.net.Outbox().Append(to, topicReplica, recs, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// anchorsByHost groups anchor texts (URL -> texts) by the URL's host.
func anchorsByHost(byURL map[string][]string) map[string]map[string][]string {
	byHost := map[string]map[string][]string{}
	for u, texts := range byURL {
		h := crawl.HostKeyOf(u)
		if byHost[h] == nil {
			byHost[h] = map[string][]string{}
		}
		byHost[h][u] = texts
	}
	return byHost
}

// anchorRecord is the record of a host's anchor texts (URL -> texts).
func anchorRecord(anchors map[string][]string) ([]byte, error) {
	b, err := peermsg.EncodePages(&peermsg.Pages{Anchors: anchors})
	if err != nil {
		return nil, err
	}
	return append([]byte{recAnchors}, b...), nil
}

// post steps ev on the loop later, without blocking: for the outbox's
// senders, which must not wait for the loop.
func (p *placer) post(ev placement.Event) {
	p.mailMu.Lock()
	p.mail = append(p.mail, ev)
	p.mailMu.Unlock()
	select {
	case p.mailSignal <- struct{}{}:
	default:
	}
}

// takeMail returns what was posted.
func (p *placer) takeMail() []placement.Event {
	p.mailMu.Lock()
	defer p.mailMu.Unlock()
	m := p.mail
	p.mail = nil
	return m
}

// itemBuffer holds what the crawler's fetch workers report (fetch markers
// and sitemap reads) until flushItems keeps and replicates it: they must
// not block.
type itemBuffer struct {
	mu      sync.Mutex
	markers []peermsg.Fetched
	maps    []peermsg.Sitemap
}

func (b *itemBuffer) take() ([]peermsg.Fetched, []peermsg.Sitemap) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, s := b.markers, b.maps
	b.markers, b.maps = nil, nil
	return m, s
}

// maxBufferedItems bounds the buffer (a stalled flush costs markers, not
// memory).
const maxBufferedItems = 20000

// flushItems keeps this node's own fetch markers and sitemap reads (under
// the keys a replica keeps them: should it hand the host back and take it
// over again, they tell it what it settled itself) and replicates them,
// every ReplicaLinger until ctx ends.
func (p *placer) flushItems(ctx context.Context, data *hostData) {
	t := time.NewTicker(ReplicaLinger)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		markers, sitemaps := p.items.take()
		if len(markers)+len(sitemaps) == 0 {
			continue
		}
		if err := data.keep(markers, sitemaps, nil, markers); err != nil {
			p.errs.add("keep fetch markers", err)
		}
		byHost := map[string][][]byte{}
		for _, m := range markers {
			byHost[m.Host] = append(byHost[m.Host], record(recMarker, m.URL))
		}
		for _, s := range sitemaps {
			byHost[s.Host] = append(byHost[s.Host], append([]byte{recSitemap}, peermsg.EncodeSitemap(s)...))
		}
		hosts := slices.Collect(maps.Keys(byHost))
		recordsOf := func(h string) ([][]byte, error) { return byHost[h], nil }
		if err := p.replicate(ctx, hosts, recordsOf); err != nil && ctx.Err() == nil {
			p.errs.add("replicate fetch markers", err)
		}
	}
}

// prefixLegacyOutbox is the replica outbox of earlier versions:
// "n:o/<peer>\x00<kind><url>", kind 'd' (a page) or 'f' (a fetch marker)
// with an empty value, or 's' with the sitemap as value: the records of
// topicReplica, kept in the key. moveLegacyOutbox moves them into p2p's
// outbox at start, so that a restart across versions loses nothing.
const prefixLegacyOutbox = "n:o/"

// moveLegacyOutbox appends every legacy outbox record to out under
// topicReplica, then deletes it. Records that do not parse are deleted.
func moveLegacyOutbox(db *badger.DB, out *p2p.Outbox) (moved int, err error) {
	byPeer := map[peer.ID][][]byte{}
	var keys [][]byte
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixLegacyOutbox)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			key := item.KeyCopy(nil)
			keys = append(keys, key)
			peerText, id, ok := strings.Cut(string(key[len(prefixLegacyOutbox):]), "\x00")
			p, perr := peer.Decode(peerText)
			if !ok || perr != nil || len(id) < 2 {
				continue
			}
			switch id[0] {
			case recPage, recMarker:
				byPeer[p] = append(byPeer[p], []byte(id))
			case recSitemap:
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				byPeer[p] = append(byPeer[p], append([]byte{recSitemap}, v...))
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read legacy replica outbox: %w", err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	for p, recs := range byPeer {
		if _, err := out.Append(p, topicReplica, recs, false); err != nil {
			return moved, fmt.Errorf("move legacy replica outbox: %w", err)
		}
		moved += len(recs)
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return moved, fmt.Errorf("delete legacy replica outbox: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return moved, fmt.Errorf("delete legacy replica outbox: %w", err)
	}
	return moved, nil
}
