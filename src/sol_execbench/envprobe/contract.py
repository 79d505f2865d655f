"""``contract --json``: the machine-readable contract of this sol-execbench.

Tool and schema versions, the JSON Schema of every file format (generated from the pydantic models
in ``sol_execbench.schema``, never written by hand), the trace statuses with their meanings, the
environment snapshot's shape, and the CLI commands (handed in by the CLI, which owns them).
No torch import: this works on a laptop.
"""

from __future__ import annotations

from typing import Any, Sequence

from sol_execbench import __version__
from sol_execbench.schema import (BLOCKER_MEANING, STATUS_MEANING, BenchmarkConfig, Definition, MigrationManifest, Solution,
                                  TimingRounds, Trace, Workload)
from sol_execbench.schema.dataset_inputs import ExecutionClosure, Readiness, ReadySubset, TimeoutOverrides
from sol_execbench.schema.dataset_run import DatasetSummary, RunRecord
from sol_execbench.schema.timing_rule import LAUNCH_ALLOWANCE_US, RULE as LATENCY_RULE
from sol_execbench.schema.base import DocumentedJsonSchema
from sol_execbench.schema.benches import (AllreduceSweep, BaselineFile, FastPReport, GemmSweep,
                                          HardwareComparison)
from sol_execbench.schema.bound import ProblemBound, ProblemDerivation
from sol_execbench.schema.containers import CompatibilityEntry, CompatibilityMatrix, DockerPreflight, DockerTargetManifest
from sol_execbench.schema.calibration import Calibration
from sol_execbench.schema.comparison import BaselineComparison
from sol_execbench.schema.scores import ScoreReport, ScoringBaseline
from sol_execbench.schema.warm_pool import WorkerStatus
from sol_execbench.schema.profiling import (ProblemTimingEvidence, ProfileSidecar, StaticEvidenceSidecar, TimingCoverage,
                                            TimingCoverageSummary, WorkloadTimingEvidence)

from .snapshot import BLOCK_ORDER, SCHEMA_VERSION, TOOL_NAME, empty_snapshot

CONTRACT_VERSION = "1.0"
FORMATS = {
    "definition": Definition,
    "workload": Workload,
    "solution": Solution,
    "trace": Trace,
    "benchmark_config": BenchmarkConfig,
    "migration_manifest": MigrationManifest,
    "bound": ProblemBound,
    "calibration": Calibration,
    "solar_derivation": ProblemDerivation,
    "score_report": ScoreReport,
    "scoring_baseline": ScoringBaseline,
    "baseline_comparison": BaselineComparison,
    "dataset_run_record": RunRecord,
    "dataset_summary": DatasetSummary,
    "timeout_overrides": TimeoutOverrides,
    "ready_subset": ReadySubset,
    "readiness": Readiness,
    "execution_closure": ExecutionClosure,
    "docker_target_manifest": DockerTargetManifest,
    "docker_preflight": DockerPreflight,
    "compatibility_entry": CompatibilityEntry,
    "compatibility_matrix": CompatibilityMatrix,
    "bench_allreduce": AllreduceSweep,
    "bench_gemm_sweep": GemmSweep,
    "bench_baseline": BaselineFile,
    "bench_fast_p": FastPReport,
    "bench_hardware_comparison": HardwareComparison,
    "profile": ProfileSidecar,
    "static_evidence": StaticEvidenceSidecar,
    "timing_evidence": ProblemTimingEvidence,
    "timing_evidence_workload": WorkloadTimingEvidence,
    "timing_coverage": TimingCoverage,
    "timing_coverage_summary": TimingCoverageSummary,
    "timing_rounds": TimingRounds,
    "worker_status": WorkerStatus,
}


def build_contract(cli_commands: list[dict[str, Any]], console_scripts: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The contract document; ``cli_commands`` is the CLI's own description of its commands, and
    ``console_scripts`` of the other console scripts (``sol-execbench-baseline``)."""
    shape = empty_snapshot()
    shape["timestamp"] = None
    return {
        "tool": {"name": TOOL_NAME, "version": __version__},
        "contract_version": CONTRACT_VERSION,
        "schema_versions": {"env_snapshot": SCHEMA_VERSION},
        "formats": {name: model.model_json_schema(schema_generator=DocumentedJsonSchema)
                    for name, model in FORMATS.items()},
        "trace_statuses": [{"status": status.value, "meaning": meaning} for status, meaning in STATUS_MEANING.items()],
        "migration_blockers": [{"code": code.value, "meaning": meaning} for code, meaning in BLOCKER_MEANING.items()],
        "latency_rule": {"text": LATENCY_RULE, "launch_allowance_us": LAUNCH_ALLOWANCE_US},
        "env_snapshot": {"schema_version": SCHEMA_VERSION, "blocks": list(BLOCK_ORDER), "shape": shape},
        "cli_commands": cli_commands,
        "console_scripts": list(console_scripts),
    }
