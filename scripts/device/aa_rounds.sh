#!/usr/bin/env bash
# A/A with every timed call recorded (SOL_EXECBENCH_TIMING_ROUNDS), on the GPU machine:
#   bash scripts/device/aa_rounds.sh   (from the repo root; OUT: where results go)
# The A/A itself is scripts/gpu_validate.sh's `aa` part, with AA_ARGS (default "--runs 3 --only
# samples"). LONG_ONLY and LONG_ROUNDS (default unset, 400): a second, single run of those problems
# with that many rounds. Writes $OUT/aa_rounds.tgz: each part's aa.json and logs, and the rounds of
# each evaluation (rounds/aa, rounds/long).
set -uo pipefail
FINAL=${OUT:-/tmp/sol-out}
WORK=$(mktemp -d /tmp/sol-aa-rounds.XXXX)
mkdir -p "$FINAL"
ROUNDS=/dev/shm/sol-aa-rounds  # writable inside the evaluation sandbox
rm -rf "$ROUNDS"
SOL_EXECBENCH_TIMING_ROUNDS=$ROUNDS/aa OUT=$WORK/aa AA_ARGS=${AA_ARGS:---runs 3 --only samples} \
  bash scripts/gpu_validate.sh aa
if [ -n "${LONG_ONLY:-}" ]; then
  mkdir -p "$WORK/long"
  printf '{"iterations": %s}\n' "${LONG_ROUNDS:-400}" >"$WORK/long/long_config.json"
  SOL_EXECBENCH_TIMING_ROUNDS=$ROUNDS/long OUT=$WORK/long STEP_TIMEOUT=${LONG_TIMEOUT:-180} \
    AA_ARGS="--runs 1 --only $LONG_ONLY --config $WORK/long/long_config.json" bash scripts/gpu_validate.sh aa
fi
cp -r "$ROUNDS" "$WORK/rounds" 2>/dev/null
tar -czf "$FINAL/aa_rounds.tgz" -C "$WORK" .
