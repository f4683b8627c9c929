// Package testnet owns the test networks: the simulated web (sub-package
// simweb), the LAN launcher that runs real `sou node` processes on loopback,
// the WAN simulator, and the reports computed from what the simulated web
// saw.
//
// The launcher starts each node with a share of the machine's cores as
// its GOMAXPROCS (NodeProcs, --node-procs): a testnet stands for nodes on
// machines of their own, and processes that each schedule the whole
// machine take cores from one another's work. A run with hostile members
// gives every node all the cores instead (RunConfig.nodeProcs says why).
//
// Report decisions of `sou testnet run`:
//   - The network section's owner spreads and each per_node entry's
//     truth_* keys split the web's hosts (keyed as the nodes key them,
//     crawl.HostKey of their URLs) and their required pages by
//     p2p.OwnerOf over the members at the end of the crawl: the web's
//     truth and the final ownership, not the nodes' own counts.
//   - Judged queries (--qrels, sou/eval's files) run at the first live node
//     one at a time with a 2 s deadline, over the part --qrels-split (all
//     by default, the dev and test parts then reported apart). Searches
//     that fail or miss a peer are counted, not scored. The search section
//     keeps the first file's mrr10, s10, s1 and ndcg10; --report-dir gets
//     misses.tsv. --qrels-lang SET=LANGUAGE sends a set's queries with its
//     readers' language (the search API's lang), as their browsers would.
//   - On a web of directory sites, the crawl section's corpus_html_* keys
//     count the .html and .htm files under the docroots (each path, a
//     symlink included; not inside symlinked directories) and those the
//     web answered 200 in full, by their own URL or, for an index.html,
//     by their directory's: unlike coverage, this counts pages no link
//     leads to.
//     --report-dir gets pages-fetched.txt, the page list bench's Bleve
//     baseline indexes to rank the same pages.
//
// The WAN simulator (Sim, `sou testnet sim`, sim*.go) runs N real nodes —
// node.Node with its Badger store, index, crawler, p2p layer and search
// coordinator — in this process, each on a go-libp2p mocknet host
// (node.WithHost) with an in-memory Badger (node.WithInMemoryStore), its
// own HTTP API on its own loopback address, and that address as the
// crawler's source IP. Decisions:
//   - Identities: Ed25519, as real nodes have (mocknet's own GenPeer makes
//     ECDSA P-256 keys, whose heartbeat signature checks were 13% of the
//     CPU of a 64-node run).
//   - Start-up: node 0 first, then the others eight at a time, each
//     bootstrapped to node 0 and to three random nodes already running
//     (startupPeers). The simulator connects nothing else: the DHT's
//     bootstrap and refresh, gossipsub and sou's own protocols open the
//     connections a node needs, as on a real network. (Connecting every
//     pair up front made N²/2 connections serialised on mocknet's
//     per-peer locks: 161 s at 64 nodes, not done after 8 minutes at 128.)
//     Start-up ends when every node sees every member.
//   - Links: every pair of nodes is linked (a link only prices a
//     connection, it opens none), with a one-way latency drawn
//     per pair from --latency (deterministic from the seed) and the
//     --bandwidth cap. Mocknet applies the bandwidth; the latency is
//     simStream's, pipelined (mocknet's own makes every write of 256 bytes
//     or more wait out the latency before the next may start, one message
//     per latency per stream, under which gossipsub at 200 nodes never
//     converged). The web delays each
//     response by the (node, host) entry of a C_ij matrix drawn from the
//     same range (simweb.LatencyMatrix): half the node's own access
//     latency, half the pair's route.
//   - Membership: the WAN p2p preset (5 s heartbeat, 30 s member timeout)
//     up to 64 nodes; beyond, the heartbeat is stretched so that the whole
//     network delivers at most simHeartbeatBudget (820) heartbeats per
//     second — interval N²/820 s, timeout six intervals (20 s / 2 min at
//     128 nodes, 49 s / 4.9 min at 200, 80 s / 8 min at 256). On a real
//     network each node pays N/interval heartbeats on its own CPU; here one
//     process pays N²/interval, and 128 nodes at 5 s never settled. It
//     slows the noticing of joins and leaves, not the crawl or the
//     searches; the report's sim section gives both values.
//   - Loss: libp2p runs over reliable transports, so the application sees
//     loss only as retransmission delay. simHost wraps each node's host so
//     every stream of sou's protocols, gossipsub and the DHT is counted and
//     a write containing a lost 1460-byte packet (--loss per packet) waits
//     max(200 ms, RTT)+RTT, blocking the stream behind it as TCP would. The
//     web's links are not lossy.
//   - Churn: --churn N is N leaves and N joins per minute, alternating,
//     while required pages remain. A leave unlinks the node and closes its
//     host before stopping it (no goodbye; its in-memory store is lost); a
//     join is a fresh identity bootstrapped to three live nodes. Node 0,
//     where the seeds are submitted, never leaves.
//   - Report: the crawl section comes from the web's request log with the
//     same checks as `sou testnet run`; network from the nodes' Status,
//     except its owner spreads, which come from the truth listing and the
//     final ownership (ownershipOf), as in `sou testnet run`; per_node
//     from each live node's Status and the web's requests from its
//     address, without the CPU and memory keys: the nodes share one
//     process, and Go keeps no CPU or memory figure per goroutine, so a
//     node's own cannot be measured (the sim section gives the process's
//     and its share per node); search from a query phase run in process (node.Search) at
//     --query-nodes nodes spread over the network, opened by one
//     unmeasured search per asking node (its first search opens
//     connections to the half of the members outside its DHT routing
//     table, which at 128+ nodes outlasted the deadline; the warm-up's
//     coverage and time are reported). The sim section adds
//     crawl pages/s, process RSS, heap and goroutines sampled every 2 s
//     (and their share per live node: the nodes share one process, so a
//     node's own use cannot be separated), index documents and postings
//     bytes per node (Badger reports no size in memory), CPU seconds, coordination messages and bytes per page by protocol as
//     seen on the emulated links during the crawl, owner-lookup hops from
//     p2p's forward counters, and the query fan-out's shard requests,
//     messages and bytes per query.
//   - A simulation is ok with coverage 1.0 and at most 0.1% of the pages
//     fetched twice (issue 8's done-when; `sou testnet run` allows none
//     without churn, but a node starved of CPU among hundreds in one
//     process can time out on a response the web completed and fetch it
//     again), plus one response per crawl worker per leave under churn.
//     The query phase uses a WAN deadline, 2 s plus six one-way latencies
//     (the LAN default of 800 ms is under two round trips plus one
//     retransmission at 200 ms).
package testnet
