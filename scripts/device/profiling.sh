#!/usr/bin/env bash
# --profile ncu, --profile torch and --static-evidence auto on the H100 (ncu does not run on the H200
# machines here), on a conformance Triton and a CUDA C++ solution (RMSNorm, hidden 4096), then per
# workload and kernel the profiler's per-call time next to the trace's latency: the target is within
# 10% for kernels of 20 us and more. About 4 minutes. Everything lands under $OUT: <lang>/<tool>/
# (traces, sidecars), logs/, comparison.txt, summary.txt.
#   usage (repo root on the GPU machine): bash scripts/device/profiling.sh
#   PROFILE_CALLS (default 10) and PROFILE_ONLY (workload uuids, space-separated) narrow the run.
set -uo pipefail
FINAL=${OUT:-/tmp/sol-out}
mkdir -p "$FINAL/logs"
export PYTHONUNBUFFERED=1
source scripts/device/env.sh
device_env "$FINAL/logs/install.log" || exit 1
export PATH=$PATH:/usr/local/cuda/bin
summary="$FINAL/summary.txt"; : >"$summary"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import torch, sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  python3 -c 'import triton; print("triton", triton.__version__)'
  (ncu --version || echo "ncu: not found") 2>&1 | tail -1
} >"$FINAL/logs/device.txt" 2>&1
cat "$FINAL/logs/device.txt"

CONF=tests/data/conformance/examples
CALLS=${PROFILE_CALLS:-10}
# RMSNorm batch 7 (a few us), 11832, 14418 and 14509 rows (tens of us each)
ONLY=${PROFILE_ONLY:-33bf737d-3b37-4e38-be80-ea39b4b46ae6 cfddc087-69e0-4acb-a945-8cc6dff8afcf f0f508c3-e880-4ec8-b8be-1062db313d36 841b0afa-80fa-449a-9e1d-f294da92d02f}
only_args=(); for u in $ONLY; do only_args+=(--only "$u"); done

run() {  # run NAME LIMIT_S SOLUTION_DIR SOLUTION_FILE TOOL [more flags]
  local name=$1 limit=$2 dir=$3 file=$4 tool=$5; shift 5; local began=$SECONDS
  mkdir -p "$FINAL/$name"
  timeout "$limit" python3 -c "import sys; sys.argv[0] = 'sol-execbench'; from sol_execbench.cli.main import main; main()" \
    "$dir" --solution "$dir/$file" "${only_args[@]}" -o "$FINAL/$name/traces.jsonl" \
    --profile "$tool" --profile-calls "$CALLS" "$@" >"$FINAL/logs/${name//\//_}.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - began))s" | tee -a "$summary"
  tail -n 8 "$FINAL/logs/${name//\//_}.log"
}

run triton/ncu 120 "$CONF/triton/rmsnorm" solution_triton.json ncu --static-evidence auto
run triton/torch 75 "$CONF/triton/rmsnorm" solution_triton.json torch
run cuda/ncu 150 "$CONF/cuda_cpp/rmsnorm" solution_cuda.json ncu --static-evidence auto
run cuda/torch 75 "$CONF/cuda_cpp/rmsnorm" solution_cuda.json torch

python3 - "$FINAL" <<'EOF' | tee "$FINAL/comparison.txt"
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
print(f"{'run':14} {'workload':10} {'kernel':44} {'per call us':>11} {'trace us':>9} {'ratio':>6}  verdict")
for sidecar in sorted(out.glob("*/*/traces.profile.*.json")):
    run = f"{sidecar.parent.parent.name}/{sidecar.parent.name}"
    data = json.loads(sidecar.read_text())
    for attempt in data["attempts"]:
        if not attempt["ok"]:
            print(f"{run:14} {attempt['tool']} failed: {(attempt['error'] or '')[:200]}")
    for w in data["workloads"]:
        trace_us = (w["trace_latency_ms"] or 0) * 1e3
        kernels = w["kernels"]
        for k in kernels:
            per_call = k["per_call_us"] or 0.0
            ratio = per_call / trace_us if trace_us else float("nan")
            alone = len(kernels) == 1
            if per_call >= 20 and alone:
                verdict = "within 10%" if abs(ratio - 1) <= 0.10 else "OUTSIDE 10%"
            else:
                verdict = "(< 20 us)" if per_call < 20 else "(one of several kernels)"
            extra = ""
            if k.get("achieved_bandwidth_gbps"):
                extra = f"  {k['achieved_bandwidth_gbps']:.0f} GB/s, regs {k.get('registers_per_thread')}"
            print(f"{run:14} {w['uuid'][:8]:10} {k['name'][:44]:44} {per_call:11.2f} {trace_us:9.2f} {ratio:6.3f}  "
                  f"{verdict}{extra}")
for evidence in sorted(out.glob("*/*/traces.static-evidence.json")):
    data = json.loads(evidence.read_text())
    for k in data["kernels"]:
        print(f"static {evidence.parent.parent.name}: {k['source']} {k['name'][:50]} regs={k['registers']} "
              f"shared={k['shared_bytes']} local={k['local_bytes']} stack={k['stack_bytes']} spills={k['spills']}")
    for e in data["errors"]:
        print(f"static {evidence.parent.parent.name}: error: {e[:200]}")
EOF
echo "comparison rc=$?" | tee -a "$summary"
