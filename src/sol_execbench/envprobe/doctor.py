"""``doctor --json``: can this host evaluate, and if not, why. Each check: status, detail, fix.

Statuses: ``ok``; ``warn`` (evaluation works, something is degraded or a feature is missing);
``fail`` (evaluation as asked for cannot work here). The whole report takes the worst status.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sol_execbench.platform import vendor_hint
from sol_execbench.platform.clocks import expected_locked_clocks

from . import nvidia, rocm_smi
from ._common import cache_dir, import_torch
from .nvml_parse import parse_reading
from .toolchain import detect_by_id

STATUS_ORDER = ("ok", "warn", "fail")


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str | None = None


def check_torch(torch: Any, torch_error: str | None, hint: str) -> list[Check]:
    if torch is None:
        return [Check("torch", "fail", torch_error or "torch missing", "pip install torch (a CUDA or ROCm build for GPU work)")]
    build = getattr(torch.version, "hip", None) and f"ROCm/HIP {torch.version.hip}" or (
        getattr(torch.version, "cuda", None) and f"CUDA {torch.version.cuda}")
    checks = [Check("torch", "ok", f"torch {torch.__version__}")]
    if build:
        checks.append(Check("torch_device_build", "ok", f"device build: {build}"))
    else:
        status = "fail" if hint != "cpu" else "warn"
        checks.append(Check("torch_device_build", status, f"CPU-only build of torch on a host that looks like: {hint}",
                            "install the torch wheel built for this host's CUDA or ROCm release"))
    return checks


def check_gpu(torch: Any, hint: str) -> Check:
    if torch is None:
        return Check("gpu_visible", "fail", "torch cannot be imported", "fix the torch check first")
    try:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as exc:  # noqa: BLE001
        return Check("gpu_visible", "fail", f"torch.cuda failed: {exc}", "check the driver install (nvidia-smi / amd-smi)")
    if count:
        return Check("gpu_visible", "ok", f"{count} GPU(s) visible to torch")
    if hint == "cpu":
        return Check("gpu_visible", "warn", "no GPU on this host: evaluation runs on the CPU (tests and demos only)",
                     "run on a host with an NVIDIA or AMD GPU for timings")
    return Check("gpu_visible", "fail", f"a {hint} driver is present but torch sees no GPU",
                 "check CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES, device permissions "
                 "(/dev/nvidia*, or /dev/kfd and /dev/dri with the video/render groups), and the torch build")


def check_device_nodes(hint: str) -> list[Check]:
    nodes = {"cuda": ("/dev/nvidiactl",), "rocm": ("/dev/kfd", "/dev/dri")}.get(hint, ())
    checks = []
    for node in nodes:
        ok = os.path.exists(node) and os.access(node, os.R_OK | os.W_OK)
        checks.append(Check(f"device_node:{node}", "ok" if ok else "fail", f"{node} {'accessible' if ok else 'missing or not readable/writable'}",
                            None if ok else "run the container with the GPU devices passed in, and the user in the video/render groups"))
    return checks


def _tool_check(name: str, artifact_id: str, missing_status: str, fix: str) -> Check:
    entry = detect_by_id(artifact_id)
    if entry["found"]:
        detail = f"{artifact_id} {entry['version'] or '(version unknown)'} at {entry['path']}"
        return Check(name, "warn" if entry["problem"] else "ok", detail + (f"; {entry['problem']}" if entry["problem"] else ""))
    return Check(name, missing_status, f"{artifact_id} not found", fix)


def check_toolchain(hint: str) -> list[Check]:
    specs = [
        ("compiler:c++", "c++", "warn", "install a host C++ compiler (g++) to build C++/CUDA/HIP solutions"),
        ("build:ninja", "ninja", "warn", "pip install ninja (PyTorch C++ extensions build with it)"),
        ("compiler:triton", "triton", "warn", "pip install triton (or triton-rocm) for Triton solutions"),
    ]
    if hint == "cuda":
        specs += [
            ("compiler:nvcc", "nvcc", "warn", "install the CUDA toolkit matching torch.version.cuda, or set CUDA_HOME"),
            ("profiler:ncu", "ncu", "warn", "install Nsight Compute (only needed for --profile)"),
            ("profiler:nsys", "nsys", "warn", "install Nsight Systems (only needed for --profile)"),
        ]
    if hint == "rocm":
        specs += [
            ("compiler:hipcc", "hipcc", "warn", "install the ROCm HIP SDK (hipcc) for HIP C++ solutions"),
            ("profiler:rocprofv3", "rocprofv3", "warn", "install rocprofiler-sdk (only needed for --profile rocprofv3)"),
        ]
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:  # each waits on a time-boxed --version
        return list(pool.map(lambda spec: _tool_check(*spec), specs))


def _nvidia_clocks() -> tuple[str, str, str | None]:
    raw, _, failure = nvidia.read_pynvml()
    if raw is None:
        raw, failure = nvidia.read_nvidia_smi()
    if raw is None:
        return "warn", f"clock state unreadable: {failure}", None
    devices = parse_reading(raw)["devices"]
    sm, mem, source = expected_locked_clocks(devices[0]["name"] or "") if devices else (None, None, "nothing")
    target = f"SM {sm} MHz, memory {mem} MHz (from {source})" if sm else None
    changed = [d["index"] for d in devices if d["clocks"]["application_clocks_changed"]]
    if changed:
        return "ok", f"application clocks set on GPU(s) {changed}", target
    return "warn", "GPU clocks float with boost (application clocks at default); timings vary with temperature and power", target


def _amd_clocks() -> tuple[str, str, str | None]:
    block, failure = rocm_smi.read_smi()
    if not block["devices"]:
        return "warn", f"clock state unreadable: {failure}", None
    levels = sorted(str(d["perf_level"]) for d in block["devices"])
    if all(d["clocks_pinned"] for d in block["devices"]):
        return "ok", f"performance level {sorted(set(levels))} pins the clocks", None
    return "warn", f"performance level {sorted(set(levels))}: clocks float; timings vary", None


def check_clocks(hint: str) -> Check:
    if hint == "cpu":
        return Check("clock_state", "ok", "no GPU: nothing to lock")
    status, detail, target = _nvidia_clocks() if hint == "cuda" else _amd_clocks()
    if os.environ.get("SOL_EXECBENCH_CLOCKS_LOCKED") == "1":
        detail += "; SOL_EXECBENCH_CLOCKS_LOCKED=1"
    if target:
        detail += f"; the lock check expects {target}"
    fix = None if status == "ok" else (
        "lock clocks (NVIDIA: sudo nvidia-smi -lgc <MHz> -lmc <MHz>; AMD: sudo amd-smi set --perf-determinism <MHz>) "
        "and set SOL_EXECBENCH_CLOCKS_LOCKED=1, or accept unlocked timings (lock_clocks=false)")
    return Check("clock_state", status, detail, fix)


def _writable(folder: Path) -> str | None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def check_cache_dirs() -> list[Check]:
    home = Path(os.path.expanduser("~"))
    folders = {
        "sol-execbench cache": cache_dir(),
        "torch extensions": Path(os.environ.get("TORCH_EXTENSIONS_DIR") or home / ".cache" / "torch_extensions"),
        "triton cache": Path(os.environ.get("TRITON_CACHE_DIR") or home / ".triton" / "cache"),
        "temp dir": Path(tempfile.gettempdir()),
    }
    checks = []
    for label, folder in folders.items():
        problem = _writable(folder)
        checks.append(Check(f"writable:{label}", "fail" if problem else "ok", f"{folder}: {problem or 'writable'}",
                            f"make {folder} writable, or point XDG_CACHE_HOME / TORCH_EXTENSIONS_DIR / TRITON_CACHE_DIR / TMPDIR elsewhere"
                            if problem else None))
    return checks


def check_bytecode() -> Check:
    """Whether an evaluation process loads torch's modules compiled or compiles them from source
    (seconds per fresh process where torch was installed without bytecode: 3.0 to 3.5 s for
    ``import torch`` against 1.7 to 2.2 s on the H200 image)."""
    from sol_execbench.platform.host import BYTECODE_CACHE_ENV, bytecode_source, torch_dir

    package = torch_dir()
    source, prefix = bytecode_source(dict(os.environ), package)
    if source == "off":
        return Check("python_bytecode", "warn",
                     f"torch has no bytecode of its own, Python may not write it beside {package}, and "
                     f"{BYTECODE_CACHE_ENV}=0: every evaluation process compiles torch's modules from source "
                     f"(seconds each)",
                     f"unset {BYTECODE_CACHE_ENV}, or compile torch once: python -m compileall -q {package}")
    if prefix is not None:
        held = sum(1 for _ in Path(prefix).rglob("*.pyc")) if Path(prefix).is_dir() else 0
        detail = (f"torch has no bytecode of its own and Python may not write it beside {package}: evaluation "
                  f"processes keep theirs in {prefix} ({held} files; the first run fills it)")
    else:
        detail = {"no package": "torch is not installed: nothing to compile",
                  "beside": f"{package}: torch's modules load compiled (bytecode beside them)",
                  "written beside": f"{package}: Python writes torch's bytecode beside it on first use",
                  "user prefix": f"bytecode under the prefix PYTHONPYCACHEPREFIX={os.environ.get('PYTHONPYCACHEPREFIX')}",
                  }[source]
    return Check("python_bytecode", "ok", detail)


def run_checks() -> list[Check]:
    hint = vendor_hint()
    torch, torch_error = import_torch()
    return [
        *check_torch(torch, torch_error, hint),
        check_gpu(torch, hint),
        *check_device_nodes(hint),
        *check_toolchain(hint),
        check_clocks(hint),
        *check_cache_dirs(),
        check_bytecode(),
    ]


def doctor_report() -> dict[str, Any]:
    checks = run_checks()
    worst = max((c.status for c in checks), key=STATUS_ORDER.index, default="ok")
    by_name = {c.name: c.status for c in checks}
    return {
        "status": worst,
        "can_evaluate": {
            "cpu": by_name.get("torch") == "ok",
            "gpu": by_name.get("gpu_visible") == "ok" and by_name.get("torch_device_build") == "ok",
        },
        "checks": [asdict(c) for c in checks],
    }
