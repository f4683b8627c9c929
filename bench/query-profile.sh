#!/usr/bin/env bash
# CPU profiles of every node of a running LAN testnet during its query
# phase: waits until the testnet's log (its stderr) says "crawl finished",
# then takes a SECONDS-long (default 20) profile of each `sou node`
# process through its /debug/pprof (loopback, no token) and logs each
# process's CPU ticks once a second.
#
#   sou testnet run --nodes 4 ... 2> run.err &
#   bash bench/query-profile.sh run.err profiles/
#   go tool pprof -top -cum sou profiles/cpu-*.prof
set -euo pipefail
log=$1 out=$2 seconds=${SECONDS_TO_PROFILE:-20}
mkdir -p "$out"
until grep -q "crawl finished" "$log" 2>/dev/null; do sleep 0.2; done
for pid in $(pgrep -f 'sou[^ ]* node'); do
  for addr in $(ss -ltnpH | grep "pid=$pid," | awk '{print $4}'); do
    if curl -sf -m 1 "http://$addr/api/status" >/dev/null; then
      curl -s -m $((seconds + 10)) -o "$out/cpu-$pid.prof" "http://$addr/debug/pprof/profile?seconds=$seconds" &
      echo "$pid $addr" >>"$out/nodes"
    fi
  done
done
for i in $(seq $((seconds + 5))); do
  for pid in $(pgrep -f 'sou[^ ]* node'); do
    echo "$i $pid $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null)"
  done >>"$out/ticks"
  sleep 1
done
wait
