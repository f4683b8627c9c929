package node

import (
	"context"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"
)

// shardTransport adapts p2p to search.Transport: members by peer ID string.
type shardTransport struct{ n *Node }

func (t *shardTransport) Self() string { return t.n.net.ID().String() }

func (t *shardTransport) Members() []string {
	ms := t.n.net.Members()
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID.String()
	}
	return out
}

func (t *shardTransport) Request(ctx context.Context, member string, req []byte) ([]byte, error) {
	id, err := peer.Decode(member)
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", member, err)
	}
	return t.n.net.Request(ctx, id, req)
}

// Holds lets the coordinator drop results a member returns for hosts it
// does not hold (search.HostHolders): a peer answering for hosts that are
// not its own is lying.
func (t *shardTransport) Holds(member, host string) bool {
	id, err := peer.Decode(member)
	return err == nil && t.n.net.Holds(id, host)
}
