#!/bin/sh
# replay-incident.sh — the seed's slow ten minutes, replayed and reported
# with one command: builds tollgate if needed, starts tollgate-stub with the
# timeline 'fast 1m; slow:3000 5m; drop 2m; reject 1m; fast' (compressed,
# default x0.05: ~30 s), runs tollgate against it with refunds arriving at
# 3/s, checks the run with `tollgate verify`, writes report.html, and stops
# every process it started (it is acceptance scenario 1,
# tests/integration/acceptance/test_s1_slow_ten_minutes.py).
#
# usage: scripts/replay-incident.sh [OUT_DIR] [TIME_SCALE]
#   OUT_DIR     where calls.jsonl, arrivals.jsonl, ledger.json and report.html
#               go (default ./incident-report)
#   TIME_SCALE  0.1 = the ten minutes in one (default 0.05); 1 = real time
# Env: TG_BUILD_DIR (default ./build).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-incident-report}
scale=${2:-0.05}
build=${TG_BUILD_DIR:-$here/build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -x "$build/tollgate" ] || [ ! -x "$build/tollgate-stub" ]; then
	cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build "$build" --target tollgate tollgate-stub
fi
TG_BUILD_DIR=$build TG_SOURCE_DIR=$here TG_REPORT_OUT=$out TG_TIME_SCALE=$scale \
	python3 "$here/tests/integration/acceptance/test_s1_slow_ten_minutes.py"
echo "report: $out/report.html"
echo "verify: $build/tollgate verify --calls $out/calls.jsonl --arrivals $out/arrivals.jsonl --ledger $out/ledger.json"
