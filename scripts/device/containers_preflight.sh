#!/usr/bin/env bash
# On a GPU machine (no Docker engine needed): the container preflight against real hardware, the
# wrapper's dry run, and the container tests. Logs and JSON under $OUT; well under a minute.
#   bash scripts/device/containers_preflight.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-out/device-containers}"
mkdir -p "${OUT}"
source scripts/device/env.sh
device_env "$OUT/install.log" || exit 1
SE=(python3 -c 'from sol_execbench.cli.main import main; main()')

for target in cuda-12.8-ubuntu-24.04-container cuda-13.0-ubuntu-24.04-container rocm-7.1.1-ubuntu-24.04-container; do
    "${SE[@]}" docker preflight --target "${target}" > "${OUT}/preflight-${target}.json" 2> "${OUT}/preflight-${target}.err"
    echo "preflight ${target}: exit $?" | tee -a "${OUT}/summary.txt"
    "${SE[@]}" docker preflight --dry-run --target "${target}" > "${OUT}/preflight-dry-${target}.json" 2>&1
    echo "preflight --dry-run ${target}: exit $?" | tee -a "${OUT}/summary.txt"
done
SOL_EXECBENCH_RUN_DOCKER_DRY_RUN=1 SOL_EXECBENCH_HOST_PYTHON=python3 ./scripts/run_docker.sh --build \
    --target cuda-13.0-ubuntu-24.04-container --allow-untested-target-smoke -- \
    sol-execbench examples/rmsnorm --solution examples/rmsnorm/solution_triton.json > "${OUT}/dry-run.txt" 2>&1
echo "run_docker.sh dry run: exit $?" | tee -a "${OUT}/summary.txt"
{ command -v docker && docker info --format '{{json .Runtimes}}'; } > "${OUT}/docker.txt" 2>&1
python3 -m pytest -q -p no:cacheprovider tests/containers tests/test_configuration_reference.py tests/test_provenance.py \
    > "${OUT}/pytest.txt" 2>&1
echo "container tests: exit $?" | tee -a "${OUT}/summary.txt"
python3 - "${OUT}" <<'PY' | tee -a "${OUT}/summary.txt"
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("preflight-*.json")):
    try:
        doc = json.loads(path.read_text())
    except ValueError:
        print(f"{path.name}: not JSON"); continue
    c, h, d = doc["classification"], doc["host"], doc["dependencies"]
    print(f"{path.name}: kind={c['host_kind']} status={c['host_status']} deps={c['dependency_status']}/{c['dependency_scope']} "
          f"allowed={c['benchmark_allowed']} gpu={h['gpu_accessible']} devices={h['runtime_device_count']} "
          f"name={h['runtime_device_name']} torch={d['torch_version']} nvcc={d['nvcc_version']} reasons={c['reasons']}")
PY
