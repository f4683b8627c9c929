#!/usr/bin/env bash
# sou against colly + Bleve + gojieba on the real corpus, one after the
# other in one command (issue 21): first `sou testnet run --nodes 1` on
# the corpus (one node, its 32 fetch workers, one request in flight per
# host), then colly + Bleve crawling the same corpus served by `sou
# testnet web` with the same 32 workers and one request in flight per
# host (bench/corpusvs_test.go). Prints, for each, wall time, CPU-seconds
# and CPU per page of every process (the web server included from the
# moment it serves: before that it reads every page to build its truth,
# which is reported apart for both), peak RSS
# (anonymous and file-backed, sampled every second as the testnet report
# samples a node) and bytes on disk, and sou's ratio to colly + Bleve.
#
#   bash bench/corpus-vs.sh [OUT]   # OUT defaults to bench/results/corpus-vs-<UTC time>.md
#
# About 10-20 minutes on two cores. Skips (exit 0) when the corpus is not
# installed.
#
# Environment:
#   SOU_SITES=FILE   the corpus's sites.tsv (default /var/lib/sou-corpus/sites.tsv)
#   SOU_VS_WORK=DIR  where the two runs keep their stores (default a new
#                    directory under /tmp, removed at the end unless
#                    SOU_VS_KEEP=1)
#   SOU_VS_REUSE=1   with SOU_VS_WORK: keep the sou run found there, run colly only
#   SOU_VS_SEEDS=web colly starts from the web's seeds only; by default it is
#                    also given every page the web requires, because it does
#                    not find the pages that only scripts and sitemaps link
#                    (sou does), and both should index the same pages
set -euo pipefail
cd "$(dirname "$0")/.."

sites=${SOU_SITES:-/var/lib/sou-corpus/sites.tsv}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=${1:-bench/results/corpus-vs-$stamp.md}
if [[ ! -r $sites ]]; then
	echo "corpus-vs.sh: $sites not found; skipping (install the corpus with ../shared/corpus/install.sh)" >&2
	exit 0
fi
work=${SOU_VS_WORK:-$(mktemp -d /tmp/sou-corpus-vs.XXXXXX)}
mkdir -p "$work"
web_pid=
cleanup() {
	if [[ -n $web_pid ]]; then kill -INT "$web_pid" 2>/dev/null || true; wait "$web_pid" 2>/dev/null || true; fi
	if [[ ${SOU_VS_KEEP:-0} != 1 ]]; then rm -rf "$work/sou-run" "$work/bleve"; fi
}
trap cleanup EXIT

echo "== build -> $work" >&2
go build -o "$work/sou" ./cmd/sou
go test -c -o "$work/bench.test" ./bench/

if [[ ${SOU_VS_REUSE:-0} == 1 && -s $work/sou.json && -s $work/sou.facts ]]; then
	echo "== 1/2 sou: reusing $work/sou.json" >&2
else
	echo "== 1/2 sou testnet run --nodes 1 on the corpus" >&2
	load_before_sou=$(cut -d' ' -f1-3 /proc/loadavg)
	started=$(date +%s.%N)
	set +e
	"$work/sou" testnet run --nodes 1 --hosts 0 --pages 0 --sites "$sites" --misbehave none \
		--queries 0 --timeout 60m --dir "$work/sou-run" --keep --json >"$work/sou.json" 2>"$work/sou.err"
	sou_rc=$?
	set -e
	sou_wall=$(echo "$(date +%s.%N) - $started" | bc)
	if [[ ! -s $work/sou.json ]]; then
		echo "corpus-vs.sh: the sou run printed no report (exit $sou_rc); see $work/sou.err" >&2
		exit 1
	fi
	sou_bytes=$(du -sk "$work/sou-run" | cut -f1)
	printf '%s\n%s\n%s\n' "$sou_wall" "$sou_bytes" "$load_before_sou" >"$work/sou.facts"
fi
{ read -r sou_wall; read -r sou_bytes; read -r load_before_sou; } <"$work/sou.facts"

echo "== 2/2 colly + Bleve + gojieba on the same corpus, served by sou testnet web" >&2
load_before_colly=$(cut -d' ' -f1-3 /proc/loadavg)
"$work/sou" testnet web --hosts 0 --sites "$sites" --misbehave none >"$work/web.out" 2>"$work/web.err" &
web_pid=$!
for _ in $(seq 600); do
	grep -q '^serving' "$work/web.out" 2>/dev/null && break
	kill -0 "$web_pid" 2>/dev/null || { echo "corpus-vs.sh: the web did not start; see $work/web.err" >&2; exit 1; }
	sleep 0.2
done
web_http=$(awk '$1 == "http:" {print $2}' "$work/web.out")
web_control=$(awk '$1 == "control:" {print $2}' "$work/web.out")
# The web reads every page to build its truth, in the background once it
# serves; its truth listing answers when that is done. The walk is the
# testbed's work, not the crawl's, left out as the sou run leaves out its
# own web's (the report's crawl.cpu_seconds_setup); colly waits for the
# same listing before its first request.
python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/truth", timeout=3600).read()' "$web_control" ||
	{ echo "corpus-vs.sh: the web's truth did not come; see $work/web.err" >&2; exit 1; }
web_setup_cpu=$(awk '{printf "%.3f", ($14 + $15) / 100}' "/proc/$web_pid/stat")
rm -rf "$work/bleve"
SOU_VS_WEB_HTTP=$web_http SOU_VS_WEB_CONTROL=$web_control SOU_VS_OUT="$work/colly.json" SOU_VS_DIR="$work/bleve" \
	"$work/bench.test" -test.run '^TestCorpusVsColly$' -test.v -test.timeout 2h >"$work/colly.log" 2>&1 ||
	{ echo "corpus-vs.sh: the colly run failed; see $work/colly.log" >&2; tail -20 "$work/colly.log" >&2; exit 1; }
# The web's CPU from the moment it served to the end of the colly crawl,
# as the sou run counts its own web's (fields 14 and 15 of
# /proc/PID/stat, in USER_HZ ticks; the command name holds no space here).
web_cpu=$(awk -v setup="$web_setup_cpu" '{printf "%.3f", ($14 + $15) / 100 - setup}' "/proc/$web_pid/stat")
kill -INT "$web_pid"
wait "$web_pid" || true
web_pid=
printf '%s\n%s\n%s\n' "$web_cpu" "$load_before_colly" "$web_setup_cpu" >"$work/colly.facts"

python3 - "$work/sou.json" "$work/colly.json" "$sou_wall" "$sou_bytes" "$web_cpu" "$sites" \
	"$load_before_sou" "$load_before_colly" "$stamp" "$web_setup_cpu" >"$out" <<'PY'
import json, platform, sys
sou = json.load(open(sys.argv[1])); col = json.load(open(sys.argv[2]))
sou_wall, sou_kb, web_cpu = float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
sites, load_sou, load_col, stamp = sys.argv[6:10]
web_setup_cpu = float(sys.argv[10])
cr = sou["crawl"]; node = sou["per_node"][0]
cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
ncpu = sum(1 for l in open("/proc/cpuinfo") if l.startswith("processor"))
sou_pages = cr["pages_fetched"]
col_pages = col["pages_indexed"]
col_cpu = col["cpu_seconds"] + web_cpu
rows = [
    ("wall time, first request to last (s)", cr["seconds"], col["fetch_seconds"]),
    ("wall time, until every page is searchable (sou: first request to the node idle; colly: first seed to last Bleve batch) (s)",
     cr.get("searchable_seconds"), col["seconds"]),
    ("wall time, whole run (sou: `testnet run` start to exit; colly: first seed to last Bleve batch) (s)", sou_wall, col["seconds"]),
    ("pages (sou: required pages fetched; colly: HTML documents sent to Bleve)", sou_pages, col_pages),
    ("  sou: corpus HTML files fetched", cr.get("corpus_html_fetched"), None),
    ("HTTP requests", cr["requests"], col["requests"]),
    ("seed URLs given", None, col.get("seeds", 0)),
    ("CPU-seconds, all processes (the web serving included)", cr["cpu_seconds_all"], col_cpu),
    ("  of which the crawler + indexer process(es)", node["cpu_seconds"], col["cpu_seconds"]),
    ("CPU ms per page, all processes", 1000 * cr["cpu_seconds_all"] / sou_pages, 1000 * col_cpu / col_pages),
    ("peak RSS, anonymous (MB)", node["rss_anon_peak_mb"], col["rss_anon_peak_mb"]),
    ("peak RSS, file-backed (MB)", node["rss_file_peak_mb"], col["rss_file_peak_mb"]),
    ("bytes on disk after the run (MB)", sou_kb / 1024, col["index_bytes"] / 2**20),
    ("  sou: postings alone (the report's postings_bytes, MB)", node["postings_bytes"] / 2**20, None),
    ("CPU-seconds of the web building its truth before the crawl (reads every page; not counted above)",
     cr.get("cpu_seconds_setup"), web_setup_cpu),
]
print(f"# sou against colly + Bleve + gojieba on the real corpus ({stamp} UTC)\n")
print(f"`bash bench/corpus-vs.sh` ({sites}); {cpu_model}, {ncpu} CPUs, {platform.system()}; "
      f"load average before sou {load_sou}, before colly {load_col}. "
      f"Both: 32 fetch workers, one request in flight per host. sou: `sou testnet run --nodes 1 --hosts 0 --pages 0 "
      f"--sites {sites} --misbehave none --queries 0 --timeout 60m --json` (report ok: {sou['ok']}, coverage {cr['coverage']}); "
      f"its whole run took {sou_wall:.1f} s (start-up, the crawl, the report). colly + Bleve: bench/corpusvs_test.go "
      f"against `sou testnet web --sites` (the same server code in its own process), seeded with the web's seeds "
      f"and, unless SOU_VS_SEEDS=web, every page the web requires (colly does not read links in scripts).\n")
print("| | sou (1 node) | colly + Bleve | sou / colly |\n|---|---|---|---|")
for name, a, b in rows:
    fa = "" if a is None else (f"{a:,.1f}" if isinstance(a, float) else f"{a:,}")
    fb = "" if b is None else (f"{b:,.1f}" if isinstance(b, float) else f"{b:,}")
    r = "" if a is None or not b else f"{a / b:.2f}×"
    print(f"| {name} | {fa} | {fb} | {r} |")
print(f"\nsou's disk figure is the node's whole data directory (frontier, page records with the "
      f"compressed cached copy, postings); colly's is Bleve's index directory (title and body stored). "
      f"colly's anonymous memory includes one goroutine per queued request (its Async mode), "
      f"{col.get('seeds', 0):,} of them queued at the start.")
PY
cat "$out"
cp "$work/sou.json" "${out%.md}-sou.json"
cp "$work/colly.json" "${out%.md}-colly.json"
