// Package bench is the side-by-side benchmark harness: sou's index, local
// search and crawler against the pipeline a Go developer would reach for,
// colly v2 feeding Bleve v2 (gojieba analyzer, BM25).
//
// Only the sou side and the shared plumbing (document sources, timing,
// percentiles, overlap) live in non-test files; everything that imports
// Bleve or colly is in _test.go files, so neither is linked into the sou
// binary (nothing outside tests imports this package anyway). Search
// quality is scored by sou/eval, as `sou eval` and the testnet report
// score it, so the baseline's figures and the network's compare directly;
// docindex_qrels.py builds judgment sets from documentation indexes, and
// quality.sh runs a corpus testnet and the baseline in one command.
//
// Key decisions:
//   - Both engines get the same parsed documents (crawl.ParseHTML output),
//     held in memory before any clock starts, so the indexing figures
//     measure indexing only.
//   - Bleve is tuned the way its authors recommend: batches of 1,000 documents
//     (a batch is analysed in parallel), no _all field, term vectors only
//     where positions are needed, BM25 scoring.
//   - The crawl comparison gives colly the same concurrency as sou's crawler
//     (one LimitRule with Parallelism = crawl workers) and resolves every
//     simulated host to the simulated web; sou goes through its own DNS
//     resolver against the simulated web's DNS server.
//
// It owns no Badger keys of its own: each sou engine here gets a Badger in
// a temporary directory and hands it to sou/index and sou/crawl.
package bench
