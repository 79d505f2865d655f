#!/usr/bin/env bash
# The test command: lint (ruff), the layering contract (import-linter), then the tests.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -m gpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m ruff check src tests benchmarks scripts
PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" lint-imports --no-cache  # an editable install hides the package from its import graph
"$PY" -m pytest -q -n 2 --durations=15 "$@"
