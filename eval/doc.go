// Package eval owns known-item search evaluation: the judgment files, their
// development/test split, the metrics, and the misses file. `sou eval`,
// `sou testnet run --qrels` and the Bleve baseline in bench all score
// through it, so their figures are comparable.
//
// A judgment file is UTF-8 text, one judged query a line:
//
//	QID <tab> QUERY <tab> URL[,URL...]
//
// (../shared/corpus/qrels.py and bench/docindex_qrels.py print it). A set
// is one file, named after the file without its extension.
//
// Decisions:
//   - A result matches a relevant URL when their MatchKey is equal: host
//     lowercased with the scheme's default port dropped, and the decoded
//     path; query string and fragment are ignored (LibreOffice answers the
//     same page under ?DbPAR= variants, and an index entry points at an
//     anchor inside the page).
//   - Binary relevance and known-item metrics over the top 10: reciprocal
//     rank of the first relevant result (MRR@10), Success@1 and @10, and
//     nDCG@10 whose ideal ranking puts all of the query's relevant pages
//     first (up to 10). A relevant page returned twice counts once.
//   - Searches that failed or answered without every peer are counted and
//     reported, and left out of the metrics: a partial answer is a network
//     fault, not a ranking result. The metrics average over the searches
//     that answered completely.
//   - A set's readers may have a language (ParseReaders; `sou eval
//     --qrels-lang`, `sou testnet run --qrels-lang`): the searcher sends
//     it with each query as the node's lang parameter, as a reader's
//     browser sends Accept-Language. Without it a query carries nothing
//     but its text.
//   - Split: a query belongs to the held-out test part when
//     FNV-1a-32(QID) mod 10 < 3 (about 30%), to the development part
//     otherwise. The split depends on the QID alone, so it holds across
//     runs, machines and reorderings of a file; tune on dev, report test.
//
// The package imports no sibling.
package eval
