package p2p

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// A pipe is a long-lived request stream to one peer for one purpose (URL
// batches, deliveries, claim batches): request and response frames
// alternate on it, as many exchanges as the sender makes, so that a
// batch costs two frames instead of a stream's opening, protocol
// negotiation, handler goroutine and closing on both sides. A pipe is
// used by one request at a time; concurrent requests to the same peer
// take other pipes. Idle pipes are kept per peer and protocol
// (maxIdlePipes) for pipeIdle(StreamIdleTimeout), and the receiver waits
// for the next request three times as long (serveIdle), so the sender is
// nearly always the side that closes one.

// PipeProtocolIDs are the pipe versions of the URL, deliver and claims
// protocols: the same frames as ProtocolIDs', any number of exchanges per
// stream.
func PipeProtocolIDs(network string) (urls, deliver, claims protocol.ID) {
	base := "/sou/" + network
	return protocol.ID(base + "/urls/2.0.0"), protocol.ID(base + "/deliver/2.0.0"), protocol.ID(base + "/claims/2.0.0")
}

// maxIdlePipes caps the idle pipes kept per peer and protocol: requests
// beyond it in flight at once to one peer use pipes that are closed after
// use.
const maxIdlePipes = 4

// pipeIdle is how long a sender keeps an idle pipe; serveIdle how long a
// receiver waits on one for the next request.
func pipeIdle(streamIdle time.Duration) time.Duration  { return 2 * streamIdle }
func serveIdle(streamIdle time.Duration) time.Duration { return 6 * streamIdle }

type pipeKey struct {
	peer  peer.ID
	proto protocol.ID // the one-request protocol the pipe stands in for
}

type pipe struct {
	s  network.Stream
	br *bufio.Reader
	// single: the peer speaks only the one-request protocol, so the
	// request ends with CloseWrite and the stream is closed after it.
	single bool
	reused bool      // it served an exchange before this one
	idle   time.Time // when it was last put back
}

// pipePool holds the idle pipes of a node.
type pipePool struct {
	mu     sync.Mutex
	idle   map[pipeKey][]*pipe
	closed bool
}

func newPipePool() *pipePool { return &pipePool{idle: map[pipeKey][]*pipe{}} }

// take returns the most recently used idle pipe of k that has been idle
// less than maxIdle, closing any staler ones, or nil.
func (pp *pipePool) take(k pipeKey, now time.Time, maxIdle time.Duration) *pipe {
	pp.mu.Lock()
	var stale []*pipe
	var got *pipe
	list := pp.idle[k]
	for len(list) > 0 && got == nil {
		p := list[len(list)-1]
		list = list[:len(list)-1]
		if now.Sub(p.idle) < maxIdle {
			got = p
		} else {
			stale = append(stale, p)
		}
	}
	pp.setLocked(k, list)
	pp.mu.Unlock()
	closePipes(stale)
	if got != nil {
		got.reused = true
	}
	return got
}

// put keeps p idle for the next request of k, or closes it when it is
// single, the pool is full for k, or the pool is closed.
func (pp *pipePool) put(k pipeKey, p *pipe, now time.Time) {
	pp.mu.Lock()
	if p.single || pp.closed || len(pp.idle[k]) >= maxIdlePipes {
		pp.mu.Unlock()
		_ = p.s.Close()
		return
	}
	p.idle = now
	pp.idle[k] = append(pp.idle[k], p)
	pp.mu.Unlock()
}

// drop closes every idle pipe of k: one of them failed, and the others
// most likely ran on the same connection.
func (pp *pipePool) drop(k pipeKey) {
	pp.mu.Lock()
	list := pp.idle[k]
	delete(pp.idle, k)
	pp.mu.Unlock()
	closePipes(list)
}

// sweep closes the pipes idle for maxIdle or longer.
func (pp *pipePool) sweep(now time.Time, maxIdle time.Duration) {
	pp.mu.Lock()
	var stale []*pipe
	for k, list := range pp.idle {
		keep := list[:0]
		for _, p := range list {
			if now.Sub(p.idle) < maxIdle {
				keep = append(keep, p)
			} else {
				stale = append(stale, p)
			}
		}
		pp.setLocked(k, keep)
	}
	pp.mu.Unlock()
	closePipes(stale)
}

// close closes every idle pipe and every pipe put back later.
func (pp *pipePool) close() {
	pp.mu.Lock()
	pp.closed = true
	var all []*pipe
	for _, list := range pp.idle {
		all = append(all, list...)
	}
	pp.idle = map[pipeKey][]*pipe{}
	pp.mu.Unlock()
	closePipes(all)
}

// count is the number of idle pipes.
func (pp *pipePool) count() int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	n := 0
	for _, list := range pp.idle {
		n += len(list)
	}
	return n
}

func (pp *pipePool) setLocked(k pipeKey, list []*pipe) {
	if len(list) == 0 {
		delete(pp.idle, k)
		return
	}
	pp.idle[k] = list
}

func closePipes(ps []*pipe) {
	for _, p := range ps {
		_ = p.s.Close()
	}
}

// sweepPipes closes idle pipes as they expire, until the node closes.
func (n *Node) sweepPipes() {
	maxIdle := pipeIdle(n.cfg.StreamIdleTimeout)
	t := time.NewTicker(maxIdle / 2)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			n.pipes.close()
			return
		case now := <-t.C:
			n.pipes.sweep(now, maxIdle)
		}
	}
}

// callPipe is callParts for a protocol that has a pipe version: the
// request goes on an idle pipe to p when there is one, else on a new
// stream that offers the pipe protocol first. A transport failure on a
// reused pipe (the peer may have closed it while it was idle) sends the
// request once more on a new stream, so delivery stays at-least-once as
// it is for every request.
func (n *Node) callPipe(ctx context.Context, p peer.ID, proto, pipeProto protocol.ID, head, body []byte) (resp []byte, wrote int, err error) {
	k := pipeKey{peer: p, proto: proto}
	maxIdle := pipeIdle(n.cfg.StreamIdleTimeout)
	for {
		pi := n.pipes.take(k, time.Now(), maxIdle)
		if pi == nil {
			s, err := n.h.NewStream(network.WithAllowLimitedConn(ctx, string(proto)), p, pipeProto, proto)
			if err != nil {
				return nil, 0, fmt.Errorf("p2p: open %s to %s: %w", proto, p, err)
			}
			pi = &pipe{s: s, br: bufio.NewReader(s), single: s.Protocol() != pipeProto}
		}
		resp, wrote, err = n.exchange(ctx, pi, p, head, body)
		var remote *RemoteError
		if err == nil || errors.As(err, &remote) {
			n.pipes.put(k, pi, time.Now())
			return resp, wrote, err
		}
		_ = pi.s.Reset()
		if !pi.reused || ctx.Err() != nil {
			return nil, 0, err
		}
		n.pipes.drop(k)
	}
}

// exchange writes one request on pi and reads its response, bounded by
// ctx: the stream is reset when ctx ends, and its deadline is ctx's
// during the exchange only.
func (n *Node) exchange(ctx context.Context, pi *pipe, p peer.ID, head, body []byte) (resp []byte, wrote int, err error) {
	stop := context.AfterFunc(ctx, func() { _ = pi.s.Reset() })
	dl, _ := ctx.Deadline()
	_ = pi.s.SetDeadline(dl)
	size := len(head) + len(body)
	if err := writeFrameParts(pi.s, head, body); err != nil {
		stop()
		return nil, 0, fmt.Errorf("p2p: send to %s: %w", p, ctxErr(ctx, err))
	}
	wrote = size + uvarintLen(uint64(size))
	if pi.single {
		// See response: the answer may stop this side's writing first.
		_ = pi.s.CloseWrite()
	}
	frame, err := readFrame(pi.br, n.cfg.MaxMessageBytes)
	if !stop() {
		// ctx ended: the stream is being reset whatever was read.
		return nil, 0, fmt.Errorf("p2p: response from %s: %w", p, ctxErr(ctx, errors.Join(err, errors.New("stream reset"))))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("p2p: response from %s: %w", p, ctxErr(ctx, err))
	}
	_ = pi.s.SetDeadline(time.Time{})
	status, body, err := decodeResponse(frame)
	if err != nil {
		n.st.rejected.Add(1)
		return nil, 0, fmt.Errorf("p2p: response from %s: %w", p, err)
	}
	if status != statusOK {
		return nil, wrote, &RemoteError{Peer: p, Msg: string(body), Refused: status == statusRefused}
	}
	return body, wrote, nil
}
