"""The report's figures: matplotlib (Agg) drawn to PNG, embedded as data URIs (no external file or script)."""

from __future__ import annotations

import base64
import io
import math


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure) -> str:  # noqa: ANN001 - a matplotlib Figure
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    _pyplot().close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def histogram(values: list[float], title: str, xlabel: str, log: bool) -> str:
    """A histogram of ``values`` (log-spaced bins where ``log``), as a PNG data URI."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6, 3.2))
    if log:
        low, high = min(values), max(values)
        if high <= low:
            low, high = low / 1.5, high * 1.5
        bins = [low * (high / low) ** (i / 30) for i in range(31)]
        axes.set_xscale("log")
    else:
        bins = 30
    axes.hist(values, bins=bins, color="#3b6ea5", edgecolor="white")
    axes.axvline(1.0, color="#b03a2e", linewidth=1)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("workloads")
    from matplotlib.ticker import MaxNLocator

    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    return _png(figure)


def latency_against_sol(points: list[tuple[float, float, bool]]) -> str:
    """Each workload's latency (y) against its T_SOL (x), log-log, with y = x: nothing may fall under
    it on datasheet ceilings. ``points``: (T_SOL ms, latency ms, flagged)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(6, 4.2))
    fine = [(x, y) for x, y, flagged in points if not flagged]
    flagged = [(x, y) for x, y, is_flagged in points if is_flagged]
    for group, colour, label in ((fine, "#3b6ea5", "workload"), (flagged, "#b03a2e", "flagged")):
        if group:
            axes.scatter([x for x, _ in group], [y for _, y in group], s=14, color=colour, label=label)
    every = [v for x, y, _ in points for v in (x, y) if v > 0]
    low, high = min(every), max(every)
    axes.plot([low, high], [low, high], color="black", linewidth=1, label="latency = T_SOL")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("T_SOL (ms, datasheet ceilings)")
    axes.set_ylabel("latency (ms)")
    axes.set_title(f"latency against T_SOL ({len(points)} workloads)")
    axes.legend(loc="upper left", fontsize="small")
    return _png(figure)


def finite_positive(values: list[float | None]) -> list[float]:
    return [v for v in values if v is not None and v > 0 and math.isfinite(v)]
