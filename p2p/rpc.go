package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ---- search ---------------------------------------------------------------------

// SetSearchHandler installs the handler of search requests (opaque bytes
// both ways; search defines the payloads).
func (n *Node) SetSearchHandler(h func(ctx context.Context, from peer.ID, req []byte) ([]byte, error)) {
	n.mu.Lock()
	n.searchH = h
	n.mu.Unlock()
}

// Request sends one search request to p and waits for the answer until
// ctx's deadline. A request to this node itself calls the handler directly.
func (n *Node) Request(ctx context.Context, p peer.ID, req []byte) ([]byte, error) {
	if p == n.h.ID() {
		n.mu.Lock()
		h := n.searchH
		n.mu.Unlock()
		if h == nil {
			return nil, errors.New("p2p: no search handler set")
		}
		return h(ctx, p, req)
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(time.Until(dl), maxSearchTimeout)
		if timeout <= 0 {
			return nil, fmt.Errorf("p2p: search request: %w", context.DeadlineExceeded)
		}
	}
	resp, _, err := n.call(ctx, p, n.protoSearch, encodeSearchRequest(timeout, req))
	if err != nil {
		return nil, fmt.Errorf("p2p: search request: %w", err)
	}
	return resp, nil
}

func (n *Node) handleSearch(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	timeout, req, err := decodeSearchRequest(msg)
	if err != nil {
		return nil, err
	}
	if !n.limits.acquireSearch(from) {
		n.st.searchesRefused.Add(1)
		return nil, errSearchBusy
	}
	defer n.limits.releaseSearch(from)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	start, err := n.searches.acquire(ctx, from)
	if err != nil {
		n.st.searchesRefused.Add(1)
		return nil, errSearchBusy
	}
	defer n.searches.release(from, start)
	n.mu.Lock()
	h := n.searchH
	n.mu.Unlock()
	if h == nil {
		return nil, errors.New("no search handler")
	}
	return h(ctx, from, req)
}

// errSearchBusy refuses a search request from a member that already has
// MaxSearchesPerPeer under way here.
var errSearchBusy = errors.New("busy: too many search requests under way from this peer")

// ---- deliver --------------------------------------------------------------------

// SetDeliverHandler installs the handler for one topic of reliable
// delivery (handoff, replication). A message is acknowledged only after
// the handler returns nil.
func (n *Node) SetDeliverHandler(topic string, h func(ctx context.Context, from peer.ID, payload []byte) error) {
	n.mu.Lock()
	n.deliverH[topic] = h
	n.mu.Unlock()
}

// Send delivers payload to p's handler for topic and returns nil only once
// that handler has returned nil. Transport failures are retried with
// backoff until ctx ends; an error returned by the remote handler is not
// retried (it comes back as *RemoteError). Send is not durable across
// restarts: the caller keeps the data until Send succeeds (node deletes
// handed-off pages only afterwards).
func (n *Node) Send(ctx context.Context, p peer.ID, topic string, payload []byte) error {
	if topic == "" || len(topic) > maxTopicBytes {
		return fmt.Errorf("p2p: send: topic length %d out of range", len(topic))
	}
	if p == n.h.ID() {
		_, err := n.handleDeliverDecoded(ctx, p, topic, payload)
		return err
	}
	head := deliverHead(topic)
	backoff := time.Duration(0)
	for {
		_, _, err := n.callParts(ctx, p, n.protoDeliver, head, payload)
		if err == nil {
			return nil
		}
		var remote *RemoteError
		if errors.As(err, &remote) || ctx.Err() != nil || n.closed.Load() {
			return fmt.Errorf("p2p: send %s to %s: %w", topic, p, err)
		}
		backoff = n.nextBackoff(backoff)
		if !sleepCtx(ctx, backoff) {
			return fmt.Errorf("p2p: send %s to %s: %w (last error: %v)", topic, p, ctx.Err(), err)
		}
	}
}

func (n *Node) handleDeliver(ctx context.Context, from peer.ID, msg []byte) ([]byte, error) {
	topic, payload, err := decodeDeliver(msg)
	if err != nil {
		return nil, err
	}
	return n.handleDeliverDecoded(ctx, from, topic, payload)
}

func (n *Node) handleDeliverDecoded(ctx context.Context, from peer.ID, topic string, payload []byte) ([]byte, error) {
	n.mu.Lock()
	h := n.deliverH[topic]
	n.mu.Unlock()
	if h == nil {
		return nil, fmt.Errorf("no handler for topic %q", topic)
	}
	if err := h(ctx, from, payload); err != nil {
		return nil, err
	}
	n.st.deliveriesReceived.Add(1)
	return nil, nil
}
