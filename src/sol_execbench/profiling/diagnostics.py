"""The evaluator's diagnostics after its traces: the profile and static-evidence sidecars."""

from __future__ import annotations

from dataclasses import dataclass

from sol_execbench.evaluate import EvalOptions
from sol_execbench.platform import vendor_hint
from sol_execbench.schema import BenchmarkConfig, Definition, Solution, Trace, Workload
from sol_execbench.schema.profiling import DEFAULT_PROFILE_CALLS

from .profile_run import ProfileRequest, profile_solution
from .sidecars import sidecar_stem, write_sidecar
from .static_evidence import static_evidence


@dataclass(frozen=True)
class Diagnostics:
    profile: str = "none"  # none | torch | ncu | rocprofv3 | auto
    profile_calls: int = DEFAULT_PROFILE_CALLS
    static_evidence: str = "none"  # none | auto

    @property
    def wanted(self) -> bool:
        return self.profile != "none" or self.static_evidence != "none"


def run_diagnostics(definition: Definition, workloads: list[Workload], solution: Solution, config: BenchmarkConfig,
                    options: EvalOptions, traces: list[Trace], wanted: Diagnostics) -> list[str]:
    """Write the sidecars asked for; one line per sidecar (where it went, or why it could not be written)."""
    if not wanted.wanted:
        return []
    vendor = "cpu" if options.device == "cpu" else vendor_hint()
    stem = sidecar_stem(options.output_path, solution.name)
    lines = []
    if wanted.profile != "none":
        sidecar = profile_solution(definition, workloads, solution, config, options,
                                   ProfileRequest(wanted.profile, wanted.profile_calls), vendor, traces)
        lines.append(_write(stem, f"profile.{sidecar.tool or wanted.profile}.json", sidecar, "profile",
                            None if sidecar.tool else "; ".join(f"{a.tool}: {a.error}" for a in sidecar.attempts)))
    if wanted.static_evidence != "none":
        evidence = static_evidence(definition, workloads, solution, config, options, vendor)
        lines.append(_write(stem, "static-evidence.json", evidence, "static evidence",
                            "; ".join(evidence.errors) if not evidence.kernels else None))
    return lines


def _write(stem, suffix: str, model, what: str, problem: str | None) -> str:  # noqa: ANN001
    try:
        target = write_sidecar(stem, suffix, model)
    except OSError as exc:
        return f"{what} could not be written beside {stem}: {exc}"
    return f"{what} written to {target}" + (f" (nothing recorded: {problem[:300]})" if problem else "")
