"""What every bench figure shares: a headless matplotlib, byte-size tick labels, saving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import BenchUsageError


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError:
        raise BenchUsageError("matplotlib is not installed: pip install 'sol-execbench[plot]' (or matplotlib) to "
                              "draw the figures") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def missing_matplotlib() -> str | None:
    """Why figures cannot be drawn here, or None: a sweep on a machine without matplotlib still
    writes its JSON, and ``--reuse`` draws the figures elsewhere."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed: figures not drawn; run the same command with --reuse where it is"
    return None


def size_label(size: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{size:.0f} B"


def byte_axis(ax: Any) -> None:
    """A log2 x axis of message sizes labelled B / KiB / MiB / GiB."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: size_label(value)))
    ax.tick_params(axis="x", labelrotation=45)


def save(fig: Any, path: Path, rect: tuple[float, float, float, float] | None = None) -> Path:
    """Lay out (within ``rect`` of the figure, where given), write and close ``fig``."""
    plt = pyplot()
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
