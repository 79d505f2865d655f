#!/usr/bin/env bash
# The checks that run before the tests: lint (ruff) and the layering contracts (import-linter).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m ruff check src tests benchmarks scripts
PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" lint-imports --no-cache  # an editable install hides the package from its import graph
