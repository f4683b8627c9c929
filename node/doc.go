// Package node wires one sou node: configuration, lifecycle, the Badger
// database shared by crawl, index and p2p, the HTTP API and web UI, and
// metrics. It is the only package that connects crawl, index, search and p2p.
//
// # Joins and handoff manifests
//
// With XOR ownership a join moves hosts only to the newcomer, and only from
// the members that owned them, which are the newcomer's XOR neighbours. So
// a member sends a joiner a handoff manifest (the hosts it is about to hand
// over) only when it has hosts for it or when it is among the joiner's 16
// closest members by its own, settled view, and a joiner waits (at most
// 15 s) for the manifests of its 8 closest members before it crawls
// anything; a host named in any manifest waits for its handoff. Until
// issue 8 every member sent every joiner a manifest and every joiner
// awaited all of them: N² messages and connections when a network starts,
// which kept a 128-node simulation from coming up. The reasoning, the
// measurement behind the sizes and what a view that has not settled does
// are in settling (ownership.go).
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
