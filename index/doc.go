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
//	i:d:<docID>             page record without raw bytes, zstd
//	i:r:<docID>             raw body as fetched, zstd
//	i:h:<host>\x00<docID>   host listing for ForEachPage and handoff
//	i:l:<docID>             field lengths, static rank, host of a flushed live doc
//	i:x:<docID>             tombstone of a deleted or replaced doc
//	i:a:<url>               anchor texts received from other pages (may precede the page)
//	i:q:<url>               re-index request (anchors changed for a stored page)
//	i:p:<term>\x00<last>    postings block; <last> is the block's last docID (BE),
//	                        0xFFFFFFFF for the term's tail block
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
// term is in a phrase), decodes docIDs/TFs of a block only when entered, and skips blocks by their last
// docID and score bound (block-max). Postings are built in memory and
// flushed every FlushDocs documents or FlushInterval by a background
// goroutine ("lazy merge"): a flush rewrites each touched term's partial tail
// block with the new postings (dropping tombstoned docs on the way) and
// appends full blocks. Tombstoned postings in full blocks stay until a
// future compaction (not implemented); queries filter them by the bitset.
//
// # Consistency
//
// Every change is one Badger transaction that carries the state it changes:
// Put writes the page record, URL and host keys, the old doc's tombstone and
// removal, and i:m:alloc together; a flush writes the postings of a batch,
// each live doc's i:l: key and i:m:flush (watermark = every docID below has
// postings) together; Delete removes a doc's keys (including i:l:) and writes
// its tombstone together. N and the field length sums are not stored: they
// are recomputed on Open from the i:l: keys, which appear with the postings
// and disappear with the doc, so statistics, postings and page store agree
// after a kill -9 at any instant. Docs at or above the watermark (stored but
// not flushed) are re-analyzed from the page store on Open and flushed
// before Open returns. A flush too big for one transaction is split into
// halves, each committed with its own watermark. A doc deleted while its
// batch is being flushed gets no i:l: key (the flush commits under the writer
// lock after checking tombstones).
package index
