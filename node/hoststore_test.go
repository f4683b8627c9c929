package node

import (
	"fmt"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"sou/node/peermsg"
)

// TestKeepSplitsLargePayloads: a peer's payload may carry up to
// peermsg.MaxMarkers markers with URLs of up to MaxURLBytes, far more than
// one Badger transaction of a node's store takes; keep writes them all,
// then settles the queued ones, in as many transactions as needed.
func TestKeepSplitsLargePayloads(t *testing.T) {
	db, err := badger.Open(BadgerOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &hostData{db: db}
	pad := strings.Repeat("p", 2000) // long URLs: the keys, not the count, fill a transaction
	var markers, queued []peermsg.Fetched
	for i := range 8000 {
		markers = append(markers, peermsg.Fetched{Host: "a.example", URL: fmt.Sprintf("http://a.example/%d/%s", i, pad)})
		queued = append(queued, peermsg.Fetched{Host: "b.example", URL: fmt.Sprintf("http://b.example/%d", i)})
	}
	if err := s.keep(markers, nil, queued, nil); err != nil {
		t.Fatalf("keep %d markers and %d queued URLs: %v", len(markers), len(queued), err)
	}
	for _, c := range []struct {
		prefix, host string
		want         int
	}{{prefixFetchedMarker, "a.example", len(markers)}, {prefixQueued, "b.example", len(queued)}} {
		got, err := s.hostKeys(c.prefix, c.host)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("%s%s: %d keys, want %d", c.prefix, c.host, len(got), c.want)
		}
	}
	if err := s.keep(nil, nil, nil, queued[:6000]); err != nil {
		t.Fatalf("settle 6000: %v", err)
	}
	got, err := s.hostKeys(prefixQueued, "b.example")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2000 {
		t.Errorf("after settling 6000 of 8000 queued URLs, %d remain, want 2000", len(got))
	}
}
