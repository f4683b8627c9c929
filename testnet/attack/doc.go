// Package attack is a hostile sou node for the hostile testnet (`sou
// testnet run --hostile K`): a real libp2p host that joins a network as a
// member and, beside it, a stranger host that never joins, which together
// run every attack class against the honest nodes for as long as they are
// told to. It never crawls and never tells the truth.
//
// The attacker runs inside the testnet's own process; its member is a
// p2p.Node over a host with no resource limits of its own (libp2p's null
// resource manager) and an in-memory store. What each class tries, and
// what the honest nodes answered, is counted per class (Stats); the
// testnet judges the outcome from what the simulated web and the honest
// nodes saw, never from these counts alone.
//
// Classes (Config.Classes; nil or "all" = every one):
//
//	decode-bomb     the 111-byte gob frame that made a node allocate hundreds of MB, and
//	                payloads whose counts lie, on every deliver topic, from the member and the stranger
//	garbage         malformed frames on every protocol (penalises the sender: sent rarely)
//	poison          forged pages, fetch markers, anchors, sitemaps and crawl state for hosts honest
//	                nodes own, as replica and handoff messages to their owners and replicas
//	manifest        forged handoff manifests naming honest hosts, again and again
//	pull            pulls of honest hosts, which would make their holders send every page
//	phantoms        heartbeats signed by thousands of generated keys, relayed by the stranger
//	claims          a claim flood: fingerprints for the attacker's own hosts and for honest hosts
//	                (sent as the member's claim batches, and signed and routed where views differ)
//	url-flood       URL batches for foreign hosts as fast as the wire allows
//	search-amp      shard requests for thousands of candidates and snippets, many at once
//	idle-streams    streams that announce a large frame and send nothing (every other round: they
//	                fill the per-peer stream cap, where the other classes would stop)
//	forged-answers  the member's own shard answers: results for hosts it does not hold, impossible
//	                statistics, HTML in snippets
//	http            DNS-rebinding requests (foreign Host) to every honest node's HTTP API, spoofed
//	                X-Forwarded-For, and a flood of concurrent searches
//
// Every forged page, title, anchor and snippet carries Config.Token, so
// the testnet can tell a poisoned page from the truth.
package attack
