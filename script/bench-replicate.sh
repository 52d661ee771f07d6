#!/usr/bin/env bash
# Bucket replication numbers (issue 48): the ignored e2e test
# `replication::bench_replication`: a source of three zones and a
# destination of one node joined by a delay proxy (RTT ms); PUT latency
# without and with a rule; the lag of a live stream; OBJECTS objects of
# SIZE bytes written while the link is cut for CUT seconds (at least the
# writes' time), then the drain (versions/s, MB/s) and every version's
# status. Prints the test's lines of numbers.
#
#   script/bench-replicate.sh                        # 2000 x 1 KiB, loopback
#   RTT=50 script/bench-replicate.sh
#   OBJECTS=200 SIZE=4000000 script/bench-replicate.sh
#   OBJECTS=10000 CUT=600 script/bench-replicate.sh  # the issue's scenario
set -euo pipefail
cd "$(dirname "$0")/.."
GARAGE_TEST_REPL_OBJECTS="${OBJECTS:-2000}" GARAGE_TEST_REPL_SIZE="${SIZE:-1024}" \
GARAGE_TEST_REPL_RTT_MS="${RTT:-0}" GARAGE_TEST_REPL_CUT_SECS="${CUT:-0}" \
    cargo test -p garage --test e2e replication::bench_replication \
    -- --ignored --nocapture --test-threads 1 2>&1 |
    grep -E "^bench:|test result|panicked"
