#!/usr/bin/env bash
# Large objects side by side, in one run: this project's release build and
# the reference system (Garage, built from its public source), each as 3
# processes in 3 zones with replication 3 on 127.0.0.1, measured by the
# same client (script/s3bench.py --large-only: 10 MiB GET whole-body
# latency and time to first byte, 1 GiB multipart PUT and GET) through
# node 1. Each cluster is stopped and its data removed before the next.
#
# Usage: script/bench-large.sh REFERENCE_GARAGE_BINARY [--quick]
#   (the reference: git clone the Garage repository, check out v2.0.0,
#    cargo build --release; its binary is target/release/garage)
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: script/bench-large.sh REFERENCE_GARAGE_BINARY [--quick]}
shift
ours=target/release/garage
[ -x "$ours" ] || { echo "no $ours (cargo build --release)" >&2; exit 1; }
[ -x "$ref" ] || { echo "no reference binary at $ref" >&2; exit 1; }
work=$(mktemp -d)
pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop; rm -rf "$work"' EXIT

wait_status() { # wait_status BIN CONFIG: until the CLI reaches the node (bounded)
  for _ in $(seq 100); do "$1" -c "$2" status >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "node with $2 did not answer" >&2; return 1
}

# This project: script/cluster3.sh prints the endpoints and a key.
echo "== this project ($(git rev-parse --short HEAD))"
out=$(script/cluster3.sh "$work/ours" "$ours")
mapfile -t pids < "$work/ours/pids"
id=$(echo "$out" | awk '/Key ID:/ {print $3}')
secret=$(echo "$out" | awk '/Secret key:/ {print $3}')
python3 script/s3bench.py --endpoint http://127.0.0.1:3910 --key "$id" --secret "$secret" --large-only "$@"
stop

# The reference system: the same topology, its own configuration format.
echo "== reference system ($("$ref" --version 2>/dev/null | head -1 || echo "$ref"))"
secret_rpc=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
for i in 1 2 3; do
  d="$work/ref/n$i"
  mkdir -p "$d"
  cat > "$d/garage.toml" <<TOML
metadata_dir = "$d/meta"
data_dir = "$d/data"
db_engine = "lmdb"
replication_factor = 3
rpc_bind_addr = "127.0.0.1:39${i}1"
rpc_public_addr = "127.0.0.1:39${i}1"
rpc_secret = "$secret_rpc"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:39${i}0"
TOML
  "$ref" -c "$d/garage.toml" server > "$d/log" 2>&1 &
  pids+=($!)
done
r() { "$ref" -c "$work/ref/n1/garage.toml" "$@"; }
wait_status "$ref" "$work/ref/n1/garage.toml"
for i in 2 3; do
  wait_status "$ref" "$work/ref/n$i/garage.toml"
  nid=$("$ref" -c "$work/ref/n$i/garage.toml" node id -q)
  r node connect "$nid" >/dev/null
done
for i in 1 2 3; do
  nid=$("$ref" -c "$work/ref/n$i/garage.toml" node id -q)
  r layout assign -z "dc$i" -c 10G "${nid:0:16}" >/dev/null
done
r layout apply --version 1 >/dev/null
kout=$(r key create bench)
kid=$(echo "$kout" | awk '/Key ID:/ {print $3}')
ksecret=$(echo "$kout" | awk '/Secret key:/ {print $3}')
r key allow --create-bucket "$kid" >/dev/null
# Until every node has the layout (bounded).
for _ in $(seq 50); do
  python3 - "$kid" "$ksecret" <<'PY' && break || sleep 0.5
import sys, boto3
from botocore.client import Config
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:3910", aws_access_key_id=sys.argv[1],
                  aws_secret_access_key=sys.argv[2], region_name="garage",
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
s3.list_buckets()
PY
done
python3 script/s3bench.py --endpoint http://127.0.0.1:3910 --key "$kid" --secret "$ksecret" --large-only "$@"
