// Package node wires one sou node: configuration, lifecycle, the Badger
// database shared by crawl, index and p2p, the HTTP API and web UI, and
// metrics. It is the only package that connects crawl, index, search and p2p.
//
// # Where hosts live: a driver of placement
//
// Every decision about where a host lives (owner, replicas, handoff
// manifests, handoffs, takeovers, pulls, how long a stored page waits for
// its replicas, who may send what) is package placement's, a state
// machine without I/O. node drives it (placer.go): one goroutine owns the
// machine, steps it with the membership's events, a 100 ms clock and the
// outcomes of its actions, and carries the actions out through two small
// interfaces, a messenger (p2p) and a host store (hoststore.go: Badger,
// the index, the crawler). Actions that take long run on workers the loop
// owns and waits for; other goroutines reach the machine only through
// the loop (placer.do). Replication goes through p2p's durable outbox
// under one topic (replication.go), each page as its owner's index stores
// it, compressed (index.Stored), with the analysed form its index made
// while the form cache still holds it (IndexOptions). A replica holds the
// page as it came and its form, without postings (index.HoldStoredBatch):
// search asks a member only for the hosts it owns, so postings of a
// replica's pages would serve nobody until it owns their host. When it
// does, by its view (indexOwnedLoop, every few seconds) or by placement's
// takeover (before anything else in it), it indexes them from their forms
// (index.IndexHeld); until then Status.HeldOwned counts them and the node
// is not idle. This departs from DESIGN.md, whose replica is ready to
// serve: a replica that takes a host over is searchable for it once
// those pages are indexed, seconds for a host of thousands of pages. The
// crawler's fetch gate is the machine's MayCrawl.
//
// # What peers send: decoded bounded, authorised by who sent it
//
// Every payload a peer delivers (handoff pages and crawl state, replicas,
// pulls, manifests) is decoded by peermsg's bounded, versioned codecs; one
// that does not decode is malformed, and p2p throttles its sender. p2p
// serves members only. Then each item is authorised by its sender's role
// for its host, by this node's own view (peerdata.go, placement's
// Allowed): replica items only
// from a member closer to the host than this node and among its R closest
// (the owner; a replica cannot write to its owner), or from a member this
// node asked in a pull; handoffs and manifests only from a founder of this
// node's view (a member met while it joined, in this run or an earlier
// one: kept in Badger) among the R+1 closest of those to the host, to a
// node among the R+1 closest; pulls only from one of the
// R closest; URL records (urlsFrom) only as links found on a host the
// sender crawls (or handed this node within Grace + Drain, or is about
// to), as relayed records from a member near the host, or as seeds
// within a per-member budget. What is refused is counted
// (Status.HandoffRefused, p2p's URLsFiltered) and logged at a bounded
// rate. A sender whose handoff of a host its owner keeps refusing (for
// placement's HandoffGiveUp: ten membership timeouts, at least 30 s)
// abandons the host (Status.HandoffAbandoned), passing its queued URLs to
// the owner as links (one URL it knows when none is queued, so that the
// owner hears of the host): the owner takes it over, pulling the pages
// from their holders, and crawls it on its own. What
// this cannot stop is a member's word about hosts it holds itself:
// RELIABILITY.md says what one member can still do.
//
// Durability of what peers deliver: with --sync acked (the default) the
// node syncs Badger's logs before it acknowledges a replica, handoff or
// URL batch, since the sender forgets what was acknowledged; --sync always
// syncs every write, --sync none nothing. The messages that ask meanwhile
// share one sync, and syncs begin at least 10 ms apart (syncer.go), so
// that the pages a crawler's many waiting workers store together reach
// the replica in one message (ProcessWorkers). Most Stores do not wait:
// up to DetachedStores of them return once the page is stored here and in
// the durable replica outbox, whose replica messages linger for company
// (ReplicaLinger), so pages reach the replica in bulk; a node killed for
// good leaves at most those to be fetched again (replication.go).
//
// # The HTTP API and UI: who may ask what (httpguard.go, session.go)
//
// Every byte from a browser is hostile, and a browser may be steered by
// another web site. So, in this order, for every request: security headers
// on the answer (nosniff, no framing, no referrer, a CSP); without
// --http-token, a Host header that names localhost, an IP address or a
// --http-host name, else 421 (DNS rebinding: an attacker's name rebound to
// 127.0.0.1 must not reach a loopback API); then the route's rule. With a
// token every route needs it, as a Bearer header or as a session cookie
// from /login (HttpOnly, SameSite=Strict, 12 h, in memory); without one,
// only loopback clients, judged by the connection's address alone
// (X-Forwarded-For is never read). --public-search opens search and cached
// pages to anyone. State changes refuse cross-origin browsers, and a change
// that rides on a session cookie must carry Origin or Sec-Fetch-Site.
// Searches, the search page and cached copies are limited in flight per
// client address and in all (429 with Retry-After): each search asks every
// peer. Results are text (search.Result); cached copies are served in a CSP
// sandbox without script or form, and as escaped text when the HTML parser
// refuses them. A WARC export that fails after its first byte breaks the
// connection rather than end cleanly.
//
// Badger key prefixes (all under "n:"): documented in the files that own them.
package node
