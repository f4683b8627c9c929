package p2p

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// The WAN simulator runs nodes on mocknet hosts (WithHost); membership
// and forwarding must work there too.
func TestNodesOnMocknet(t *testing.T) {
	mn := mocknet.New()
	t.Cleanup(func() { mn.Close() })
	const count = 4
	for i := 0; i < count; i++ {
		if _, err := mn.GenPeer(); err != nil {
			t.Fatal(err)
		}
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*testNode, count)
	for i, h := range mn.Hosts() {
		dir := t.TempDir()
		db := openDB(t, filepath.Join(dir, "db"))
		t.Cleanup(func() { db.Close() })
		var boot []*testNode
		if i > 0 {
			boot = nodes[:1]
		}
		nodes[i] = restartNode(t, dir, db, nil, boot, WithHost(h))
	}
	ids := make([]peer.ID, count)
	for i, n := range nodes {
		ids[i] = n.ID()
	}
	for _, n := range nodes {
		waitFor(t, 15*time.Second, "mocknet membership", func() bool { return knows(n, ids...) })
	}
	var got [count]collector
	for i, n := range nodes {
		n.SetURLHandler(got[i].handle)
	}
	var recs []URLRecord
	for i := 0; i < 200; i++ {
		recs = append(recs, URLRecord{URL: "http://" + hostName(i) + "/", Anchor: "x", SourceHost: "s.test", Cash: 0.1})
	}
	if err := nodes[1].Forward(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	total := func() int {
		s := 0
		for i := range got {
			s += got[i].count()
		}
		return s
	}
	waitFor(t, 15*time.Second, "all records delivered", func() bool { return total() == len(recs) })
	for i := range got {
		recs, _ := got[i].snapshot()
		for _, r := range recs {
			h, _ := hostOf(r.URL)
			if OwnerOf(ids, h) != ids[i] {
				t.Fatalf("%s handled by non-owner", r.URL)
			}
		}
	}
	// Claims are signed with the mocknet host's (ECDSA) key.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, n := range nodes {
		key := fmt.Appendf(nil, "mocknet-%d", i)
		u := heldURL(t, ids, n.ID(), n.cfg.Replicas, "page")
		if w, err := n.Claim(ctx, key, u); err != nil || w != u {
			t.Fatalf("claim on mocknet: %q %v", w, err)
		}
	}
}

func hostName(i int) string {
	return "h" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + ".test"
}
