"""The GPU interconnect as a matrix of link names: ``nvidia-smi topo -m``, else NVML's P2P status,
else ``amd-smi topology`` / ``rocm-smi --showtopotype`` on AMD. Never raises: a topology nobody could
read has ``reason`` saying what each source answered."""

from __future__ import annotations

import re

from sol_execbench.envprobe._common import find_tool, run_command
from sol_execbench.schema.benches import Topology

ROCM_BIN = ("/opt/rocm/bin",)
_DEVICE_LABEL = re.compile(r"^(GPU\s*\d+)\b")


def parse_matrix(text: str) -> tuple[list[str], list[list[str]]]:
    """Devices and links from a table whose rows start ``GPU<i>`` and whose first cells after the
    label are the links to GPU0..GPU<n-1> (nvidia-smi's and rocm-smi's layout)."""
    rows: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = _DEVICE_LABEL.match(line)  # rows start at the margin; the header row is indented
        if not match:
            continue
        stripped = line.strip()
        cells = re.split(r"\s{2,}|\t", stripped[match.end():].strip())
        rows.append((match.group(1).replace(" ", ""), [c.strip() for c in cells if c.strip()]))
    n = len(rows)
    if n == 0 or any(len(cells) < n for _label, cells in rows):
        return [], []
    return [label for label, _ in rows], [cells[:n] for _label, cells in rows]


def _from_nvml() -> tuple[list[str], list[list[str]]] | str:
    try:
        import pynvml
    except ImportError:
        return "pynvml is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVML raises its own error types
        return f"NVML init failed: {exc}"
    try:
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        nvlink = getattr(pynvml, "NVML_P2P_CAPS_INDEX_NVLINK", 3)
        read = getattr(pynvml, "NVML_P2P_CAPS_INDEX_READ", 0)
        ok = getattr(pynvml, "NVML_P2P_STATUS_OK", 0)
        links = []
        for i in range(count):
            row = []
            for j in range(count):
                if i == j:
                    row.append("X")
                elif pynvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], nvlink) == ok:
                    row.append("NVLINK")
                elif pynvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], read) == ok:
                    row.append("P2P")
                else:
                    row.append("none")
            links.append(row)
        return [f"GPU{i}" for i in range(count)], links
    except Exception as exc:  # noqa: BLE001
        return f"NVML P2P status failed: {exc}"
    finally:
        pynvml.nvmlShutdown()


def read_topology(platform: str) -> Topology:
    """The interconnect of this host's GPUs (``platform``: cuda, rocm or cpu)."""
    if platform == "cpu":
        return Topology(reason="no GPU: the sweep ran on the CPU")
    failures: list[str] = []
    commands = ([("nvidia-smi topo -m", "nvidia-smi", ["topo", "-m"], ())] if platform == "cuda" else
                [("amd-smi", "amd-smi", ["topology"], ROCM_BIN), ("rocm-smi", "rocm-smi", ["--showtopotype"], ROCM_BIN)])
    for source, tool, args, extra in commands:
        path = find_tool(tool, extra)
        if path is None:
            failures.append(f"{tool}: not found")
            continue
        result = run_command([path, *args], timeout=15.0)
        if not result.ok:
            failures.append(f"{tool}: {result.error}")
            continue
        devices, links = parse_matrix(result.stdout)
        if devices:
            return Topology(source=source, devices=devices, links=links, raw=result.stdout)
        failures.append(f"{tool}: no GPU rows in its output")
    if platform == "cuda":
        nvml = _from_nvml()
        if not isinstance(nvml, str):
            return Topology(source="nvml", devices=nvml[0], links=nvml[1])
        failures.append(f"nvml: {nvml}")
    return Topology(reason="; ".join(failures))
