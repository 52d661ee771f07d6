#!/usr/bin/env bash
# Scale benchmark (doc/benchmarks.md, "Scale"): the ingest of many tiny
# objects, then listings, random reads, a DeleteObjects sweep, a restart
# and the space after GC, on a 3-node cluster (3 zones, replication 3,
# LMDB, 127.0.0.1) started by script/cluster3.sh; first this project's
# release build, then, if given, the reference system's binary, one after
# the other in one run, with the same client (script/scale-bench).
#
# Usage: script/bench-scale.sh [--reference BINARY] [scale-bench options]
#   e.g. script/bench-scale.sh --objects 1000000
#        script/bench-scale.sh --reference /path/to/garage-v2/garage --objects 196608 --ingest-only
#        script/bench-scale.sh --reference REF --objects 200 --size 1048576 --batch 200 --get-load 8,64
#          (1 MiB GETs of random keys at 8 and 64 in flight: objects/s, first byte, latency)
#        GARAGE_NODES=1 script/bench-scale.sh --objects 10000000   (one node, replication 1)
# Our cluster runs with GARAGE_TABLE_GC_DELAY_SECS=60 so that the space
# after the deletes and GC is measured within the run (the reference
# system's tombstone delay is fixed at 24 h).
set -euo pipefail
cd "$(dirname "$0")/.."
ref=
if [ "${1:-}" = --reference ]; then ref=${2:?--reference BINARY}; shift 2; fi
ours=target/release/garage
[ -x "$ours" ] || { echo "no $ours (cargo build --release)" >&2; exit 1; }
[ -z "$ref" ] || [ -x "$ref" ] || { echo "no reference binary at $ref" >&2; exit 1; }
cargo build --release -q -p garage-scale-bench
work=$(mktemp -d)
stop() {
  [ -f "$work/run/pids" ] || return 0
  while read -r p; do kill "$p" 2>/dev/null || true; done < "$work/run/pids"
  while read -r p; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done < "$work/run/pids"
  if [ -f "$work/run/proxy.pid" ]; then
    p=$(cat "$work/run/proxy.pid"); kill "$p" 2>/dev/null || true
    while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
  fi
  rm -rf "$work/run"
}
trap 'stop; rm -rf "$work"' EXIT

bench() { # bench NAME BINARY [scale-bench options]
  local name=$1 bin=$2 out id secret
  shift 2
  echo "== $name"
  out=$(GARAGE_TABLE_GC_DELAY_SECS=60 script/cluster3.sh "$work/run" "$bin")
  id=$(echo "$out" | awk '/Key ID:/ {print $3}')
  secret=$(echo "$out" | awk '/Secret key:/ {print $3}')
  GARAGE_TABLE_GC_DELAY_SECS=60 target/release/garage-scale-bench --dir "$work/run" --bin "$bin" \
    --key "$id" --secret "$secret" "$@"
  stop
}

bench "this project ($(git rev-parse --short HEAD))" "$ours" "$@"
[ -z "$ref" ] || bench "reference system ($("$ref" --version 2>/dev/null | head -1))" "$ref" "$@"
