#!/usr/bin/env bash
# Records real Nsight Compute CSV output on the GPU machine for the profiling parsers' CPU tests:
# a PyTorch add, a bf16 matrix product and a Triton kernel, three calls each, under the ncu options
# and metric list `--profile ncu` uses. Writes $OUT/ncu_h100_raw.csv (--page raw: one row a kernel)
# and $OUT/ncu_h100_details.csv (the default page: one row a metric), plus the ncu version.
set -uo pipefail
OUT=${OUT:-/tmp/ncu-fixture}
mkdir -p "$OUT"
prog=$(mktemp /tmp/ncu_prog.XXXX.py)
cat >"$prog" <<'PY'
import torch, triton, triton.language as tl

@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)

x = torch.randn(1 << 20, device="cuda")
a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
for _ in range(3):
    torch.add(x, x)
    a @ a
    scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
torch.cuda.synchronize()
PY
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
for op in fadd fmul ffma dadd dmul dfma hadd hmul hfma; do metrics=$metrics,sm__sass_thread_inst_executed_op_${op}_pred_on.sum; done
metrics=$metrics,launch__grid_size,launch__block_size,launch__registers_per_thread
common=(--clock-control none --cache-control all --target-processes all --metrics "$metrics" --csv --print-units base)
ncu --version >"$OUT/ncu_version.txt" 2>&1
ncu "${common[@]}" --page raw python3 "$prog" >"$OUT/ncu_h100_raw.csv" 2>"$OUT/ncu_raw.err"; echo "ncu raw page: exit $?"
ncu "${common[@]}" python3 "$prog" >"$OUT/ncu_h100_details.csv" 2>"$OUT/ncu_details.err"; echo "ncu details page: exit $?"
wc -l "$OUT"/ncu_h100_*.csv
