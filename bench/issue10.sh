#!/usr/bin/env bash
# Every measurement behind issue 10's targets, one after another, on this
# machine: the tables and logs go to bench/results/issue10-<UTC time>/, and
# BENCHMARKS.md "Issue 10 at a glance" says which line of which file holds
# each figure. Hours of work on two cores: run it on a machine doing
# nothing else, and compare ratios within one run.
#
#   bash bench/issue10.sh            # everything (about 4 hours)
#   QUICK=1 bash bench/issue10.sh    # the smaller sizes only (about 1 hour)
#
# The real-corpus parts need ../shared/corpus/install.sh (sites.tsv under
# /var/lib/sou-corpus) and are skipped with a note without it.
set -euo pipefail
cd "$(dirname "$0")/.."
out="bench/results/issue10-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$out"
sites=/var/lib/sou-corpus/sites.tsv
pages=2000,10000 growth=100000 nodepages=100000
if [ -n "${QUICK:-}" ]; then pages=2000 growth=20000 nodepages=10000; fi

step() { echo "== $1 ($(date -u +%H:%M:%S))"; }
go build -o "$out/sou" ./cmd/sou
{ uname -a; nproc; grep -m1 'model name' /proc/cpuinfo || true; free -g | head -2; go version; git rev-parse HEAD; } >"$out/machine.txt"

step "sou vs colly + Bleve on the synthetic web: indexing, disk, queries, crawl pipeline"
SOU_BENCH=1 SOU_BENCH_PAGES=$pages go test -count=1 -run 'TestCompare$' -v -timeout 3h ./bench/ 2>&1 | tee "$out/compare.log"

step "crawl + parse + index, one pipeline per process (CPU from /usr/bin/time)"
for p in sou colly-bleve; do
  SOU_BENCH_PAGES=${pages##*,} /usr/bin/time -v go test -count=1 -run '^$' -bench "BenchmarkCrawl/pipeline=$p\$" -benchtime 1x -timeout 1h ./bench/ >"$out/crawl-$p.log" 2>&1
done

step "index growth on one node, no crawler"
SOU_BENCH_GROWTH=$growth go test -count=1 -run TestIndexGrowth -v -timeout 4h ./bench/ 2>&1 | tee "$out/growth.log"

step "whole-node growth: the synthetic web crawled by one node"
for p in 10000 "$nodepages"; do
  "$out/sou" testnet run --nodes 1 --hosts $((p / 50)) --pages "$p" --queries 100 --timeout 3h --json >"$out/node-$p.json" 2>"$out/node-$p.log" || true
done

step "distributed query latency against node count"
for n in 1 2 4 8; do
  "$out/sou" testnet run --nodes "$n" --hosts 200 --pages 10000 --queries 200 --json >"$out/nodes-$n.json" 2>"$out/nodes-$n.log" || true
done

if [ ! -f "$sites" ]; then
  echo "real corpus not installed ($sites): skipping the corpus measurements" | tee "$out/corpus-skipped.txt"
  exit 0
fi
step "real corpus: sou vs Bleve (indexing, disk, quality, latency)"
SOU_BENCH=1 go test -count=1 -run TestCompareCorpus -v -timeout 3h ./bench/ 2>&1 | tee "$out/compare-corpus.log"

step "real corpus: local query latency, the 600 known-item queries"
SOU_BENCH=1 go test -count=1 -run TestCorpusQueryProfile -v -timeout 1h ./bench/ 2>&1 | tee "$out/corpus-query.log"

step "real corpus: indexing CPU per page"
go test -count=1 -run '^$' -bench BenchmarkIndexCorpus -benchtime 1x -count 3 -timeout 1h ./bench/ 2>&1 | tee "$out/index-corpus.log"

step "real corpus on a 4-node LAN testnet: crawl time, RSS, distributed search, MRR@10"
qrels=()
for lang in zh-CN en-US; do
  if python3 ../shared/corpus/qrels.py libreoffice "$lang" >"$out/qrels-$lang.tsv" 2>/dev/null; then
    qrels+=("$out/qrels-$lang.tsv")
  fi
done
qflag=()
if [ ${#qrels[@]} -gt 0 ]; then qflag=(--qrels "$(IFS=,; echo "${qrels[*]}")"); fi
/usr/bin/time -v "$out/sou" testnet run --nodes 4 --hosts 0 --pages 0 --sites "$sites" "${qflag[@]}" --queries 100 --timeout 1h --json --report-dir "$out/corpus-4" >"$out/corpus-4.json" 2>"$out/corpus-4.log" || true
step "done: $out"
