#!/usr/bin/env bash
# One-command set-up: the project, its test dependencies, and a PyTorch build.
# A machine that already has torch (a GPU host with its CUDA/ROCm build) keeps it; a bare
# machine gets the CPU wheel torch==2.13.0 first so pip does not pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install --quiet "torch==2.13.0"
fi
"$PY" -m pip install --quiet -e ".[dev]"
"$PY" -c "import sol_execbench, torch; print('sol-execbench', sol_execbench.__version__, '| torch', torch.__version__)"
