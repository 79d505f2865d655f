"""The baselines' figure, drawn from the baseline files of one hardware folder alone: each problem's
time in every mode (eager and the compile modes), and each compile mode's compile time."""

from __future__ import annotations

from pathlib import Path

from sol_execbench.schema.benches import BaselineFile

from .errors import BenchUsageError
from .figures import pyplot, save

FIGURE = "baselines.png"


def baseline_files(folder: Path, test: bool) -> dict[str, BaselineFile]:
    """Mode label -> file, for the ``baseline_time_torch*.json`` of a hardware folder (``_test`` ones
    when ``test``)."""
    files = {}
    for path in sorted(folder.glob("baseline_time_torch*.json")):
        if path.stem.endswith("_test") != test:
            continue
        stem = path.stem.removesuffix("_test")
        label = "eager" if stem == "baseline_time_torch" else stem.removeprefix("baseline_time_torch_compile_")
        files[label] = BaselineFile.model_validate_json(path.read_bytes())
    return files


def render_baselines(files: dict[str, BaselineFile], title: str, output: Path) -> Path:
    plt = pyplot()
    problems = sorted({(level, name) for f in files.values() for level, entries in f.root.items() for name in entries})
    labels = [f"{level}/{name}" for level, name in problems]
    fig, (ax_time, ax_compile) = plt.subplots(2, 1, figsize=(max(8, 0.6 * len(problems) + 3), 8), squeeze=True)
    width = 0.8 / max(len(files), 1)
    for index, (mode, baseline) in enumerate(files.items()):
        xs = [i + (index - (len(files) - 1) / 2) * width for i in range(len(problems))]
        entries = [baseline.root.get(level, {}).get(name) for level, name in problems]
        ax_time.bar(xs, [e.mean if e is not None and e.mean else 0.0 for e in entries], width=width, label=mode,
                    color=f"C{index}")
        for x, entry in zip(xs, entries):
            if entry is not None and entry.mean is None:
                ax_time.text(x, 0, entry.status or "failed", rotation=90, fontsize=6, ha="center", va="bottom")
        if mode != "eager":
            ax_compile.bar(xs, [e.compile_s if e is not None and e.compile_s else 0.0 for e in entries], width=width,
                           label=mode, color=f"C{index}")
    for ax in (ax_time, ax_compile):
        ax.set_xticks(range(len(problems)), labels, rotation=30, ha="right", fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    ax_time.set_yscale("log")
    ax_time.set_ylabel("mean time (ms)")
    ax_compile.set_ylabel("first call, compiling (s)")
    ax_time.set_title(title, fontsize=9)
    return save(fig, output / FIGURE)


def render_folder(folder: Path, test: bool) -> Path:
    """The figure of a hardware folder's baseline files, written beside them."""
    files = baseline_files(folder, test)
    if not files:
        raise BenchUsageError(f"{folder}: no baseline_time_torch*{'_test' if test else ''}.json in it; run bench "
                              "baselines first or give --results/--hardware of a folder that has them")
    return render_baselines(files, f"PyTorch baselines on {folder.name} (the evaluator's timing)", folder)
