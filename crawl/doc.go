// Package crawl owns everything between a URL and a parsed page: the
// persistent frontier, politeness, robots.txt, the DNS cache, the fetcher,
// charset decoding and HTML parsing, URL normalisation and filters, URL-seen
// and content-seen de-duplication, priority (OPIC) and recrawl scheduling.
//
// It knows nothing of the network or of ranking: the node wires it to the
// rest through the Sink interface (Owns, Forward, Store; optionally MayFetch).
//
// # Frontier and schedule
//
// Every queued URL is one Badger key in its host's queue, ordered by
// priority: more OPIC cash first, then shallower link depth (the Tianwang
// heuristic), then arrival order. Memory holds only per-host state: the queue
// length, the priority of its head, politeness counters and robots rules, so
// millions of queued URLs cost nothing in RAM. The schedule is two heaps:
// hosts waiting for their politeness timer (by ready time) and due hosts (by
// head priority). A worker takes the best due host, which is then "in
// flight" and in no heap: one request per host at a time, whatever the
// configuration. The schedule is rebuilt at start from a key-only scan.
//
// A host's head is read by seeking to a per-host mark (the last head read,
// lowered by any add below it) rather than rewinding to the queue prefix:
// fetched entries are deleted at the front of the queue, and Badger keeps
// their tombstones until compaction, so a rewind cost grew with the pages
// already fetched from the host (170× slower at 20,000 fetched,
// BenchmarkFrontierFetchOrder). A mark that is wrong could only delay a
// better entry: an empty seek rewinds before it says the queue is empty.
// A mark read as the head also keeps its URL until the entry is fetched
// or a better one added, so that the head the release after a fetch
// reads (to schedule the host) is not sought again by the next slot;
// the slot checks it against its seen record like any head.
//
// OPIC: seeds get Config.SeedCash; a fetched page's cash is split equally
// over its followable out-links (and its canonical and meta-refresh targets,
// which are treated as links), a link found only in a script counting
// half and an external script nothing (read once, it would keep the cash
// of every later includer); a redirect passes all its cash to its target.
// Cash for a queued URL moves it up its queue; cash for a fetched URL is
// kept for its next visit. Both are credited in memory and written to the
// seen record in batches (linkcash.go), since most links of a site point
// at pages seen before: a queued URL moves once per settle, every few
// seconds, for all the links it got meanwhile, and its fetch takes what
// it got since. Cash to foreign hosts travels with the
// Discovered links given to Sink.Forward. Page.Cash is the total received.
//
// # External scripts
//
// A page's <script src> on its own host (parse.go) enters the frontier as
// an entry that carries the page's base URL (Discovered.Base, kept in its
// URL-seen record, so that handoff carries it too). It is a URL like any
// other for URL-seen (fetched once per host, whoever else includes it; an
// entry keeps the base of the first includer, and a queued link that a
// page then includes becomes a script), robots.txt, politeness, retries
// and error classes, and passes the filters but for the extension list.
// The request reads JavaScript, JSON or text/plain only, up to
// FetcherConfig.MaxScriptBytes. Its links (ScriptLinks) resolve against
// the includer's base, not the script's URL: the links a script writes
// into a document are the document's. They are links of that page (the
// script's depth). A script is no page: not stored, not counted in
// Stats.Fetched or the host's page budget (Stats.ScriptsFetched instead),
// never recrawled; FetchedSink hears of it. A redirect of a script to its
// own host is followed as a script. Scripts on other hosts, subdomains
// included, are not fetched: another host is another owner's and
// politeness slot, and the entry's base would have to travel with it.
//
// # Politeness
//
// After a response the host waits clamp(DelayFactor x response time,
// MinDelay, MaxDelay), at least robots.txt Crawl-delay. A Crawl-delay above
// MaxCrawlDelay is capped (CrawlDelayCap, the default, logged once per host)
// or the host is skipped entirely (CrawlDelaySkip: its URLs stay queued).
// 429/503: the same URL stays queued (one more attempt, never a duplicate)
// and the host waits Retry-After (capped at MaxBackoff) or an exponential
// backoff. ParkAfterTimeouts consecutive timeouts park the host for
// ParkDuration (DSpider), doubling per further park without an answer up to
// MaxParkDuration; Idle ignores parked hosts (presumed dead until they
// answer). A host whose name does not resolve (NXDOMAIN) or resolves only to
// forbidden addresses has its queued URLs given up. Transient failures are
// retried up to MaxAttempts per URL. The per-host page budget is
// FilterConfig.MaxPagesPerHost; the presets also bound link depth (20) so
// that traps inventing paths forever end.
//
// robots.txt is the first request in a host's slot, cached with an expiry
// and persisted; 4xx means allow all, 5xx or a network failure means the
// host waits (exponential backoff bounded by RetryMax, parked for GiveUpWait
// after MaxAttempts failures): a host is never crawled without its rules.
// When a refresh of expired rules fails, the cached copy stays in use and
// the refresh is retried after RetryMax (RFC 9309). Same-host redirects of
// robots.txt are followed (5 hops); a redirect to another host counts as no
// file (allow all), since requesting it would use another host's slot.
// Its same-host sitemaps and /sitemap.xml are fetched next, once, in the
// host's slots too; their URLs enter as links of depth 1 without cash.
//
// # Crash safety
//
// A fetch ends with ONE transaction that deletes the queue key, marks the
// URL fetched in the seen set and writes the response into the processing
// queue (c:p/). Processing (parse, near-dup claim, Sink.Forward of foreign
// links, Sink.Store, or QueueSink.Queue of the owned links of a response
// without a page) runs on separate goroutines and ends with ONE
// transaction that enqueues the local links, records the content hash and
// recrawl time, and deletes the c:p/ entry. So at any instant a URL is
// either queued, or fetched with its response waiting in c:p/, or done with
// its links in the frontier. After kill -9, leftover c:p/ entries are
// processed again (Store is idempotent; Forward may repeat links, which the
// receiver's seen set absorbs, with their cash counted twice). The only
// refetch is of requests in flight at the instant of the kill (at most
// Workers URLs; which of them the server saw is unknowable). A clean stop
// lets requests in flight finish (ShutdownGrace) and refetches nothing.
//
// A node that is killed for good loses more: its c:p/ entries, and pages
// Store has not returned for (not yet replicated), so the replica that
// takes its hosts over fetches them again. Admission (admission.go) keeps
// that set small without slowing the crawl: a fetch worker takes a credit
// before a host's slot, and the credit comes back when the slot ends
// without a response to process or when its response has been processed.
// The credits are bounded by Little's law from the mean fetch-stage and
// processing times (enough requests in flight to keep processing busy,
// plus one response waiting and one in processing per processing worker,
// at most Workers): on a web slower than processing nothing changes, on
// a fast one no response waits in a fetch worker's hands for room in the
// processing queue.
//
// A timeout also buys the server at least as much rest as it made us wait,
// so that its still-running handler never overlaps our next request.
// The optional Sink method MayFetch(host) pauses a host (ownership moving):
// its slot is released unused and asked again after 500 ms, a pause kept
// in memory: the host record, which holds what a restart owes the host,
// is saved after a slot only when the slot changed it. The optional
// FetchedSink and SitemapSink hear of URLs settled without a page and of
// every sitemap read with the URLs it listed, so a node can tell its
// replicas; QueueSink keeps the owned links of a redirect or a script
// durable before they are queued, since no stored page tells of them. Sitemap progress (read and pending sitemaps) is kept in the
// host record: a restart continues the host's sitemaps instead of reading
// them again, and NoteSitemaps hands in what a previous owner read.
//
// Redirect targets, canonical and refresh URLs go through the seen set like
// any link, so redirect chains end at a URL already seen (and at MaxDepth).
//
// # Recrawl
//
// Each stored page has an interval: halved when a visit finds new content,
// doubled when unchanged or 304, within [Min, Max] (default 1 day to 30
// days, so a testnet run never recrawls). Revisits are conditional
// (If-None-Match / If-Modified-Since).
//
// # Near duplicates
//
// The near-duplicate index (simhash.go) keeps its entries in Badger. In
// memory it holds only a count of c:n/ keys per band and band value
// (256 KiB whatever the number of pages), counted from the keys at start,
// so that a claim seeks only into the bands that have entries.
//
// # Badger keys (all under "c:")
//
//	c:q/<host>/<^cash:8 BE><depth:2 BE><seq:8 BE>  -> URL            per-host queue (engine)
//	c:u/<host>/<sha256(URL)[:16]>                  -> seenRecord     URL-seen set, state, cash, validators, recrawl, script base (engine, binary: seen.go)
//	c:h/<host>                                     -> hostRecord JSON politeness counters, budget, sitemaps done (engine)
//	c:r/<host>                                     -> robotsRecord JSON robots.txt response, re-parsed at start (engine)
//	c:p/<seq:8 BE>                                 -> body (one S2 block when the header says "z", else raw), JSON header, its length (4 BE): fetched, awaiting processing (engine)
//	c:t/<due unix nanos:8 BE><host>/<hash:16>      -> empty          recrawl schedule (engine)
//	c:m/seq                                        -> Badger sequence lease for queue and processing keys (engine)
//	c:x/<exact content hash:16>                    -> URL            exact duplicates (simhash.go)
//	c:n/<band:1><value:2 BE><simhash:8 BE><url>    -> empty          SimHash bands for near duplicates (simhash.go)
//	c:nu/<url>                                     -> exact(16)+simhash(8)+lang: reverse entry of a claim (simhash.go; a near duplicate is one of the same lang)
//
// Host keys are HostKey values (lowercase host, ":port" when not default);
// they never contain "/", so every per-host prefix is unambiguous.
package crawl
