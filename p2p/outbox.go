package p2p

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// URLRecord is one discovered URL on its way to the owner of its host.
type URLRecord struct {
	URL        string
	Anchor     string
	SourceHost string
	Cash       float64
	Depth      int
	Hops       int
}

// errBusy refuses a URL batch from a peer over its allowance; the sender
// retries it from its outbox after a backoff.
var errBusy = errors.New("busy: URL rate limit, retry later")

// errOutboxFull refuses records for a peer whose outbox holds
// MaxOutboxPerPeer records.
var errOutboxFull = errors.New("outbox full")

// ErrInvalidRecord marks records refused by Forward (too long, not UTF-8,
// negative or non-finite cash...). The valid records of the same call are
// still enqueued.
var ErrInvalidRecord = errors.New("invalid URL record")

// Outbox keys: "p:o/<peer ID, base58>/<seq, 8 bytes big-endian>" -> one
// encoded record. seq is global and monotonic across restarts (rebuilt
// from the largest key at start), so each outbox drains in FIFO order.
const outboxPrefix = "p:o/"

func outboxPeerPrefix(p peer.ID) []byte { return []byte(outboxPrefix + p.String() + "/") }

func outboxKey(p peer.ID, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(outboxPeerPrefix(p), seq)
}

// parseOutboxKey splits a key into peer and seq.
func parseOutboxKey(k []byte) (peer.ID, uint64, bool) {
	rest, ok := bytes.CutPrefix(k, []byte(outboxPrefix))
	if !ok || len(rest) < 10 || rest[len(rest)-9] != '/' {
		return "", 0, false
	}
	p, err := peer.Decode(string(rest[:len(rest)-9]))
	if err != nil {
		return "", 0, false
	}
	return p, binary.BigEndian.Uint64(rest[len(rest)-8:]), true
}

// loadOutboxState counts records left by a previous run and restores the
// sequence counter.
func (n *Node) loadOutboxState() error {
	var count int64
	var maxSeq uint64
	perPeer := map[peer.ID]int{}
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(outboxPrefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if p, seq, ok := parseOutboxKey(it.Item().Key()); ok {
				count++
				perPeer[p]++
				maxSeq = max(maxSeq, seq)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("p2p: scan outbox: %w", err)
	}
	n.depth.Store(count)
	n.seq.Store(maxSeq)
	n.obMu.Lock()
	n.obCount = perPeer
	n.obMu.Unlock()
	return nil
}

// startPendingSenders starts a sender for every peer with a non-empty
// outbox from a previous run.
func (n *Node) startPendingSenders() {
	var peers []peer.ID
	_ = n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(outboxPrefix)})
		defer it.Close()
		var last peer.ID
		for it.Rewind(); it.Valid(); it.Next() {
			if p, _, ok := parseOutboxKey(it.Item().Key()); ok && p != last {
				peers = append(peers, p)
				last = p
			}
		}
		return nil
	})
	for _, p := range peers {
		n.kickSender(p)
	}
}

// Forward routes records to the owners of their hosts by this node's view.
// Records this node owns go straight to the URL handler; the others are
// appended durably to per-owner outboxes. It returns once every record is
// either handled or persisted (as durable as the DB's SyncWrites setting).
// Delivery is at-least-once: a batch whose ack is lost is sent again.
func (n *Node) Forward(ctx context.Context, recs []URLRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var invalid []error
	byOwner := map[peer.ID][]URLRecord{}
	view := n.View()
	for _, r := range recs {
		if err := validateRecord(r); err != nil {
			n.st.urlsInvalid.Add(1)
			if len(invalid) < 3 {
				invalid = append(invalid, fmt.Errorf("%.100q: %w", r.URL, err))
			}
			continue
		}
		host, err := hostOf(r.URL)
		if err != nil {
			n.st.urlsInvalid.Add(1)
			if len(invalid) < 3 {
				invalid = append(invalid, err)
			}
			continue
		}
		o := view.Owner(host)
		byOwner[o] = append(byOwner[o], r)
	}
	for o, rs := range byOwner {
		if o == n.h.ID() {
			if err := n.deliverLocal(ctx, n.h.ID(), rs); err != nil {
				return err
			}
			continue
		}
		if err := n.appendOutbox(o, rs); errors.Is(err, errOutboxFull) {
			// Only a member silent for very long fills an outbox, and a
			// silent member leaves the view, which re-routes its outbox:
			// this node's own links to it are dropped rather than stall
			// the crawl.
			n.st.urlsDropped.Add(uint64(len(rs)))
			if n.refusalLog.Allow() {
				n.log.Warn("outbox full: dropping forwarded URLs", "peer", o, "records", len(rs), "cap", n.cfg.MaxOutboxPerPeer)
			}
		} else if err != nil {
			return err
		}
	}
	if len(invalid) > 0 {
		return fmt.Errorf("p2p: forward: %w: %w", ErrInvalidRecord, errors.Join(invalid...))
	}
	return nil
}

func (n *Node) deliverLocal(ctx context.Context, from peer.ID, recs []URLRecord) error {
	n.mu.Lock()
	h := n.urlH
	n.mu.Unlock()
	if h == nil {
		return errors.New("p2p: no URL handler set for records this node owns")
	}
	if err := h(ctx, from, recs); err != nil {
		return fmt.Errorf("p2p: local URL handler: %w", err)
	}
	return nil
}

// SetURLHandler installs the receiver of records this node owns. The
// handler must make them durable before returning nil (the batch is then
// acknowledged); an error makes the sender retry later. Because delivery
// is at-least-once, the handler must tolerate duplicates (node dedups
// against its URL-seen set).
func (n *Node) SetURLHandler(h func(ctx context.Context, from peer.ID, recs []URLRecord) error) {
	n.mu.Lock()
	n.urlH = h
	n.mu.Unlock()
}

// SetURLFilter installs a check of the records of every batch a peer
// sends, made where they first arrive, before they are handled or passed
// on: f reports for each record whether it is taken, and those it refuses
// are dropped (Stats.URLsFiltered). node decides which links a sender may
// vouch for; p2p does not know what a source host means.
func (n *Node) SetURLFilter(f func(from peer.ID, recs []URLRecord) []bool) {
	n.mu.Lock()
	n.urlFilter = f
	n.mu.Unlock()
}

// appendOutbox persists records for peer p and wakes its sender.
func (n *Node) appendOutbox(p peer.ID, recs []URLRecord) error {
	if len(recs) == 0 {
		return nil
	}
	n.obMu.Lock()
	if n.obCount[p]+len(recs) > n.cfg.MaxOutboxPerPeer {
		n.obMu.Unlock()
		n.st.outboxFull.Add(uint64(len(recs)))
		return fmt.Errorf("p2p: outbox of %s: %w (%d records)", p, errOutboxFull, n.cfg.MaxOutboxPerPeer)
	}
	n.obCount[p] += len(recs)
	n.obMu.Unlock()
	written := false
	defer func() {
		if !written {
			n.obMu.Lock()
			n.obCount[p] -= len(recs)
			n.obMu.Unlock()
		}
	}()
	txn := n.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, r := range recs {
		k, v := outboxKey(p, n.seq.Add(1)), encodeOutboxRecord(r)
		err := txn.Set(k, v)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return fmt.Errorf("p2p: persist outbox: %w", err)
			}
			txn = n.db.NewTransaction(true)
			err = txn.Set(k, v)
		}
		if err != nil {
			return fmt.Errorf("p2p: persist outbox: %w", err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("p2p: persist outbox: %w", err)
	}
	written = true
	n.depth.Add(int64(len(recs)))
	n.kickSender(p)
	return nil
}

// abortSend cancels an in-flight batch to p (it has left).
func (n *Node) abortSend(p peer.ID) {
	n.obMu.Lock()
	if cancel := n.inflight[p]; cancel != nil {
		cancel()
	}
	n.obMu.Unlock()
}

// senderSignals wake a sender: kick when records were added (honoured
// when idle), wake when p's membership changed (also cuts a backoff short:
// a peer that just joined is worth trying now, one that left is re-routed).
type senderSignals struct {
	kick, wake chan struct{}
}

// kickSender wakes (or starts) the sender goroutine for p.
func (n *Node) kickSender(p peer.ID) { n.signalSender(p, false) }

// wakeSender is kickSender for membership changes.
func (n *Node) wakeSender(p peer.ID) { n.signalSender(p, true) }

func (n *Node) signalSender(p peer.ID, membership bool) {
	if p == n.h.ID() {
		return
	}
	n.obMu.Lock()
	defer n.obMu.Unlock()
	if n.closed.Load() {
		return
	}
	sig, ok := n.senders[p]
	if !ok {
		sig = &senderSignals{kick: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
		n.senders[p] = sig
		n.goLoop(func() { n.senderLoop(p, sig) })
	}
	// Signalled under obMu, so that retireSender cannot remove a sender
	// between this lookup and the signal.
	ch := sig.kick
	if membership {
		ch = sig.wake
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// retireSender ends p's sender when it is idle (outbox empty, no backoff)
// and no signal is pending: a node in a network of N members would
// otherwise keep N parked goroutines, most for peers it never forwards to.
// The next kick starts a new one.
func (n *Node) retireSender(p peer.ID, sig *senderSignals) bool {
	n.obMu.Lock()
	defer n.obMu.Unlock()
	if len(sig.kick) > 0 || len(sig.wake) > 0 {
		return false
	}
	delete(n.senders, p)
	return true
}

type outboxEntry struct {
	key []byte
	rec URLRecord
}

// readOutbox returns the oldest records for p, bounded by count and by an
// estimate of the inflated batch size.
func (n *Node) readOutbox(p peer.ID) ([]outboxEntry, error) {
	var out []outboxEntry
	var corrupt [][]byte
	budget := n.cfg.MaxMessageBytes / 2
	err := n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: outboxPeerPrefix(p), PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		size := 0
		for it.Rewind(); it.Valid() && len(out) < n.cfg.BatchMaxURLs; it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			rec, err := decodeOutboxRecord(v)
			if err != nil {
				corrupt = append(corrupt, item.KeyCopy(nil))
				continue
			}
			size += len(v) + 16
			if size > budget && len(out) > 0 {
				break
			}
			out = append(out, outboxEntry{key: item.KeyCopy(nil), rec: rec})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("p2p: read outbox: %w", err)
	}
	if len(corrupt) > 0 {
		n.log.Error("dropping undecodable outbox records", "peer", p, "count", len(corrupt))
		if err := n.deleteKeys(corrupt); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (n *Node) deleteKeys(keys [][]byte) error {
	wb := n.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return fmt.Errorf("p2p: delete outbox records: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("p2p: delete outbox records: %w", err)
	}
	n.depth.Add(-int64(len(keys)))
	n.obMu.Lock()
	for _, k := range keys {
		if p, _, ok := parseOutboxKey(k); ok {
			if n.obCount[p]--; n.obCount[p] <= 0 {
				delete(n.obCount, p)
			}
		}
	}
	n.obMu.Unlock()
	return nil
}

// senderLoop drains p's outbox: batch, send, delete on ack; back off
// exponentially (with jitter) while p is unreachable; re-route the outbox
// when p is no longer a member; end once the outbox is empty.
func (n *Node) senderLoop(p peer.ID, sig *senderSignals) {
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-n.ctx.Done():
				t.Stop()
				return
			case <-sig.wake:
			case <-t.C:
			}
			t.Stop()
		} else {
			select {
			case <-n.ctx.Done():
				return
			case <-sig.kick:
			case <-sig.wake:
			}
			if n.cfg.BatchDelay > 0 && !sleepCtx(n.ctx, n.cfg.BatchDelay) {
				return
			}
		}
		for n.ctx.Err() == nil {
			entries, err := n.readOutbox(p)
			if err != nil {
				n.log.Error("outbox", "peer", p, "err", err)
				backoff = n.nextBackoff(backoff)
				break
			}
			if len(entries) == 0 {
				backoff = 0
				break
			}
			if !n.isMember(p) {
				// Give a restarted node time to hear heartbeats before
				// deciding that an outbox's peer is gone.
				if time.Since(n.start) < 2*n.cfg.MemberTimeout {
					backoff = n.nextBackoff(backoff)
					break
				}
				if err := n.reroute(p, entries); err != nil {
					n.log.Error("re-route outbox", "peer", p, "err", err)
					backoff = n.nextBackoff(backoff)
					break
				}
				continue
			}
			if err := n.sendBatch(p, entries); err != nil {
				n.st.sendFailures.Add(1)
				n.log.Debug("URL batch not delivered", "peer", p, "records", len(entries), "err", err)
				backoff = n.nextBackoff(backoff)
				break
			}
			backoff = 0
		}
		if backoff == 0 && n.ctx.Err() == nil && n.retireSender(p, sig) {
			return
		}
	}
}

func (n *Node) nextBackoff(cur time.Duration) time.Duration {
	next := min(max(cur*2, n.cfg.RetryMin), n.cfg.RetryMax)
	// ±20% jitter so that senders to one recovering peer spread out.
	return next + time.Duration((rand.Float64()-0.5)*0.4*float64(next))
}

func (n *Node) sendBatch(p peer.ID, entries []outboxEntry) error {
	recs := make([]URLRecord, len(entries))
	keys := make([][]byte, len(entries))
	for i, e := range entries {
		recs[i], keys[i] = e.rec, e.key
	}
	msg, err := encodeURLBatch(recs)
	if err != nil {
		return err
	}
	if len(msg) > n.cfg.MaxMessageBytes-16 {
		if len(entries) == 1 {
			n.log.Error("dropping URL record larger than the message cap", "peer", p, "url", recs[0].URL)
			return n.deleteKeys(keys)
		}
		half := len(entries) / 2
		if err := n.sendBatch(p, entries[:half]); err != nil {
			return err
		}
		return n.sendBatch(p, entries[half:])
	}
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	defer cancel()
	// A member that leaves aborts the send at once (its outbox is then
	// re-routed) instead of waiting for a dial to a dead address to fail.
	n.obMu.Lock()
	n.inflight[p] = cancel
	n.obMu.Unlock()
	defer func() {
		n.obMu.Lock()
		delete(n.inflight, p)
		n.obMu.Unlock()
	}()
	_, wrote, err := n.call(ctx, p, n.protoURLs, msg)
	n.st.forwardBytes.Add(uint64(wrote))
	if err != nil {
		return err
	}
	// Ack received: the receiver has made the records durable (or passed
	// them on), so now, and only now, they leave our outbox. They count as
	// forwarded first, so that an empty outbox never shows them uncounted.
	n.st.batchesSent.Add(1)
	n.st.urlsForwarded.Add(uint64(len(recs)))
	return n.deleteKeys(keys)
}

// reroute moves the records of a departed peer to the owners by the
// current view (the new owner of their hosts), atomically per record set.
func (n *Node) reroute(from peer.ID, entries []outboxEntry) error {
	view := n.View()
	byOwner := map[peer.ID][]URLRecord{}
	var local []URLRecord
	for _, e := range entries {
		host, err := hostOf(e.rec.URL)
		if err != nil {
			continue
		}
		o := view.Owner(host)
		if o == n.h.ID() {
			local = append(local, e.rec)
		} else {
			byOwner[o] = append(byOwner[o], e.rec)
		}
	}
	if len(local) > 0 {
		ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
		err := n.deliverLocal(ctx, n.h.ID(), local)
		cancel()
		if err != nil {
			return err
		}
	}
	for o, rs := range byOwner {
		if err := n.appendOutbox(o, rs); err != nil {
			return err
		}
	}
	keys := make([][]byte, len(entries))
	for i, e := range entries {
		keys[i] = e.key
	}
	n.log.Info("re-routed outbox of departed member", "peer", from, "records", len(entries))
	return n.deleteKeys(keys)
}

// handleURLs receives a batch: records this node owns go to the handler,
// the others move on greedily to the closest member it knows (which is
// strictly closer to the host than this node, so forwarding cannot loop).
//
// A sender over its URL allowance (PeerURLRate) is told it is busy before
// its batch is even inflated; it keeps the batch in its outbox and retries.
// Records for hosts this node does not own are not taken on trust either
// way: each goes to the owner by this node's view, at most MaxHops hops
// from its origin, and counts against the sender's allowance like the rest.
func (n *Node) handleURLs(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	if n.opts.intakeGate != nil {
		if err := n.opts.intakeGate(); err != nil {
			return nil, err
		}
	}
	if !n.urlAllowance(from) {
		n.st.urlBatchesRefused.Add(1)
		return nil, errBusy
	}
	recs, err := decodeURLBatch(msg, n.cfg.MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	if !n.takeURLs(from, len(recs)) {
		n.st.urlBatchesRefused.Add(1)
		return nil, errBusy
	}
	n.st.batchesReceived.Add(1)
	n.st.urlsReceived.Add(uint64(len(recs)))
	n.st.receivedBytes.Add(uint64(len(msg) + uvarintLen(uint64(len(msg)))))
	view := n.View()
	self := n.h.ID()
	n.mu.Lock()
	filter := n.urlFilter
	n.mu.Unlock()
	var keep []bool
	if filter != nil {
		keep = filter(from, recs)
	}
	var mine []URLRecord
	onward := map[peer.ID][]URLRecord{}
	for i, r := range recs {
		if keep != nil && !keep[i] {
			n.st.urlsFiltered.Add(1)
			continue
		}
		for {
			cur := n.st.maxHops.Load()
			if int64(r.Hops) <= cur || n.st.maxHops.CompareAndSwap(cur, int64(r.Hops)) {
				break
			}
		}
		host, err := hostOf(r.URL)
		if err != nil {
			return nil, malformed("record url: %v", err)
		}
		o := view.Owner(host)
		if o == self {
			mine = append(mine, r)
			continue
		}
		if r.Hops+1 > n.cfg.MaxHops {
			n.st.urlsDropped.Add(1)
			n.log.Warn("dropping URL past hop limit", "url", r.URL, "hops", r.Hops, "from", from)
			continue
		}
		r.Hops++
		onward[o] = append(onward[o], r)
	}
	if len(mine) > 0 {
		if err := n.deliverLocal(ctx, from, mine); err != nil {
			return nil, err
		}
	}
	for o, rs := range onward {
		if err := n.appendOutbox(o, rs); errors.Is(err, errOutboxFull) {
			n.st.urlBatchesRefused.Add(1)
			return nil, errBusy // the sender keeps the batch and retries
		} else if err != nil {
			return nil, err
		}
		n.st.urlsReforwarded.Add(uint64(len(rs)))
	}
	return nil, nil
}
