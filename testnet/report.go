package testnet

import (
	"math"
	"net"
	"slices"
	"sort"
	"time"

	"sou/eval"
	"sou/search"
	"sou/testnet/simweb"
)

// Report is what `sou testnet run --json` prints; see DESIGN.md "The
// testnet report". Keys keep their meaning once introduced.
type Report struct {
	Nodes int `json:"nodes"`
	// NodeProcs is every node process's GOMAXPROCS.
	NodeProcs int            `json:"node_procs"`
	Hosts     int            `json:"hosts"`
	Pages     int            `json:"pages"`
	Seed      int64          `json:"seed"`
	Crawl     CrawlReport    `json:"crawl"`
	Network   *NetworkReport `json:"network,omitempty"`
	Search    *SearchReport  `json:"search,omitempty"`
	// Hostile is filled by --hostile (see hostile.go).
	Hostile *HostileReport `json:"hostile,omitempty"`
	// PerNode has one entry per node process slot, in node order.
	PerNode []NodeFigures `json:"per_node,omitempty"`
	Events  []string      `json:"events,omitempty"`
	OK      bool          `json:"ok"`
	// Failures says which checks made OK false.
	Failures []string `json:"failures,omitempty"`
}

// CrawlReport is computed from the simulated web's request log and truth
// listing, never from the crawlers' own counters (except errors_by_class,
// which is the crawlers' classification of what went wrong).
type CrawlReport struct {
	PagesExpected    int     `json:"pages_expected"`
	PagesFetched     int     `json:"pages_fetched"`
	Coverage         float64 `json:"coverage"`
	DuplicateFetches int     `json:"duplicate_fetches"`
	DuplicateRate    float64 `json:"duplicate_rate"`
	// DuplicatesInFlight are the duplicate fetches whose earlier fetch was
	// in flight when its node was SIGKILLed (see classifyDuplicates);
	// DuplicatesAvoidable are all the others.
	DuplicatesInFlight  int `json:"duplicates_in_flight"`
	DuplicatesAvoidable int `json:"duplicates_avoidable"`
	// DuplicatesInFlightMaxPerKill is the most one kill orphaned.
	DuplicatesInFlightMaxPerKill int `json:"duplicates_in_flight_max_per_kill"`
	// InFlightLagMaxMS is the longest a response had been complete when the
	// kill that orphaned it came (the bound is settleBound).
	InFlightLagMaxMS float64 `json:"in_flight_lag_max_ms"`
	// Kills counts the SIGKILLs sent during the crawl.
	Kills                int              `json:"kills"`
	RobotsViolations     int              `json:"robots_violations"`
	PolitenessViolations int              `json:"politeness_violations"`
	ErrorsByClass        map[string]int64 `json:"errors_by_class"`
	Seconds              float64          `json:"seconds"`
	PagesPerSecond       float64          `json:"pages_per_second"`
	Requests             int              `json:"requests"`
	// CPUSecondsAll is the CPU time of every process of the testnet up to
	// the end of the crawl: the nodes (sampled from /proc, summed over
	// restarts) and the testnet's own process (the simulated web serving,
	// the launcher, attackers if any) from the moment its web was ready;
	// CPUMsPerPage is that per page fetched. CPUSecondsSetup is the
	// testnet's own CPU before then, not in CPUSecondsAll: the simulated
	// web building its truth, which reads and parses every page of a
	// corpus before any node starts.
	CPUSecondsAll   float64 `json:"cpu_seconds_all"`
	CPUMsPerPage    float64 `json:"cpu_ms_per_page"`
	CPUSecondsSetup float64 `json:"cpu_seconds_setup"`
	// SearchableSeconds is the time from the first request until every
	// node was found idle: nothing left to fetch or forward, and every
	// page fetched searchable with the anchor texts recorded for it. It
	// is the crawl's end as a searcher sees it (Seconds ends at the last
	// request). The WAN simulator does not report it.
	SearchableSeconds float64 `json:"searchable_seconds,omitempty"`
	firstRequest      time.Time
	// Missing lists (up to 20) required pages nobody fetched.
	Missing []string `json:"missing,omitempty"`
	// Duplicates lists (up to 20) URLs fetched more than once.
	Duplicates []string `json:"duplicates,omitempty"`
	// AvoidableDuplicates explains (up to 20) the avoidable ones.
	AvoidableDuplicates []string `json:"avoidable_duplicates,omitempty"`
	// Violations lists (up to 20) robots and politeness violations.
	Violations []string `json:"violations,omitempty"`
	// HostsByNode counts, per host, how many nodes fetched from it (owner
	// exclusivity): hosts fetched by more than one node.
	HostsSharedByNodes int `json:"hosts_shared_by_nodes"`
	// LastHost is the host whose last request ended last: with one
	// request in flight per host, its chain of requests bounds the crawl's
	// wall time.
	LastHost *HostTimeline `json:"last_host,omitempty"`
	// CorpusHTML adds the corpus_html_* keys when the web served directory
	// sites.
	*CorpusHTML
}

// HostTimeline splits one host's requests into time the web spent
// answering them and time between them, when the host waited on its
// crawler (its politeness delay included).
type HostTimeline struct {
	Host     string `json:"host"`
	Requests int    `json:"requests"`
	// FirstStartS and LastEndS are seconds from the crawl's first request.
	FirstStartS float64 `json:"first_start_s"`
	LastEndS    float64 `json:"last_end_s"`
	// ServingS sums the requests' durations at the web; BetweenS the gaps
	// from one request's end to the next one's start; BetweenP50MS and
	// BetweenP99MS are percentiles of those gaps.
	ServingS     float64 `json:"serving_s"`
	BetweenS     float64 `json:"between_s"`
	BetweenP50MS float64 `json:"between_p50_ms"`
	BetweenP99MS float64 `json:"between_p99_ms"`
}

// lastHostTimeline returns the timeline of the host whose last request
// ended last; fetches of each host are sorted by start.
func lastHostTimeline(byHost map[string][]fetch, first time.Time) *HostTimeline {
	var host string
	var end time.Time
	for h, fs := range byHost {
		for _, f := range fs {
			if f.End.After(end) || (f.End.Equal(end) && h < host) {
				host, end = h, f.End
			}
		}
	}
	fs := byHost[host]
	if len(fs) == 0 {
		return nil
	}
	t := &HostTimeline{Host: host, Requests: len(fs), FirstStartS: round3(fs[0].Start.Sub(first).Seconds()), LastEndS: round3(end.Sub(first).Seconds())}
	var serving, between time.Duration
	gaps := make([]float64, 0, len(fs))
	for i, f := range fs {
		serving += f.End.Sub(f.Start)
		if i > 0 {
			g := max(0, f.Start.Sub(fs[i-1].End))
			between += g
			gaps = append(gaps, float64(g)/float64(time.Millisecond))
		}
	}
	t.ServingS = round3(serving.Seconds())
	t.BetweenS = round3(between.Seconds())
	if len(gaps) > 0 {
		sort.Float64s(gaps)
		t.BetweenP50MS = round3(gaps[len(gaps)/2])
		t.BetweenP99MS = round3(gaps[min(len(gaps)-1, len(gaps)*99/100)])
	}
	return t
}

// NetworkReport is the network section (issue 5).
type NetworkReport struct {
	MembersSeenByEach []int   `json:"members_seen_by_each"`
	URLsForwarded     uint64  `json:"urls_forwarded"`
	ForwardBytes      uint64  `json:"forward_bytes"`
	BytesPerURL       float64 `json:"bytes_per_url"`
	ForwardHopsMax    int     `json:"forward_hops_max"`
	HandoffPages      int64   `json:"handoff_pages"`
	// OwnerSpread is the most hosts one member owns over the mean, by the
	// final ownership (p2p.OwnerOf over the members at the end) of the
	// web's hosts (its truth listing), not by the nodes' own counts;
	// OwnerSpreadPages the same for required pages; OwnerSpreadPagesFloor
	// the least any split by host could reach (the largest host's
	// required pages over the mean, at least 1). See ownershipOf.
	OwnerSpread           float64 `json:"owner_spread"`
	OwnerSpreadPages      float64 `json:"owner_spread_pages"`
	OwnerSpreadPagesFloor float64 `json:"owner_spread_pages_floor"`
}

// SearchReport is the search section (issue 6).
type SearchReport struct {
	Queries        int     `json:"queries"`
	P50MS          float64 `json:"p50_ms"`
	P95MS          float64 `json:"p95_ms"`
	P99MS          float64 `json:"p99_ms"`
	CoverageMin    float64 `json:"coverage_min"`
	RankConsistent bool    `json:"rank_consistent"`
	ZeroResults    int     `json:"zero_results"`
	// MRR10, S10, S1 and NDCG10 are the first --qrels file's, over the
	// part QrelsSplit; Qrels has one entry per --qrels file.
	MRR10      float64      `json:"mrr10,omitempty"`
	S10        float64      `json:"s10,omitempty"`
	S1         float64      `json:"s1,omitempty"`
	NDCG10     float64      `json:"ndcg10,omitempty"`
	QrelsSplit eval.Split   `json:"qrels_split,omitempty"`
	Qrels      []QrelsScore `json:"qrels,omitempty"`
	// qrelsRuns are the judged queries' outcomes, for the misses file of
	// --report-dir.
	qrelsRuns []qrelsRun
	// AfterKill is filled by --kill-after-crawl.
	AfterKill *AfterKillReport `json:"after_kill,omitempty"`
	// Slowest are the query phase's slowest searches, slowest first, with
	// where their time went: the coordinator's own figure and its slowest
	// shard. The tail of a few hundred searches is a handful of them.
	Slowest []SlowSearch `json:"slowest,omitempty"`
	// Incomplete are the query phase's searches that did not reach every
	// shard (in a hostile run, every honest shard), in order, at most
	// incompleteKept of them, each with the shards that did not answer
	// and why; IncompleteCount counts them all.
	Incomplete      []IncompleteSearch `json:"incomplete,omitempty"`
	IncompleteCount int                `json:"incomplete_count"`
	// nodeOf names the run's nodes by peer ID, for Incomplete.
	nodeOf map[string]int
	// LatenciesMS are the query phase's latencies, sorted, for the plots
	// of --report-dir (the JSON keeps only the percentiles).
	LatenciesMS []float64 `json:"-"`
	// view, in a hostile run, restricts coverage to honest shards and the
	// rank comparison to results on hosts honest nodes own.
	view *honestView
}

// NodeFigures is one node of the per_node array: what it holds (from its
// status at the end: hosts_owned is the hosts its crawler knows and it
// owns by its view, pages_stored its index's documents, postings_bytes
// their encoded postings; how many pages it analysed and how many it
// stored from their owner's analysis, since its last start), what the final ownership gives it by the web's
// truth (truth_hosts, truth_pages_required: ownershipOf), the requests the
// web logged from its address, and what its processes cost (from /proc,
// sampled every second, CPU summed over restarts: cpu_seconds up to the
// end of the crawl, as crawl.cpu_seconds_all counts it, the memory peaks
// over the whole run, query phase included; `sou testnet sim` runs every
// node in one process, where no figure of a node's own CPU or memory
// exists, and leaves them out).
type NodeFigures struct {
	Node        int    `json:"node"`
	Peer        string `json:"peer"`
	HostsOwned  int    `json:"hosts_owned"`
	PagesStored int64  `json:"pages_stored"` // indexed and held
	// PagesHeld are the pages it holds as a replica without postings
	// (index.Stats.Held), indexed if it comes to own their hosts.
	PagesHeld     int     `json:"pages_held"`
	PostingsBytes int64   `json:"postings_bytes"`
	TruthHosts    int     `json:"truth_hosts"`
	TruthPages    int     `json:"truth_pages_required"`
	WebRequests   int     `json:"web_requests"`
	CPUSeconds    float64 `json:"cpu_seconds,omitempty"`
	RSSAnonPeakMB float64 `json:"rss_anon_peak_mb,omitempty"`
	RSSFilePeakMB float64 `json:"rss_file_peak_mb,omitempty"`
	// PagesAnalysed are the pages its index analysed to store them;
	// FormsReplayed those it stored from their owner's analysed form
	// without analysing them (replicas), FormsRefused received forms it
	// could not use (index.Stats).
	PagesAnalysed uint64 `json:"pages_analysed"`
	FormsReplayed uint64 `json:"forms_replayed"`
	FormsRefused  uint64 `json:"forms_refused"`
	// AnchorUpdates are the stored pages whose anchor field was indexed
	// again for new anchor text (index.Stats).
	AnchorUpdates uint64 `json:"anchor_updates"`
	// ClaimBatches are the batches of its content claims its registries
	// answered, ClaimsBatched the claims in them (p2p.Stats): claims per
	// stream.
	ClaimBatches  uint64 `json:"claim_batches"`
	ClaimsBatched uint64 `json:"claims_batched"`
	// DeliveriesReceived are the messages of its peers' outboxes
	// (replicas, handoffs) it accepted; SyncRounds the fsyncs of its logs
	// it made before acknowledging what peers sent (those messages and
	// URL batches; node.Status).
	DeliveriesReceived uint64 `json:"deliveries_received"`
	SyncRounds         int    `json:"sync_rounds"`
	// StoresDetached are its Stores of pages and fetch markers that
	// returned before their replicas held them (node.Status).
	StoresDetached int64 `json:"stores_detached"`
}

// SlowSearch is one search of the query phase and where its time went.
type SlowSearch struct {
	Query string `json:"query"`
	Node  int    `json:"node"`
	// MS is the latency the client saw (over HTTP on a LAN testnet);
	// CoordinatorMS what the asked node's coordinator measured.
	MS            float64 `json:"ms"`
	CoordinatorMS float64 `json:"coordinator_ms"`
	Cached        bool    `json:"cached,omitempty"`
	Total         int64   `json:"total"`
	// SlowestShard is the member whose shard answer took longest, and
	// ShardMS how long.
	SlowestShard string  `json:"slowest_shard,omitempty"`
	ShardMS      float64 `json:"shard_ms"`
}

// IncompleteSearch is a search of the query phase that some shard did not
// answer.
type IncompleteSearch struct {
	Query    string  `json:"query"`
	Node     int     `json:"node"`
	Coverage float64 `json:"coverage"`
	// Missing are the shards that did not answer: their state (timeout or
	// failed) and error, as the coordinator reported them.
	Missing []MissingShard `json:"missing"`
}

// MissingShard is one shard that did not answer a search.
type MissingShard struct {
	search.ShardStatus
	// Node is the run's node with that peer ID, when it is one.
	Node *int `json:"node,omitempty"`
	// Refusals are that node's counts, read just after the search, of
	// what its p2p layer refuses by its own rules (p2p.Stats): which one
	// moved says why a request to it failed.
	Refusals *Refusals `json:"refusals,omitempty"`
}

// Refusals are a node's p2p refusal counts (p2p.Stats).
type Refusals struct {
	NonMemberStreams  uint64 `json:"non_member_streams"`
	StreamsRefused    uint64 `json:"streams_refused"`
	ThrottledMessages uint64 `json:"throttled_messages"`
	SearchesRefused   uint64 `json:"searches_refused"`
}

// incompleteKept bounds SearchReport.Incomplete.
const incompleteKept = 20

// noteCoverage keeps the search in Incomplete if a shard that counts did
// not answer it.
func (sr *SearchReport) noteCoverage(query string, node int, resp *search.Response) (kept *IncompleteSearch) {
	var missing []MissingShard
	asked := 0
	for _, sh := range resp.Coverage.Shards {
		if sr.view != nil && !sr.view.honest[sh.Member] {
			continue
		}
		asked++
		if sh.State == "answered" {
			continue
		}
		m := MissingShard{ShardStatus: sh}
		if i, ok := sr.nodeOf[sh.Member]; ok {
			m.Node = &i
		}
		missing = append(missing, m)
	}
	if len(missing) == 0 {
		return nil
	}
	sr.IncompleteCount++
	if len(sr.Incomplete) == incompleteKept {
		return nil
	}
	sr.Incomplete = append(sr.Incomplete, IncompleteSearch{
		Query: query, Node: node, Coverage: round3(float64(asked-len(missing)) / float64(asked)), Missing: missing,
	})
	return &sr.Incomplete[len(sr.Incomplete)-1]
}

// slowestKept is how many searches SearchReport.Slowest keeps.
const slowestKept = 5

// noteLatency keeps the search among the slowest if it is one.
func (sr *SearchReport) noteLatency(query string, node int, ms float64, resp *search.Response) {
	if len(sr.Slowest) == slowestKept && ms <= sr.Slowest[slowestKept-1].MS {
		return
	}
	s := SlowSearch{Query: query, Node: node, MS: round3(ms), CoordinatorMS: round3(resp.ElapsedMS), Cached: resp.Cached, Total: resp.Total}
	for _, sh := range resp.Coverage.Shards {
		if sh.LatencyMS >= s.ShardMS {
			s.SlowestShard, s.ShardMS = sh.Member, round3(sh.LatencyMS)
		}
	}
	i := sort.Search(len(sr.Slowest), func(i int) bool { return sr.Slowest[i].MS < ms })
	sr.Slowest = slices.Insert(sr.Slowest, i, s)
	if len(sr.Slowest) > slowestKept {
		sr.Slowest = sr.Slowest[:slowestKept]
	}
}

// AfterKillReport: searches while a node is dead and after its replica took
// over.
type AfterKillReport struct {
	Killed          int     `json:"killed_node"`
	Queries         int     `json:"queries"`
	PartialReported bool    `json:"partial_reported"`
	MaxLatencyMS    float64 `json:"max_latency_ms"`
	Late            int     `json:"late"`
	Changed         int     `json:"changed_top10"`
	SameTop10       bool    `json:"same_top10_after_takeover"`
	// Examples show up to three queries whose top 10 changed.
	Examples []string `json:"examples,omitempty"`
}

// fetch is one request as the web saw it.
type fetch struct {
	URL      string // normalised like the truth listing
	Host     string
	Path     string // path only, for robots rules
	Client   string // client IP
	Start    time.Time
	End      time.Time
	Status   int
	Bytes    int64
	Complete bool
}

// final reports whether a response settles the URL: a crawler that asks
// again after it is fetching twice. 429 and 5xx ask the crawler to come
// back; an incomplete response (timeout, reset) never arrived.
func (f fetch) final() bool {
	return f.Complete && f.Status != 429 && f.Status < 500
}

// delivered reports whether the response gave the crawler the page: the
// web wrote it whole to a client still there, or it was a 200 whose body
// the crawler read up to its cap (maxBody) and then hung up on, keeping
// the page as far as the cap (crawl.FetchConfig.MaxBodyBytes). The web
// logs the second as incomplete or complete depending on whether the
// socket buffers had taken the rest when the crawler hung up, which
// depends on the machine's load, not on the crawler.
func (f fetch) delivered(maxBody int64) bool {
	return f.Complete || f.Status == 200 && maxBody > 0 && f.Bytes >= maxBody
}

// crawlChecks computes the crawl section from what the web saw. delay gives
// the minimum gap the crawlers were configured to keep for a host.
//
// The crawler hangs up on a response past its body cap (maxBody), slower
// than its first-byte timeout (hangUp), or of a content type it does not
// parse (the truth's not_html pages: it reads the headers only); the web
// may still be flushing such a response into the socket buffer when the
// next request arrives, and logs it as complete. Those overlaps are not the
// crawler's and are not counted. (A corpus run counted one: a LilyPond
// source file of 9 KB, logged as ending 0.1 ms after the next request to
// its host began on a new connection.)
func crawlChecks(truth *simweb.Truth, fetches []fetch, delay func(host string) time.Duration, maxBody int64, hangUp time.Duration) CrawlReport {
	r := CrawlReport{ErrorsByClass: map[string]int64{}}
	required := map[string]bool{}
	for _, p := range truth.Pages {
		if p.Required {
			required[p.URL] = true
		}
	}
	r.PagesExpected = len(required)
	r.Requests = len(fetches)

	byURL := map[string][]fetch{}
	byHost := map[string][]fetch{}
	robotsAt := map[string]time.Time{} // host -> end of the first completed robots.txt fetch
	clientsByHost := map[string]map[string]bool{}
	var first, last time.Time
	for _, f := range fetches {
		if first.IsZero() || f.Start.Before(first) {
			first = f.Start
		}
		if f.End.After(last) {
			last = f.End
		}
		byHost[f.Host] = append(byHost[f.Host], f)
		if clientsByHost[f.Host] == nil {
			clientsByHost[f.Host] = map[string]bool{}
		}
		clientsByHost[f.Host][f.Client] = true
		if f.Path == "/robots.txt" {
			// 5xx means "come back later": only an answer below 500 lets
			// the crawler fetch pages.
			if f.Complete && f.Status > 0 && f.Status < 500 {
				if t, ok := robotsAt[f.Host]; !ok || f.End.Before(t) {
					robotsAt[f.Host] = f.End
				}
			}
			continue
		}
		byURL[f.URL] = append(byURL[f.URL], f)
	}
	for _, c := range clientsByHost {
		if len(c) > 1 {
			r.HostsSharedByNodes++
		}
	}
	var missing, dups, viol []string
	for u := range required {
		fs := byURL[u]
		got := false
		for _, f := range fs {
			if f.delivered(maxBody) {
				got = true
				break
			}
		}
		if got {
			r.PagesFetched++
		} else {
			missing = append(missing, u)
		}
	}
	for u, fs := range byURL {
		finals := 0
		for _, f := range fs {
			if f.final() {
				finals++
			}
		}
		if finals > 1 {
			r.DuplicateFetches += finals - 1
			dups = append(dups, u)
		}
	}
	hostRules := map[string]simweb.HostTruth{}
	for _, h := range truth.Hosts {
		hostRules[h.Host] = h
	}
	unread := map[string]bool{}
	for _, p := range truth.Pages {
		if p.Excluded == simweb.ExclNotHTML {
			unread[p.URL] = true
		}
	}
	for host, fs := range byHost {
		sort.Slice(fs, func(i, j int) bool { return fs[i].Start.Before(fs[j].Start) })
		ht, known := hostRules[host]
		robotsEnd, robotsSeen := robotsAt[host]
		for i, f := range fs {
			if f.Path != "/robots.txt" && known {
				if !robotsSeen || f.Start.Before(robotsEnd) {
					r.RobotsViolations++
					viol = append(viol, "robots.txt not fetched before "+f.URL)
				} else if !ht.Allows(f.Path) {
					r.RobotsViolations++
					viol = append(viol, "disallowed "+f.URL)
				}
			}
			if i == 0 {
				continue
			}
			prev := fs[i-1]
			gap := f.Start.Sub(prev.End)
			// A few milliseconds of tolerance: the web logs a request when
			// its handler starts, after the crawler's timer has fired.
			const tolerance = 3 * time.Millisecond
			switch {
			case maxBody > 0 && prev.Bytes > maxBody,
				hangUp > 0 && prev.End.Sub(prev.Start) >= hangUp,
				unread[prev.URL]:
				// The crawler may have hung up on prev (see above).
			case f.Start.Before(prev.End) && prev.Complete:
				r.PolitenessViolations++
				viol = append(viol, "concurrent requests to "+host)
			case gap+tolerance < delay(host):
				r.PolitenessViolations++
				viol = append(viol, "requests to "+host+" "+gap.String()+" apart")
			}
		}
	}
	// Until classify sees the kills (the WAN simulator has no kill log),
	// every duplicate counts as avoidable.
	r.DuplicatesAvoidable = r.DuplicateFetches
	if r.PagesExpected > 0 {
		r.Coverage = float64(r.PagesFetched) / float64(r.PagesExpected)
		r.DuplicateRate = float64(r.DuplicateFetches) / float64(r.PagesExpected)
	}
	r.firstRequest = first
	if !first.IsZero() {
		r.LastHost = lastHostTimeline(byHost, first)
		r.Seconds = round3(last.Sub(first).Seconds())
		if r.Seconds > 0 {
			r.PagesPerSecond = round3(float64(r.PagesFetched) / r.Seconds)
		}
	}
	r.Coverage = round6(r.Coverage)
	r.DuplicateRate = round6(r.DuplicateRate)
	r.Missing = firstSorted(missing, 20)
	r.Duplicates = firstSorted(dups, 20)
	r.Violations = firstSorted(viol, 20)
	return r
}

// classify splits the duplicate fetches into those in flight at one of
// kills and the avoidable rest.
func (r *CrawlReport) classify(fetches []fetch, kills []killRecord) {
	c := classifyDuplicates(fetches, kills, settleBound)
	r.Kills = len(kills)
	r.DuplicatesInFlight, r.DuplicatesAvoidable = c.InFlight, c.Avoidable
	r.DuplicatesInFlightMaxPerKill = c.InFlightMaxPerKill
	r.InFlightLagMaxMS = round3(float64(c.LagMax.Microseconds()) / 1000)
	r.AvoidableDuplicates = c.AvoidableExamples
}

func firstSorted(s []string, n int) []string {
	sort.Strings(s)
	if len(s) > n {
		s = s[:n]
	}
	return s
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return round3(sorted[max(0, min(i, len(sorted)-1))])
}

// fetchesFrom turns the web's request log into fetches, one for one.
func fetchesFrom(reqs []simweb.Request) []fetch {
	out := make([]fetch, len(reqs))
	for i, r := range reqs {
		client := r.Client
		if h, _, err := net.SplitHostPort(client); err == nil {
			client = h
		}
		out[i] = fetch{
			URL: r.URL, Host: r.VHost, Path: r.Target, Client: client,
			Start: r.Start, End: r.End, Status: r.Status, Bytes: r.Bytes, Complete: r.Completed,
		}
	}
	return out
}

// observe counts one search answer of the query phase (coverage, empty
// answers) and returns its result URLs in order.
func (sr *SearchReport) observe(resp *search.Response) []string {
	if v := sr.view; v != nil {
		asked, answered := 0, 0
		for _, sh := range resp.Coverage.Shards {
			if v.honest[sh.Member] {
				asked++
				if sh.State == "answered" {
					answered++
				}
			}
		}
		if asked > 0 {
			sr.CoverageMin = min(sr.CoverageMin, float64(answered)/float64(asked))
		}
	} else if resp.Coverage.Asked > 0 {
		sr.CoverageMin = min(sr.CoverageMin, float64(resp.Coverage.Answered)/float64(resp.Coverage.Asked))
	}
	if len(resp.Results) == 0 {
		sr.ZeroResults++
	}
	top := make([]string, 0, len(resp.Results))
	for _, r := range resp.Results {
		if sr.view == nil || sr.view.ownsHonestly(r.Host) {
			top = append(top, r.URL)
		}
	}
	return top
}

// compareTops clears RankConsistent when the nodes asked one query did not
// all return the same top list.
func (sr *SearchReport) compareTops(tops [][]string) {
	for _, t := range tops[1:] {
		if !slices.Equal(t, tops[0]) {
			sr.RankConsistent = false
		}
	}
}

// quietDetector decides when a crawl has finished: every node idle and the
// web's request count unchanged for quietFor (a node between two requests
// of a slow host can look idle for a moment).
type quietDetector struct {
	since    time.Time
	lastReqs int
}

const quietFor = 2 * time.Second

func newQuietDetector() *quietDetector { return &quietDetector{lastReqs: -1} }

func (q *quietDetector) done(allIdle bool, reqs int, now time.Time) bool {
	if !allIdle || reqs != q.lastReqs {
		q.since, q.lastReqs = time.Time{}, reqs
		return false
	}
	if q.since.IsZero() {
		q.since = now
	}
	return now.Sub(q.since) >= quietFor
}
