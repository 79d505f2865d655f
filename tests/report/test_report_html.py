"""``sol-execbench report``: the page of a run in real headless Chromium (the DOM holds the tables,
the screenshot is not blank), the SOL columns from a score report or computed from the run's
summary, and the inputs it refuses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.schema.dataset_run import CategorySummary, DatasetSummary, ProblemSummary

from ..dataset.conftest import add_problem
from ..scoring.crafted import trace, write_traces

_register()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _run_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A dataset root and a run's output: crafted traces of two problems, one skipped, and a summary."""
    root = tmp_path / "suite"
    add_problem(root, "L1/add", sizes=(8, 16))
    add_problem(root, "L2/add", sizes=(8,))
    add_problem(root, "L2/skipped", sizes=(8,))
    out = tmp_path / "out"
    write_traces(out / "L1/add/traces.jsonl", [trace("vector_add", "w0-8", latency_ms=2.0, reference_ms=3.0),
                                               trace("vector_add", "w1-16", latency_ms=1.0, reference_ms=3.0)])
    write_traces(out / "L2/add/traces.json", [trace("vector_add", "w0-8", status="INCORRECT_NUMERICAL")])
    totals = CategorySummary(category="", problems=3, problems_passed=1, workloads=3)
    problems = [ProblemSummary(problem="L1/add", category="L1", definition="vector_add", outcome="evaluated"),
                ProblemSummary(problem="L2/add", category="L2", definition="vector_add", outcome="evaluated"),
                ProblemSummary(problem="L2/skipped", category="L2", definition="vector_add", outcome="skipped",
                               note="no solution.py")]
    summary = DatasetSummary(root=str(root), output=str(out), started_at="t", finished_at="t", wall_s=1.0,
                             totals=totals, problems=problems)
    (out / "summary.json").write_text(summary.model_dump_json())
    return root, out


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"
    return subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                           *args], capture_output=True, timeout=120, cwd=tmp_path)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (scripts/setup.sh installs Debian's package)")
def test_the_page_in_headless_chromium_holds_the_tables_and_draws(tmp_path: Path):
    import matplotlib.image

    _root, out = _run_dir(tmp_path)
    page = tmp_path / "report.html"
    done = CliRunner().invoke(cli, ["report", str(out), "-o", str(page), "--hardware", "H100"])
    assert done.exit_code == 0, done.output
    text = page.read_text()
    assert "<script" not in text and "http" not in text.split("<body>")[1]  # self-contained
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    dom_text = dom.stdout.decode()
    for needle in ('id="categories"', 'id="problems"', 'id="flags"', "L1/add", "L2/add", "L2/skipped",
                   "INCORRECT_NUMERICAL", "no solution.py", "NVIDIA H100", 'id="fig-latency-vs-sol"',
                   'id="fig-speedup"', 'id="fig-sol-fraction"', "bound_far_from_reference"):
        assert needle in dom_text, needle
    shot = tmp_path / "shot.png"
    done = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1000,1400", page.as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = matplotlib.image.imread(shot)
    assert pixels.std() > 0.05 and (pixels[..., :3].min(axis=2) < 0.5).mean() > 0.005  # drawn, not a blank page


def test_scores_from_a_score_report_and_the_inputs_it_refuses(tmp_path: Path):
    root, out = _run_dir(tmp_path)
    scores = tmp_path / "score.json"
    derived = CliRunner().invoke(cli, ["dataset", "run", str(root), "-o", str(out), "--phase", "derived",
                                       "--amd-score-report", str(scores), "--hardware", "MI300X"])
    assert derived.exit_code == 0, derived.output
    done = CliRunner().invoke(cli, ["report", str(out), "--scores", str(scores)])
    assert done.exit_code == 0, done.output
    text = (out / "report.html").read_text()
    assert "AMD Instinct MI300X" in text and 'id="fig-latency-vs-sol"' in text
    (out / "summary.json").unlink()
    done = CliRunner().invoke(cli, ["report", str(out), "-o", str(tmp_path / "plain.html")])
    assert done.exit_code == 0 and "no SOL columns" in (tmp_path / "plain.html").read_text()
    (tmp_path / "bad.json").write_text('{"root": "x"}')
    for args, words in ((["report", str(tmp_path / "none")], ["none", "not a directory"]),
                        (["report", str(out), "--scores", str(tmp_path / "bad.json")], ["bad.json", "output"]),
                        (["report", str(out), "--hardware", "Radeon 7900"], ["--hardware", "known parts"]),
                        (["report", str(tmp_path / "suite")], ["no traces.jsonl"])):
        done = CliRunner().invoke(cli, args)
        lines = done.stderr.splitlines()
        assert done.exit_code == 2 and len(lines) == 1 and all(w in lines[0] for w in words), (args, done.output)
