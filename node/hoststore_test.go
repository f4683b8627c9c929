package node

import (
	"fmt"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"sou/crawl"
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

// TestHeldDepths: a host taken over gets its pages' depths back from the
// links between them, so that the depth bound stops an endless calendar
// where its old owner stopped it, not MaxDepth further on.
func TestHeldDepths(t *testing.T) {
	const host = "cal.test"
	month := func(i int) string { return fmt.Sprintf("http://cal.test/calendar/%d/", i) }
	link := func(to string) crawl.Discovered { return crawl.Discovered{URL: to} }
	maxDepth := crawl.DefaultConfig().Filter.MaxDepth
	if maxDepth < 5 {
		t.Fatalf("the default depth bound is %d: the test needs one", maxDepth)
	}

	// The old owner's crawl: the root (depth 1, linked from a seed) links
	// to month 0, each month to the next and the one before, and the
	// crawl stopped at the months maxDepth allows.
	calendar := map[string][]crawl.Discovered{"http://cal.test/": {link(month(0))}}
	reach := maxDepth - 2
	var pages []string
	for i := -reach; i <= reach; i++ {
		calendar[month(i)] = []crawl.Discovered{link(month(i - 1)), link(month(i + 1))}
		pages = append(pages, month(i))
	}
	pages = append(pages, "http://cal.test/")

	tests := []struct {
		name    string
		host    string
		pages   []string
		linksOf map[string][]crawl.Discovered
		want    map[string]int
	}{
		{
			name: "calendar cut at the depth bound", host: host, pages: pages, linksOf: calendar,
			want: map[string]int{"http://cal.test/": 1, month(0): 2, month(reach): maxDepth, month(-reach): maxDepth},
		},
		{
			name: "https root, a page nothing links to",
			host: host, pages: []string{"https://cal.test/", "https://cal.test/a", "https://cal.test/orphan", "https://cal.test/b"},
			linksOf: map[string][]crawl.Discovered{
				"https://cal.test/":       {link("https://cal.test/a")},
				"https://cal.test/orphan": {link("https://cal.test/b")},
				"https://cal.test/a":      {link("https://cal.test/b")},
			},
			want: map[string]int{"https://cal.test/": 1, "https://cal.test/a": 2, "https://cal.test/orphan": 1, "https://cal.test/b": 2},
		},
		{
			name: "a cycle entered from elsewhere, links to pages not held",
			host: host, pages: []string{"http://cal.test/x", "http://cal.test/y"},
			linksOf: map[string][]crawl.Discovered{
				"http://cal.test/x": {link("http://cal.test/y"), link("http://cal.test/gone")},
				"http://cal.test/y": {link("http://cal.test/x")},
			},
			want: map[string]int{"http://cal.test/x": 1, "http://cal.test/y": 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := heldDepths(tc.host, tc.pages, tc.linksOf)
			if len(got) != len(tc.pages) {
				t.Errorf("depths of %d pages, want all %d", len(got), len(tc.pages))
			}
			for u, want := range tc.want {
				if got[u] != want {
					t.Errorf("depth of %s = %d, want %d", u, got[u], want)
				}
			}
		})
	}
	// The links of the last months are beyond the bound again.
	d := heldDepths(host, pages, calendar)
	if next := d[month(reach)] + 1; next <= maxDepth {
		t.Errorf("the month after the last one fetched gets depth %d, within the bound %d: the trap goes on", next, maxDepth)
	}
}
