#!/usr/bin/env bash
# Large objects side by side, in one run: this project's release build and
# the reference system (Garage, built from its public source), each as 3
# processes in 3 zones with replication 3 on 127.0.0.1 (script/cluster3.sh
# starts either), measured by the same client (script/s3bench.py
# --large-only: 10 MiB GET whole-body latency and time to first byte,
# 1 GiB multipart PUT and GET) through node 1. Each cluster is stopped
# and its data removed before the next.
# With --multipart, the client is script/bench-multipart.py instead (uploads
# of 100, 1 000 and 10 000 parts; its options follow, e.g. --parts 100,1000).
# With --small, the client is script/s3bench.py --small-only (16 B PUT and
# GET latencies, one request at a time).
# REFERENCE_GARAGE_BINARY may be "none": this project only.
#
# Usage: script/bench-large.sh REFERENCE_GARAGE_BINARY [--quick]
#        script/bench-large.sh REFERENCE_GARAGE_BINARY --multipart [bench-multipart.py options]
#   (the reference: git clone the Garage repository, check out v2.0.0,
#    cargo build --release; its binary is target/release/garage)
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: script/bench-large.sh REFERENCE_GARAGE_BINARY [--quick]}
shift
ours=target/release/garage
[ -x "$ours" ] || { echo "no $ours (cargo build --release)" >&2; exit 1; }
[ "$ref" = none ] || [ -x "$ref" ] || { echo "no reference binary at $ref" >&2; exit 1; }
client=(script/s3bench.py --large-only)
if [ "${1:-}" = --multipart ]; then client=(script/bench-multipart.py); shift; fi
if [ "${1:-}" = --small ]; then client=(script/s3bench.py --small-only); shift; fi
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

bench() { # bench NAME BINARY [s3bench options]
  local name=$1 bin=$2 out id secret
  shift 2
  echo "== $name"
  out=$(script/cluster3.sh "$work/run" "$bin")
  id=$(echo "$out" | awk '/Key ID:/ {print $3}')
  secret=$(echo "$out" | awk '/Secret key:/ {print $3}')
  # Until node 1 serves S3 with the layout applied (bounded).
  for _ in $(seq 50); do
    python3 - "$id" "$secret" <<'PY' && break || sleep 0.5
import sys, boto3
from botocore.client import Config
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:3910", aws_access_key_id=sys.argv[1],
                  aws_secret_access_key=sys.argv[2], region_name="garage",
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
s3.list_buckets()
PY
  done
  python3 "${client[@]}" --endpoint http://127.0.0.1:3910 --key "$id" --secret "$secret" "$@"
  stop
}

bench "this project ($(git rev-parse --short HEAD))" "$ours" "$@"
[ "$ref" = none ] || bench "reference system ($("$ref" --version 2>/dev/null | head -1))" "$ref" "$@"
