"""Host span of one call, with and without the profiler the device method runs (GPU).

    python benchmarks/launch_overhead.py [--out launch_overhead.json] [--cases add_4k,rmsnorm_4096x4096]

For a few fidelity cases (benchmarks/fidelity.py): per call, the wall-clock span from the call's
start until the device finished (cold L2, synchronised before), median of 50 calls: with no
profiler; inside a ``torch.profiler`` session with CPU and CUDA activities; inside the device
method's profiler ranges too (the flush in a setup range and waited for, as the method's loop did
until the fifth session, the call in a call range); and those
with the idle gap after each call that the device method leaves (``timing.cooldown``), asleep or
spinning. Also the same for the measuring bracket alone (a one-element add). The differences are
what the measuring adds to a call's host span, which the host-bound rule must not mistake for
host work (docs/timing.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from sol_execbench.evaluate.host_recheck import timed_call  # noqa: E402
from sol_execbench.evaluate.timing import L2Flusher  # noqa: E402
from sol_execbench.evaluate.timing_methods.base import CALL_RANGE, SETUP_RANGE, synchronize  # noqa: E402
from sol_execbench.platform import current  # noqa: E402


def _fidelity_cases():
    spec = importlib.util.spec_from_file_location("fidelity_bench", REPO / "benchmarks" / "fidelity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.CASES


def _idle(kind: str, seconds: float) -> None:
    """The device method's gap after a call: asleep (what ``_cool_down`` did), or spinning on the
    clock, so the thread stays on its core."""
    if kind == "sleep":
        time.sleep(seconds)
    elif kind == "spin":
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass


def host_spans(fn, values, flusher: L2Flusher, calls: int = 50, ranged: bool = False, idle: str = "none") -> float:
    """Median wall-clock us from a call's start until the device finished it. ``ranged``: the flush
    and the call inside the device method's profiler ranges; ``idle``: after each call, idle as long
    as it took (``none``, ``sleep`` or ``spin``)."""
    from torch.profiler import record_function

    device = current()
    spans = []
    for i in range(calls):
        if ranged:
            with record_function(SETUP_RANGE):
                flusher.flush()
            synchronize(device)
            began = time.perf_counter_ns()
            with record_function(f"{CALL_RANGE}#{i}"):
                fn(*values)
            synchronize(device)
            spans.append((time.perf_counter_ns() - began) / 1e3)
        else:
            spans.append(timed_call(fn, values, flusher, device)[1].wall_ms * 1e3)
        _idle(idle, spans[-1] / 1e6)
    return statistics.median(spans)


VARIANTS = ("plain", "profiled", "ranged", "ranged_sleep", "ranged_spin")


def measure(fn, values, flusher: L2Flusher) -> dict[str, float]:
    """Median host span (us) per variant: no profiler; under the profiler as is; inside the device
    method's ranges; and those with the idle gap after each call, asleep or spinning."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):
        fn(*values)
    torch.cuda.synchronize()
    row = {"plain": host_spans(fn, values, flusher)}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        row["profiled"] = host_spans(fn, values, flusher)
        row["ranged"] = host_spans(fn, values, flusher, ranged=True)
        row["ranged_sleep"] = host_spans(fn, values, flusher, ranged=True, idle="sleep")
        row["ranged_spin"] = host_spans(fn, values, flusher, ranged=True, idle="spin")
    return {name: round(value, 2) for name, value in row.items()}


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
    print(f"{'call (host span, us)':32s} " + " ".join(f"{v:>12s}" for v in VARIANTS))
    for name, row in rows.items():
        print(f"{name:32s} " + " ".join(f"{row[v]:12.1f}" for v in VARIANTS))
    if args.out:
        args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                        "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
