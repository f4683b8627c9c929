// Package index owns a node's shard: the analyzer (gojieba + Unicode words),
// the page store, positional postings in compressed blocks, field statistics
// for BM25F, snippets and cached pages.
//
// # Analyzer
//
// One gojieba instance per process (SharedAnalyzer, sync.Once). cppjieba's
// Cut/CutForSearch are const methods over a read-only trie, so the instance
// is shared by all goroutines without a lock (AddWord/RemoveWord, which
// mutate it, are never called). Dictionaries come from gojieba's default
// paths (gojieba.DICT_PATH etc., inside the Go module cache) or from
// SOU_JIEBA_DICT_DIR; when missing, Chinese degrades to character bigrams
// rather than panicking. All Han runs of a text are joined and segmented by
// one cgo call; segmentation is still the dominant CPU cost of indexing.
//
// Text is NFKC-folded (full-width to ASCII) and lowercased. Index mode uses
// search-mode cuts (搜索引擎 also yields 搜索, 索引, 引擎), with sub-words at
// the position of their parent word so phrases keep matching; query mode
// uses the plain cut. HMM is off: it merges unknown characters depending on
// context, so a query and a page could segment the same text differently.
// Traditional Chinese: no Traditional→Simplified table exists in the module
// cache or on the system, so instead runs of single characters (what
// gojieba's Simplified dictionary leaves of Traditional text) also index
// their character bigrams at the first character's position; queries use
// the bigrams only (資訊檢索 → 資訊 訊檢 檢索), which also phrase-match.
// Other scripts: letters/digits/marks form words; joiners . & @ - _ ' glue
// words when followed by a letter or digit (3.14, at&t, e-mail,
// user@example.com, node.js) and, in index mode, the parts are indexed at the
// same position too; suffixes ++ and # (c++, c#) and a leading dot (.net)
// are kept. Tokens over 64 bytes and text beyond 1 MiB per field are dropped.
//
// # Storage (Badger, keys under "i:")
//
//	i:m:alloc               next docID (written by every Put)
//	i:m:flush               flush watermark, term count, postings bytes (written by every flush)
//	i:u:<url>               docID (uint32 BE)
//	i:d:<docID>             page record without raw bytes: URL, host, title, hashes, then the rest zstd
//	i:r:<docID>             raw body as fetched, zstd
//	i:h:<host>\x00<docID>   host listing for ForEachPage and handoff
//	i:l:<docID>             field lengths, static rank, host of a flushed live doc
//	i:x:<docID>             tombstone of a deleted or replaced doc
//	i:a:<url>               anchor texts received from other pages (may precede the page)
//	i:q:<url>               re-index request (anchors changed for a stored page)
//	i:p:<term>\x00<last>    postings block; <last> is the block's last docID (BE),
//	                        0xFFFFFFFF for the term's tail block
//
// Anchor text (AddAnchors, AddAnchorsBatch: one transaction for a page's
// links) may arrive before or after its page. For a stored page the change
// is indexed by re-putting the page, which costs as much as indexing it:
// the background flush therefore re-indexes a page only once its first
// unindexed change is Options.ReindexDelay old, or when a flush finds no
// page stored since the last one (the site's crawl has quieted down);
// Flush and Close re-index everything, and Stats.Pending counts the pages
// waiting. On a link-dense site this turns one re-index per page per flush
// into about one per page. While pages keep arriving, a flush re-indexes
// at most half as many pages as it has new ones (at least 256), oldest
// change first: in a long crawl anchors trickle in for as long as linking
// pages are fetched, and without that budget re-indexing doubled the
// indexing work of a 100,000-page crawl.
//
// A re-index reads and analyses its pages on all cores without the writer
// lock (Puts go on meanwhile) and writes the stored compressed record and
// raw body again as they are, since only the anchors changed; under the
// lock each page is put only if its docID and anchors are still those it
// was analysed with (else it is analysed again there). AddAnchorsBatch
// merges a page's links' anchors under anchorMu, not the writer lock (a
// page's links cost two Badger reads each). The writers settle the race
// this opens themselves: a Put compares, under the writer lock, the
// anchors it analysed with those recorded now and leaves the page waiting
// for a re-index when they differ; AddAnchorsBatch, after its commit,
// queues the pages that a Put stored since it found them missing.
//
// DocIDs are dense uint32, never reused: Put of an existing URL allocates a
// new docID and tombstones the old one, so postings lists only ever grow at
// the end. In memory the index keeps per docID the field lengths, static
// rank and host (about 50 bytes/doc), a tombstone bitset, per-host doc
// counts and field length sums (statistics restricted to owned hosts in
// O(hosts)), and the largest static rank (the engine's static bound).
//
// # Postings
//
// Blocks of 128 docs: header (doc count, last docID, cumulative DF, per-field
// max TF and min field length for the block and cumulated over the list so
// far), then docIDs as d-gap varints, per doc a field mask and per-field TF
// varints, then per doc its positions as d-gap varints. Positions of all
// fields share one space (title, each anchor, headings, body, URL words,
// separated by gaps so phrases do not cross them). The last block of a term
// (under the 0xFFFFFFFF key) carries DF and the term-level bounds; a query
// reads a term's blocks as bytes (without the positions section unless the
// term is in a phrase), decodes docIDs/TFs of a block only when entered,
// and skips blocks by their last docID and score bound (block-max).
//
// # Indexing path
//
// Put analyzes the page on the caller's goroutine (pooled scratch: one
// map and a few slices reused per page), groups each term's positions and
// encodes them, then, under the writer lock, appends them to the pending
// index: an in-memory inverted index of the pages stored since the last
// flush, one varint byte buffer per term (docID gap, field mask, TFs,
// position gaps; about 4 bytes per posting, a tenth of the per-page term
// lists it replaced). Postings are flushed every FlushDocs documents, at
// FlushBytes of buffered postings, or every FlushInterval, by a
// background goroutine ("lazy merge"): a flush rewrites each touched
// term's partial tail block with the new postings (dropping tombstoned
// docs on the way) and appends full blocks. Tombstoned postings in full
// blocks stay until a future compaction (not implemented); queries filter
// them by the bitset.
//
// A flush sorts the pending terms, cuts them into chunks that up to
// GOMAXPROCS (at most 4) workers encode in parallel, and writes the chunks
// in order from one goroutine, in transactions of at most 1 MiB (and
// three quarters of Badger's MaxBatchSize/MaxBatchCount), committing one
// while building the next. Small commits matter: every new Badger
// transaction (a query's, a Put's) waits for the commits in flight, and
// the old single flush transaction of many megabytes stalled them all. The tail blocks of recently
// flushed terms are kept in a cache (LRU, TailCacheBytes, default 16 MiB)
// so that a frequent term's tail is not read back from Badger; an entry is
// set only after its transaction committed, and the cache is dropped when
// a flush fails, so Badger stays the truth.
//
// There is no on-disk format change from the single-transaction flush
// (a test checks that every configuration writes the same bytes); there
// is no deployed data to migrate in any case.
//
// # Consistency
//
// Every change is one Badger transaction that carries the state it changes:
// Put writes the page record, URL and host keys, the old doc's tombstone and
// removal, and i:m:alloc together; Delete removes a doc's keys (including
// i:l:) and writes its tombstone together; a flush (below) writes postings,
// then each live doc's i:l: key with i:m:flush (watermark = every docID
// below has postings). N and the field length sums are not stored: they
// are recomputed on Open from the i:l: keys, which appear after the
// postings and disappear with the doc, so statistics, postings and page
// store agree after a kill -9 at any instant. Docs at or above the
// watermark (stored but not flushed) are re-analyzed from the page store on
// Open and flushed before Open returns.
//
// A flush commits postings in several transactions, each holding whole
// term updates (a term's new full blocks and its new tail together; a term
// with more new postings than a quarter of a transaction is updated in
// chunks of docs, each a whole update), and each also writing i:m:flush
// with the unchanged watermark and the exact term and byte counts so far.
// Then the live docs' i:l: keys and the new watermark are committed under
// the writer lock (after checking tombstones: a doc deleted during the
// flush gets no i:l: key), in more than one transaction only if Badger's
// limits require, each moving the watermark to its first doc not yet
// written. If a flush stops between transactions (error or crash), some
// terms already hold docs at or above the watermark: the next flush of
// those docs skips, per term, every doc not above the term's tail's last
// docID, so no posting is lost or doubled. Queries in the meantime do not
// see those docs (Live is false at or above the watermark), though a
// term's DF may already count them.
package index
