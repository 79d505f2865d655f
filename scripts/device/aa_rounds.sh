#!/usr/bin/env bash
# A/A with every timed call recorded (SOL_EXECBENCH_TIMING_ROUNDS), on the GPU machine:
#   bash scripts/device/aa_rounds.sh   (from the repo root; OUT: where results go)
# AA_ARGS: options for benchmarks/aa.py (default "--runs 3 --only samples"); LONG_ONLY and
# LONG_ROUNDS (default unset, 400): a second, single run of those problems with that many rounds.
# Writes $OUT/aa_rounds.tgz: aa.json, aa.log, the rounds of each evaluation, and the long run's.
set -uo pipefail
FINAL=${OUT:-/tmp/sol-out}
WORK=$(mktemp -d /tmp/sol-aa-rounds.XXXX)
mkdir -p "$FINAL" "$WORK/logs"
export PYTHONUNBUFFERED=1
source scripts/device/env.sh
device_env "$WORK/install.log" || exit 1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))' \
  | tee "$WORK/device.txt"
ROUNDS=/dev/shm/sol-aa-rounds  # writable inside the evaluation sandbox
rm -rf "$ROUNDS"
export SOL_EXECBENCH_TIMING_ROUNDS=$ROUNDS/aa
sol worker start --spares 2 >/dev/null 2>&1
began=$SECONDS
timeout "${STEP_TIMEOUT:-400}" python3 benchmarks/aa.py --warm ${AA_ARGS:---runs 3 --only samples} --out "$WORK/aa.json" \
  >"$WORK/logs/aa.log" 2>&1
echo "aa rc=$? $((SECONDS - began))s"
tail -n 50 "$WORK/logs/aa.log"
if [ -n "${LONG_ONLY:-}" ]; then
  printf '{"iterations": %s}\n' "${LONG_ROUNDS:-400}" >"$WORK/long_config.json"
  export SOL_EXECBENCH_TIMING_ROUNDS=$ROUNDS/long
  sol worker stop >/dev/null 2>&1; sol worker start --spares 2 >/dev/null 2>&1
  began=$SECONDS
  timeout "${LONG_TIMEOUT:-180}" python3 benchmarks/aa.py --warm --runs 1 --only "$LONG_ONLY" \
    --config "$WORK/long_config.json" --out "$WORK/aa_long.json" >"$WORK/logs/aa_long.log" 2>&1
  echo "aa_long rc=$? $((SECONDS - began))s"
  tail -n 30 "$WORK/logs/aa_long.log"
fi
sol worker stop >/dev/null 2>&1
cp -r "$ROUNDS" "$WORK/rounds" 2>/dev/null
tar -czf "$FINAL/aa_rounds.tgz" -C "$WORK" .
