package node

import (
	"context"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"sou/crawl"
	"sou/index"
)

// threeNodes starts three connected nodes and waits until each sees all.
func threeNodes(t *testing.T) []*Node {
	t.Helper()
	var nodes []*Node
	var boot []string
	for i := 0; i < 3; i++ {
		cfg := testConfig(t)
		cfg.Bootstrap = boot
		n, _ := runNode(t, cfg)
		nodes = append(nodes, n)
		if i == 0 {
			boot = bootstrapAddrs(n)
		}
	}
	waitMembers(t, 3, nodes...)
	return nodes
}

// TestForeignHostClaimsRefused is issue 9's hostile peer claiming hosts it
// does not own, at the node's handlers: pages, fetch markers, anchors and
// crawl state for a host are taken only from a peer that holds it (owner or
// replica) or for a host this node holds; anything else is refused and
// counted, and nothing of it reaches the index or the crawler.
func TestForeignHostClaimsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := threeNodes(t)
	ctx := context.Background()
	// A host that node 0 does not hold (R = 2 of 3 members hold each host).
	var host string
	for i := 0; host == ""; i++ {
		h := fmt.Sprintf("foreign-%d.example", i)
		if !nodes[0].isReplica(h) {
			host = h
		}
	}
	var holder *Node
	for _, n := range nodes[1:] {
		if n.isReplica(host) {
			holder = n
			break
		}
	}
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	page := func(path string) *index.Document {
		return &index.Document{URL: "http://" + host + path, Host: host, Title: "forged " + path, Body: "forged body text", Status: 200}
	}
	msg := pagesMsg{
		Docs:    []*index.Document{page("/a"), page("/b")},
		Fetched: []fetchedMarker{{URL: "http://" + host + "/c", Host: host}},
		Anchors: map[string][]string{"http://" + host + "/a": {"forged anchor"}},
	}
	payload, err := encodeGob(msg)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		deliver func() error
		wantErr bool
	}{
		{"replica from a stranger", func() error { return nodes[0].receiveReplica(ctx, stranger, payload) }, false},
		{"handoff pages from a stranger", func() error { return nodes[0].receiveHandoffPages(ctx, stranger, payload) }, false},
		{"host export from a stranger", func() error {
			b, err := encodeGob(hostMsg{Export: &crawl.HostExport{Host: host}})
			if err != nil {
				return err
			}
			return nodes[0].receiveHandoffHost(ctx, stranger, b)
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := nodes[0].handoff.refused.Load()
			err := c.deliver()
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want error %v", err, c.wantErr)
			}
			if nodes[0].handoff.refused.Load() == before {
				t.Fatalf("nothing counted as refused")
			}
		})
	}
	if rec, err := nodes[0].ix.Get(ctx, "http://"+host+"/a"); err == nil {
		t.Fatalf("a forged page reached the index: %q", rec.Title)
	}
	nodes[0].replicas.mu.Lock()
	madeReplica := nodes[0].replicas.hosts[host]
	nodes[0].replicas.mu.Unlock()
	if madeReplica {
		t.Fatalf("the stranger made node 0 a replica of %s", host)
	}

	// The same pages from a peer that does hold the host are taken: this is
	// how an old owner hands a host over.
	if holder == nil {
		t.Fatalf("no holder of %s among the other nodes", host)
	}
	if err := nodes[0].receiveHandoffPages(ctx, holder.net.ID(), payload); err != nil {
		t.Fatalf("handoff from a holder: %v", err)
	}
	if _, err := nodes[0].ix.Get(ctx, "http://"+host+"/a"); err != nil {
		t.Fatalf("page handed over by a holder not stored: %v", err)
	}
}
