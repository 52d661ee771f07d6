#!/usr/bin/env bash
# Replication and erasure coding side by side on one local cluster of six
# nodes in three zones (two per zone: STANDARD_IA is 4+2): PUT and GET
# throughput, bytes on disk per byte stored, a 1 MiB GET's latency; then
# the same GETs with a whole zone (nodes 5 and 6) stopped.
#
# Usage: script/bench-ec.sh [GARAGE_BINARY] [OBJECTS] [SIZE_MIB]
set -euo pipefail
bin=${1:-target/release/garage}
objects=${2:-16}
size=${3:-8}
dir=$(mktemp -d /tmp/garage-bench-ec.XXXXXX)
trap 'kill $(cat "$dir/pids") 2>/dev/null || true; rm -rf "$dir"' EXIT
out=$(GARAGE_NODES=6 script/cluster3.sh "$dir" "$bin")
key=$(echo "$out" | awk '/Key ID:/ {print $3}')
secret=$(echo "$out" | awk '/Secret key:/ {print $3}')
"$bin" -c "$dir/n1/garage.toml" layout show | grep -A12 "^Storage class"
run() { python3 script/bench-ec.py --endpoint http://127.0.0.1:3910 --key "$key" \
  --secret "$secret" --data "$dir/n*/data" --objects "$objects" --size-mib "$size" "$@"; }
echo "== all six nodes up"
run --phase write
run --phase read
echo "== zone dc3 (nodes 5 and 6) stopped"
kill "$(sed -n 5p "$dir/pids")" "$(sed -n 6p "$dir/pids")"
for _ in $(seq 100); do
  n=$("$bin" -c "$dir/n1/garage.toml" status 2>/dev/null | sed -n '/FAILED NODES/,$p' | grep -c dc3 || true)
  [ "$n" -ge 2 ] && break; sleep 0.5
done
run --phase read
