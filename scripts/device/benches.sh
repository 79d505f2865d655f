#!/usr/bin/env bash
# The benches on one GPU (about 4 minutes on an H100): the GEMM sweep on large bf16 (and fp8) shapes,
# the all-reduce sweep with one GPU and its model fit, and PyTorch baselines of the bundled examples
# in eager and inductor-default, with fast_p of the compiled runs against eager. Everything lands
# under $OUT: gemm/, allreduce/, timing/<GPU>_<platform>/, fast_p.json, logs/, summary.txt.
#   usage (repo root on the GPU machine): bash scripts/device/benches.sh [gemm allreduce baselines tests]
#   (default: gemm allreduce baselines; "tests" runs tests/benches -m gpu, about a minute more)
#   BENCH_REDUCE_OVERHEAD=1 also runs inductor-reduce-overhead (CUDA graphs) on the examples.
#   GEMM_ARGS, ALLREDUCE_ARGS, BASELINE_ARGS replace each step's sizes and counts (a dry run on a CPU:
#   GEMM_ARGS="--shape 64x64x64 --dtype fp16" ALLREDUCE_ARGS="--max-bytes 4096 --factor 8"
#   BASELINE_ARGS="--num-trials 3 --config examples/cpu_config.json --max-problems 1").
# Figures need matplotlib; where it is missing the JSON is written and `sol-execbench bench gemm|allreduce
# --reuse -o DIR` draws them on any machine.
set -uo pipefail
FINAL=${OUT:-/tmp/sol-out}
mkdir -p "$FINAL/logs"
export PYTHONUNBUFFERED=1
parts=${*:-gemm allreduce baselines}
source scripts/device/env.sh
device_env "$FINAL/logs/install.log" || exit 1
summary="$FINAL/summary.txt"; : >"$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
  python3 -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  python3 -c 'import triton; print("triton", triton.__version__)'; python3 -c 'import matplotlib; print("matplotlib", matplotlib.__version__)'
} >"$FINAL/logs/device.txt" 2>&1
cat "$FINAL/logs/device.txt"

if want gemm; then
  # bf16: the 70%-of-989-TFLOP/s target is on the large shapes; one of each family, fp8 beside it
  step gemm 150 sol bench gemm -o "$FINAL/gemm" ${GEMM_ARGS:---dtype bf16 --dtype fp8 --iterations 20 \
    --shape square_8192 --shape llama3_8b_gate_up --shape skinny_16x8192x8192}
fi
if want allreduce; then
  step allreduce 70 sol bench allreduce -o "$FINAL/allreduce" ${ALLREDUCE_ARGS:---min-bytes 8 --max-bytes $((1 << 30)) \
    --factor 4 --iterations 20 --warmup 5 --timeout 60}
fi
if want baselines; then
  modes=eager,inductor-default
  [[ "${BENCH_REDUCE_OVERHEAD:-0}" == 1 ]] && modes=$modes,inductor-reduce-overhead
  step baselines 150 sol bench baselines examples --modes "$modes" --results "$FINAL/timing" --timeout 120 \
    ${BASELINE_ARGS:-}
  hw=$(ls "$FINAL/timing" 2>/dev/null | head -1)
  if [[ -n "$hw" ]]; then
    step fast_p 30 sol bench fast-p --baseline "$FINAL/timing/$hw/baseline_time_torch.json" \
      --traces "$FINAL/timing/$hw/runs/inductor-default" -o "$FINAL/fast_p.json"
    # the run folders hold every trace; the baseline files and fast_p are the results
    tar -czf "$FINAL/baseline_runs.tgz" -C "$FINAL/timing/$hw" runs && rm -rf "$FINAL/timing/$hw/runs"
  fi
fi
if want tests; then
  step tests 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE tests/benches
fi
cat "$summary"
