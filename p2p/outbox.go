package p2p

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TopicURLs is the outbox topic of URL forwarding (Forward): its records
// are URL records, sent on the URL protocol, and the records of a peer
// that left are re-routed to the owners by the current view.
const TopicURLs = "urls"

// OutboxTopic says how the records of one topic travel. Records are
// opaque to the outbox; the topic's Batch makes messages of them, sent
// on the deliver protocol under the topic's name.
type OutboxTopic struct {
	// Batch makes one message of the oldest records for a peer and says
	// how many of them it used (at least one). A nil message drops the
	// used records without sending them (they went stale).
	Batch func(ctx context.Context, to peer.ID, recs [][]byte) (msg []byte, used int, err error)
	// Delivered hears of every batch the peer acknowledged, with the
	// sequence number of its last record; Failed of every delivery that
	// failed. Both run on the sender's goroutine and must not block.
	Delivered func(to peer.ID, seq uint64)
	Failed    func(to peer.ID, err error)
	// Linger is how long a record appended without urgency waits for
	// company, before a queue's first message and between its messages:
	// after a message that took fewer records than it could, the sender
	// lingers again, so that records appended while it was in flight
	// travel together; after a full one it sends the next at once. An
	// urgent Append ends a linger. MaxRecords caps the records read for
	// one batch; SendTimeout bounds one delivery.
	Linger      time.Duration
	MaxRecords  int
	SendTimeout time.Duration
}

// Outbox keeps records for peers by topic in Badger and delivers them:
// one sender goroutine per peer and topic with records (it ends when they
// are gone; the next Append starts another) reads them oldest first,
// sends a batch, and deletes the records once the peer acknowledged it,
// which the receiver does once its handler made them durable. One batch
// is in flight per peer and topic (the acknowledgement is the flow
// control); failures back off exponentially (RetryMin to RetryMax, ±20%
// jitter), cut short when the peer's membership changes. Delivery is at
// least once: a lost acknowledgement means a resend.
//
// Badger keys: "p:q/<topic>\x00<peer ID base58>\x00<seq 8 bytes
// big-endian>" -> one record. seq is global and monotonic, restored from
// the largest key at start, so each queue drains in order. URL records
// of an earlier version ("p:o/<peer>/<seq>") are moved in at start.
//
// Delivered records leave deletion markers that Badger keeps until a
// compaction, and an iterator walks over every one of them: a read from
// the start of a queue would cost more with every record the queue ever
// held. So each queue has a front, below which every record is deleted,
// and reads seek to it. A read moves the front up to the first record it
// found, but never past an Append in progress (its records may commit
// below the first record found), and not at all when an Append of the
// queue completed while it read (see read).
type Outbox struct {
	n *Node

	mu       sync.Mutex
	topics   map[string]OutboxTopic
	senders  map[queue]*senderSignals
	inflight map[queue]context.CancelFunc
	count    map[queue]int // records in each queue
	seq      atomic.Uint64
	// front[q]: every record of q below this seq is deleted.
	front map[queue]uint64
	// appending[q] holds the first seqs of q's Appends in progress (a
	// multiset); appended[q] counts q's completed Appends.
	appending map[queue]map[uint64]int
	appended  map[queue]uint64
}

// queue is the records of one topic for one peer.
type queue struct {
	topic string
	peer  peer.ID
}

const (
	outboxPrefix       = "p:q/"
	legacyOutboxPrefix = "p:o/"
)

func queuePrefix(q queue) []byte {
	return []byte(outboxPrefix + q.topic + "\x00" + q.peer.String() + "\x00")
}

func recordKey(q queue, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(queuePrefix(q), seq)
}

// parseRecordKey splits a key into queue and seq.
func parseRecordKey(k []byte) (queue, uint64, bool) {
	rest, ok := bytes.CutPrefix(k, []byte(outboxPrefix))
	if !ok || len(rest) < 10 || rest[len(rest)-9] != 0 {
		return queue{}, 0, false
	}
	topic, id, ok := bytes.Cut(rest[:len(rest)-9], []byte{0})
	if !ok || len(topic) == 0 {
		return queue{}, 0, false
	}
	p, err := peer.Decode(string(id))
	if err != nil {
		return queue{}, 0, false
	}
	return queue{string(topic), p}, binary.BigEndian.Uint64(rest[len(rest)-8:]), true
}

func newOutbox(n *Node) *Outbox {
	return &Outbox{
		n: n, topics: map[string]OutboxTopic{}, senders: map[queue]*senderSignals{},
		inflight: map[queue]context.CancelFunc{}, count: map[queue]int{},
		front: map[queue]uint64{}, appending: map[queue]map[uint64]int{}, appended: map[queue]uint64{},
	}
}

// SetTopic installs how the records of topic travel; records of a topic
// without one wait.
func (o *Outbox) SetTopic(topic string, t OutboxTopic) {
	o.mu.Lock()
	o.topics[topic] = t
	var waiting []queue
	for q, c := range o.count {
		if q.topic == topic && c > 0 {
			waiting = append(waiting, q)
		}
	}
	o.mu.Unlock()
	for _, q := range waiting {
		o.signal(q, true)
	}
}

// load moves the records of an earlier version in, counts the records
// left by the last run and restores the sequence counter.
func (o *Outbox) load() error {
	if err := o.moveLegacy(); err != nil {
		return err
	}
	count := map[queue]int{}
	var maxSeq uint64
	err := o.n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(outboxPrefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if q, seq, ok := parseRecordKey(it.Item().Key()); ok {
				count[q]++
				maxSeq = max(maxSeq, seq)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("p2p: scan outbox: %w", err)
	}
	o.seq.Store(maxSeq)
	o.mu.Lock()
	o.count = count
	o.mu.Unlock()
	return nil
}

// moveLegacy appends the URL records of the earlier key scheme to
// TopicURLs, in their order, and deletes them.
func (o *Outbox) moveLegacy() error {
	var keys, vals [][]byte
	var peers []peer.ID
	err := o.n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(legacyOutboxPrefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			rest := k[len(legacyOutboxPrefix):]
			keys = append(keys, k)
			if len(rest) < 10 || rest[len(rest)-9] != '/' {
				peers, vals = append(peers, ""), append(vals, nil)
				continue
			}
			p, err := peer.Decode(string(rest[:len(rest)-9]))
			if err != nil {
				p = ""
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			peers, vals = append(peers, p), append(vals, v)
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return err
	}
	wb := o.n.db.NewWriteBatch()
	defer wb.Cancel()
	var seq uint64
	for i, k := range keys {
		if peers[i] != "" {
			seq++
			if err := wb.Set(recordKey(queue{TopicURLs, peers[i]}, seq), vals[i]); err != nil {
				return fmt.Errorf("p2p: move outbox: %w", err)
			}
		}
		if err := wb.Delete(k); err != nil {
			return fmt.Errorf("p2p: move outbox: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("p2p: move outbox: %w", err)
	}
	o.n.log.Info("moved outbox records to the topic outbox", "records", seq)
	return nil
}

// startSenders starts a sender for every queue left by the last run.
func (o *Outbox) startSenders() {
	o.mu.Lock()
	var qs []queue
	for q, c := range o.count {
		if c > 0 {
			qs = append(qs, q)
		}
	}
	o.mu.Unlock()
	for _, q := range qs {
		o.signal(q, true)
	}
}

// Append keeps recs for peer to under topic and wakes the sender: at once
// if urgent, else after the topic's Linger. It returns the sequence
// number of the last record once all are as durable as the DB's
// SyncWrites setting makes them. A queue holds at most MaxOutboxPerPeer
// records; beyond, nothing is kept and the error wraps errOutboxFull.
func (o *Outbox) Append(to peer.ID, topic string, recs [][]byte, urgent bool) (last uint64, err error) {
	if len(recs) == 0 {
		return 0, nil
	}
	if topic == "" || len(topic) > maxTopicBytes {
		return 0, fmt.Errorf("p2p: outbox: topic length %d out of range", len(topic))
	}
	q := queue{topic, to}
	o.mu.Lock()
	if o.count[q]+len(recs) > o.n.cfg.MaxOutboxPerPeer {
		o.mu.Unlock()
		o.n.st.outboxFull.Add(uint64(len(recs)))
		return 0, fmt.Errorf("p2p: outbox %s of %s: %w (%d records)", topic, to, errOutboxFull, o.n.cfg.MaxOutboxPerPeer)
	}
	o.count[q] += len(recs)
	last = o.seq.Add(uint64(len(recs)))
	first := last - uint64(len(recs)) + 1
	if o.appending[q] == nil {
		o.appending[q] = map[uint64]int{}
	}
	o.appending[q][first]++
	o.mu.Unlock()
	written := false
	defer func() {
		o.mu.Lock()
		if !written {
			o.count[q] -= len(recs)
		}
		if o.appending[q][first]--; o.appending[q][first] == 0 {
			delete(o.appending[q], first)
		}
		if len(o.appending[q]) == 0 {
			delete(o.appending, q)
		}
		o.appended[q]++
		o.mu.Unlock()
	}()
	txn := o.n.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	prefix := queuePrefix(q)
	for i, r := range recs {
		k := binary.BigEndian.AppendUint64(slices.Clip(prefix), first+uint64(i))
		err := txn.Set(k, r)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return 0, fmt.Errorf("p2p: persist outbox: %w", err)
			}
			txn = o.n.db.NewTransaction(true)
			err = txn.Set(k, r)
		}
		if err != nil {
			return 0, fmt.Errorf("p2p: persist outbox: %w", err)
		}
	}
	if err := txn.Commit(); err != nil {
		return 0, fmt.Errorf("p2p: persist outbox: %w", err)
	}
	written = true
	o.signal(q, urgent)
	return last, nil
}

// Drop deletes every record for peer to under topic.
func (o *Outbox) Drop(to peer.ID, topic string) error {
	q := queue{topic, to}
	var keys [][]byte
	err := o.n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: queuePrefix(q)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("p2p: drop outbox %s of %s: %w", topic, to, err)
	}
	return o.delete(q, keys)
}

// Peers lists the peers with records under topic.
func (o *Outbox) Peers(topic string) []peer.ID {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []peer.ID
	for q, c := range o.count {
		if q.topic == topic && c > 0 {
			out = append(out, q.peer)
		}
	}
	return out
}

// Depth is the number of records waiting under topic, in all and by peer.
func (o *Outbox) Depth(topic string) (int, map[peer.ID]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	total, byPeer := 0, map[peer.ID]int{}
	for q, c := range o.count {
		if q.topic == topic && c > 0 {
			total += c
			byPeer[q.peer] = c
		}
	}
	return total, byPeer
}

// depthByTopic is the number of records waiting under each topic.
func (o *Outbox) depthByTopic() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for q, c := range o.count {
		if c > 0 {
			out[q.topic] += c
		}
	}
	return out
}

// senderSignals wake a sender: kick when records were added urgently
// (honoured when idle), nudge when records were added without urgency
// (the sender lingers first), wake when the peer's membership changed
// (also cuts a backoff short: a peer that just joined is worth trying
// now, one that left is re-routed).
type senderSignals struct {
	kick, nudge, wake chan struct{}
}

// signal wakes (or starts) the sender of q.
func (o *Outbox) signal(q queue, urgent bool) {
	if urgent {
		o.notify(q, func(s *senderSignals) chan struct{} { return s.kick })
	} else {
		o.notify(q, func(s *senderSignals) chan struct{} { return s.nudge })
	}
}

// wakePeer wakes the senders of every queue of p (its membership changed)
// and, when abort, cancels their batches in flight (it left: a dial to a
// dead address would take long to fail, and its URL records are
// re-routed).
func (o *Outbox) wakePeer(p peer.ID, abort bool) {
	o.mu.Lock()
	var qs []queue
	for q := range o.senders {
		if q.peer == p {
			qs = append(qs, q)
			if cancel := o.inflight[q]; abort && cancel != nil {
				cancel()
			}
		}
	}
	for q, c := range o.count {
		if q.peer == p && c > 0 && o.senders[q] == nil {
			qs = append(qs, q)
		}
	}
	o.mu.Unlock()
	for _, q := range qs {
		o.notify(q, func(s *senderSignals) chan struct{} { return s.wake })
	}
}

func (o *Outbox) notify(q queue, ch func(*senderSignals) chan struct{}) {
	if o.n.closed.Load() || q.peer == o.n.h.ID() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n.closed.Load() {
		return
	}
	sig, ok := o.senders[q]
	if !ok {
		sig = &senderSignals{kick: make(chan struct{}, 1), nudge: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
		o.senders[q] = sig
		o.n.goLoop(func() { o.senderLoop(q, sig) })
	}
	// Signalled under mu, so that retire cannot remove a sender between
	// this lookup and the signal.
	select {
	case ch(sig) <- struct{}{}:
	default:
	}
}

// retire ends q's sender when it is idle (queue empty, no backoff) and no
// signal is pending: a node in a network of N members would otherwise
// keep N parked goroutines per topic, most for peers it never sends to.
func (o *Outbox) retire(q queue, sig *senderSignals) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(sig.kick) > 0 || len(sig.nudge) > 0 || len(sig.wake) > 0 {
		return false
	}
	delete(o.senders, q)
	return true
}

type outboxEntry struct {
	key []byte
	seq uint64
	val []byte
}

// read returns up to limit of the oldest records of q, and at most about
// budget bytes of them (one at least), seeking to q's front, which it
// then moves to the first record found. That is safe when no Append of q
// completed between the check before the read and the one after: every
// Append then either committed before the read's snapshot (its records
// are seen), or was in progress at the first check (the front stays at or
// below its first seq), or took its seqs after the first check, above
// every record committed by then.
func (o *Outbox) read(q queue, limit, budget int) ([]outboxEntry, error) {
	o.mu.Lock()
	from, appended := o.front[q], o.appended[q]
	bound := uint64(math.MaxUint64)
	for first := range o.appending[q] {
		bound = min(bound, first)
	}
	o.mu.Unlock()
	var out []outboxEntry
	err := o.n.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: queuePrefix(q), PrefetchValues: true, PrefetchSize: min(limit, 256)})
		defer it.Close()
		size := 0
		for it.Seek(recordKey(q, from)); it.Valid() && len(out) < limit; it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			size += len(v) + 16
			if size > budget && len(out) > 0 {
				break
			}
			k := item.KeyCopy(nil)
			out = append(out, outboxEntry{key: k, seq: binary.BigEndian.Uint64(k[len(k)-8:]), val: v})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("p2p: read outbox: %w", err)
	}
	if len(out) > 0 {
		o.mu.Lock()
		if o.appended[q] == appended {
			o.front[q] = max(o.front[q], min(out[0].seq, bound))
		}
		o.mu.Unlock()
	}
	return out, nil
}

// delete removes the records under keys, all of them q's, and takes them
// off q's count.
func (o *Outbox) delete(q queue, keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	wb := o.n.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return fmt.Errorf("p2p: delete outbox records: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("p2p: delete outbox records: %w", err)
	}
	o.mu.Lock()
	if o.count[q] -= len(keys); o.count[q] <= 0 {
		delete(o.count, q)
	}
	o.mu.Unlock()
	return nil
}

// senderLoop drains q: batch, send, delete on ack, linger between
// messages as the topic says; back off exponentially (with jitter) while
// the peer is unreachable; re-route URL records when the peer is no
// longer a member; end once the queue is empty.
func (o *Outbox) senderLoop(q queue, sig *senderSignals) {
	n := o.n
	backoff := time.Duration(0)
	for {
		if !o.await(q, sig, backoff) {
			return
		}
		for n.ctx.Err() == nil {
			more, err := o.deliverOnce(q)
			if err != nil {
				n.st.sendFailures.Add(1)
				n.log.Debug("outbox delivery failed", "topic", q.topic, "peer", q.peer, "err", err)
				backoff = n.nextBackoff(backoff)
				break
			}
			backoff = 0
			if !more {
				o.nudgeIfQueued(q, sig)
				break
			}
		}
		if backoff == 0 && n.ctx.Err() == nil && o.retire(q, sig) {
			return
		}
	}
}

// nudgeIfQueued leaves the sender of q a nudge while q holds records.
// Those appended while its last message was in flight left one of their
// own; those its last read left for its byte budget did not, and without
// one the sender would retire with them queued.
func (o *Outbox) nudgeIfQueued(q queue, sig *senderSignals) {
	o.mu.Lock()
	queued := o.count[q] > 0
	o.mu.Unlock()
	if queued {
		select {
		case sig.nudge <- struct{}{}:
		default:
		}
	}
}

// await blocks until the sender has work: after a backoff, or when
// signalled (lingering after a nudge); false once the node closes.
func (o *Outbox) await(q queue, sig *senderSignals, backoff time.Duration) bool {
	ctx := o.n.ctx
	if backoff > 0 {
		t := time.NewTimer(backoff)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-sig.wake:
		case <-t.C:
		}
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-sig.kick:
		return true
	case <-sig.wake:
		return true
	case <-sig.nudge:
	}
	linger := o.n.cfg.BatchDelay
	if q.topic != TopicURLs {
		o.mu.Lock()
		linger = o.topics[q.topic].Linger
		o.mu.Unlock()
	}
	if linger <= 0 {
		return true
	}
	t := time.NewTimer(linger)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-sig.kick:
	case <-t.C:
	}
	return true
}

// deliverOnce sends one batch of q and reports whether to send again at
// once: records may remain (for a topic that lingers, only after a full
// message; the records appended meanwhile left a signal that ends the
// sender's next wait).
func (o *Outbox) deliverOnce(q queue) (more bool, err error) {
	n := o.n
	if q.topic == TopicURLs {
		entries, err := o.read(q, n.cfg.BatchMaxURLs, n.cfg.MaxMessageBytes/2)
		if err != nil || len(entries) == 0 {
			return false, err
		}
		if !n.mem.isMember(q.peer) {
			// Give a restarted node time to hear heartbeats before
			// deciding that an outbox's peer is gone.
			if time.Since(n.start) < 2*n.cfg.MemberTimeout {
				return false, fmt.Errorf("p2p: %s is not a member yet", q.peer)
			}
			return true, n.urls.reroute(q.peer, entries)
		}
		return true, n.urls.sendURLBatch(q.peer, entries)
	}
	o.mu.Lock()
	t, ok := o.topics[q.topic]
	o.mu.Unlock()
	if !ok {
		return false, fmt.Errorf("p2p: outbox topic %q has no sender", q.topic)
	}
	limit := max(t.MaxRecords, 1)
	entries, err := o.read(q, limit, n.cfg.MaxMessageBytes/2)
	if err != nil || len(entries) == 0 {
		return false, err
	}
	used, err := o.deliverBatch(q, t, entries)
	if err != nil {
		if t.Failed != nil {
			t.Failed(q.peer, err)
		}
		return true, err
	}
	if t.Linger > 0 {
		// A message with room to spare took every record there was:
		// the next ones linger for company (senderLoop).
		return used < len(entries) || len(entries) >= limit, nil
	}
	return true, nil
}

// deliverBatch sends one message of a topic's records, deletes what it
// carried once acknowledged, and returns how many records that was.
func (o *Outbox) deliverBatch(q queue, t OutboxTopic, entries []outboxEntry) (int, error) {
	n := o.n
	timeout := t.SendTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(n.ctx, timeout)
	defer cancel()
	recs := make([][]byte, len(entries))
	for i, e := range entries {
		recs[i] = e.val
	}
	msg, used, err := t.Batch(ctx, q.peer, recs)
	if err != nil {
		return 0, fmt.Errorf("p2p: batch %s for %s: %w", q.topic, q.peer, err)
	}
	used = min(max(used, 1), len(entries))
	if msg != nil {
		o.mu.Lock()
		o.inflight[q] = cancel
		o.mu.Unlock()
		defer func() {
			o.mu.Lock()
			delete(o.inflight, q)
			o.mu.Unlock()
		}()
		if _, _, err := n.callParts(ctx, q.peer, n.protoDeliver, deliverHead(q.topic), msg); err != nil {
			return 0, fmt.Errorf("p2p: deliver %s to %s: %w", q.topic, q.peer, err)
		}
	}
	keys := make([][]byte, used)
	for i, e := range entries[:used] {
		keys[i] = e.key
	}
	if err := o.delete(q, keys); err != nil {
		return 0, err
	}
	if t.Delivered != nil {
		t.Delivered(q.peer, entries[used-1].seq)
	}
	return used, nil
}

func (n *Node) nextBackoff(cur time.Duration) time.Duration {
	next := min(max(cur*2, n.cfg.RetryMin), n.cfg.RetryMax)
	// ±20% jitter so that senders to one recovering peer spread out.
	return next + time.Duration((rand.Float64()-0.5)*0.4*float64(next))
}
