#!/usr/bin/env bash
# Long runs of the history checker (src/garage/tests/e2e/checker.rs): one run
# after another, each with its own seed, random nemeses for its whole
# duration, until the total time is spent. Stops at the first run with an
# anomaly (its log and history are kept). See doc/checker.md.
#
# The test binary and `garage` are built once and copied under $OUT/bin:
# the runs use those copies, so the tree can be edited and rebuilt while
# they go on.
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

built=$(cargo test -p garage --test e2e --no-run 2>&1 | tee /dev/stderr |
    sed -n 's/.*Executable tests\/e2e\/main.rs (\(.*\))$/\1/p' | tail -1)
if [ -z "$built" ]; then
    echo "cannot find the e2e test binary in cargo's output" >&2
    exit 1
fi
mkdir -p "$OUT/bin"
cp "$built" "$OUT/bin/e2e"
cp target/debug/garage "$OUT/bin/garage"
end=$(( $(date +%s) + HOURS * 3600 ))
runs=0
ops=0
faults=0
while [ "$(date +%s)" -lt "$end" ]; do
    log="$OUT/seed-$SEED.log"
    echo "== run $((runs + 1)): seed $SEED, ${RUN_SECS}s, $CLIENTS clients (log: $log)"
    if CHECKER_SEED="$SEED" CHECKER_SECS="$RUN_SECS" CHECKER_CLIENTS="$CLIENTS" CHECKER_LONG=1 \
        CHECKER_HISTORY="$OUT/seed-$SEED.history" GARAGE_TEST_BIN="$OUT/bin/garage" \
        "$OUT/bin/e2e" checker::checker_random_seed --exact --nocapture >"$log" 2>&1; then
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
