#!/usr/bin/env bash
# Calibration on a GPU host (written for the H100; runs on any GPU host). Under 3 minutes.
#
#   OUT=/some/folder bash scripts/device/calibrate.sh
#
# Runs this checkout's code (src/ first on PYTHONPATH) with a fresh cache under $OUT/cache. Writes:
#   context.txt                     GPU, driver and torch
#   calibrate.json / .err           'calibrate --json' (measures: nothing cached yet)
#   calibrate_table.txt             'calibrate' again: the table, answered from the cache
#   bound_measured.json / .txt      'bound <conformance problem> --ceilings measured'
#   bound_datasheet.json            the same problem on datasheet ceilings
#   t_sol_measured_vs_datasheet.txt per workload: T_SOL on measured / on datasheet ceilings (>= 1 expected)
#   bound_no_calibration.txt        'bound --ceilings measured' with an empty cache (expected exit 2, one line)
#   pytest_calibration.txt          tests/scoring/test_calibration.py with the gpu-marked test
#   summary.txt                     every step's exit code and wall time
set -uo pipefail

: "${OUT:?set OUT to a writable folder}"
mkdir -p "$OUT"
cd "$(dirname "$0")/../.." || exit 2
PY="${PYTHON:-python}"
source scripts/device/env.sh
device_env "$OUT/install.log" || exit 1
export SOL_EXECBENCH_CACHE_DIR="$OUT/cache"
PROBLEM="${PROBLEM:-tests/data/conformance/samples/jamba_attn_proj}"
SEB=("$PY" -c 'import sys; sys.argv[0] = "sol-execbench"; from sol_execbench.cli.main import main; main()')

SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
step() {  # step NAME TIMEOUT_S STDOUT_FILE STDERR_FILE ARGS...: one sol-execbench call; exit code and wall seconds
  local name=$1 limit=$2 out=$3 err=$4; shift 4
  local t0=$SECONDS
  timeout "$limit" "${SEB[@]}" "$@" > "$out" 2> "$err"
  echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$SUMMARY"
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi -L 2>&1 || rocm-smi --showproductname 2>&1 || true
  cat /proc/driver/nvidia/version 2>/dev/null | head -1
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip)' 2>&1
} | tee "$OUT/context.txt"

step "calibrate --json (measure)" 150 "$OUT/calibrate.json" "$OUT/calibrate.err" calibrate --json
step "calibrate (from cache)" 60 "$OUT/calibrate_table.txt" "$OUT/calibrate_table.err" calibrate
cat "$OUT/calibrate_table.txt" "$OUT/calibrate_table.err"
step "bound --ceilings measured --json" 60 "$OUT/bound_measured.json" "$OUT/bound_measured.err" bound "$PROBLEM" --ceilings measured --json
step "bound --ceilings measured" 60 "$OUT/bound_measured.txt" "$OUT/bound_measured.err" bound "$PROBLEM" --ceilings measured
step "bound --ceilings datasheet --json" 60 "$OUT/bound_datasheet.json" "$OUT/bound_datasheet.err" bound "$PROBLEM" --json
cat "$OUT/bound_measured.txt" "$OUT/bound_measured.err"
"$PY" - "$OUT" <<'PYEOF' | tee "$OUT/t_sol_measured_vs_datasheet.txt"
import json, sys
out = sys.argv[1]
try:
    measured = json.load(open(f"{out}/bound_measured.json"))
    sheet = json.load(open(f"{out}/bound_datasheet.json"))
except (OSError, ValueError) as exc:
    sys.exit(f"no comparison: {exc}")
print("ceilings:", measured["ceilings"], "measured rates:", measured["hardware"]["measured"])
for m, d in zip(measured["workloads"], sheet["workloads"]):
    print(f"{m['uuid']}: T_SOL measured {m['t_sol_s'] * 1e6:.2f} us / datasheet {d['t_sol_s'] * 1e6:.2f} us "
          f"= {m['t_sol_s'] / d['t_sol_s']:.3f} ({m['bound_by']})")
PYEOF
SOL_EXECBENCH_CACHE_DIR="$OUT/empty-cache" step "bound without a calibration (expect exit 2)" 60 \
  "$OUT/bound_no_calibration.txt" "$OUT/bound_no_calibration.txt" bound "$PROBLEM" --ceilings measured
cat "$OUT/bound_no_calibration.txt"
t0=$SECONDS
timeout 150 "$PY" -m pytest -q -p no:cacheprovider tests/scoring/test_calibration.py > "$OUT/pytest_calibration.txt" 2>&1
echo "pytest test_calibration (gpu test included): exit $? in $((SECONDS - t0)) s" | tee -a "$SUMMARY"
tail -3 "$OUT/pytest_calibration.txt"
cat "$SUMMARY"
