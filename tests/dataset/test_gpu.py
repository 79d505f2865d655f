"""On GPUs: the suite's references pass, and ``--gpu-jobs auto`` runs one evaluation per GPU at a
time (the run records' intervals on one device never overlap)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from sol_execbench.schema.dataset_run import DatasetSummary, RunRecord

from .conftest import SUITE, add_problem, build_suite, light_config, run_to_end


@pytest.mark.gpu
def test_gpu_jobs_auto_runs_one_evaluation_per_gpu(tmp_path: Path):
    import torch

    root = build_suite(tmp_path / "suite")
    keys = list(SUITE)
    for index in range(2 * torch.cuda.device_count()):
        keys.append(f"Extra/add{index}")
        add_problem(root, keys[-1], sizes=(1024, 4096))
    out = tmp_path / "out"
    result = run_to_end(tmp_path, root, out, light_config(tmp_path), "--gpu-jobs", "auto", "--device", "auto",
                        timeout=900)
    assert result.returncode == 0, result.stderr + result.stdout
    summary = DatasetSummary.model_validate_json((out / "summary.json").read_text())
    assert summary.totals.problems == summary.totals.problems_passed == len(keys)
    spans: dict[str, list[tuple[datetime, datetime]]] = {}
    for key in keys:
        record = RunRecord.model_validate_json((out / key / "run.json").read_text())
        spans.setdefault(record.device, []).append((datetime.fromisoformat(record.started_at),
                                                   datetime.fromisoformat(record.finished_at)))
    assert set(spans) == {f"cuda:{i}" for i in range(torch.cuda.device_count())}
    for device, intervals in spans.items():
        intervals.sort()
        assert all(end <= start for (_, end), (start, _) in zip(intervals, intervals[1:])), device
