#!/usr/bin/env bash
# Scores on the GPU here (a few minutes): the conformance samples evaluated with each reference as its
# own solution, scored on datasheet ceilings with the bound and derivation sidecars, the run's HTML
# page, a self-comparison through sol-execbench-baseline, and the check that no PASSED latency falls
# under its T_SOL. SCORES_ROOT picks the suite (default tests/data/conformance/samples; the corpus's
# other part is tests/data/conformance/examples). Everything lands under $OUT (default out/device-scores). SCORES_EXTRA adds dataset-run
# flags (a CPU trial: "--config examples/cpu_config.json --device cpu --hardware H100 --limit 2").
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out/device-scores}
mkdir -p "$OUT"
source scripts/device/env.sh
device_env "$OUT/install.log" || exit 1
sol() { python3 -c "from sol_execbench.cli.main import main; main()" "$@"; }
sol dataset run "${SCORES_ROOT:-tests/data/conformance/samples}" -o "$OUT/run" --blob-precheck warn --timeout 120 \
  --amd-score-report "$OUT/score.json" --amd-sol-bound-dir "$OUT/bounds" --solar-derivation "$OUT/derivation" ${SCORES_EXTRA:-} \
  > "$OUT/run.log" 2>&1
echo "dataset run exit $?" | tee -a "$OUT/run.log"
sol report "$OUT/run" --scores "$OUT/score.json" -o "$OUT/report.html" > "$OUT/report.log" 2>&1
echo "report exit $?" | tee -a "$OUT/report.log"
python3 -c "from sol_execbench.cli.baseline_cmd import main; main()" --candidate "$OUT/run" --baseline "$OUT/run" \
  --format json --output "$OUT/self-compare.json" --amd-native-claim > "$OUT/compare.log" 2>&1
echo "baseline exit $?" | tee -a "$OUT/compare.log"
python3 - "$OUT/score.json" <<'PY' | tee "$OUT/check.txt"
import json, sys
report = json.load(open(sys.argv[1]))
rows = [(p["problem"], w["uuid"], w["t_sol_ms"] / w["latency_ms"]) for p in report["problems"] for w in p["workloads"]
        if w["status"] == "PASSED" and w["t_sol_ms"] and w["latency_ms"]]
over = [r for r in rows if r[2] > 1]
print(f"hardware {report['hardware']['label']}; {len(rows)} PASSED workloads with T_SOL; "
      f"max T_SOL/latency {max((r[2] for r in rows), default=0):.4f}; above 1: {len(over)}")
for problem, uuid, ratio in sorted(rows, key=lambda r: -r[2])[:10]:
    print(f"  {problem} {uuid} T_SOL/latency {ratio:.4f}")
print("flags:", {k: sum(f["kind"] == k for f in report["flags"]) for k in {f["kind"] for f in report["flags"]}})
PY
