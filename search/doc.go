// Package search owns the query language, local top-k execution against an
// index shard, the distributed scatter-gather with global-IDF rescoring, the
// merge, duplicate collapse and the result cache.
//
// # Query language (query.go)
//
// Terms are ANDed (with Params.Relax, a query of plain words also finds
// pages lacking some of them, ranked as Scoring says); "a phrase" needs
// consecutive positions; -word, -"phrase" and -site:host exclude; a OR b
// (also a | b) makes alternatives of the neighbouring items; site:host
// restricts to a host and its subdomains (several are alternatives; a site
// without a port matches any port). Words
// go through the index analyzer in query mode, so Chinese without spaces is
// segmented (我们的搜索引擎 → 我们 的 搜索引擎, three terms) and a query in
// Traditional characters is folded and read in mainland words (檔案 設定 →
// 文件 设置; see index's "Script folding"). A Query is AND of Groups, a
// Group an OR of Clauses, a Clause a conjunction of terms with optional
// phrase positions.
// Malformed input is read sensibly (invalid UTF-8 and control characters are
// spaces, an unbalanced quote runs to the end, dangling OR is ignored, a
// repeated item counts once); beyond MaxQueryBytes/MaxQueryRunes or
// MaxQueryTerms, or with no positive term, ParseQuery returns an error.
// FuzzParseQuery (seed corpus in testdata/fuzz) guards against panics.
//
// # Scoring (score.go)
//
// BM25F over title, anchor, body, URL words and headings:
//
//	tf'  = Σ_f W_f·tf_f / (1 − B_f + B_f·len_f/avglen_f)
//	term = idf·tf'·(K1+1)/(K1+tf'),  idf = ln(1 + (N − df + 0.5)/(df + 0.5))
//	score = Σ_present term − Miss·Σ_missing idf + proximity + same script
//	        + StaticWeight·r/(1+r)   (r = static rank ≥ 0)
//
// A relaxable query (two or more terms, no OR, no phrase; Query.Relaxable)
// matches a page that has any of its terms when Params.Relax is set, and
// the page pays Miss·idf for each term it lacks, so a page with all the
// words still comes first unless another is far better on the others.
// Proximity: for each pair of neighbouring query terms, the shard counts
// the occurrences of one within proxWindow positions of the other (in one
// field: fields are further apart than the window) and the pair adds
// Prox·min(idf)·x/(ProxK+x), bounded whatever x; the counts travel in the
// Candidate (Prox) and are checked against the TFs. A query in Chinese
// characters of one script adds SameScript to pages written in that
// script (Candidate.Script), so that of a help page's Simplified and
// Traditional copies, both found through folding, the reader's comes
// first. A query whose characters tell no script (Latin letters, or Han
// characters both scripts write alike) takes the reader's script when the
// request names one (Request.Script, from the reader's language): the
// help index of a Chinese manual keeps many entries in English, and a
// Chinese reader typing one wants the Chinese copy of the page, which
// nothing in the query's text can tell from the English one. The script
// travels to the shards, which choose their candidates with it.
// DefaultParams says why each default is what it is.
//
// Score is one pure function; the local engine runs the same arithmetic in
// the same order, so a coordinator rescoring a Candidate with the same
// statistics gets the same bits. Statistics are the caller's (global) or the
// shard's own, and count live documents only: DF is counted by a pass over
// the term's doc IDs rather than read from the postings header, which also
// counts replaced documents not yet purged. How many of those a node holds
// depends on its history, and header DFs made a page score differently on
// its owner and on the replica that took over from it.
// That pass reads a term's whole list, so on a large shard it made every
// query with a common term cost in proportion to the shard. The DF cache
// (dfcache.go) keeps each term's count with the watermark and deletion
// count it was made at: a later view with no deletion since adds only the
// documents flushed after it; any deletion or replacement makes the next
// query count again. Counts are kept per host: a shard's statistics cover
// only the hosts it owns (not those it holds as a replica), and that set
// moves with membership, so a filtered DF is a sum over the term's hosts.
//
// # Local execution (local.go)
//
// Document-at-a-time over all required groups with block-max pruning: once
// k hits are held, the sum of the current blocks' score bounds (per-block max
// TF and min field length, inflated by 1e-9 against rounding) plus the
// bounds of what does not depend on the terms' blocks (static rank from the
// shard's largest, the script bonus, proximity) is compared with the k-th
// score, and a run of documents whose bound cannot beat it is skipped
// without decoding; the term-level bound ends the query early. A relaxed
// query first runs strictly (documents with every term), then over the
// union of its terms' lists with MaxScore pruning (runRelaxed), skipping
// the documents the first pass saw and starting from the k-th score it
// reached: lists whose bounds, less the penalties of the other terms (and
// the proximity of pairs a document lacking them cannot have), cannot beat
// it stop supplying candidates. Ties break on docID and the heap's order
// is total, so the result equals exhaustive scoring (tested, strict and
// relaxed, with and without proximity and a host filter). Positions are
// decoded only to verify phrases and to count proximity, the latter only
// for a document that could still enter with the largest proximity its
// TFs allow. A shard holds replicas of hosts it does not answer for, in
// runs of neighbouring docIDs: every cursor jumps over a run of refused
// hosts at once (nextAllowed, on the index's dense per-doc host IDs);
// exclusions and site: filters are checked per candidate.
// Each Candidate carries per-term per-field TFs, field lengths, proximity
// counts and its page's script for exact rescoring; Total is exact only
// when nothing was pruned (ShardResult.TotalExact). With a host filter, Search returns statistics
// restricted to the passing hosts (as LocalStats does): Docs and field sums
// from per-host aggregates, DF by the same scan.
// Unflushed documents (at most FlushInterval old) are not yet searchable.
//
// A shard runs one request for more than a first page's candidates
// (maxShallowK) at a time and refuses the others as busy (ErrDeepBusy):
// a search's cost grows with k, and a member asking for the deepest pages
// over and over would otherwise hold every search worker of the shard.
// A deep page refused by a shard shows that shard missing in its coverage.
//
// # Snippets: two rounds
//
// A coordinator asks every shard for page·n + ShardK candidates but shows
// page·n, and a snippet (decompressing the page's record and analyzing
// its text) is most of a candidate's cost, so shards answer without
// snippets (Local.SearchSnippets with none; the wire refuses a candidate
// that carries one). After the merge, the coordinator asks each shard
// holding results on the page for their snippets (the request with U =
// their URLs, answered by Local.Snippets; one request per shard, in
// parallel, within the search's deadline; this node's own shard is read
// in process). So the network builds exactly the snippets it shows, at
// the price of a second round trip to the shards on the page. A result
// whose snippet did not come in time is shown without one, counted in
// Coverage.SnippetsMissing, and the page is not cached.
//
// # One analyzer (coordinator.go)
//
// Every shard request and answer carries its sender's
// index.Analyzer.Version. Terms, DFs and field lengths are only comparable
// between nodes that analyze text alike, so a shard of another version is
// a failed shard in Coverage ("analyzer version X, want Y") and nothing of
// it is merged; a shard asked by a coordinator of another version answers
// with its version only, without searching. An index re-indexes itself
// when the node's analyzer changes (index.Open), so a node that upgraded
// rejoins searches once its peers run the same version.
//
// # Wire (wire.go)
//
// Shard requests and answers travel in a hand-written binary encoding,
// described field by field above WireVersion: varints and length-prefixed
// strings read one field at a time, every count and length checked against
// a limit before anything is allocated for it, trailing bytes refused, so a
// peer's bytes never reach a reflective decoder. Both sides parse the raw
// query with the same analyzer, so a TF or a DF names its term by its
// index in Query.Terms, and a snippet names its page by its index in the
// request. The codec is exported for those that speak the protocol as a
// peer: node's tests and testnet's attacker.
//
// # Untrusted shards (validate.go)
//
// A remote shard's answer is checked before it is merged: counts and DFs
// against its document count (with slack for the gap between its two
// snapshots), DFs only for query terms, at most the k candidates asked, per
// candidate TF within the field length, lengths and static rank finite and
// bounded, host equal to the URL's host, an http(s) URL, no repeated URL, no
// more candidates with a term than its DF, no snippet. An answer that
// fails is never merged or cached; its coverage entry is "failed" with
// the reason. The score a shard sends is ignored (the coordinator
// rescores from the statistics). When the Transport implements HostHolders, results for hosts
// the member does not hold are dropped and counted (Coverage.Dropped), so a
// peer can only rank pages of its own hosts. An answer that arrives with or
// after the deadline counts as a timeout.
//
// Snippets are data. The coordinator reads every shard's snippet, its own
// included, as plain text (dropping only index.Snippet's <b> tags and
// decoding entities) and finds the query terms in it itself
// (Result.Highlights, code-point ranges), so a peer's markup reaches a
// result page as the literal text it is. What no check can catch: believable
// lies about a peer's own pages (see RELIABILITY.md).
package search
