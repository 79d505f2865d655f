#!/usr/bin/env bash
# Select a declared ROCm or CUDA container target, preflight the host, optionally build the image,
# and run a command in the container: a thin wrapper over `sol-execbench docker run`
# (docs/containers.md has every flag and variable).
#
#   ./scripts/run_docker.sh [--build] [--target ID] [--allow-unknown-target]
#       [--allow-mixed-version-dependencies] [--allow-untested-target-smoke]
#       [--record-container-validation] [--preflight-only]
#       [--compatibility-entry PATH] [--compatibility-matrix PATH] [DOCKER_RUN_ARGS...] [-- COMMAND...]
#
# Arguments before `--` that are not the wrapper's go to `docker run`; after `--` is the container
# command (default: bash). SOL_EXECBENCH_RUN_DOCKER_DRY_RUN=1 prints the docker commands and runs
# none. SOL_EXECBENCH_HOST_PYTHON names the Python that runs the wrapper (default: `uv run python`,
# or python3 where uv is not installed).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ -n "${SOL_EXECBENCH_HOST_PYTHON:-}" ]; then
    read -r -a HOST_PYTHON <<< "${SOL_EXECBENCH_HOST_PYTHON}"
elif command -v uv >/dev/null 2>&1; then
    HOST_PYTHON=(uv run --project "${REPO_ROOT}" python)
else
    HOST_PYTHON=(python3)
fi

export PYTHONPATH="${REPO_ROOT}/src${PYTHONPATH:+:${PYTHONPATH}}"
exec "${HOST_PYTHON[@]}" -c 'import sys; sys.argv[0] = "sol-execbench"; from sol_execbench.cli.main import main; main()' \
    docker run --repo-root "${REPO_ROOT}" "$@"
