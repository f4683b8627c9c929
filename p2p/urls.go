package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"golang.org/x/time/rate"
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

// urlRouter takes URL records to the owners of their hosts: this node's
// own to the URL handler, the others into the outbox under TopicURLs,
// sent in batches, re-routed when their peer leaves; and it receives other
// members' batches, keeping what this node owns and passing the rest on.
type urlRouter struct {
	cfg        Config
	log        *slog.Logger
	st         *counters
	ctx        context.Context // ends at Close
	mem        *membership     // the view: who owns a host
	limits     *peerLimits     // the senders' URL allowances
	outbox     *Outbox
	call       caller
	proto      protocol.ID
	intakeGate func() error
	refusalLog *rate.Limiter

	mu        sync.Mutex
	urlH      func(ctx context.Context, from peer.ID, recs []URLRecord) error
	urlFilter func(from peer.ID, recs []URLRecord) []bool
}

// ErrInvalidRecord marks records refused by Forward (too long, not UTF-8,
// negative or non-finite cash...). The valid records of the same call are
// still enqueued.
var ErrInvalidRecord = errors.New("invalid URL record")

// Forward routes records to the owners of their hosts by this node's view.
// Records this node owns go straight to the URL handler; the others are
// appended durably to per-owner outboxes. It returns once every record is
// either handled or persisted (as durable as the DB's SyncWrites setting).
// Delivery is at-least-once: a batch whose ack is lost is sent again.
func (n *Node) Forward(ctx context.Context, recs []URLRecord) error {
	return n.urls.forward(ctx, recs)
}

func (u *urlRouter) forward(ctx context.Context, recs []URLRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var invalid []error
	byOwner := map[peer.ID][]URLRecord{}
	view := u.mem.view()
	for _, r := range recs {
		if err := validateRecord(r); err != nil {
			u.st.urlsInvalid.Add(1)
			if len(invalid) < 3 {
				invalid = append(invalid, fmt.Errorf("%.100q: %w", r.URL, err))
			}
			continue
		}
		host, err := hostOf(r.URL)
		if err != nil {
			u.st.urlsInvalid.Add(1)
			if len(invalid) < 3 {
				invalid = append(invalid, err)
			}
			continue
		}
		o := view.Owner(host)
		byOwner[o] = append(byOwner[o], r)
	}
	for o, rs := range byOwner {
		if o == u.mem.self() {
			if err := u.deliverLocal(ctx, u.mem.self(), rs); err != nil {
				return err
			}
			continue
		}
		if err := u.appendURLs(o, rs); errors.Is(err, errOutboxFull) {
			// Only a member silent for very long fills an outbox, and a
			// silent member leaves the view, which re-routes its outbox:
			// this node's own links to it are dropped rather than stall
			// the crawl.
			u.st.urlsDropped.Add(uint64(len(rs)))
			if u.refusalLog.Allow() {
				u.log.Warn("outbox full: dropping forwarded URLs", "peer", o, "records", len(rs), "cap", u.cfg.MaxOutboxPerPeer)
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

func (u *urlRouter) deliverLocal(ctx context.Context, from peer.ID, recs []URLRecord) error {
	u.mu.Lock()
	h := u.urlH
	u.mu.Unlock()
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
	n.urls.mu.Lock()
	n.urls.urlH = h
	n.urls.mu.Unlock()
}

// SetURLFilter installs a check of the records of every batch a peer
// sends, made where they first arrive, before they are handled or passed
// on: f reports for each record whether it is taken, and those it refuses
// are dropped (Stats.URLsFiltered). node decides which links a sender may
// vouch for; p2p does not know what a source host means.
func (n *Node) SetURLFilter(f func(from peer.ID, recs []URLRecord) []bool) {
	n.urls.mu.Lock()
	n.urls.urlFilter = f
	n.urls.mu.Unlock()
}

// appendURLs keeps records for p in its URL outbox.
func (u *urlRouter) appendURLs(p peer.ID, recs []URLRecord) error {
	enc := make([][]byte, len(recs))
	for i, r := range recs {
		enc[i] = encodeOutboxRecord(r)
	}
	_, err := u.outbox.Append(p, TopicURLs, enc, false)
	return err
}

// urlEntry is one decoded URL record of the outbox.
type urlEntry struct {
	key []byte
	rec URLRecord
}

// decodeURLEntries decodes outbox records; those that do not decode are
// deleted.
func (u *urlRouter) decodeURLEntries(p peer.ID, entries []outboxEntry) ([]urlEntry, error) {
	out := make([]urlEntry, 0, len(entries))
	var corrupt [][]byte
	for _, e := range entries {
		rec, err := decodeOutboxRecord(e.val)
		if err != nil {
			corrupt = append(corrupt, e.key)
			continue
		}
		out = append(out, urlEntry{key: e.key, rec: rec})
	}
	if len(corrupt) > 0 {
		u.log.Error("dropping undecodable outbox records", "peer", p, "count", len(corrupt))
		if err := u.outbox.delete(queue{TopicURLs, p}, corrupt); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sendURLBatch sends URL records to p; they leave the outbox once p
// acknowledged them.
func (u *urlRouter) sendURLBatch(p peer.ID, entries []outboxEntry) error {
	decoded, err := u.decodeURLEntries(p, entries)
	if err != nil {
		return err
	}
	return u.sendURLs(p, decoded)
}

func (u *urlRouter) sendURLs(p peer.ID, entries []urlEntry) error {
	if len(entries) == 0 {
		return nil
	}
	recs := make([]URLRecord, len(entries))
	keys := make([][]byte, len(entries))
	for i, e := range entries {
		recs[i], keys[i] = e.rec, e.key
	}
	msg, err := encodeURLBatch(recs)
	if err != nil {
		return err
	}
	if len(msg) > u.cfg.MaxMessageBytes-16 {
		if len(entries) == 1 {
			u.log.Error("dropping URL record larger than the message cap", "peer", p, "url", recs[0].URL)
			return u.outbox.delete(queue{TopicURLs, p}, keys)
		}
		half := len(entries) / 2
		if err := u.sendURLs(p, entries[:half]); err != nil {
			return err
		}
		return u.sendURLs(p, entries[half:])
	}
	ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
	defer cancel()
	// A member that leaves aborts the send at once (its outbox is then
	// re-routed) instead of waiting for a dial to a dead address to fail.
	q := queue{TopicURLs, p}
	u.outbox.mu.Lock()
	u.outbox.inflight[q] = cancel
	u.outbox.mu.Unlock()
	defer func() {
		u.outbox.mu.Lock()
		delete(u.outbox.inflight, q)
		u.outbox.mu.Unlock()
	}()
	_, wrote, err := u.call(ctx, p, u.proto, msg)
	u.st.forwardBytes.Add(uint64(wrote))
	if err != nil {
		return err
	}
	// Ack received: the receiver has made the records durable (or passed
	// them on), so now, and only now, they leave our outbox. They count as
	// forwarded first, so that an empty outbox never shows them uncounted.
	u.st.batchesSent.Add(1)
	u.st.urlsForwarded.Add(uint64(len(recs)))
	return u.outbox.delete(queue{TopicURLs, p}, keys)
}

// reroute moves the records of a departed peer to the owners by the
// current view (the new owner of their hosts), atomically per record set.
func (u *urlRouter) reroute(from peer.ID, entries []outboxEntry) error {
	decoded, err := u.decodeURLEntries(from, entries)
	if err != nil {
		return err
	}
	view := u.mem.view()
	byOwner := map[peer.ID][]URLRecord{}
	var local []URLRecord
	for _, e := range decoded {
		host, err := hostOf(e.rec.URL)
		if err != nil {
			continue
		}
		o := view.Owner(host)
		if o == u.mem.self() {
			local = append(local, e.rec)
		} else {
			byOwner[o] = append(byOwner[o], e.rec)
		}
	}
	if len(local) > 0 {
		ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
		err := u.deliverLocal(ctx, u.mem.self(), local)
		cancel()
		if err != nil {
			return err
		}
	}
	for o, rs := range byOwner {
		if err := u.appendURLs(o, rs); err != nil {
			return err
		}
	}
	keys := make([][]byte, len(decoded))
	for i, e := range decoded {
		keys[i] = e.key
	}
	u.log.Info("re-routed outbox of departed member", "peer", from, "records", len(decoded))
	return u.outbox.delete(queue{TopicURLs, from}, keys)
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
func (u *urlRouter) handleURLs(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	if u.intakeGate != nil {
		if err := u.intakeGate(); err != nil {
			return nil, err
		}
	}
	if !u.limits.urlAllowance(from) {
		u.st.urlBatchesRefused.Add(1)
		return nil, errBusy
	}
	recs, err := decodeURLBatch(msg, u.cfg.MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	if !u.limits.takeURLs(from, len(recs)) {
		u.st.urlBatchesRefused.Add(1)
		return nil, errBusy
	}
	u.st.batchesReceived.Add(1)
	u.st.urlsReceived.Add(uint64(len(recs)))
	u.st.receivedBytes.Add(uint64(len(msg) + uvarintLen(uint64(len(msg)))))
	view := u.mem.view()
	self := u.mem.self()
	u.mu.Lock()
	filter := u.urlFilter
	u.mu.Unlock()
	var keep []bool
	if filter != nil {
		keep = filter(from, recs)
	}
	var mine []URLRecord
	onward := map[peer.ID][]URLRecord{}
	for i, r := range recs {
		if keep != nil && !keep[i] {
			u.st.urlsFiltered.Add(1)
			continue
		}
		for {
			cur := u.st.maxHops.Load()
			if int64(r.Hops) <= cur || u.st.maxHops.CompareAndSwap(cur, int64(r.Hops)) {
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
		if r.Hops+1 > u.cfg.MaxHops {
			u.st.urlsDropped.Add(1)
			u.log.Warn("dropping URL past hop limit", "url", r.URL, "hops", r.Hops, "from", from)
			continue
		}
		r.Hops++
		onward[o] = append(onward[o], r)
	}
	if len(mine) > 0 {
		if err := u.deliverLocal(ctx, from, mine); err != nil {
			return nil, err
		}
	}
	for o, rs := range onward {
		if err := u.appendURLs(o, rs); errors.Is(err, errOutboxFull) {
			u.st.urlBatchesRefused.Add(1)
			return nil, errBusy // the sender keeps the batch and retries
		} else if err != nil {
			return nil, err
		}
		u.st.urlsReforwarded.Add(uint64(len(rs)))
	}
	return nil, nil
}
