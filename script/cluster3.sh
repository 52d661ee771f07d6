#!/usr/bin/env bash
# Starts a local 3-node garage cluster (3 zones, replication 3; or one node
# with GARAGE_NODES=1; or 6 nodes, two per zone, with GARAGE_NODES=6) on
# 127.0.0.1 for manual tests and benchmarks, and prints an S3 endpoint per
# node and a key. Stop it with: kill $(cat DIR/pids)
#
# Usage: script/cluster3.sh DIR [GARAGE_BINARY]
#   GARAGE_NODES=1 script/cluster3.sh DIR   one node, replication 1
#   GARAGE_NODES=6 script/cluster3.sh DIR   six nodes in zones dc1..dc3, replication 3
#   GARAGE_RTT_MS=50 script/cluster3.sh DIR  node-to-node traffic through
#     script/delay-proxy.py (50 ms round trip, GARAGE_JITTER_MS for jitter);
#     the S3 endpoints are not delayed. The proxy exits with the last node.
#   GARAGE_EXTRA_CONFIG='lmdb_write_map = true' script/cluster3.sh DIR
#     adds top-level configuration lines to every node's garage.toml.
set -euo pipefail
nodes=${GARAGE_NODES:-3}
case "$nodes" in 1|3|6) ;; *) echo "GARAGE_NODES must be 1, 3 or 6, not $nodes" >&2; exit 1 ;; esac
rf=$nodes; [ "$nodes" = 6 ] && rf=3
dir=${1:?usage: script/cluster3.sh DIR [GARAGE_BINARY]}
bin=${2:-target/release/garage}
[ -x "$bin" ] || { echo "no garage binary at $bin (cargo build --release)" >&2; exit 1; }
mkdir -p "$dir"
secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
: > "$dir/pids"
pub=1; [ -n "${GARAGE_RTT_MS:-}" ] && pub=2
for i in $(seq "$nodes"); do
  mkdir -p "$dir/n$i"
  cat > "$dir/n$i/garage.toml" <<TOML
metadata_dir = "$dir/n$i/meta"
data_dir = "$dir/n$i/data"
replication_factor = $rf
rpc_bind_addr = "127.0.0.1:39${i}1"
rpc_public_addr = "127.0.0.1:39${i}${pub}"
rpc_secret = "$secret"
${GARAGE_EXTRA_CONFIG:-}

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:39${i}0"
TOML
  "$bin" -c "$dir/n$i/garage.toml" server > "$dir/n$i/stdout" 2> "$dir/n$i/log" &
  echo $! >> "$dir/pids"
done
if [ "$pub" = 2 ]; then
  python3 "$(dirname "$0")/delay-proxy.py" --rtt-ms "$GARAGE_RTT_MS" --jitter-ms "${GARAGE_JITTER_MS:-0}" \
    $(sed 's/^/--while-pid /' "$dir/pids") $(for i in $(seq "$nodes"); do printf '39%s2:39%s1 ' "$i" "$i"; done) \
    > "$dir/proxy.log" 2>&1 &
  echo $! > "$dir/proxy.pid"
  for i in $(seq "$nodes"); do
    for _ in $(seq 50); do (: > "/dev/tcp/127.0.0.1/39${i}2") 2>/dev/null && break; sleep 0.1; done
  done
fi
g() { "$bin" -c "$dir/n1/garage.toml" "$@"; }
for _ in $(seq 50); do g status >/dev/null 2>&1 && break; sleep 0.2; done
for i in $(seq 2 "$nodes"); do
  id=$("$bin" -c "$dir/n$i/garage.toml" node id -q)
  g node connect "$id" >/dev/null
done
for i in $(seq "$nodes"); do
  id=$("$bin" -c "$dir/n$i/garage.toml" node id -q)
  zone=$i; [ "$nodes" = 6 ] && zone=$(( (i + 1) / 2 ))
  g layout assign -z "dc$zone" -c 10G "${id:0:16}" >/dev/null
done
g layout apply --version 1 >/dev/null
out=$(g key create bench)
g key allow --create-bucket "$(echo "$out" | awk '/Key ID:/ {print $3}')" >/dev/null
echo "S3 endpoints: $(for i in $(seq "$nodes"); do printf 'http://127.0.0.1:39%s0 ' "$i"; done)(region garage)"
echo "$out" | grep -E "Key ID:|Secret key:"
