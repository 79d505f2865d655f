"""Derived outputs of a run, from the traces in its output folder (no evaluation):

- ``--solar-derivation DIR``: ``DIR/<problem path>/derivation.json``, each workload's fewest bytes
  and FLOPs by kind and dtype (``ProblemDerivation``);
- ``--amd-score-report FILE``: SOL scores of the run (``ScoreReport``), T_SOL priced on the
  datasheet peaks of ``--hardware`` or the GPU the traces name, T_b the reference's latency or
  ``--scoring-baseline``; with ``--amd-sol-bound-dir DIR`` also ``DIR/<problem path>/bound.json``,
  the priced bounds (``ProblemBound``).

Both sidecars are keyed by problem path: definition names and workload uuids repeat across folders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from sol_execbench.files import replace_json
from sol_execbench.platform.peaks import PartPeaks, UnknownPartError, known_parts, peaks_for
from sol_execbench.schema import Trace
from sol_execbench.schema.bound import ProblemBound, ProblemDerivation
from sol_execbench.schema.scores import ScoreBaselineSource, ScoreReport, ScoringBaseline
from sol_execbench.schema.trace_files import read_traces, traces_file
from sol_execbench.scoring.comparison import hardware_of
from sol_execbench.scoring.hardware import hardware_model
from sol_execbench.scoring.score import ProblemInput, score_problems

from .discovery import DatasetProblem, DatasetUsageError, is_problem_folder
from .execution import now_iso
from .options import RunOptions
from .records import sha256_bytes

DERIVATION_FILE = "derivation.json"
BOUND_FILE = "bound.json"


@dataclass(frozen=True)
class DerivedOutputs:
    """What the derived phase wrote."""

    score_report: ScoreReport | None
    written: tuple[Path, ...]


def load_scoring_baseline(path: Path) -> tuple[ScoringBaseline, bytes]:
    """The ``--scoring-baseline`` file; DatasetUsageError naming the file and field otherwise."""
    try:
        data = path.read_bytes()
        return ScoringBaseline.model_validate_json(data), data
    except OSError as exc:
        raise DatasetUsageError(f"--scoring-baseline {path}: cannot be read ({exc.strerror or exc}); give a JSON "
                                "file") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "(the document)"
        raise DatasetUsageError(f"--scoring-baseline {path}: {field}: {error['msg']}; see the scoring_baseline format "
                                "in docs/scoring.md") from None


def check_baseline_problems(baseline: ScoringBaseline, path: Path, root: Path) -> None:
    """Every key names a problem below the root (a baseline may cover more than the run selects)."""
    def known(key: str) -> bool:  # a root that is itself a problem is named by its folder's name
        return is_problem_folder(root / key) or (key == root.name and is_problem_folder(root))

    unknown = sorted(key for key in baseline.latency_ms if not known(key))
    if unknown:
        raise DatasetUsageError(f"--scoring-baseline {path}: latency_ms.{unknown[0]}: no such problem below the "
                                f"dataset root ({len(unknown)} key(s) unknown); key the times by problem path, "
                                "e.g. 'L1/rmsnorm'")


def _traces(output: Path, problem: DatasetProblem) -> list[Trace] | None:
    path = traces_file(output / problem.key)
    if path is None:
        return None
    try:
        return read_traces(path)
    except (OSError, ValueError) as exc:
        raise DatasetUsageError(f"{exc}; rerun the problem (--rerun) or remove the file") from None


def scoring_part(hardware: str | None, traces: list[list[Trace] | None]) -> tuple[PartPeaks, str]:
    """The part T_SOL is priced on: ``--hardware``, else the first GPU the traces name."""
    if hardware is not None:
        try:
            return peaks_for(hardware), hardware
        except UnknownPartError as exc:
            raise DatasetUsageError(f"--hardware: {exc}") from None
    seen = []
    for trace in (t for group in traces if group for t in group):
        name = hardware_of(trace)
        if name and name not in seen:
            seen.append(name)
            try:
                return peaks_for(name), name
            except UnknownPartError:
                continue
    raise DatasetUsageError(f"--amd-score-report: the traces name no part of the peak table (seen: "
                            f"{', '.join(seen[:3]) or 'none'}); pass --hardware NAME (one of {', '.join(known_parts())})")


def _derive(problem: DatasetProblem) -> tuple[ProblemDerivation | None, str | None]:
    from sol_execbench.scoring.bound import BoundInputError, derive_problem

    try:
        return derive_problem(problem.folder, problem.key), None
    except BoundInputError as exc:
        return None, f"no bound: {exc}"


def _baseline_source(options: RunOptions) -> tuple[ScoringBaseline | None, ScoreBaselineSource]:
    if options.scoring_baseline is None:
        return None, ScoreBaselineSource(kind="reference")
    baseline, data = load_scoring_baseline(options.scoring_baseline)
    return baseline, ScoreBaselineSource(kind="file", path=str(options.scoring_baseline), sha256=sha256_bytes(data),
                                         description=baseline.description)


def _report(root: Path, output: Path, problems: list[DatasetProblem], traces: list[list[Trace] | None],
            derived: list[tuple[ProblemDerivation | None, str | None]], part: tuple[PartPeaks, str],
            baseline: ScoringBaseline | None, source: ScoreBaselineSource) -> tuple[ScoreReport, list[ProblemBound | None]]:
    from sol_execbench.scoring.bound import price_problem

    bounds = [price_problem(derivation, *part) if derivation is not None else None for derivation, _ in derived]
    inputs = [ProblemInput(p.key, p.category, d.definition if d else None, t, b, error)
              for p, t, (d, error), b in zip(problems, traces, derived, bounds)]
    scores = score_problems(inputs, baseline)
    report = ScoreReport(root=str(root), output=str(output), created_at=now_iso(), hardware=hardware_model(*part),
                         baseline=source, totals=scores.totals, categories=scores.categories, problems=scores.problems,
                         flags=scores.flags)
    return report, bounds


def score_run(root: Path, output: Path, problems: list[DatasetProblem], hardware: str | None) -> ScoreReport:
    """The scores of a run's traces against the reference's latency, written nowhere."""
    traces = [_traces(output, p) for p in problems]
    part = scoring_part(hardware, traces)
    return _report(root, output, problems, traces, [_derive(p) for p in problems], part, None,
                   ScoreBaselineSource(kind="reference"))[0]


def derive_outputs(options: RunOptions, root: Path, output: Path, problems: list[DatasetProblem]) -> DerivedOutputs:
    """Write the derived outputs the options ask for, from the traces below ``output``."""
    if options.amd_score_report is None and options.solar_derivation is None:
        return DerivedOutputs(None, ())
    traces = [_traces(output, p) for p in problems]
    baseline, source = _baseline_source(options)
    if baseline is not None:
        check_baseline_problems(baseline, options.scoring_baseline, root)
    part = scoring_part(options.hardware, traces) if options.amd_score_report is not None else None
    derived = [_derive(p) for p in problems]
    written: list[Path] = []
    if options.solar_derivation is not None:
        written += [replace_json(options.solar_derivation / p.key / DERIVATION_FILE, d)
                    for p, (d, _) in zip(problems, derived) if d is not None]
    if part is None:
        return DerivedOutputs(None, tuple(written))
    report, bounds = _report(root, output, problems, traces, derived, part, baseline, source)
    if options.amd_sol_bound_dir is not None:
        written += [replace_json(options.amd_sol_bound_dir / p.key / BOUND_FILE, b)
                    for p, b in zip(problems, bounds) if b is not None]
    written.append(replace_json(options.amd_score_report, report))
    return DerivedOutputs(report, tuple(written))
