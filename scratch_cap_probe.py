"""Experiment (not committed): what moves a GEMM's median between runs, and what a clock probe sees."""
import json, os, statistics, sys, time
sys.path.insert(0, "src")
import torch
from torch.profiler import ProfilerActivity, profile, record_function
from sol_execbench.evaluate.clock_watch import device_uuid
from sol_execbench.evaluate.timing import FreshArgs, L2Flusher, time_calls
from sol_execbench.platform import current
from sol_execbench.platform.clocks import ClockReader, capped_between
import pynvml

out = os.environ.get("OUT", "/tmp")
dev = current()
reader = ClockReader(dev.vendor, dev.index, device_uuid(dev))
report = {}

def nv(r):
    return {"sm": r.sm_mhz, "reasons": r.throttle_reasons, "power": r.power_w, "temp": r.temperature_c}

# 1. clock samples API
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByUUID("GPU-" + str(torch.cuda.get_device_properties(0).uuid).removeprefix("GPU-"))
def samples(last):
    try:
        kind, s = pynvml.nvmlDeviceGetSamples(h, pynvml.NVML_GRAPHICS_CLOCK_SAMPLES, last)
        return [(x.timeStamp, x.sampleValue.uiVal) for x in s]
    except Exception as exc:
        return str(exc)

# 2. sleep calibration: CUPTI duration of _sleep(C) against C
def sleep_durations(cs, reps=20):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for c in cs:
            for _ in range(reps):
                torch.cuda._sleep(c)
        torch.cuda.synchronize()
    ks = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    durs = [e.device_time for e in ks]  # us
    res = {}
    for i, c in enumerate(cs):
        res[c] = statistics.median(durs[i * reps:(i + 1) * reps])
    return res
a = torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16); b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(50): a @ b
torch.cuda.synchronize()
cal = sleep_durations([0, 5000, 20000, 40000])
report["sleep_cal_us"] = cal
print("sleep calibration (cycles -> us):", cal, "slope MHz:", (40000 - 5000) / (cal[40000] - cal[5000]), nv(reader.read()))

# 3. runs of the harness device method, NVML around each, GEMM and GEMM+ReLU
cases = {"gemm_8192x4096x4096": (lambda x, y: x @ y, [a, b]),
         "gemm_relu_4096": (lambda x, y: torch.relu(x @ y), [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16),
                                                            torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)])}
flusher = L2Flusher(dev)
last_ts = 0
for name, (fn, vals) in cases.items():
    rows = []
    for run in range(12):
        r0 = reader.read(); t0 = time.time()
        m = time_calls(fn, FreshArgs([vals], slots=61), warmup=10, iterations=50, device=dev, flusher=flusher, method="device")
        r1 = reader.read(); t1 = time.time()
        capped, _ = capped_between(r0, r1)
        st = m.stats()
        s = samples(last_ts)
        if isinstance(s, list) and s:
            last_ts = s[-1][0]
        rows.append({"run": run, "median_us": st.median_ms * 1e3, "min_us": min(m.device_ms) * 1e3 if getattr(m, "device_ms", None) else None,
                     "wall_s": t1 - t0, "capped_ms": capped, "before": nv(r0), "after": nv(r1),
                     "clock_samples": s if isinstance(s, str) else [v for _, v in s][-20:],
                     "n_samples": None if isinstance(s, str) else len(s),
                     "sample_dt_ms": None if isinstance(s, str) or len(s) < 2 else (s[-1][0] - s[0][0]) / 1e3 / (len(s) - 1)})
        print(name, run, f"{st.median_ms*1e3:.1f}us", {k: round(v, 2) if v else v for k, v in capped.items()},
              nv(r1), rows[-1]["n_samples"], rows[-1]["sample_dt_ms"], flush=True)
    report[name] = rows

# 4. per-call clock probe: profiler loop, flush, call, sleep(20000) probe, no sync between calls except a join
def probe_loop(fn, vals, calls=50, probe=20000):
    for _ in range(10): fn(*vals)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for i in range(calls):
            flusher.flush()
            with record_function(f"call#{i}"):
                fn(*vals)
            torch.cuda._sleep(probe)
            torch.cuda.synchronize()
    ks = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    # group: sleep kernels delimit calls
    per, cur = [], []
    for e in ks:
        if "spin" in e.name or "sleep" in e.name.lower():
            per.append((sum(x.device_time for x in cur if "reduce_kernel" not in x.name), e.device_time, [x.name[:40] for x in cur]))
            cur = []
        else:
            cur.append(e)
    return per
for name, (fn, vals) in cases.items():
    rows = []
    for run in range(4):
        per = probe_loop(fn, vals)
        # first kernel(s) of cur include the flush kernels; take last kernel(s) as the call (gemm name)
        call_us = [c for c, _, _ in per]
        probes = [p for _, p, _ in per]
        mhz = [(20000 - 0) / (p - cal[0]) for p in probes]
        rows.append({"probe_us": probes, "mhz": mhz, "call_us": call_us, "names": per[0][2] if per else None})
        print(name, "probe run", run, "MHz median", round(statistics.median(mhz)), "min", round(min(mhz)), "max", round(max(mhz)),
              "call median", round(statistics.median(call_us), 1), "min", round(min(call_us), 1), "max", round(max(call_us), 1), per[0][2] if per else None, flush=True)
        pairs = sorted(zip(mhz, call_us))
        print("   slowest-clock calls:", [(round(f), round(c, 1)) for f, c in pairs[:5]], "fastest:", [(round(f), round(c, 1)) for f, c in pairs[-3:]], flush=True)
    report[name + "_probe"] = rows

# 5. tiny kernels back to back in a graph: per-kernel amortised time
def graph_amortised(fn, vals, n=500):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3): fn(*vals)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n): fn(*vals)
    g.replay(); torch.cuda.synchronize()
    times = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / n)
    return statistics.median(times)
tiny = {"empty": (lambda: torch.cuda._sleep(0), []),
        "add_4k": (lambda x, y: x + y, [torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")]),
        "add_1m": (lambda x, y: x + y, [torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")]),
        "softmax_64x8192": (lambda x: torch.softmax(x, -1), [torch.randn(64, 8192, device="cuda")])}
report["graph_amortised_us"] = {}
for name, (fn, vals) in tiny.items():
    v = graph_amortised(fn, vals)
    report["graph_amortised_us"][name] = v
    print("graph amortised", name, f"{v:.2f} us")
json.dump(report, open(f"{out}/cap_probe.json", "w"), indent=1, default=str)
