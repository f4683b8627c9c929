package p2p

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	"github.com/multiformats/go-multistream"
)

// staleProbeTimeout bounds the probe of an older connection to a peer:
// a live connection answers a protocol negotiation within a round trip.
const staleProbeTimeout = 3 * time.Second

// staleConns closes the connections a peer left behind when it crashed
// and came back. A SIGKILLed peer's QUIC connections end with no close
// and linger until their idle timeout, and libp2p opens new streams on
// the connection with the most streams: the dead one, which still holds
// this node's pipes to the peer. Every request to the peer (searches,
// deliveries) then times out until the idle timeout ends it. So when a
// connection to a peer arrives beside older ones, each older one is
// asked for a protocol negotiation; one that does not answer within
// staleProbeTimeout is closed. An answer of any kind, a refusal
// included, keeps the connection. One probe per peer runs at a time.
type staleConns struct {
	net     network.Network
	ctx     context.Context
	spawn   func(func()) bool
	log     *slog.Logger
	probing sync.Map // peer.ID -> true while its older connections are probed
	closed  func()   // counts a closed connection
}

func (s *staleConns) notifiee() network.Notifiee {
	return &network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) { s.connected(c) }}
}

func (s *staleConns) connected(c network.Conn) {
	p := c.RemotePeer()
	if len(s.net.ConnsToPeer(p)) < 2 {
		return
	}
	if _, busy := s.probing.LoadOrStore(p, true); busy {
		return
	}
	if !s.spawn(func() {
		defer s.probing.Delete(p)
		s.probeOlder(p, c)
	}) {
		s.probing.Delete(p)
	}
}

// probeOlder probes the connections to p other than newest and closes
// those that do not answer.
func (s *staleConns) probeOlder(p peer.ID, newest network.Conn) {
	for _, old := range s.net.ConnsToPeer(p) {
		if old.ID() == newest.ID() || old.IsClosed() {
			continue
		}
		if err := probeConn(s.ctx, old); isProbeTimeout(err) && s.ctx.Err() == nil {
			s.log.Info("closed a connection that no longer answers", "peer", p, "remote", old.RemoteMultiaddr())
			_ = old.Close()
			if s.closed != nil {
				s.closed()
			}
		}
	}
}

// probeConn opens a stream on c and negotiates libp2p's ping protocol on
// it: nil or a refusal means c answered.
func probeConn(ctx context.Context, c network.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, staleProbeTimeout)
	defer cancel()
	s, err := c.NewStream(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = s.Reset() }()
	if err := s.SetDeadline(time.Now().Add(staleProbeTimeout)); err != nil {
		return err
	}
	return multistream.SelectProtoOrFail(ping.ID, s)
}

// isProbeTimeout says whether a probe's error means no answer came.
func isProbeTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
