// Package p2p owns the libp2p host, the Kademlia DHT, the membership view,
// host ownership by keyspace, and the wire protocols (URL forwarding, search
// transport, handoff, replication). It knows nothing of crawling or ranking:
// payloads it does not need to understand are opaque bytes. It imports
// libp2p, Badger and the standard library only (plus golang.org/x/time/rate).
//
// Node wires one type per concern, each owning its state and lock:
// membership (membership.go, admission.go: the view, its ring, heartbeats,
// candidates, member events and the loops that keep them), peerLimits
// (limits.go: each peer's rate, penalty box, streams, searches and
// allowances), urlRouter (urls.go: Forward, URL batches out and in,
// re-routing), claims (claims.go), the Outbox (outbox.go) and the search
// queue (searchqueue.go). Node itself keeps the host, the DHT, gossipsub,
// the stream discipline (streamHandler, call), pipes (pipes.go), search
// and deliver.
//
// # Host
//
// One libp2p host per node with a persistent Ed25519 identity in
// DataDir/identity.key (created 0600 on first start; an empty DataDir gives
// an ephemeral identity). Transports: TCP and QUIC (v1), listening by
// default on 0.0.0.0 and :: with port 0. Connection manager (low/high
// watermarks; live members are protected from trimming). With Config.PSK
// the node runs a libp2p private network (pnet): libp2p's QUIC transport
// refuses private networks, so QUIC is not configured and UDP listen
// addresses are dropped (logged) — a private network is TCP only.
// WithHost lets the WAN simulator supply a mocknet host; the node then
// does not close it.
//
// # NAT traversal
//
// Enabled: NATPortMap (UPnP/NAT-PMP), AutoNAT v1 service for others plus
// AutoNAT v2 client, circuit relay v2 transport (EnableRelay), AutoRelay fed
// by the live members as relay candidates, hole punching (DCUtR), and the
// relay v2 service when Config.RelayService is true (default: a publicly
// reachable node relays for NATed ones; libp2p only activates the service
// once AutoNAT reports public reachability, so a NATed node never offers
// it). libp2p's dialer prefers direct addresses; relayed (limited)
// connections are accepted for our protocols, and DCUtR upgrades them to
// direct ones when the hole punch succeeds.
//
// What the loopback testnet can exercise: the whole stack is configured
// and started in every test and testnet node (so option conflicts, e.g.
// PSK with QUIC, surface), TCP and QUIC on 127.0.0.x, direct dialing, mDNS
// on a host with multicast, private networks. What it cannot: there is no
// NAT between loopback addresses, so AutoNAT reports no public
// reachability change worth acting on, no relay reservation is needed and
// no hole punch happens; UPnP port mapping needs a real gateway. Relay and
// hole punching are therefore untested here beyond start-up; exercising
// them needs network namespaces with NAT rules (or real machines) — not
// done.
//
// # Membership
//
// The DHT (server mode, protocol prefix "/sou/<network>", providers and
// values disabled: it is used only for its routing table and peer
// discovery) is bootstrapped from Config.Bootstrap and, when enabled, mDNS
// (service "sou-<network>"). Routing-table peers that are not yet members
// are dialed so that gossip reaches them. Liveness comes from a heartbeat
// published every HeartbeatInterval ±25 % (nodes started together would
// otherwise publish in lockstep, and the bursts overflow gossipsub's
// queues: Stats.GossipDrops) on the GossipSub topic
// "sou/<network>/members/2" (its version is the ownership scheme's;
// signed by the origin, validated: size-capped,
// decoded, rate-limited per origin) carrying addresses and Load. An
// origin becomes a member only while this node has a live, authenticated
// connection to it; one heard but not connected is a candidate, dialled
// at the addresses it announced and admitted once the dial succeeds
// (admission.go). Admissions are capped (MaxMembers) and paced (JoinRate,
// JoinBurst), candidates are bounded, and heartbeats of origins there is
// no room for are dropped before they are decoded. A member
// silent for MemberTimeout is dropped, and every connection to it is
// closed: a member killed and restarted within seconds leaves a dead QUIC
// connection behind, on which gossipsub would keep respawning its writer
// until it gives up on the peer for good (pubsub.MaxBackoffAttempts) and the
// two views stay split; closing resets gossipsub for the peer, which
// reconnects. One back faster than MemberTimeout is never dropped, so
// when a new connection to a peer arrives beside older ones, each older
// one must answer a protocol negotiation within 3 s or is closed
// (staleconn.go): libp2p opens new streams on the connection with the
// most streams, which the dead one is. A node that closes cleanly publishes a
// "leaving" heartbeat and is dropped at once. Every change is a
// MemberEvent (Joined, Left) on Events(), queued without bound so nothing is
// lost to a slow reader. Presets: LAN 500 ms / 3 s, WAN 5 s / 30 s.
// GossipSub is tuned for this one topic of small, periodic, self-replacing
// messages (gossipParams): gossip (IHAVE) goes to Dlazy = 6 peers rather
// than a quarter of all connected peers, which made gossip O(N) per node
// (a 128-node simulation's pubsub bytes fell 6.6× without it), and
// gossipsub's own heartbeat runs every HeartbeatInterval/5, at least a
// second apart (its default, so the presets keep it). Its per-peer
// outbound queue holds 256 RPCs and the subscription 1,024 messages
// (defaults 32 each), so that a burst of joins is queued, not dropped.
//
// # Ownership
//
// Hosts are placed by consistent hashing with virtual keys (Karger et al.;
// Dynamo's virtual nodes) on a ring of 64-bit points. A host's point is
// the first 64 bits of HostKey, sha256(lowercased host[:port]). Each
// member has VirtualKeys (128) points, derived from 128 bits of its peer
// key sha256(peer ID) (splitmix64 steps: a member's points are distinct,
// and placing them at will costs what placing the peer key does). A
// member's distance to a point is how far clockwise its nearest virtual
// key lies; ties (two members' keys colliding) go to the smaller peer ID,
// so the order is strict and every node computes it alike. Owner = the
// member (self included) closest to the host; Replicas = the R closest
// distinct members, owner first. A join moves hosts only to the newcomer,
// and from at most VirtualKeys members, its donors (Ring.Donors): for
// each of its points, the member owning the next point of the others. A
// leave moves each of the leaver's hosts to the next member on the ring,
// its replica.
//
// Why virtual keys: with one key per member the arcs (or XOR cells) are
// as uneven as a handful of random points, and the most loaded member
// owns several times the mean; the spread of the sum of a member's arcs
// shrinks with the number of keys (TestOwnershipSpread prints the spread
// of one key and of VirtualKeys keys; BENCHMARKS.md, "Balanced
// ownership", the testnets'). Rendezvous hashing (HRW) balances at least
// as well with no keys to choose, but a joiner takes hosts from every
// member, so a join would need a manifest and a handoff from all N; the
// ring bounds a joiner's donors by VirtualKeys. XOR over virtual keys
// balances about as well as the ring, but names a joiner's donors only
// with high odds (among the few keys closest to each of its own), where
// the ring names them exactly.
//
// OwnerOf and ReplicasOf are the pure functions over a member list (tests,
// reports, node's lists that are not the view); they derive every
// member's keys anew. The node keeps a Ring of its view (View), replaced
// when a member joins or leaves (a merge, O(N·VirtualKeys)), and answers
// Owner, Replicas, IsOwner and Holds from it with one binary search; a
// ring also remembers recent hosts' ring points in a fixed direct-mapped table
// (a search asks the owner of every host of its shard per query).
// Holds(p, host) says whether p holds host: p is a member (or this node)
// among the R closest. A peer not admitted holds nothing. Claims are
// checked with it, and node gives it to the search coordinator so that
// results a shard sends for hosts it does not hold are dropped. The claim
// registry of a key is the member closest to sha256(key) on the same ring.
// The DHT's routing table still places peers by their one peer key:
// ownership is computed over the full membership view, not looked up in
// the DHT.
//
// # Members only
//
// Every protocol (URLs, search, deliver, claim, claims) serves members only: a
// stream from a peer that is not a member is reset before its frame is
// read and before any per-peer state is made (Stats.NonMemberStreams). An
// honest peer not admitted yet is refused like a stranger and retries.
//
// # The outbox
//
// Outbox is one durable per-peer outbox for every topic: records for a
// peer under a topic, kept in Badger, delivered oldest first by one
// sender goroutine per peer and topic (it ends when the queue is empty),
// one batch in flight (the ack is the flow control), deleted only once
// the receiver acknowledged them, which it does after its handler made
// them durable. Failures back off exponentially (RetryMin to RetryMax,
// ±20% jitter). Delivery is at-least-once: a lost ack means a resend. A
// topic other than URLs (SetTopic: node's replication) makes its own
// messages of its records, sent on the deliver protocol, and hears what
// was delivered; a topic with a Linger lingers before a queue's first
// message and after each message that had room to spare, so records
// appended while one is in flight travel together.
//
// # URL forwarding
//
// Forward groups records by owner (this node's view): own records go to
// the URL handler directly, others are appended to the outbox under
// TopicURLs, sent in batches of up to BatchMaxURLs (lingering BatchDelay
// to fill them). If the peer stops being a member, its URL records are
// re-routed to the owners by the current view (after a grace of
// 2×MemberTimeout after start, so a restarted node first hears
// heartbeats). The receiver (node) deduplicates against its URL-seen set.
//
// A receiver first asks the URL filter (SetURLFilter: node's rule of which
// records a member may vouch for) about every record of a batch and drops
// those it refuses (Stats.URLsFiltered); then it hands the records it owns
// (by its view) to the handler and re-forwards the rest to the owner by
// its view with Hops+1, dropping (and logging, counting) records past
// MaxHops. Chains cannot loop, however the views differ: a receiver's view
// holds itself, so the owner it forwards to is strictly closer to the host
// than itself in the order above, and that order (distance to the nearest
// virtual key, then peer ID) belongs to the pair of member and host, not
// to any view. Each hop therefore gets strictly closer, no member is
// visited twice, and a chain ends at a member that owns the host by its
// own view (TestGreedyForwardingTerminates).
//
// # Protocols and wire formats (all IDs versioned, all include the network)
//
// A stream of a protocol below carries one request frame and one
// response frame: a uvarint length then the bytes, capped by
// MaxMessageBytes; the buffer grows as bytes arrive (from 4 KiB), never to
// the announced length up front. URL batches, deliveries and claim
// batches go on pipes (pipes.go): long-lived streams of the protocols'
// 2.0.0 versions (PipeProtocolIDs), on which request and response frames
// alternate, as many exchanges as the sender makes, one at a time. A
// sender keeps up to 4 idle pipes per peer and protocol for
// 2×StreamIdleTimeout, the receiver waits 6×StreamIdleTimeout for a
// pipe's next request, and every request on a pipe passes the checks of
// a new stream's (membership, rate, the URL batch cap). A sender offers
// the pipe version first and falls back to one stream per request with a
// peer that does not speak it. Every
// payload starts with a version byte (1). Responses: version, status (0
// ok, 1 error, 2 refused by the handler's rules: ErrRefused), then the
// body or an error text (≤ 1 KiB). Malformed input resets the stream
// and is counted (Stats.RejectedMessages); it never panics (fuzzed).
//
//   - /sou/<network>/urls/1.0.0: version, then a raw DEFLATE stream of a
//     columnar batch sorted by URL: count; URLs front-coded (shared prefix
//     length with the previous URL, suffix); anchors; source hosts (0 = same
//     as previous); cash as float64 bits; depth; hops. Inflation is capped at
//     MaxMessageBytes (compression bombs cost nothing). Measured: 1,000 URLs
//     from one site with random slugs and short anchors take 22.6 bytes/URL
//     on the stream (frame header and payload; yamux/noise/TCP overhead not
//     counted).
//   - /sou/<network>/search/1.0.0: version, uvarint timeout in ms (the
//     caller's remaining time, relative so clocks need not agree; the
//     handler's ctx ends with it), opaque request. The caller's Request
//     returns at its ctx deadline whatever the peer does.
//   - /sou/<network>/deliver/1.0.0: version, topic (uvarint length, ≤ 128
//     bytes), opaque payload; acked after the topic's handler returns nil.
//     Send retries transport failures until ctx ends, returns handler errors
//     as *RemoteError. Not durable: the caller keeps its data until Send
//     returns nil. Batch payloads: each message counts against the peer rate.
//   - /sou/<network>/claim/2.0.0: version, hops, key, value (a URL), the
//     origin's public key and its signature over ("sou/claim/1", network,
//     key, value); routed greedily to the member closest to sha256(key)
//     on the ownership ring, which keeps the least value claimed so far
//     (shortest, then byte
//     order: the winner does not depend on arrival order) and returns it.
//     Every hop verifies the signature (a forgery is
//     malformed: reset, counted, sender throttled) and refuses the claim
//     (an error answer, Stats.ClaimsRefused) unless the origin holds the
//     URL's host (Holds: a member among the Replicas closest to it by the
//     hop's view), and then charges the origin's claim allowance. A peer
//     therefore cannot claim, and so suppress as duplicates, pages on hosts
//     honest peers own. (1.0.0 carried no origin and is gone.)
//   - /sou/<network>/claims/1.0.0: a batch of the sender's own claims
//     (claimbatch.go): version, count (1 to 512), then each claim's key
//     and value. The stream's peer is the origin, so nothing is signed;
//     the receiver answers each claim (version, count, then a status
//     byte per claim: won with the winning value, refused, throttled, or
//     not here when it is not the key's registry by its view) after the
//     checks of claim/2.0.0, and stores the batch in one transaction. A
//     node sends its claims this way to their registry by its view, one
//     batch per registry in flight, and the claims made meanwhile go in
//     the next; a claim answered "not here", or whose batch failed in
//     transport, goes the signed, routed way of claim/2.0.0.
//   - heartbeat (pubsub): version, flags (bit 0 leaving), sender time in ms,
//     addresses (≤ 64, binary multiaddrs), load (pages, frontier, hosts,
//     outbox depth) as uvarints.
//
// # Limits
//
// Every inbound request (a new stream's, or the next on a pipe) costs one
// token of a per-peer token bucket (PeerRate, PeerBurst); a peer that
// empties it is throttled — every stream it sends on is reset — for
// ThrottleFor (Stats.ThrottledMessages, ThrottleEvents,
// ThrottledPeers). A malformed message throttles its sender at once.
// Heartbeats are limited per origin to 4 per interval.
//
// Concurrency: a peer may have at most MaxStreamsPerPeer (128) inbound
// streams being handled at once, at most MaxSearchesPerPeer (32) search
// requests (more are answered busy: Stats.SearchesRefused), and at most 4
// URL batches being read or handled (a pipe waiting for its next batch
// holds no slot). Search requests run on as many workers as there are cores;
// a freed worker goes to the waiting peer that used the workers least
// lately (searchqueue.go), so a member that sends many or costly searches
// delays its own, not others'; one not started by its deadline is
// answered busy. Streams beyond
// are reset on arrival (Stats.StreamsRefused). Exceeding it is not
// penalised: an honest coordinator under load may run many searches at
// once. A request must keep arriving: StreamIdleTimeout (10 s) of silence
// resets the stream (Stats.StreamsTimedOut), and every request ends after
// 2 minutes in all. libp2p's own resource manager (default, autoscaled
// limits) stays in place below these.
//
// URL intake: each peer has an allowance of PeerURLRate records per second
// (20,000) saved up to PeerURLBurst (100,000). A batch is accepted while
// the allowance is positive and charged in full; otherwise it is answered
// "busy" before it is inflated (Stats.URLBatchesRefused), and the sender
// keeps it in its outbox and retries after a backoff. Records for hosts
// the receiver does not own count alike, so a flooder cannot grow this
// node's frontier or outboxes faster than the allowance by any route.
//
// Field caps: URL 8 KiB, anchor 1 KiB, source host 300 B, 100,000 records
// per batch, claim key 1 KiB, value 8 KiB, public key and signature 1 KiB
// each, 512 claims per claim batch; gossip messages 64 KiB.
//
// # Badger keys (all under "p:")
//
//   - "p:q/<topic>\x00<peer ID base58>\x00<seq 8 bytes big-endian>" -> one
//     outbox record (under TopicURLs: version, URL, anchor, source host,
//     cash bits, depth, hops). seq is global and monotonic; restored from
//     the largest key at start. Records under "p:o/<peer>/<seq>" (URL
//     records of an earlier version) are moved there at start.
//   - "p:c/<sha256(key) 32 bytes>" -> the winning value of a claim, kept
//     for ClaimTTL (Badger's TTL). Claims are not replicated: if the member
//     holding a claim dies, the next-closest member starts without it, so
//     one duplicate may then slip through.
//
// What peers make this node store is bounded: URL batches by the URL
// allowance and the intake gate (WithIntakeGate: node's disk guard); a
// peer's queue of a topic by MaxOutboxPerPeer (beyond it this node's own records for
// the peer are dropped, Stats.URLsDropped and OutboxFull, and batches that
// would need re-forwarding there are refused as busy); claims by the
// origin's ClaimRate allowance (Stats.ClaimsThrottled), ClaimTTL and the
// intake gate.
//
// Durability of both follows the DB's SyncWrites option.
package p2p
