package testnet

import (
	"strings"
	"testing"
	"time"

	"sou/testnet/simweb"
)

func TestClassifyDuplicates(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const a, b = "127.0.0.10", "127.0.0.11"
	get := func(u, client string, start, end, status int) fetch {
		path := u[strings.Index(u[len("http://"):], "/")+len("http://"):]
		return fetch{URL: u, Host: "h.test", Path: path, Client: client, Start: at(start), End: at(end), Status: status, Complete: true}
	}
	kill := func(client string, sent int) killRecord { // restarted 1 s later
		return killRecord{Client: client, Sent: at(sent), Back: at(sent + 1000)}
	}
	const bound = 1000 // ms
	tests := []struct {
		name                     string
		fetches                  []fetch
		kills                    []killRecord
		inFlight, avoidable, max int
	}{
		{name: "no duplicate", fetches: []fetch{get("http://h.test/x", a, 0, 10, 200)}, kills: []killRecord{kill(a, 5)}},
		{
			name:    "killed while the response was on its way",
			fetches: []fetch{get("http://h.test/x", a, 0, 10, 200), get("http://h.test/x", a, 500, 510, 200)},
			kills:   []killRecord{kill(a, 5)},
			// in flight: the kill came between start and end
			inFlight: 1, max: 1,
		},
		{
			name:     "killed after the response, within the bound",
			fetches:  []fetch{get("http://h.test/x", a, 0, 10, 200), get("http://h.test/x", b, 5000, 5010, 200)},
			kills:    []killRecord{kill(a, 10+bound)},
			inFlight: 1, max: 1,
		},
		{
			name:      "killed after the bound",
			fetches:   []fetch{get("http://h.test/x", a, 0, 10, 200), get("http://h.test/x", b, 5000, 5010, 200)},
			kills:     []killRecord{kill(a, 11+bound)},
			avoidable: 1,
		},
		{
			name:     "handled after the kill, sent before: the web was slow to start it",
			fetches:  []fetch{get("http://h.test/x", a, 100, 110, 200), get("http://h.test/x", a, 1900, 1910, 200)},
			kills:    []killRecord{kill(a, 50)},
			inFlight: 1, max: 1,
		},
		{
			name:      "sent by the restarted node",
			fetches:   []fetch{get("http://h.test/x", a, 1100, 1110, 200), get("http://h.test/x", a, 1900, 1910, 200)},
			kills:     []killRecord{kill(a, 50)},
			avoidable: 1,
		},
		{
			name:     "killed for good: whatever came from it later was sent before",
			fetches:  []fetch{get("http://h.test/x", a, 3000, 3010, 200), get("http://h.test/x", b, 9000, 9010, 200)},
			kills:    []killRecord{{Client: a, Sent: at(50)}},
			inFlight: 1, max: 1,
		},
		{
			name:      "another node was killed",
			fetches:   []fetch{get("http://h.test/x", a, 0, 10, 200), get("http://h.test/x", a, 500, 510, 200)},
			kills:     []killRecord{kill(b, 5)},
			avoidable: 1,
		},
		{
			name:      "no kill at all",
			fetches:   []fetch{get("http://h.test/x", a, 0, 10, 200), get("http://h.test/x", b, 20, 30, 404)},
			avoidable: 1,
		},
		{
			name: "the refetch after a kill fetched again later",
			fetches: []fetch{
				get("http://h.test/x", a, 0, 10, 200),
				get("http://h.test/x", a, 3000, 3010, 200), // after the restart: in flight
				get("http://h.test/x", b, 9000, 9010, 200), // the restarted node was not killed again: avoidable
			},
			kills:    []killRecord{kill(a, 5)},
			inFlight: 1, avoidable: 1, max: 1,
		},
		{
			name: "unsorted log: the earlier fetch decides",
			fetches: []fetch{
				get("http://h.test/x", b, 3000, 3010, 200),
				get("http://h.test/x", a, 0, 10, 200),
			},
			kills:    []killRecord{kill(a, 5)},
			inFlight: 1, max: 1,
		},
		{
			name:    "an answer that asks to come back is not a fetch",
			fetches: []fetch{get("http://h.test/x", a, 0, 10, 429), get("http://h.test/x", a, 500, 510, 200), get("http://h.test/y", a, 0, 10, 503), get("http://h.test/y", a, 500, 510, 200)},
		},
		{
			name:    "an incomplete response is not a fetch",
			fetches: []fetch{{URL: "http://h.test/x", Host: "h.test", Path: "/x", Client: a, Start: at(0), End: at(10), Status: 200}, get("http://h.test/x", a, 500, 510, 200)},
		},
		{
			name:    "robots.txt is not counted",
			fetches: []fetch{get("http://h.test/robots.txt", a, 0, 10, 200), get("http://h.test/robots.txt", a, 500, 510, 200)},
		},
		{
			name: "one kill orphans several responses",
			fetches: []fetch{
				get("http://h.test/x", a, 0, 10, 200), get("http://h.test/x", a, 3000, 3010, 200),
				get("http://h.test/y", a, 2, 8, 200), get("http://h.test/y", a, 3000, 3010, 200),
				get("http://h.test/z", a, 1, 400, 200), get("http://h.test/z", a, 3000, 3010, 200),
				get("http://h.test/w", a, 2000, 2100, 200), get("http://h.test/w", a, 4000, 4010, 200),
			},
			kills:    []killRecord{kill(a, 5), kill(a, 2050)},
			inFlight: 4, max: 3,
		},
	}
	truth := &simweb.Truth{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := classifyDuplicates(tc.fetches, tc.kills, bound*time.Millisecond)
			if c.InFlight != tc.inFlight || c.Avoidable != tc.avoidable || c.InFlightMaxPerKill != tc.max {
				t.Errorf("in flight %d, avoidable %d, max per kill %d; want %d, %d, %d (%v)",
					c.InFlight, c.Avoidable, c.InFlightMaxPerKill, tc.inFlight, tc.avoidable, tc.max, c.AvoidableExamples)
			}
			if len(c.AvoidableExamples) != c.Avoidable {
				t.Errorf("%d examples for %d avoidable duplicates", len(c.AvoidableExamples), c.Avoidable)
			}
			// The classes split exactly the duplicates crawlChecks counts.
			r := crawlChecks(truth, tc.fetches, func(string) time.Duration { return 0 }, 5<<20, 3*time.Second)
			if got := c.InFlight + c.Avoidable; got != r.DuplicateFetches {
				t.Errorf("classes sum to %d, crawlChecks counts %d duplicates", got, r.DuplicateFetches)
			}
		})
	}
}

func TestJudgeDuplicates(t *testing.T) {
	most := orphansPerKill()
	tests := []struct {
		name                       string
		cfg                        RunConfig
		dups, inFlight, maxPerKill int
		ok                         bool
	}{
		{"no churn, none", RunConfig{}, 0, 0, 0, true},
		{"no churn, one", RunConfig{}, 1, 0, 0, false},
		{"crashes, all in flight", RunConfig{Crashes: 50}, 80, 80, 5, true},
		{"crashes, one avoidable", RunConfig{Crashes: 50}, 81, 80, 5, false},
		{"crashes, a kill orphaning as many as it can", RunConfig{Crashes: 1}, most, most, most, true},
		{"crashes, a kill orphaning more than it can", RunConfig{Crashes: 1}, most + 1, most + 1, most + 1, false},
		{"join, within 0.1%", RunConfig{JoinAt: "30%"}, 10, 0, 0, true},
		{"join, beyond 0.1%", RunConfig{JoinAt: "30%"}, 11, 0, 0, false},
		{"kill, in flight beyond 0.1%", RunConfig{KillAt: "60%"}, 30, 25, 25, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Crawl: CrawlReport{PagesExpected: 10000, Coverage: 1, DuplicateFetches: tc.dups,
				DuplicatesInFlight: tc.inFlight, DuplicatesAvoidable: tc.dups - tc.inFlight, DuplicatesInFlightMaxPerKill: tc.maxPerKill}}
			r.judge(tc.cfg)
			if r.OK != tc.ok {
				t.Errorf("ok %v, want %v (failures %v)", r.OK, tc.ok, r.Failures)
			}
		})
	}
}
