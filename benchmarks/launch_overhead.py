"""Host span of one call, with and without the profiler the device method runs (GPU).

    python benchmarks/launch_overhead.py [--out launch_overhead.json] [--cases add_4k,rmsnorm_4096x4096]

For a few fidelity cases (benchmarks/fidelity.py): per call, the wall-clock span from the call's
start until the device finished (cold L2, synchronised before), median of 50 calls, once with no
profiler and once inside a ``torch.profiler`` session with CPU and CUDA activities, the way the
device method measures. Also the same for the measuring bracket alone (a one-element add). The
difference is what the profiler adds to a call's host span, which the host-bound rule must not
mistake for host work (docs/timing.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from sol_execbench.evaluate.host_recheck import timed_call  # noqa: E402
from sol_execbench.evaluate.timing import L2Flusher  # noqa: E402
from sol_execbench.platform import current  # noqa: E402


def _fidelity_cases():
    spec = importlib.util.spec_from_file_location("fidelity_bench", REPO / "benchmarks" / "fidelity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.CASES


def host_spans(fn, values, flusher: L2Flusher, calls: int = 50) -> float:
    """Median wall-clock us from a call's start until the device finished it."""
    device = current()
    return statistics.median(timed_call(fn, values, flusher, device)[1].wall_ms * 1e3 for _ in range(calls))


def measure(fn, values, flusher: L2Flusher) -> dict[str, float]:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):
        fn(*values)
    torch.cuda.synchronize()
    plain = host_spans(fn, values, flusher)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        profiled = host_spans(fn, values, flusher)
    return {"plain_us": round(plain, 2), "profiled_us": round(profiled, 2), "added_us": round(profiled - plain, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", default="add_4k,gemm_256x4096x4096,rmsnorm_4096x4096,softmax_4096x8192")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("launch_overhead.py needs a GPU", file=sys.stderr)
        return 2
    flusher = L2Flusher(current())
    cases = _fidelity_cases()
    x, out = torch.zeros(1, device="cuda"), torch.empty(1, device="cuda")
    rows = {"bracket (one-element add)": measure(lambda: torch.add(x, 1.0, out=out), [], flusher)}
    for name in args.cases.split(","):
        fn, values = cases[name][1]()
        rows[name] = measure(fn, values, flusher)
    print(f"{'call':32s} {'no profiler us':>15s} {'profiled us':>12s} {'added us':>9s}")
    for name, row in rows.items():
        print(f"{name:32s} {row['plain_us']:15.1f} {row['profiled_us']:12.1f} {row['added_us']:9.1f}")
    if args.out:
        args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                        "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
