"""Experiment (not committed): does a heavy burst just before a timed loop slow it, for how long; graph differential for tiny kernels."""
import json, os, statistics, sys, time
sys.path.insert(0, "src")
import torch, triton.testing
from sol_execbench.evaluate.clock_watch import device_uuid
from sol_execbench.evaluate.timing import FreshArgs, L2Flusher, time_calls
from sol_execbench.platform import current
from sol_execbench.platform.clocks import ClockReader, capped_between
out = os.environ.get("OUT", "/tmp")
dev = current(); reader = ClockReader(dev.vendor, dev.index, device_uuid(dev)); flusher = L2Flusher(dev)
report = {"burst": []}
a = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16); b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
a2 = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
cases = {"gemm_8192x4096x4096": (lambda x, y: x @ y, [a, b]), "gemm_relu_4096": (lambda x, y: torch.relu(x @ y), [a2, b])}
def run(fn, vals):
    m = time_calls(fn, FreshArgs([vals], slots=61), warmup=10, iterations=50, device=dev, flusher=flusher, method="device")
    return m.stats().median_ms * 1e3
for name, (fn, vals) in cases.items():
    for _ in range(3): run(fn, vals)
    for burst in ("none", "do_bench", "do_bench_long"):
        for delay in (0.0, 0.3, 1.0, 3.0):
            if burst == "none" and delay > 0: continue
            meds = []
            for rep in range(3):
                if burst == "do_bench":
                    triton.testing.do_bench(lambda: fn(*vals), warmup=25, rep=100)
                elif burst == "do_bench_long":
                    triton.testing.do_bench(lambda: fn(*vals), warmup=25, rep=1000)
                time.sleep(delay)
                r0 = reader.read()
                med = run(fn, vals)
                r1 = reader.read()
                cap, _ = capped_between(r0, r1)
                meds.append(med)
                report["burst"].append({"case": name, "burst": burst, "delay": delay, "median_us": med, "sm_before": r0.sm_mhz,
                                        "reasons_before": r0.throttle_reasons, "sm_after": r1.sm_mhz, "power_before": r0.power_w,
                                        "capped_ms": cap.get("power")})
                print(name, burst, delay, f"{med:.1f}", "sm", r0.sm_mhz, r0.throttle_reasons, "->", r1.sm_mhz, "W", r0.power_w, "capped", cap.get("power"), flush=True)
# graph differential: n x (flush + kernel) minus n x flush, timed by events
def graph_time(body, n=100, reps=5):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3): body()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n): body()
    g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3 / n)
    return statistics.median(ts)
tiny = {"empty": (lambda: torch.cuda._sleep(0), []),
        "add_4k": (lambda x, y: x + y, [torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")]),
        "add_1m": (lambda x, y: x + y, [torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")]),
        "softmax_64x8192": (lambda x: torch.softmax(x, -1), [torch.randn(64, 8192, device="cuda")]),
        "gemm_256x4096x4096": (lambda x, y: x @ y, [torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16), b])}
report["graph"] = {}
for name, (fn, vals) in tiny.items():
    flush_only = graph_time(lambda: flusher.flush())
    both = graph_time(lambda: (flusher.flush(), fn(*vals)))
    warm = graph_time(lambda: fn(*vals), n=500)
    report["graph"][name] = {"flush_us": flush_only, "flush_plus_kernel_us": both, "differential_us": both - flush_only, "warm_back_to_back_us": warm}
    print("graph", name, f"flush {flush_only:.2f} both {both:.2f} differential {both - flush_only:.2f} warm b2b {warm:.2f}", flush=True)
json.dump(report, open(f"{out}/burst.json", "w"), indent=1, default=str)
