"""Host span of one call, with and without the profiler the device pass runs (GPU).

    python benchmarks/launch_overhead.py [--out launch_overhead.json] [--cases add_4k,eager_rmsnorm_7x4096]

For a few fidelity cases (benchmarks/fidelity_cases.py): per call, L2 flushed, then the wall-clock
span from the call's start until the device finished (``timing.unprofiled.host_span_ms``, the host
pass's own measurement), median of 50 calls, in four variants: no profiler (as the host pass runs);
inside a ``torch.profiler`` session with CPU and CUDA activities; inside that session and the
device pass's ranges (the flush in a setup range, the call in a call range); and that with the
cooldown after each call (``timing.cooldown``). Beside them, the synchronisation floor the host
pass subtracts. The differences are what a profiler adds to a call's host span: why the host time
is taken from the unprofiled pass.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from contextlib import nullcontext
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from sol_execbench.evaluate.child.timing import L2Flusher  # noqa: E402
from sol_execbench.evaluate.child.timing.calls import CALL_RANGE, SETUP_RANGE  # noqa: E402
from sol_execbench.evaluate.child.timing.profiled import Cooldown  # noqa: E402
from sol_execbench.evaluate.child.timing.unprofiled import host_span_ms, sync_floor_ms  # noqa: E402
from sol_execbench.platform import current  # noqa: E402
from sol_execbench.schema import TimingConfig  # noqa: E402

VARIANTS = ("plain", "profiled", "ranged", "ranged_cooldown")


def _fidelity_cases():
    """fidelity_cases.CASES (imported here: it builds CUDA tensors only when a case is built)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from fidelity_cases import CASES

    return CASES


def host_spans(fn, values, flusher: L2Flusher, calls: int = 50, ranged: bool = False, cooldown: float = 0.0) -> float:
    """Median wall-clock us from a call's start until the device finished it. ``ranged``: the flush
    and the call inside the device pass's profiler ranges; ``cooldown``: idle after each call for
    that many times the host's wait for the device, as the passes do."""
    from torch.profiler import record_function

    device = current()
    spans = []
    idle = Cooldown(cooldown)
    for i in range(calls):
        idle.before_call()
        with record_function(SETUP_RANGE) if ranged else nullcontext():
            flusher.flush()

        def call(i: int = i) -> None:
            with record_function(f"{CALL_RANGE}#{i}") if ranged else nullcontext():
                fn(*values)

        _, span_ms, waited_ms = host_span_ms(device, call)
        spans.append(span_ms * 1e3)
        idle.after_call(waited_ms)
    return statistics.median(spans)


def measure(fn, values, flusher: L2Flusher) -> dict[str, float]:
    """Median host span (us) per variant."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):
        fn(*values)
    torch.cuda.synchronize()
    row = {"plain": host_spans(fn, values, flusher)}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        row["profiled"] = host_spans(fn, values, flusher)
        row["ranged"] = host_spans(fn, values, flusher, ranged=True)
        row["ranged_cooldown"] = host_spans(fn, values, flusher, ranged=True, cooldown=TimingConfig().cooldown)
    return {name: round(value, 2) for name, value in row.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cases", default="add_4k,eager_rmsnorm_7x4096,gemm_256x4096x4096,rmsnorm_4096x4096")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("launch_overhead.py needs a GPU", file=sys.stderr)
        return 2
    device = current()
    flusher = L2Flusher(device)
    cases = _fidelity_cases()
    floor_us = round(sync_floor_ms(device) * 1e3, 2)
    rows = {}
    for name in args.cases.split(","):
        fn, values = cases[name][1]()
        rows[name] = measure(fn, values, flusher)
    print(f"synchronisation floor (the host pass subtracts it): {floor_us:.1f} us")
    print(f"{'call (host span, us)':32s} " + " ".join(f"{v:>15s}" for v in VARIANTS))
    for name, row in rows.items():
        print(f"{name:32s} " + " ".join(f"{row[v]:15.1f}" for v in VARIANTS))
    if args.out:
        args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                        "sync_floor_us": floor_us, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
