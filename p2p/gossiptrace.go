package p2p

import (
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// gossipDrops counts the heartbeats gossipsub loses to full queues, which
// it otherwise does silently: a membership that converges slowly looks
// the same as one whose messages are dropped.
type gossipDrops struct {
	// outbound: RPCs dropped because a peer's outbound queue was full.
	// undelivered: messages dropped because receiveHeartbeats fell behind.
	// validation: messages dropped because the validation queue was full.
	outbound, undelivered, validation atomic.Uint64
}

func (d *gossipDrops) DropRPC(*pubsub.RPC, peer.ID)         { d.outbound.Add(1) }
func (d *gossipDrops) UndeliverableMessage(*pubsub.Message) { d.undelivered.Add(1) }
func (d *gossipDrops) RejectMessage(_ *pubsub.Message, reason string) {
	if reason == pubsub.RejectValidationQueueFull || reason == pubsub.RejectValidationThrottled {
		d.validation.Add(1)
	}
}

func (d *gossipDrops) OnNewOutboundStream(peer.ID, protocol.ID)             {}
func (d *gossipDrops) OnClosedOutboundStream(peer.ID)                       {}
func (d *gossipDrops) Join(string)                                          {}
func (d *gossipDrops) Leave(string)                                         {}
func (d *gossipDrops) Graft(peer.ID, string)                                {}
func (d *gossipDrops) Prune(peer.ID, string)                                {}
func (d *gossipDrops) ValidateMessage(*pubsub.Message)                      {}
func (d *gossipDrops) DeliverMessage(*pubsub.Message)                       {}
func (d *gossipDrops) DuplicateMessage(*pubsub.Message)                     {}
func (d *gossipDrops) ThrottlePeer(peer.ID)                                 {}
func (d *gossipDrops) RecvRPC(*pubsub.RPC)                                  {}
func (d *gossipDrops) SendRPC(*pubsub.RPC, peer.ID)                         {}
func (d *gossipDrops) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}

func (d *gossipDrops) total() uint64 {
	return d.outbound.Load() + d.undelivered.Load() + d.validation.Load()
}
