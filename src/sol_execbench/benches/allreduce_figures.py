"""The all-reduce figures, drawn from an ``AllreduceSweep`` alone: latency and bus bandwidth per GPU count
(with the datasheet link bandwidth per direction, dashed), the buffer kinds (and their CSV), the
alpha-beta model against the measurements, the topology. Each buffer kind and placement keeps one
colour; its graph launch is drawn dashed with square markers beside the eager line."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from sol_execbench.schema.benches import AllreduceMeasurement, AllreduceSweep

from .allreduce_metrics import configuration, configuration_label
from .figures import byte_axis, pyplot, save

BUFFER_KINDS_CSV = "buffer_kinds.csv"
LAUNCH_STYLE = {"eager": {"linestyle": "-", "marker": "."}, "graph": {"linestyle": "--", "marker": "s", "markersize": 3}}
LEGEND_COLUMNS = 4


def _series(measurements: list[AllreduceMeasurement]) -> dict[tuple, list[AllreduceMeasurement]]:
    series: dict[tuple, list[AllreduceMeasurement]] = {}
    for m in sorted(measurements, key=lambda m: (configuration(m), m.bytes)):
        series.setdefault(configuration(m), []).append(m)
    return series


def _plot(ax, points: list[AllreduceMeasurement], values: list[float], colours: dict) -> None:  # noqa: ANN001
    """One series: the kind and placement's colour (shared by both launches), the launch's style."""
    first = points[0]
    colour = colours.setdefault((first.buffer_kind, first.placement), f"C{len(colours) % 10}")
    ax.plot([p.bytes for p in points], values, color=colour, label=configuration_label(first).replace("_", "-"),
            **LAUNCH_STYLE[first.launch])


def _latency(sweep: AllreduceSweep, ranks: int, output: Path) -> Path:
    plt = pyplot()
    series = _series([m for m in sweep.measurements if m.ranks == ranks])
    legend_inches = 0.2 * math.ceil((len(series) + 1) / LEGEND_COLUMNS) + 0.1
    height = 4.5 + legend_inches
    fig, (ax_time, ax_bw) = plt.subplots(1, 2, figsize=(12, height))
    time_colours: dict = {}
    bw_colours: dict = {}
    for points in series.values():
        _plot(ax_time, points, [p.time_us for p in points], time_colours)
        _plot(ax_bw, points, [p.busbw_gbps if ranks > 1 else p.algbw_gbps for p in points], bw_colours)
    for ax in (ax_time, ax_bw):
        byte_axis(ax)
        ax.grid(True, which="both", alpha=0.3)
    ax_time.set_yscale("log")
    ax_time.set_ylabel("time per call (us)")
    ax_bw.set_ylabel("busbw (GB/s)" if ranks > 1 else "algbw (GB/s); busbw is 0 for one rank")
    handles, labels = ax_time.get_legend_handles_labels()
    if ranks > 1 and sweep.link_datasheet_gbps is not None:  # a ring's busbw is each link's load per direction
        handles.append(ax_bw.axhline(sweep.link_datasheet_gbps, color="black", linestyle="--", linewidth=1))
        labels.append(f"datasheet link per direction ({sweep.link_datasheet_gbps:.0f} GB/s)")
    fig.suptitle(f"all-reduce, {ranks} rank(s), {sweep.backend} on {sweep.device_name}")
    # One legend below both panels: inside either one it covered the small-size curves.
    fig.legend(handles, labels, loc="lower center", ncol=LEGEND_COLUMNS, fontsize=7, frameon=False)
    return save(fig, output / f"latency_{ranks}ranks.png", rect=(0, legend_inches / height, 1, 1))


def _buffer_kinds(sweep: AllreduceSweep, output: Path) -> list[Path]:
    ranks = max(m.ranks for m in sweep.measurements)
    chosen = [m for m in sweep.measurements if m.ranks == ranks]
    with open(output / BUFFER_KINDS_CSV, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(("ranks", "buffer_kind", "placement", "launch", "bytes", "time_us", "busbw_gbps"))
        for m in sorted(chosen, key=lambda m: (configuration(m), m.bytes)):
            writer.writerow((m.ranks, m.buffer_kind, m.placement, m.launch, m.bytes, f"{m.time_us:.6g}",
                             f"{m.busbw_gbps:.6g}"))
        for s in sweep.skipped:
            if s.ranks == ranks:
                writer.writerow((s.ranks, s.buffer_kind, "skipped", s.launch or "every", "", "", s.reason))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    colours: dict = {}
    for points in _series(chosen).values():
        _plot(ax, points, [p.time_us for p in points], colours)
    byte_axis(ax)
    ax.set_yscale("log")
    ax.set_ylabel("time per call (us)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    skipped = sorted({s.buffer_kind + (f" ({s.launch})" if s.launch else "") for s in sweep.skipped
                      if s.ranks == ranks})
    ax.set_title(f"buffer kinds, {ranks} rank(s)" + (f"; skipped: {', '.join(skipped)} (reasons in "
                                                    f"{BUFFER_KINDS_CSV})" if skipped else ""), fontsize=9)
    return [output / BUFFER_KINDS_CSV, save(fig, output / "buffer_kinds.png")]


def _model(sweep: AllreduceSweep, output: Path) -> Path:
    plt = pyplot()
    fig, (ax_fit, ax_err) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for fit in sweep.fits:
        beta = f"{fit.beta_gbps:.1f} GB/s" if fit.beta_gbps is not None else "none"
        label = f"{fit.ranks}r {configuration_label(fit).replace('_', '-')}: alpha {fit.alpha_us:.1f} us, beta {beta}"
        sizes = [p.bytes for p in fit.points]
        style = "--" if fit.launch == "graph" else "-"
        line = ax_fit.plot(sizes, [p.measured_us for p in fit.points], "s" if fit.launch == "graph" else "o",
                           markersize=3)[0]
        ax_fit.plot(sizes, [p.model_us for p in fit.points], style, color=line.get_color(), label=label)
        ax_err.plot(sizes, [100 * p.relative_error for p in fit.points], "." + style, color=line.get_color())
    ax_fit.set_xscale("log", base=2)
    byte_axis(ax_err)  # after the shared axis's scale, which would reset the labels
    ax_fit.set_yscale("log")
    ax_fit.set_ylabel("time per call (us)")
    ax_fit.set_title("points: measured; lines: alpha + bytes / beta (dashed: graph launch)", fontsize=9)
    ax_err.set_ylabel("model error (%)")
    ax_err.axhline(0, color="black", linewidth=0.5)
    for ax in (ax_fit, ax_err):
        ax.grid(True, which="both", alpha=0.3)
    ax_fit.legend(fontsize=6)
    return save(fig, output / "model_fit.png")


def _topology(sweep: AllreduceSweep, output: Path) -> Path:
    plt = pyplot()
    topo = sweep.topology
    n = len(topo.devices)
    fig, ax = plt.subplots(figsize=(max(4, 1 + 0.9 * n), max(3, 0.8 + 0.7 * n)))
    if n == 0:
        ax.axis("off")
        ax.text(0.5, 0.5, f"no topology read:\n{topo.reason or 'no source answered'}", ha="center", va="center",
                wrap=True, fontsize=9)
    else:
        names = sorted({link for row in topo.links for link in row})
        codes = [[names.index(link) for link in row] for row in topo.links]
        ax.imshow(codes, cmap="tab20", vmin=0, vmax=max(len(names) - 1, 1))
        for i, row in enumerate(topo.links):
            for j, link in enumerate(row):
                ax.text(j, i, link, ha="center", va="center", fontsize=8)
        ax.set_xticks(range(n), topo.devices)
        ax.set_yticks(range(n), topo.devices)
        ax.set_title(f"GPU links ({topo.source})", fontsize=9)
    return save(fig, output / "topology.png")


def render_allreduce(sweep: AllreduceSweep, output: Path) -> list[Path]:
    """Every figure of the sweep into ``output``; returns the files written."""
    written = [_topology(sweep, output)]
    if sweep.measurements:
        written += [_latency(sweep, ranks, output) for ranks in sorted({m.ranks for m in sweep.measurements})]
        written += _buffer_kinds(sweep, output)
    if sweep.fits:
        written.append(_model(sweep, output))
    return written
