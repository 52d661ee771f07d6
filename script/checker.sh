#!/usr/bin/env bash
# Long runs of the history checker (src/garage/tests/e2e/checker.rs): one run
# after another, each with its own seed, random nemeses for its whole
# duration, until the total time is spent. Stops at the first run with an
# anomaly (its log and history are kept). See doc/checker.md.
#
#   script/checker.sh                 # 1 hour of 10-minute runs, seeds from 1000
#   HOURS=8 RUN_SECS=900 SEED=5000 CLIENTS=6 script/checker.sh
set -euo pipefail
cd "$(dirname "$0")/.."

HOURS="${HOURS:-1}"
RUN_SECS="${RUN_SECS:-600}"
SEED="${SEED:-1000}"
CLIENTS="${CLIENTS:-4}"
OUT="$(pwd)/${OUT:-checker-runs}"
mkdir -p "$OUT"

cargo test -p garage --test e2e --no-run
end=$(( $(date +%s) + HOURS * 3600 ))
runs=0
ops=0
faults=0
while [ "$(date +%s)" -lt "$end" ]; do
    log="$OUT/seed-$SEED.log"
    echo "== run $((runs + 1)): seed $SEED, ${RUN_SECS}s, $CLIENTS clients (log: $log)"
    if CHECKER_SEED="$SEED" CHECKER_SECS="$RUN_SECS" CHECKER_CLIENTS="$CLIENTS" CHECKER_LONG=1 \
        CHECKER_HISTORY="$OUT/seed-$SEED.history" \
        cargo test -q -p garage --test e2e checker::checker_random_seed -- --nocapture >"$log" 2>&1; then
        status=ok
    else
        status=FAILED
    fi
    n_ops=$(sed -n 's/^\([0-9]*\) operations:$/\1/p' "$log" | tail -1)
    n_faults=$(sed -n 's/^\([0-9]*\) faults injected:$/\1/p' "$log" | tail -1)
    anomalies=$(sed -n 's/^anomalies: \([0-9]*\)$/\1/p' "$log" | tail -1)
    echo "   $status: ${n_ops:-?} operations, ${n_faults:-?} faults, anomalies: ${anomalies:-?}"
    runs=$((runs + 1))
    ops=$((ops + ${n_ops:-0}))
    faults=$((faults + ${n_faults:-0}))
    if [ "$status" != ok ]; then
        grep -E "ANOMALY|panicked" "$log" | head -20 || true
        echo "== stopped after $runs runs: seed $SEED failed (replay: CHECKER_SEED=$SEED CHECKER_SECS=$RUN_SECS CHECKER_LONG=1 cargo test -p garage --test e2e checker::checker_random_seed -- --nocapture)"
        exit 1
    fi
    rm -f "$OUT/seed-$SEED.history"
    SEED=$((SEED + 1))
done
echo "== summary: $runs runs, $ops operations, $faults faults injected, anomalies: 0"
