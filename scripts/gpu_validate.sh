#!/usr/bin/env bash
# One call on the device machine: install what is missing (wheels carried in .whl), run the gpu
# tests and the benchmarks, and pack logs and JSON into $OUT/validation.tgz (plus a short summary).
#   usage (from the repo root on the GPU machine): bash scripts/gpu_validate.sh [all | PART ...]
#   FIDELITY_ARGS, OVERHEAD_ARGS, LAUNCH_ARGS, AA_ARGS: options for benchmarks/fidelity.py (e.g. --cases
#   add_4k,gemm_256x4096x4096), eval_overhead.py (e.g. --only rmsnorm), launch_overhead.py and aa.py;
#   LEVELS_ARGS for process_levels.py (e.g. --processes 8).
#   parts: tests envprobe build_cache fidelity launch overhead aa profile levels aa_nolevel (the last three
#   are not in "all": profile is a diagnosis of where one evaluation of a 14-workload problem spends its
#   time, parent and child; levels how far a call of small kernels moves between processes; aa_nolevel
#   the A/A with the warm pool's launch-level selection off, to set beside aa's)
set -uo pipefail
FINAL=${OUT:-/tmp/sol-out}
WORK=$(mktemp -d /tmp/sol-validate.XXXX)
mkdir -p "$FINAL"
export PYTHONUNBUFFERED=1 PYTHON=python3
parts=${*:-all}
source scripts/device/env.sh
device_env "$WORK/install.log" || exit 1
{ nvidia-smi; python3 -c 'import torch, triton, sys; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name(0))'; nvcc --version | tail -2; } >"$WORK/device.txt" 2>&1
tail -4 "$WORK/device.txt"
want() { [[ " $parts " == *" all "* || " $parts " == *" $1 "* ]]; }
summary="$FINAL/summary.txt"; : >"$summary"
# Each step is bounded (STEP_TIMEOUT, default 540 s) so one call of the device tool (600 s at most)
# still returns the logs of a step that ran long; the logs are written under $FINAL directly.
step() { local name=$1; shift; local began=$SECONDS; timeout "${STEP_TIMEOUT:-540}" "$@"; local rc=$?; echo "$name rc=$rc $((SECONDS - began))s" | tee -a "$summary"; }
if want tests; then
  # Two rounds: builds and conformance in parallel workers; then, alone on a quiet machine, the
  # tests that judge timings (host-bound verdicts, all-stream spans). Run beside four workers and
  # their parallel nvcc builds, honest 1 to 12 us kernels had host spans of 0.2 to 0.7 ms (with
  # other processes' kernels queued on the GPU), which is what the contention warning is for, not
  # what these tests are about. The launch-level tests warm children one after another, each of
  # which waits for the device while other workers' evaluations measure.
  serial="tests/timing tests/exploits/test_exploits_gpu.py tests/test_launch_level.py"
  step tests_parallel bash -c "python3 -m pytest -m gpu -q -p no:cacheprovider -n ${PYTEST_WORKERS:-4} -rfE --durations=15 \
      ${PYTEST_ARGS:-tests $(for t in $serial; do printf -- '--ignore=%s ' "$t"; done)} > '$FINAL/pytest_gpu.log' 2>&1"
  tail -25 "$FINAL/pytest_gpu.log"
  if [ -z "${PYTEST_ARGS:-}" ]; then
    step tests_serial bash -c "python3 -m pytest -m gpu -q -p no:cacheprovider -rfE --durations=10 $serial > '$FINAL/pytest_gpu_serial.log' 2>&1"
    tail -25 "$FINAL/pytest_gpu_serial.log"
  fi
fi
if want envprobe; then
  mkdir -p "$WORK/envprobe"
  step envprobe bash -c "OUT='$WORK/envprobe' bash scripts/gpu_envprobe_check.sh > '$WORK/envprobe/log.txt' 2>&1"
  tail -15 "$WORK/envprobe/log.txt"
fi
if want aa; then
  # aa.py --warm starts the warm pool in its evaluations' environment and stops it after them.
  step aa bash -c "python3 benchmarks/aa.py --warm ${AA_ARGS:-} --out '$FINAL/aa.json' > '$FINAL/aa.log' 2>&1"
  tail -45 "$FINAL/aa.log"
fi
if [[ " $parts " == *" aa_nolevel "* ]]; then
  # The A/A with every warm process kept whatever its launch level: beside "aa" on the same machine,
  # what the selection gains (device-set spreads) and costs (the pool's waits, the wall time).
  step aa_nolevel bash -c "SOL_EXECBENCH_LAUNCH_LEVEL=0 python3 benchmarks/aa.py --warm ${AA_ARGS:-} --out '$FINAL/aa_nolevel.json' > '$FINAL/aa_nolevel.log' 2>&1"
  tail -8 "$FINAL/aa_nolevel.log"
fi
if want overhead; then
  step overhead bash -c "python3 benchmarks/eval_overhead.py --phases --repeat ${REPEAT:-2} ${OVERHEAD_ARGS:-} ${UPSTREAM_PATH:+--upstream-path $UPSTREAM_PATH} --out '$FINAL/eval_overhead.json' > '$FINAL/eval_overhead.log' 2>&1"
  tail -18 "$FINAL/eval_overhead.log"
fi
if [[ " $parts " == *" profile "* ]]; then
  prob=tests/data/conformance/examples/triton/rmsnorm
  printf 'import sys\nsys.argv[0] = "sol-execbench"\nfrom sol_execbench.cli.main import main\nmain()\n' >"$WORK/cli.py"
  step profile bash -c "SOL_EXECBENCH_CHILD_PROFILE='$WORK/child.prof' SOL_EXECBENCH_PHASE_LOG=1 python3 -m cProfile -o '$WORK/parent.prof' \
      '$WORK/cli.py' $prob --solution $prob/solution_triton.json --no-warm-pool -v -o '$WORK/profile.jsonl' > '$WORK/profile_run.log' 2>&1"
  python3 - "$WORK" >"$FINAL/profile.txt" 2>&1 <<'PY'
import pstats, sys
for name in ("child", "parent"):
    for key in ("cumulative", "tottime"):
        print(f"==== {name} by {key}")
        pstats.Stats(f"{sys.argv[1]}/{name}.prof").sort_stats(key).print_stats(45)
PY
  grep "phase" "$WORK/profile_run.log" | tail -20
fi
if [[ " $parts " == *" levels "* ]]; then
  step levels bash -c "python3 benchmarks/process_levels.py ${LEVELS_ARGS:-} --out '$FINAL/process_levels.json' > '$FINAL/process_levels.log' 2>&1"
  tail -12 "$FINAL/process_levels.log"
fi
if want build_cache; then
  step build_cache bash -c "python3 benchmarks/build_cache.py ${UPSTREAM_PATH:+--upstream-path $UPSTREAM_PATH --upstream-first-only} --out '$FINAL/build_cache.json' > '$FINAL/build_cache.log' 2>&1"
  tail -15 "$FINAL/build_cache.log"
fi
if want launch; then
  step launch bash -c "python3 benchmarks/launch_overhead.py ${LAUNCH_ARGS:-} --out '$FINAL/launch_overhead.json' > '$WORK/launch.log' 2>&1"
  cat "$WORK/launch.log"
fi
if want fidelity && [ -f scripts/gpu_fidelity.sh ]; then
  mkdir -p "$WORK/fidelity"
  step fidelity bash -c "OUT='$WORK/fidelity' bash scripts/gpu_fidelity.sh ${FIDELITY_ARGS:-} > '$WORK/fidelity/log.txt' 2>&1"
  tail -40 "$WORK/fidelity/log.txt"
  cp "$WORK/fidelity/fidelity.json" "$FINAL/" 2>/dev/null
fi
tar czf "$FINAL/validation.tgz" -C "$WORK" .
cat "$summary"
