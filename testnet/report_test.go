package testnet

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"sou/search"
	"sou/testnet/simweb"
)

func TestCrawlChecks(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	truth := &simweb.Truth{
		Hosts: []simweb.HostTruth{{Host: "a.test", Disallow: []string{"/private"}, Allow: []string{"/private/ok"}}, {Host: "b.test"}},
		Pages: []simweb.PageTruth{
			{URL: "http://a.test/", Host: "a.test", Required: true},
			{URL: "http://a.test/x", Host: "a.test", Required: true},
			{URL: "http://b.test/", Host: "b.test", Required: true},
			{URL: "http://b.test/missing", Host: "b.test", Required: true},
		},
	}
	f := func(u, host, path string, start, end, status int) fetch {
		return fetch{URL: u, Host: host, Path: path, Client: "127.0.0.2", Start: at(start), End: at(end), Status: status, Complete: true}
	}
	fetches := []fetch{
		f("http://a.test/robots.txt", "a.test", "/robots.txt", 0, 1, 200),
		f("http://a.test/", "a.test", "/", 10, 20, 200),
		f("http://a.test/x", "a.test", "/x", 25, 30, 429),                 // asked to come back: not final
		f("http://a.test/x", "a.test", "/x", 40, 50, 200),                 // the retry
		f("http://a.test/x", "a.test", "/x", 60, 70, 200),                 // a duplicate
		f("http://a.test/private/a", "a.test", "/private/a", 80, 90, 200), // robots violation
		f("http://a.test/private/ok", "a.test", "/private/ok", 95, 99, 200),
		f("http://b.test/", "b.test", "/", 0, 10, 200),                     // before robots.txt: violation
		f("http://b.test/robots.txt", "b.test", "/robots.txt", 5, 12, 404), // overlaps the page: concurrent
	}
	r := crawlChecks(truth, fetches, func(string) time.Duration { return 0 }, 5<<20, 3*time.Second)
	checks := []struct {
		name      string
		got, want int
	}{
		{"expected", r.PagesExpected, 4},
		{"fetched", r.PagesFetched, 3},
		{"duplicates", r.DuplicateFetches, 1},
		{"robots", r.RobotsViolations, 2},
		{"politeness", r.PolitenessViolations, 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d (report %+v)", c.name, c.got, c.want, r)
		}
	}
	// a.test's chain ends last: 7 requests, 50 ms served, 49 ms between.
	wantLast := HostTimeline{Host: "a.test", Requests: 7, FirstStartS: 0, LastEndS: 0.099, ServingS: 0.05, BetweenS: 0.049, BetweenP50MS: 10, BetweenP99MS: 10}
	if r.LastHost == nil || *r.LastHost != wantLast {
		t.Errorf("last host %+v, want %+v", r.LastHost, wantLast)
	}
	// A page larger than the crawler's cap: it hangs up after the cap, and
	// the web, still writing, logs the response as incomplete. The page
	// was fetched; one cut short before the cap was not.
	capped := []fetch{
		f("http://b.test/robots.txt", "b.test", "/robots.txt", 0, 1, 200),
		{URL: "http://b.test/", Host: "b.test", Path: "/", Start: at(2), End: at(50), Status: 200, Bytes: 5 << 20},
		{URL: "http://b.test/missing", Host: "b.test", Path: "/missing", Start: at(60), End: at(90), Status: 200, Bytes: 5<<20 - 1},
	}
	if r := crawlChecks(truth, capped, func(string) time.Duration { return 0 }, 5<<20, 3*time.Second); r.PagesFetched != 1 || !slices.Contains(r.Missing, "http://b.test/missing") {
		t.Errorf("capped page: fetched %d, missing %v; want the capped page fetched, the short one missing", r.PagesFetched, r.Missing)
	}
	// A huge page the crawler hung up on may still be flushing when the
	// next request starts: not a violation.
	huge := []fetch{
		f("http://b.test/robots.txt", "b.test", "/robots.txt", 0, 1, 200),
		{URL: "http://b.test/huge", Host: "b.test", Path: "/huge", Start: at(2), End: at(50), Status: 200, Bytes: 11 << 20, Complete: true},
		f("http://b.test/", "b.test", "/", 30, 35, 200),
	}
	if r := crawlChecks(truth, huge, func(string) time.Duration { return 0 }, 5<<20, 3*time.Second); r.PolitenessViolations != 0 {
		t.Errorf("overlap after a capped body counted: %v", r.Violations)
	}
	// So may a file whose body the crawler does not read (not HTML); an
	// HTML page overlapping the next request is still a violation.
	withFiles := *truth
	withFiles.Pages = append(slices.Clone(truth.Pages),
		simweb.PageTruth{URL: "http://b.test/song.ly", Host: "b.test", ContentType: "text/x-lilypond", Excluded: simweb.ExclNotHTML},
		simweb.PageTruth{URL: "http://b.test/page", Host: "b.test"})
	for _, tc := range []struct {
		prev string
		want int
	}{{"/song.ly", 0}, {"/page", 1}} {
		overlap := []fetch{
			f("http://b.test/robots.txt", "b.test", "/robots.txt", 0, 1, 200),
			f("http://b.test"+tc.prev, "b.test", tc.prev, 2, 10, 200),
			f("http://b.test/", "b.test", "/", 9, 12, 200),
		}
		if r := crawlChecks(&withFiles, overlap, func(string) time.Duration { return 0 }, 5<<20, 3*time.Second); r.PolitenessViolations != tc.want {
			t.Errorf("overlap after %s: %d violations, want %d: %v", tc.prev, r.PolitenessViolations, tc.want, r.Violations)
		}
	}
	if r.Coverage != 0.75 {
		t.Errorf("coverage %v", r.Coverage)
	}
	// A configured delay turns close requests into violations.
	r = crawlChecks(truth, fetches[:2], func(string) time.Duration { return 20 * time.Millisecond }, 5<<20, 3*time.Second)
	if r.PolitenessViolations != 1 {
		t.Errorf("with a 20ms delay: %d politeness violations, want 1", r.PolitenessViolations)
	}
}

// TestSlowestSearches checks that the report keeps the slowest searches,
// slowest first, each with its slowest shard.
func TestSlowestSearches(t *testing.T) {
	resp := func(shardMS ...float64) *search.Response {
		r := &search.Response{ElapsedMS: 1}
		for i, ms := range shardMS {
			r.Coverage.Shards = append(r.Coverage.Shards, search.ShardStatus{Member: fmt.Sprint("m", i), LatencyMS: ms})
		}
		return r
	}
	tests := []struct {
		name      string
		latencies []float64
		want      []float64
	}{
		{"fewer than kept", []float64{3, 9, 1}, []float64{9, 3, 1}},
		{"more than kept", []float64{5, 1, 8, 2, 7, 9, 3, 6}, []float64{9, 8, 7, 6, 5}},
		{"ties keep the first", []float64{4, 4, 4, 4, 4, 4}, []float64{4, 4, 4, 4, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sr SearchReport
			for i, ms := range tt.latencies {
				sr.noteLatency(fmt.Sprint("q", i), i%4, ms, resp(ms/4, ms/2, ms/3))
			}
			var got []float64
			for _, s := range sr.Slowest {
				got = append(got, s.MS)
				if s.SlowestShard != "m1" || s.ShardMS != round3(s.MS/2) {
					t.Errorf("%s: slowest shard %s at %.3f ms, want m1 at %.3f", s.Query, s.SlowestShard, s.ShardMS, s.MS/2)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("kept %v, want %v", got, tt.want)
			}
		})
	}
}

// TestIncompleteSearches: a search some shard did not answer is kept with
// the shards that did not answer, their state and error, named by node;
// the list is bounded and the count is not.
func TestIncompleteSearches(t *testing.T) {
	resp := func(states ...string) *search.Response {
		r := &search.Response{}
		for i, st := range states {
			sh := search.ShardStatus{Member: fmt.Sprint("peer", i), State: st}
			if st != "answered" {
				sh.Error = "refused: " + sh.Member
			}
			r.Coverage.Shards = append(r.Coverage.Shards, sh)
		}
		return r
	}
	tests := []struct {
		name      string
		searches  [][]string
		honest    map[string]bool // nil: not a hostile run
		wantCount int
		wantKept  int
	}{
		{"complete searches", [][]string{{"answered", "answered"}, {"answered", "answered"}}, nil, 0, 0},
		{"one shard failed", [][]string{{"answered", "failed", "answered", "answered"}}, nil, 1, 1},
		{"more than kept", slices.Repeat([][]string{{"timeout", "answered"}}, incompleteKept+3), nil, incompleteKept + 3, incompleteKept},
		{"only an attacker missing", [][]string{{"answered", "failed"}}, map[string]bool{"peer0": true}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := SearchReport{nodeOf: map[string]int{"peer1": 1}}
			if tt.honest != nil {
				sr.view = &honestView{honest: tt.honest}
			}
			for i, states := range tt.searches {
				sr.noteCoverage(fmt.Sprint("q", i), 3, resp(states...))
			}
			if sr.IncompleteCount != tt.wantCount || len(sr.Incomplete) != tt.wantKept {
				t.Fatalf("count %d, kept %d; want %d, %d", sr.IncompleteCount, len(sr.Incomplete), tt.wantCount, tt.wantKept)
			}
			for _, s := range sr.Incomplete {
				if s.Node != 3 || len(s.Missing) != 1 {
					t.Fatalf("search %+v: want node 3 and one missing shard", s)
				}
				m := s.Missing[0]
				if m.State == "answered" || m.Error != "refused: "+m.Member {
					t.Errorf("missing shard %+v lacks its state or error", m)
				}
				if m.Member == "peer1" && (m.Node == nil || *m.Node != 1) {
					t.Errorf("missing shard %s not named node 1: %v", m.Member, m.Node)
				}
			}
		})
	}
	sr := SearchReport{}
	sr.noteCoverage("q", 0, resp("answered", "failed", "answered", "answered"))
	if c := sr.Incomplete[0].Coverage; c != 0.75 {
		t.Errorf("coverage %v, want 0.75", c)
	}
}
