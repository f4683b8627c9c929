// Package index owns a node's shard: the analyzer (script folding, gojieba,
// Unicode words), the page store, positional postings in compressed
// blocks, field statistics for BM25F, snippets and cached pages.
//
// # Analyzer
//
// One gojieba instance per process (LoadAnalyzer, sync.Once) over
// dictionaries compiled into the binary (data/, data/README.md), so that
// the binary runs without the Go module cache and every node segments
// alike. cppjieba reads dictionaries from files, once, in its
// constructor: they are written to a private temporary directory, loaded
// and removed. A failure is an error from LoadAnalyzer and Open, never a
// fallback: a node that cut text differently would corrupt global IDF
// without a sign. SOU_JIEBA_DICT_DIR replaces jieba.dict.utf8 and
// user.dict.utf8 (checked line by line first: cppjieba aborts the process
// on a malformed one). cppjieba's Cut/CutForSearch are const methods over
// a read-only trie, so the instance is shared by all goroutines without a
// lock (AddWord/RemoveWord, which mutate it, are never called). All Han
// runs of a text are joined and segmented by one cgo call; segmentation
// is the dominant CPU cost of indexing.
//
// Text is NFKC-folded (full-width to ASCII), lowercased and script-folded
// (below). Index mode uses search-mode cuts (搜索引擎 also yields 搜索,
// 索引, 引擎), with sub-words at the position of their parent word so
// phrases keep matching; query mode uses the plain cut. HMM is off: it
// merges unknown characters depending on context, so a query and a page
// could segment the same text differently. Runs of single characters
// (what jieba leaves of words it does not know, names mostly) also index
// their character bigrams at the first character's position; queries use
// the bigrams only, which also phrase-match.
// Other scripts: letters/digits/marks form words; joiners . & @ - _ ' glue
// words when followed by a letter or digit (3.14, at&t, e-mail,
// user@example.com, node.js) and, in index mode, the parts are indexed at the
// same position too; suffixes ++ and # (c++, c#) and a leading dot (.net)
// are kept. Tokens over 64 bytes and text beyond 1 MiB per field are dropped.
// English words (3 to 32 ASCII letters, not glued) are replaced by their
// Snowball stems in pages and queries alike (stem.go says why by form).
//
// Analyzer.Version names everything that decides terms: analyzerAlgorithm
// (bumped by hand when a change to the code changes terms) and a hash of
// the dictionaries and conversion tables. The index records it (Storage);
// search refuses to merge shards of another version.
//
// # Script folding
//
// Traditional Chinese is folded to Simplified before segmentation, in
// pages and in queries, so that one (Simplified) dictionary serves both
// scripts. The tables are OpenCC's (data/opencc), applied by fold.go: a
// trie per step built once, OpenCC's maximum forward matching, and a map
// from each byte of the folded text to the original, so that snippets and
// cached pages highlight the page's own characters (a replacement's k-th
// character maps to the k-th it replaced). github.com/longbridgeapp/opencc
// does not fit: it keeps no offsets, allocates a map at every position
// it converts (its cost per page: BENCHMARKS.md, "Script folding") and
// registers a command-line flag when imported.
//
// A text's script is decided on its first 64 KiB: characters only
// Traditional uses (t2s changes them: 們) against characters only
// Simplified uses (s2t changes them: 们). A field that does not tell (a
// short title, 巨集) takes its page's script: the body's, else the
// title's. Traditional text goes through OpenCC's Taiwan and Hong Kong
// variant tables, then t2s; other text through t2s only, which leaves
// Simplified text as it is bar quoted Traditional characters (the
// variant tables would not: 什么 is not 什幺).
//
// Vocabulary: Taiwan words whose mainland word differs (OpenCC's
// TWPhrasesRev: 檔案 文件, 設定 设置, 巨集 宏). It applies to
// Traditional text only: in Simplified text it would change meanings (a
// mainland 文件 is a file, a Taiwan one a document). A Traditional page
// indexes both readings: the folded word (档案) and, at its position, the
// words that a segmentation of the mainland reading (the alternative and
// four characters each side) makes across the alternative (资讯检索 also
// yields 信息 and 信息检索), so that a page matches a query in either
// vocabulary; where OpenCC's mainland word is doubtful (面板 → 皮肤) the
// page still matches its own word. A Traditional query is read in
// mainland words only. A query that does not tell (巨集, 列印) is read as
// Simplified: it finds Taiwan pages by their folded words but not the
// mainland pages of the other word (an OR of both readings would need the
// query parser).
//
// # Storage (Badger, keys under "i:")
//
// The index orders its writers itself (mu, anchorMu, flushMu) and expects
// a DB opened without Badger's conflict detection, as node.BadgerOptions
// opens it: with it, AddAnchorsBatch fails with ErrConflict when a Put
// commits a page it read.
//
//	i:m:alloc               next docID (written by every Put)
//	i:m:flush               flush watermark, postings bytes (written by every flush)
//	i:m:analyzer            Analyzer.Version and postings format of the postings
//	i:u:<url>               docID (uint32 BE), then 1 for a held page
//	i:d:<docID>             page record without raw bytes: URL, host, title, hashes, then the rest compressed (S2; zstd from older builds)
//	i:r:<docID>             raw body as fetched, compressed (S2; zstd from older builds)
//	i:h:<host>\x00<docID>   host listing for ForEachPage and handoff
//	i:l:<docID>             field lengths, static rank, host, script of a flushed live doc
//	i:x:<docID>             tombstone of a deleted or replaced doc
//	i:a:<url>               anchor texts received from other pages (may precede the page):
//	                        the maxAnchors first by a fixed hash, whatever order they came
//	                        in, so that every node holding the URL keeps the same (anchors.go)
//	i:q:<url>               anchor update request (anchors changed for a stored page)
//	i:z:<host>\x00<docID>   a held page: its owner's analysed form (maybe empty)
//	i:p:<term>\x00<last>    full postings block (BlockSize docs); <last> is its last docID (BE)
//	i:p:<term>\x00\xff\xff\xff\xff<last>
//	                        appended postings block (fewer docs), after the full ones
//	i:n:<term>\x00<update><part>
//	                        anchor postings: a term's entries for the anchor updates
//	                        (anchorpost.go); <update> numbers them (BE uint32), <part> (BE uint16)
//	                        splits a large one
//	i:m:anchors             last anchor update number
//
// Anchor text (AddAnchors, AddAnchorsBatch: one transaction for a page's
// links) may arrive before or after its page. A page is analysed when the
// flush after its Put adds its postings (queue.go), with the anchors
// recorded by then: the pages fetched right after a page link to it
// within the same seconds, and their anchors cost nothing. For a page
// flushed already, a later flush analyses the anchor field alone and
// writes it as anchor postings (i:n:, anchorpost.go) that replace, for
// that doc, the anchor field of its main postings when they are read:
// the page itself is not read, analysed or written again. The anchors sit
// last in the page's position space (from anchorBase), so the new field
// shifts no other field's positions. The background flush updates a
// page's anchors once its first unindexed change is Options.AnchorDelay
// old, or when a flush finds no page stored since the last one (the
// site's crawl has quieted down), and a busy flush updates at most half
// as many pages as it has new ones (at least 256), oldest change first;
// Flush and Close update everything, and Stats.Pending counts the pages
// waiting. Each update writes the whole anchor field again, so coalescing
// a page's changes keeps the stale entries (dropped when their term's
// anchor blocks are merged) few.
//
// A page's analysed form (forms.go: the tokens of each field, with
// positions relative to their part) is how a page is analysed once in a
// network: Form encodes a cached form (formwire.go, Options.FormCacheBytes,
// an LRU by bytes in memory) for the page's replicas (a page still queued
// is analysed then, and the flush uses that analysis, or replays the form
// if anchors arrived since), and
// PutAnalysedBatch indexes a page from its received form with the
// receiver's own anchors, writing the postings an analysis would
// (TestPutAnalysedBatchWritesSameBytes). A replica of a host it does not
// own stores the page and its form without postings instead (HoldBatch,
// held.go; HoldStoredBatch keeps the page as its owner's index stored it,
// compressed, which Stored reads, and which CheckStored checks once
// before it is held, decompressing both parts within their caps:
// stored.go): search asks a member only for the hosts it owns, so a
// replica's postings served nobody, and writing them (with their flushes
// and anchor updates) repeated the owner's indexing work.
// IndexHeld indexes a host's held pages from their forms when the node
// comes to own it. A received form is bytes from a
// peer: it is decoded with bounds and checked for everything the postings
// rely on, and one that fails (or names another analyzer version) is
// not used: the page is analysed. Under the
// lock each page is put only if its docID and anchors are still those it
// was analysed with (else it is analysed again there). AddAnchorsBatch
// merges a page's links' anchors under anchorMu, not the writer lock (a
// page's links cost two Badger reads each), and skips the links whose
// anchors are all recorded already, by a table of recorded (URL, text)
// pairs (anchorcache.go): most links of a documentation site are its
// navigation, the same texts to the same pages from every page. The
// writers settle the race this opens themselves: a Put compares, under
// the writer lock, the anchors it analysed with those recorded now and
// leaves the page waiting for an anchor update when they differ;
// AddAnchorsBatch, after its commit, queues the pages that a Put stored
// since it found them missing.
//
// DocIDs are dense uint32, never reused: Put of an existing URL allocates a
// new docID and tombstones the old one, so postings lists only ever grow at
// the end. In memory the index keeps per docID the field lengths, static
// rank, host and Chinese script (Reader.Script, about 50 bytes/doc), a tombstone bitset, per-host doc
// counts and field length sums (statistics restricted to owned hosts in
// O(hosts)), and the largest static rank (the engine's static bound).
// Because a docID's record never changes, the summaries a query's
// candidates need (URL, host, title, hashes) are kept in a cache that
// nothing invalidates (summarycache.go, Options.SummaryCacheBytes, default
// 4 MiB): a deleted doc's entry is only dropped to free it.
//
// # Postings
//
// Blocks of up to 128 docs: header (doc count, last docID, per-field max
// TF and min field length of the block), then docIDs as d-gap varints, per
// doc a field mask and per-field TF varints, then per doc its positions as
// d-gap varints. Positions of all fields share one space (title,
// headings, body, URL words, then each anchor from anchorBase on,
// separated by gaps so phrases do not cross them). A term's list is its
// full blocks (exactly 128 docs) and then its appended blocks (fewer), in docID order in key order. A query
// reads a term's blocks as bytes (without the positions section unless
// the term is in a phrase), sums their headers into DF and the term-level
// bounds, decodes docIDs/TFs of a block only when entered, and skips
// blocks by their last docID and score bound (block-max).
//
// # Indexing path
//
// Put validates and compresses the page on the caller's goroutine, stores
// it under a new docID and queues it, holding its text. The flush first
// analyses the queued pages on all cores (pooled scratch: one map and a
// few slices reused per page), groups each term's positions and encodes
// them (and, with the form cache on, keeps the page's analysed form for its
// replicas, above), then, under the writer lock, appends them in
// docID order to the pending index (the docIDs below the first page
// queued since are the flush's batch): an in-memory inverted index of the
// flush's pages, one varint byte buffer per term (docID gap, field mask,
// TFs, position gaps; about 4 bytes per posting, a tenth of the per-page
// term lists it replaced). A flush runs every FlushDocs queued documents,
// at FlushBytes of queued text and buffered postings, or every
// FlushInterval, on a background goroutine. A flush appends each touched
// term's new postings as a block of their own, without reading the list,
// so that most terms of a flush cost one write and no read. Now and then (the "lazy merge" of
// DESIGN.md) it merges a term's appended blocks instead: it reads them,
// adds the new postings, writes full blocks of 128 and appends what is
// left, deleting the blocks it read, with tombstoned docs dropped on the
// way. A term is merged by one
// flush in mergeEvery (8) that has postings for it, chosen by a hash of
// the term so that no per-term state is kept and no flush merges all
// terms, and by any flush whose new postings for it fill a block. A list
// thus ends in about 8 appended blocks, and a flush reads the appended
// blocks of one term in 8 (small values, held in the LSM tree).
// Tombstoned postings in full blocks stay until a future compaction (not
// implemented); queries filter them by the bitset. How the pages are
// batched into flushes changes the blocks, never the postings of the
// live docs (TestFlushWritesSamePostings).
//
// A flush sorts the pending terms, cuts them into chunks that up to
// GOMAXPROCS (at most 4) workers encode in parallel, and writes the chunks
// in order from one goroutine, in transactions of at most 1 MiB (and
// three quarters of Badger's MaxBatchSize/MaxBatchCount), committing one
// while building the next. Small commits matter: every new Badger
// transaction (a query's, a Put's) waits for the commits in flight, and
// the old single flush transaction of many megabytes stalled them all.
//
// i:m:analyzer also names the postings format (postingsFormat): an index
// written in another is rebuilt by Open as after a change of analyzer.
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
// Open, on all cores, and flushed FlushDocs at a time (each flush moving
// the watermark) before Open returns.
//
// An index whose i:m:analyzer is not its analyzer's version (built by
// another release, or with other dictionaries) has every i:p: and i:l:
// key dropped and its watermark moved to 0, then i:m:analyzer set: the
// re-analysis above then indexes every stored page again, from its
// record, before Open returns, so a node never searches postings of
// another analyzer. A crash before i:m:analyzer is set starts over; one
// after resumes at the watermark.
//
// A flush commits postings in several transactions, each holding whole
// term updates (a term's new blocks and the deletion of the appended
// blocks they replace together; a term with more new postings than a
// quarter of a transaction is updated in chunks of docs, each a whole
// update), and each also writing i:m:flush with the unchanged watermark
// and the exact byte count so far.
// Then the live docs' i:l: keys and the new watermark are committed under
// the writer lock (after checking tombstones: a doc deleted during the
// flush gets no i:l: key), in more than one transaction only if Badger's
// limits require, each moving the watermark to its first doc not yet
// written. If a flush stops between transactions (error or crash), some
// terms already hold docs at or above the watermark: the flushes of those
// docs (up to the last docID the stopped flush could have written) are
// careful, reading every term's last docID on disk and skipping the docs
// not above it, so no posting is lost or doubled. Queries in the meantime do not
// see those docs (Live is false at or above the watermark), though a
// term's DF may already count them.
package index
