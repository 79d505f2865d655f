"""The device an evaluation runs on."""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Any

from .host import cpu_l2_bytes, cpu_model

# Architectures whose arch-specific feature set ("a" suffix) kernels target: wgmma on sm_90a, tcgen05 on sm_100a.
_ARCH_SPECIFIC = {(9, 0), (10, 0), (10, 3), (12, 0)}


@dataclass(frozen=True)
class DeviceInfo:
    vendor: str  # "cuda", "rocm" or "cpu"
    torch_device: str  # "cuda:0" (also on ROCm, as torch names it) or "cpu"
    index: int | None
    name: str
    arch: str | None  # sm_90a, gfx942, x86_64
    compute_units: int | None  # SMs on NVIDIA, CUs on AMD, cores on CPU
    l2_bytes: int | None
    memory_bytes: int | None
    runtime_version: str | None  # CUDA or HIP version torch was built with

    @property
    def is_gpu(self) -> bool:
        return self.vendor in ("cuda", "rocm")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_device_spec(spec: str | None) -> tuple[str, int | None]:
    """``None``/"auto" -> first GPU or CPU; "cpu"; "3" or "cuda:3" or "hip:3" -> GPU 3."""
    if spec is None or spec in ("", "auto"):
        return "auto", None
    given = spec.strip().lower()
    if given == "cpu":
        return "cpu", None
    if given in ("cuda", "hip", "rocm", "gpu"):
        return "gpu", 0
    kind, _, index = given.rpartition(":")
    if kind not in ("", "cuda", "hip", "rocm", "gpu") or not index.isdigit():
        raise ValueError(f"device '{spec}' is not 'cpu', 'auto', an index or 'cuda:N'")
    return "gpu", int(index)


def gpu_expected(spec: str | None) -> bool:
    """Whether ``spec`` will select a GPU, judged without starting the GPU runtime, which does not
    survive a fork once started (CUDA, HIP): torch built for a GPU runtime, that vendor's device
    nodes present, and the visibility variables not hiding every device. A guess that ``current``
    settles: a process that forks on it checks it after the fork."""
    import torch

    if parse_device_spec(spec)[0] == "cpu":
        return False
    if getattr(torch.version, "hip", None):
        nodes, variables = ["/dev/kfd"], ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    elif torch.version.cuda:
        nodes, variables = ["/dev/nvidiactl"], ("CUDA_VISIBLE_DEVICES",)
    else:
        return False
    if not any(os.path.exists(node) for node in nodes):
        return False
    for name in variables:
        value = os.environ.get(name)
        if value is not None and (not value.strip() or value.strip().startswith("-")):
            return False
    return True


def vendor_hint() -> str:
    """Best guess of the GPU vendor without importing torch (for the parent process)."""
    if os.path.exists("/dev/kfd") or shutil.which("rocminfo"):
        return "rocm"
    if os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi"):
        return "cuda"
    return "cpu"


def cuda_arch_name(major: int, minor: int) -> str:
    """The arch name of an NVIDIA compute capability: (9, 0) -> sm_90a, (8, 0) -> sm_80."""
    return f"sm_{major}{minor}{'a' if (major, minor) in _ARCH_SPECIFIC else ''}"


def _gpu_arch(props: Any, is_rocm: bool) -> str:
    if is_rocm:
        return str(getattr(props, "gcnArchName", "") or "").split(":")[0] or "gfx-unknown"
    return cuda_arch_name(props.major, props.minor)


def current(spec: str | None = None) -> DeviceInfo:
    """Describe the device ``spec`` selects (imports torch). Raises ValueError for a bad spec."""
    import torch

    kind, index = parse_device_spec(spec)
    has_gpu = torch.cuda.is_available()
    if kind == "gpu" and not has_gpu:
        raise ValueError(f"device '{spec}' asked for, but torch sees no GPU")
    if kind == "cpu" or (kind == "auto" and not has_gpu):
        return DeviceInfo(
            vendor="cpu",
            torch_device="cpu",
            index=None,
            name=cpu_model(),
            arch=os.uname().machine,
            compute_units=os.cpu_count(),
            l2_bytes=cpu_l2_bytes(),
            memory_bytes=None,
            runtime_version=None,
        )
    index = index or 0
    count = torch.cuda.device_count()
    if index >= count:
        raise ValueError(f"device index {index} asked for, but only {count} GPU(s) are visible")
    props = torch.cuda.get_device_properties(index)
    is_rocm = bool(getattr(torch.version, "hip", None))
    return DeviceInfo(
        vendor="rocm" if is_rocm else "cuda",
        torch_device=f"cuda:{index}",
        index=index,
        name=props.name,
        arch=_gpu_arch(props, is_rocm),
        compute_units=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None),
        memory_bytes=props.total_memory,
        runtime_version=(torch.version.hip if is_rocm else torch.version.cuda),
    )


def make_current(info: DeviceInfo) -> None:
    """Make ``info``'s GPU torch's current device. A solution's own kernels (CUDA C++ launched on
    ``getCurrentCUDAStream()``, Triton) and the timing's events, streams and spin kernels all go to
    the current device, whatever device the tensors are on: on ``cuda:1`` with the current device
    left at 0 they would run, or be timed, on the wrong GPU. It creates the device's context (CUDA
    12 and later), so a warm child calls it only once it may use the device (``gpu_quiet``)."""
    if info.index is not None:
        import torch

        torch.cuda.set_device(info.index)


# Threads creating a GPU's primary context ahead of torch (``start_device_context``).
_context_starts: list[threading.Thread] = []


def start_device_context(spec: str | None) -> None:
    """Create the primary context of the NVIDIA GPU ``spec`` names on a thread of its own, for a
    process about to import torch: the driver's start-up (0.3 s on the H100 host) then runs beside
    the import rather than after it, and torch uses the same primary context. Nothing happens once
    torch is imported, on the CPU, on ROCm or without the driver library; ``use_device`` waits for
    the thread."""
    if "torch" in sys.modules:
        return
    try:
        kind, index = parse_device_spec(spec)
    except ValueError:
        return
    if kind == "cpu" or vendor_hint() != "cuda":
        return
    thread = threading.Thread(target=_retain_primary_context, args=(index or 0,), name="sol-execbench-context",
                              daemon=True)
    thread.start()
    _context_starts.append(thread)


def _retain_primary_context(index: int) -> None:
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return
    device, context = ctypes.c_int(), ctypes.c_void_p()
    if driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(device), index) == 0:
        driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)  # kept for the process's life, as torch keeps it


def use_device(spec: str | None = None) -> DeviceInfo:
    """``current(spec)``, made torch's current device (``make_current``)."""
    while _context_starts:  # no thread of the harness's own outlives the start-up
        _context_starts.pop().join()
    info = current(spec)
    make_current(info)
    return info
