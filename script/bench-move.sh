#!/usr/bin/env bash
# Move throughput of a bucket pinned to a class with a place (issue 47):
# the placement e2e test `a_bucket_moved_from_standard_to_eu` (five nodes
# in five zones, objects of 8 KiB moved from STANDARD to EU under a
# reader) with OBJECTS objects and RTT ms between every two nodes (the
# harness's delay proxy). Prints the test's own line of numbers.
#
#   script/bench-move.sh                 # 1000 objects, loopback
#   OBJECTS=200 RTT=50 script/bench-move.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OBJECTS="${OBJECTS:-1000}" RTT="${RTT:-0}"
GARAGE_TEST_MOVE_OBJECTS="$OBJECTS" GARAGE_TEST_MOVE_RTT_MS="$RTT" \
    cargo test -p garage --test e2e placement::a_bucket_moved_from_standard_to_eu \
    -- --nocapture --test-threads 1 2>&1 |
    grep -E "objects (moved|of)|GETs during|test result"
