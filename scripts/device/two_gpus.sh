#!/usr/bin/env bash
# The two-GPU host (nvidia-h100-x2 or nvidia-h200-x2), about 8 minutes:
#  1. bench allreduce over one and two GPUs, every buffer kind, eager and CUDA-graph launches (NVLink
#     multicast off: the command sets the variables), then benchmarks/allreduce_parity.py: the plainest torch.distributed loop timed by
#     the host clock beside the sweep, the CuPy direct launch against regular, the datasheet link;
#  2. dataset scaling: benchmarks/dataset_throughput.py with --gpu-jobs 1 (GPU 0 alone) and 2 on a
#     PyTorch suite (evaluation-bound: no native builds, whose CPU time is the same on any GPU count);
#  3. the same on the mixed suite (24 PyTorch, 6 CUDA C++: its builds are CPU work alike on 1 and 2 GPUs);
#  4. the GPU tests that evaluate on cuda:1 (a Triton and a CUDA C++ RMSNorm).
# The comparison with one process per problem is scripts/device/dataset_throughput.sh (one GPU).
# Everything lands under $OUT: allreduce/ (JSON, CSV, figures), allreduce_parity.json,
# dataset_scaling.json, dataset_mixed.json, logs/, summary.txt.
#   usage (repo root on the GPU machine): bash scripts/device/two_gpus.sh [allreduce scaling mixed tests]
#   ALLREDUCE_ARGS, SCALING_ARGS, MIXED_ARGS replace each step's sizes and suites (a dry run on a CPU:
#   ALLREDUCE_ARGS="--cpu --max-bytes 4096 --factor 8" PARITY_ARGS=--cpu
#   SCALING_ARGS="--problems 3 --cuda 0 --device cpu --config examples/cpu_config.json" MIXED_ARGS=...).
set -uo pipefail
FINAL=${OUT:-/tmp/sol-out}
mkdir -p "$FINAL/logs"
export PYTHONUNBUFFERED=1
parts=${*:-allreduce scaling mixed tests}
source scripts/device/env.sh
device_env "$FINAL/logs/install.log" || exit 1
export PATH=$PATH:/usr/local/cuda/bin
summary="$FINAL/summary.txt"; : >"$summary"
{ nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  python3 -c 'import cupy; print("cupy", cupy.__version__)'; nproc
} >"$FINAL/logs/device.txt" 2>&1
cat "$FINAL/logs/device.txt"

if want allreduce; then
  # eager and graph launches, 5 windows of 20 calls: the timed calls take seconds; the processes' start,
  # NCCL, CuPy and symmetric-memory set-up most of the rest. --timeout 90 per GPU count: a graph capture
  # that hangs in the first group still leaves the second its time inside the step's 200 s.
  step allreduce 200 sol bench allreduce -o "$FINAL/allreduce" ${ALLREDUCE_ARGS:---ranks 1 --ranks 2 --min-bytes 8 \
    --max-bytes $((1 << 30)) --factor 4 --iterations 20 --repeats 5 --warmup 5 --timeout 90}
  step allreduce_parity 120 python3 benchmarks/allreduce_parity.py --sweep "$FINAL/allreduce/allreduce.json" \
    --ranks 2 --out "$FINAL/allreduce_parity.json" ${PARITY_ARGS:-}
fi
if want scaling; then
  step scaling 200 python3 benchmarks/dataset_throughput.py --modes pipeline --gpu-jobs 1,2 \
    --out "$FINAL/dataset_scaling.json" ${SCALING_ARGS:---problems 30 --cuda 0}
fi
if want mixed; then
  step mixed 240 python3 benchmarks/dataset_throughput.py --modes pipeline --gpu-jobs 1,2 \
    --out "$FINAL/dataset_mixed.json" ${MIXED_ARGS:---problems 30 --cuda 6}
fi
if want tests; then
  step tests 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rfE tests/test_gpu_conformance.py -k second_gpu
fi
cat "$summary"
