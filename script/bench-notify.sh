#!/usr/bin/env bash
# Bucket notification numbers (issue 48): the ignored e2e test
# `notifications::bench_notifications` on three zones: PUT latency of
# 1 KiB objects without and with a webhook rule, events delivered while
# writing, the drain rate of a backlog of EVENTS events at a webhook, and
# NATS JetStream; RTT ms between every two nodes (the harness's delay
# proxy). Prints the test's lines of numbers.
#
#   script/bench-notify.sh                   # 2000 events, loopback
#   EVENTS=500 RTT=50 script/bench-notify.sh
#   EVENTS=10000 OUTAGE=600 script/bench-notify.sh   # receiver down 10 min
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS="${EVENTS:-2000}" RTT="${RTT:-0}" OUTAGE="${OUTAGE:-0}"
GARAGE_TEST_NOTIFY_EVENTS="$EVENTS" GARAGE_TEST_NOTIFY_RTT_MS="$RTT" \
GARAGE_TEST_NOTIFY_OUTAGE_SECS="$OUTAGE" \
    cargo test -p garage --test e2e notifications::bench_notifications \
    -- --ignored --nocapture --test-threads 1 2>&1 |
    grep -E "^bench:|test result"
