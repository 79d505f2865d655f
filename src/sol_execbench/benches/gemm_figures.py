"""The GEMM sweep's three figures, drawn from a ``GemmSweep`` alone: TFLOP/s by shape per variant, the
fraction of the datasheet (and calibrated) peak, and a roofline with each point at its arithmetic
intensity."""

from __future__ import annotations

from pathlib import Path

from sol_execbench.schema.benches import GemmPoint, GemmSweep

from .figures import pyplot, save

TARGET_FRACTION = 0.7  # the line drawn on the fraction figure: a well-tuned large GEMM reaches it


def _grid(sweep: GemmSweep) -> tuple[list[str], list[str], list[str]]:
    dtypes = list(dict.fromkeys(p.dtype for p in sweep.points))
    shapes = list(dict.fromkeys(p.shape for p in sweep.points))
    variants = list(dict.fromkeys(p.variant for p in sweep.points))
    return dtypes, shapes, variants


def _bars(sweep: GemmSweep, value: str, ylabel: str, path: Path, line: dict[str, float] | None = None,
          markers: str | None = None) -> Path:
    """Bars of ``value`` per shape and variant, one panel per dtype; ``markers``: a second field drawn
    as points over the bars (the fraction of the calibrated peak)."""
    plt = pyplot()
    dtypes, shapes, variants = _grid(sweep)
    fig, axes = plt.subplots(len(dtypes) or 1, 1, figsize=(max(8, 1.1 * len(shapes)), 3.4 * max(len(dtypes), 1)),
                             squeeze=False)
    width = 0.8 / max(len(variants), 1)
    for ax, dtype in zip(axes[:, 0], dtypes or [""]):
        by_key: dict[tuple[str, str], GemmPoint] = {(p.shape, p.variant): p for p in sweep.points if p.dtype == dtype}
        for v_index, variant in enumerate(variants):
            xs = [i + (v_index - (len(variants) - 1) / 2) * width for i in range(len(shapes))]
            ys = [getattr(by_key.get((s, variant)), value, None) or 0.0 for s in shapes]
            ax.bar(xs, ys, width=width, label=variant)
            if markers:
                marked = [(x, getattr(by_key.get((s, variant)), markers, None)) for x, s in zip(xs, shapes)]
                marked = [(x, y) for x, y in marked if y is not None]
                if marked:
                    ax.plot(*zip(*marked), "kx", label="x: of the calibrated peak" if v_index == 0 else None)
            for x, s in zip(xs, shapes):
                point = by_key.get((s, variant))
                if point is not None and point.status != "PASSED":
                    ax.text(x, 0, point.status, rotation=90, fontsize=6, ha="center", va="bottom")
        if line and dtype in line:
            ax.axhline(line[dtype], color="black", linestyle="--", linewidth=1, label=f"{line[dtype]:.3g}")
        ax.set_xticks(range(len(shapes)), shapes, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{dtype} on {sweep.device_name}", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    return save(fig, path)


def _roofline(sweep: GemmSweep, path: Path) -> Path:
    import numpy as np

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    dtypes, _shapes, variants = _grid(sweep)
    markers = dict(zip(dtypes, "os^Dv"))
    passed = [p for p in sweep.points if p.tflops]
    intensities = [p.arithmetic_intensity for p in sweep.points] or [1.0, 1000.0]
    xs = np.logspace(np.log10(min(intensities) / 2), np.log10(max(intensities) * 2), 200)
    if sweep.memory_bandwidth_gbps:
        for dtype in dtypes:
            peak = sweep.datasheet_tflops.get(dtype)
            if peak:
                ax.plot(xs, np.minimum(peak, xs * sweep.memory_bandwidth_gbps / 1e3), "--", linewidth=1,
                        label=f"{dtype} roof: {peak:.0f} TFLOP/s, {sweep.memory_bandwidth_gbps:.0f} GB/s")
    colors = {v: f"C{i}" for i, v in enumerate(variants)}
    for p in passed:
        ax.scatter(p.arithmetic_intensity, p.tflops, color=colors[p.variant], marker=markers.get(p.dtype, "o"), s=22)
    for v in variants:
        ax.scatter([], [], color=colors[v], label=f"variant {v}")
    for d in dtypes:
        ax.scatter([], [], color="gray", marker=markers.get(d, "o"), label=f"dtype {d}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte: 2MNK over A, B, C moved once)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"roofline, {sweep.device_name}" + ("" if sweep.memory_bandwidth_gbps else " (no datasheet roof)"),
                 fontsize=9)
    return save(fig, path)


def render_gemm(sweep: GemmSweep, output: Path) -> list[Path]:
    written = [_bars(sweep, "tflops", "TFLOP/s", output / "gemm_tflops.png", sweep.datasheet_tflops)]
    if sweep.datasheet_tflops:
        written.append(_bars(sweep, "fraction_of_datasheet", "fraction of datasheet peak",
                             output / "gemm_fraction_of_peak.png",
                             {d: TARGET_FRACTION for d in sweep.datasheet_tflops}, markers="fraction_of_calibrated"))
    else:
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(6, 2))
        ax.axis("off")
        ax.text(0.5, 0.5, f"no datasheet peak for {sweep.device_name}: no fraction of peak", ha="center", va="center")
        written.append(save(fig, output / "gemm_fraction_of_peak.png"))
    written.append(_roofline(sweep, output / "gemm_roofline.png"))
    return written
