package p2p

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// udpRelay forwards one client's datagrams to target and back until it
// is cut, after which it drops them all: a peer behind it looks killed
// (no close, no reset), as a SIGKILLed process looks over QUIC.
type udpRelay struct {
	front, back *net.UDPConn
	client      atomic.Pointer[net.UDPAddr]
	cut         atomic.Bool
}

func newUDPRelay(t *testing.T, target *net.UDPAddr) *udpRelay {
	t.Helper()
	front, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.DialUDP("udp4", nil, target)
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{front: front, back: back}
	t.Cleanup(func() { front.Close(); back.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			r.client.Store(from)
			if !r.cut.Load() {
				_, _ = back.Write(buf[:n])
			}
		}
	}()
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := back.Read(buf)
			if err != nil {
				return
			}
			if c := r.client.Load(); c != nil && !r.cut.Load() {
				_, _ = front.WriteToUDP(buf[:n], c)
			}
		}
	}()
	return r
}

func quicPort(t *testing.T, n *testNode) *net.UDPAddr {
	t.Helper()
	for _, a := range n.h.Network().ListenAddresses() {
		if s, err := a.ValueForProtocol(ma.P_UDP); err == nil {
			port, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
		}
	}
	t.Fatal("no QUIC listen address")
	return nil
}

// TestDeadConnectionOfARestartedPeerIsClosed: a peer killed and back
// leaves a connection that no longer answers, and which holds more
// streams than the new one, so libp2p would open every new stream on
// it. The new connection makes this node probe the old one and close
// it; a connection that answers is kept.
func TestDeadConnectionOfARestartedPeerIsClosed(t *testing.T) {
	quicOnly := func(c *Config) { c.Listen = []string{"/ip4/127.0.0.1/udp/0/quic-v1"} }
	a := startNode(t, quicOnly, nil)
	b := startNode(t, quicOnly, nil)
	const hold = "/sou-test/hold/1"
	handler := func(s network.Stream) { buf := make([]byte, 1); _, _ = s.Read(buf) }
	b.h.SetStreamHandler(hold, handler)
	relay := newUDPRelay(t, quicPort(t, b))
	via := ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1", relay.front.LocalAddr().(*net.UDPAddr).Port))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.h.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{via}}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // long-lived streams, as pipes are
		if _, err := a.h.NewStream(ctx, b.ID(), hold); err != nil {
			t.Fatal(err)
		}
	}
	conns := a.h.Network().ConnsToPeer(b.ID())
	if len(conns) != 1 {
		t.Fatalf("%d connections to b, want the relayed one", len(conns))
	}
	if err := probeConn(ctx, conns[0]); isProbeTimeout(err) {
		t.Fatalf("probe of a live connection: %v", err)
	}

	relay.cut.Store(true) // b is "killed": its close never reaches a
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := restartNode(t, b.dir, b.db, quicOnly, []*testNode{a})
	b2.h.SetStreamHandler(hold, handler)
	if b2.ID() != b.ID() {
		t.Fatal("b came back with another identity")
	}
	waitFor(t, 10*time.Second, "the dead connection to be closed", func() bool {
		return a.Stats().StaleConnsClosed == 1 && len(a.h.Network().ConnsToPeer(b.ID())) == 1
	})
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	s, err := a.h.NewStream(sctx, b.ID(), hold)
	if err != nil {
		t.Fatalf("a stream to b after its restart: %v", err)
	}
	_ = s.Reset()
}
