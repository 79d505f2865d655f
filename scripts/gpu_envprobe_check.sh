#!/usr/bin/env bash
# Environment-probe check on a GPU host (written for an NVIDIA H100; runs on any GPU host).
#
#   OUT=/some/folder bash scripts/gpu_envprobe_check.sh
#
# Run from the repository root with the package importable. Writes into $OUT:
#   env_h100_a.json, env_h100_b.json   two snapshots 60 s apart (the first also warms the hash cache)
#   probe_a.txt                        the human summary (-v: with the full JSON) of the first probe
#   probe_timing.txt                   wall seconds of warm probes (whole CLI call) and probe_wall_s (target < 2 s)
#   env_cold.json, env_warm.json       a --no-cache probe and the warm probe after it
#   diff_cold_warm.txt / .json         env diff cold -> warm (expected exit 0: volatile fields only)
#   warm_imports.txt                   whether a warm probe imported torch (expected False)
#   diff_a_b.txt / .json               env diff between the two snapshots (expected exit 0: volatile only)
#   diff_ci_h100.txt / .json           env diff CPU CI machine -> this host (expected exit 1)
#   env_h100_extended.json             probe with --extended (nm symbol counts), time-boxed
#   contract.json doctor.json toolchain.json toolchain_registry.json
#   pytest_envprobe.txt                tests/envprobe including the gpu-marked tests
#   summary.txt                        every step's exit code
set -uo pipefail

: "${OUT:?set OUT to a writable folder}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 2
PY="${PYTHON:-python}"
export PY
SLEEP_S="${SLEEP_S:-60}"  # the gap between the two snapshots (override only to try the script quickly)

if command -v sol-execbench >/dev/null 2>&1; then
  seb() { sol-execbench "$@"; }
  echo "using: $(command -v sol-execbench)"
else
  # The console script is main(); call it directly when the entry point is not installed.
  seb() { "$PY" -c 'import sys; sys.argv[0] = "sol-execbench"; from sol_execbench.cli.main import main; main()' "$@"; }
  echo "using: $PY -c sol_execbench.cli.main:main"
fi

SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
now() { "$PY" -c 'import time; print(f"{time.time():.3f}")'; }
elapsed() { "$PY" -c "print(f'{$2 - $1:.3f}')"; }

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi -L 2>&1 || true
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip, "gpus", torch.cuda.device_count())' 2>&1
  "$PY" -c 'import pynvml; print("pynvml importable")' 2>&1 || echo "pynvml NOT importable: NVML is read through nvidia-smi"
} | tee "$OUT/context.txt"

t0=$(now)
seb env probe -v -o "$OUT/env_h100_a.json" > "$OUT/probe_a.txt" 2>&1
note "probe a: exit $? in $(elapsed "$t0" "$(now)") s (cold: hashes the libraries once)"
grep -v '^ \|^{\|^}' "$OUT/probe_a.txt" | head -40

echo "sleeping ${SLEEP_S} s before the second snapshot ..."
sleep "$SLEEP_S"
seb env probe -o "$OUT/env_h100_b.json" > "$OUT/probe_b.txt" 2>&1
note "probe b: exit $?"

: > "$OUT/probe_timing.txt"
for i in 1 2 3; do
  t0=$(now)
  seb env probe --json > "$OUT/warm_$i.json" 2>/dev/null
  wall=$(elapsed "$t0" "$(now)")
  inproc=$("$PY" -c "import json; print(json.load(open('$OUT/warm_$i.json'))['probe_wall_s'])")
  echo "warm probe $i: ${wall} s whole CLI call, probe_wall_s ${inproc} s" | tee -a "$OUT/probe_timing.txt"
done
rm -f "$OUT"/warm_*.json
note "warm probe timing: $(tail -1 "$OUT/probe_timing.txt")"

# Cold (every cache recomputed) against warm: the caches must not change any non-volatile field.
t0=$(now)
seb env probe --no-cache --json -o "$OUT/env_cold.json" > /dev/null 2>&1
note "cold probe (--no-cache): exit $? in $(elapsed "$t0" "$(now)") s"
t0=$(now)
seb env probe --json -o "$OUT/env_warm.json" > /dev/null 2>&1
note "warm probe after it: exit $? in $(elapsed "$t0" "$(now)") s"
seb env diff "$OUT/env_cold.json" "$OUT/env_warm.json" > "$OUT/diff_cold_warm.txt" 2>&1
note "env diff cold warm: exit $? (expected 0)"
seb env diff --json "$OUT/env_cold.json" "$OUT/env_warm.json" > "$OUT/diff_cold_warm.json" 2>&1
"$PY" -c 'import sys; from sol_execbench.envprobe.snapshot import collect; s = collect(); print("torch imported by a warm probe:", "torch" in sys.modules, "probe_wall_s", s["probe_wall_s"])' > "$OUT/warm_imports.txt" 2>&1
note "$(cat "$OUT/warm_imports.txt") (expected False)"

seb env diff "$OUT/env_h100_a.json" "$OUT/env_h100_b.json" > "$OUT/diff_a_b.txt" 2>&1
note "env diff a b: exit $? (expected 0)"
seb env diff --json "$OUT/env_h100_a.json" "$OUT/env_h100_b.json" > "$OUT/diff_a_b.json" 2>&1
cat "$OUT/diff_a_b.txt"

CI_SNAPSHOT=tests/data/envprobe/snapshot_cpu_ci_host.json
if [ -f "$CI_SNAPSHOT" ]; then
  seb env diff "$CI_SNAPSHOT" "$OUT/env_h100_a.json" > "$OUT/diff_ci_h100.txt" 2>&1
  note "env diff ci h100: exit $? (expected 1)"
  seb env diff --json "$CI_SNAPSHOT" "$OUT/env_h100_a.json" > "$OUT/diff_ci_h100.json" 2>&1
  grep -v '^  ' "$OUT/diff_ci_h100.txt" | tail -12
fi

t0=$(now)
timeout 180 bash -c "$(declare -f seb); seb env probe --extended --json" > "$OUT/env_h100_extended.json" 2>&1
note "extended probe: exit $? in $(elapsed "$t0" "$(now)") s"

seb contract --json > "$OUT/contract.json" 2>&1; note "contract --json: exit $?"
seb doctor --json > "$OUT/doctor.json" 2>&1; note "doctor --json: exit $? (1 means a failed check; see doctor.json)"
seb toolchain --json > "$OUT/toolchain.json" 2>&1; note "toolchain --json: exit $?"
seb toolchain --json --list-registry > "$OUT/toolchain_registry.json" 2>&1; note "toolchain --list-registry: exit $?"

if "$PY" -c 'import pytest' 2>/dev/null; then
  "$PY" -m pytest tests/envprobe -q -p no:cacheprovider > "$OUT/pytest_envprobe.txt" 2>&1
  note "pytest tests/envprobe: exit $? ($(tail -1 "$OUT/pytest_envprobe.txt"))"
else
  note "pytest not importable: tests skipped"
fi

echo "---"
cat "$SUMMARY"
