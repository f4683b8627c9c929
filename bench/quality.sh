#!/usr/bin/env bash
# Search quality on the real corpus in one command (issue 23): builds the
# judgment sets, runs a 4-node corpus testnet that scores them, then scores
# the Bleve + gojieba baseline on the pages that run fetched and writes the
# table of sou against Bleve per set and part (dev and held-out test).
#
#   bash bench/quality.sh [OUT]      # OUT defaults to bench/results/quality-<UTC time>
#
# About 15-25 minutes on two cores (the testnet run 8-12, the baseline's
# indexing and queries the rest); it uses both cores throughout.
#
# Environment:
#   SOU_SITES=FILE         the corpus's sites.tsv (default /var/lib/sou-corpus/sites.tsv)
#   SOU_QUALITY_N=N        judged queries per set (default 300)
#   SOU_QUALITY_NODES=N    testnet nodes (default 4)
#   SOU_QUALITY_REUSE=1    keep OUT/run from an earlier call and score the baseline only
#   SOU_QUALITY_READERS=L  the sets' readers' languages, SET=LANGUAGE,... (default
#                          lo-zh-CN=zh-CN,lo-en-US=en-US: the readers of each help's
#                          index; empty: queries carry nothing but their text)
#
# OUT receives qrels/*.tsv (the sets), run/ (the testnet's report.json,
# report.md, misses.tsv, pages-fetched.txt, progress.log), quality.md (the
# tables) and bleve-misses.tsv.
set -euo pipefail
cd "$(dirname "$0")/.."

sites=${SOU_SITES:-/var/lib/sou-corpus/sites.tsv}
n=${SOU_QUALITY_N:-300}
nodes=${SOU_QUALITY_NODES:-4}
readers=${SOU_QUALITY_READERS-lo-zh-CN=zh-CN,lo-en-US=en-US}
out=${1:-bench/results/quality-$(date -u +%Y%m%d-%H%M%S)}
if [[ ! -r $sites ]]; then
	echo "quality.sh: $sites not found; install the corpus with ../shared/corpus/install.sh" >&2
	exit 1
fi
mkdir -p "$out/qrels" "$out/run"
out=$(cd "$out" && pwd)

echo "== judgment sets ($n queries each) -> $out/qrels" >&2
python3 ../shared/corpus/qrels.py libreoffice zh-CN --n "$n" >"$out/qrels/lo-zh-CN.tsv"
python3 ../shared/corpus/qrels.py libreoffice en-US --n "$n" >"$out/qrels/lo-en-US.tsv"
python3 bench/docindex_qrels.py python --n "$n" >"$out/qrels/python-index.tsv"
python3 bench/docindex_qrels.py postgresql --n "$n" >"$out/qrels/postgresql-index.tsv"
qrels=$(ls "$out"/qrels/*.tsv | paste -sd, -)

if [[ ${SOU_QUALITY_REUSE:-0} == 1 && -s $out/run/report.json ]]; then
	echo "== reusing the testnet run in $out/run" >&2
else
	echo "== $nodes-node corpus testnet run -> $out/run (progress: $out/run/progress.log)" >&2
	go build -o "$out/sou" ./cmd/sou
	# A run whose report is not ok (coverage below 1, say) still scored the
	# judged queries; the report's failures say what went wrong.
	"$out/sou" testnet run --nodes "$nodes" --hosts 0 --pages 0 --sites "$sites" --qrels "$qrels" \
		${readers:+--qrels-lang "$readers"} \
		--json --timeout 30m --report-dir "$out/run" >"$out/run/stdout.json" 2>"$out/run/progress.log" ||
		echo "testnet run exited $?: see $out/run/report.md" >&2
	rm -f "$out/sou"
fi
if [[ ! -s $out/run/report.json ]]; then
	echo "quality.sh: the testnet run wrote no report; see $out/run/progress.log" >&2
	exit 1
fi

echo "== Bleve + gojieba baseline on the pages the run fetched" >&2
SOU_BENCH=1 SOU_BENCH_CORPUS="$sites" SOU_QUALITY_QRELS="$qrels" SOU_QUALITY_REPORT="$out/run/report.json" \
	SOU_QUALITY_PAGES="$out/run/pages-fetched.txt" SOU_QUALITY_OUT="$out/quality.md" \
	go test -run 'TestQualityBaseline$' -v -timeout 2h ./bench/ >"$out/baseline.log" 2>&1 ||
	{ tail -30 "$out/baseline.log" >&2; exit 1; }
cat "$out/quality.md"
