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
# Headless Chromium renders `sol-execbench report` pages in the tests (Debian's package).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
  $SUDO apt-get install -y -q chromium >/dev/null || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; } \
    || echo "warning: chromium not installed; the report's browser test will be skipped" >&2
fi
# LLVM (llc, llvm-readelf) makes and reads an AMDGPU code object in the static-evidence tests (skipped without).
if ! command -v llvm-readelf >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
  $SUDO apt-get install -y -q llvm >/dev/null || echo "warning: llvm not installed; the AMDGPU static-evidence tests will be skipped" >&2
fi
"$PY" -c "import sol_execbench, torch; print('sol-execbench', sol_execbench.__version__, '| torch', torch.__version__)"
