"""Block ``pytorch_build``: which PyTorch this is and how it was built.

Build flags come from ``torch.__config__.show()``. They are CMake-time facts (``USE_ROCM_CK_SDPA``
is a compile definition, not a runtime variable: setting it in the environment does nothing).
Nothing here imports torch: the version fields are read from ``torch/version.py`` and the rest
from the build record ``torch_facts`` keeps (cached per torch install).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ._common import Context, Reasons, read_text, run_command
from .extended import bundled_symbols
from .extended import empty as empty_symbols

# Flags that appear only as ``-DFLAG`` in CXX_FLAGS: present means on, absent (in a readable config) off.
DEFINE_FLAGS = ("USE_ROCM_CK_SDPA", "USE_ROCM_CK_GEMM", "USE_FBGEMM", "USE_FBGEMM_GENAI", "USE_KINETO", "USE_XNNPACK")
# Flags listed as ``KEY=VALUE`` under "Build settings": null when the build does not list them.
SETTING_FLAGS = (
    "USE_CUDA", "USE_CUDNN", "USE_CUSPARSELT", "USE_NCCL", "USE_ROCM", "USE_ROCM_KERNEL_ASSERT",
    "USE_MKL", "USE_MKLDNN", "USE_MPI", "USE_GLOO", "USE_OPENMP", "USE_XPU", "USE_XCCL",
)
SUBMODULES = {
    "composable_kernel": "third_party/composable_kernel",
    "aiter": "third_party/aiter",
    "fbgemm": "third_party/fbgemm",
    "cutlass": "third_party/cutlass",
    "cudnn_frontend": "third_party/cudnn_frontend",
    "flash_attention": "third_party/flash-attention",
}
SOURCE_URL = "https://github.com/pytorch/pytorch/tree/{commit}/third_party"

_ON = {"ON", "1", "TRUE", "YES"}
_OFF = {"OFF", "0", "FALSE", "NO", ""}


def empty() -> dict[str, Any]:
    return {
        "version": None,
        "git_commit": None,
        "cuda_version": None,
        "hip_version": None,
        "debug": None,
        "install_kind": None,
        "install_path": None,
        "cxx11_abi": None,
        "build_type": None,
        "cudnn_version": None,
        "miopen_version": None,
        "arch_list": None,
        "build_flags": {name: None for name in (*DEFINE_FLAGS, *SETTING_FLAGS)},
        "source_tree": None,
        "submodule_commits": {name: None for name in SUBMODULES},
        "bundled_symbols": empty_symbols(),
    }


def parse_build_settings(config: str) -> dict[str, str]:
    """``KEY=VALUE`` pairs of the "Build settings:" line of ``torch.__config__.show()``."""
    match = re.search(r"Build settings:(.*)", config, re.S)
    if not match:
        return {}
    settings: dict[str, str] = {}
    # Values (CXX_FLAGS) hold spaces and '=' but no ", KEY=" sequence, so split on that.
    for part in re.split(r",\s+(?=[A-Z0-9_]+=)", match.group(1).strip()):
        key, sep, value = part.partition("=")
        if sep and re.fullmatch(r"[A-Z0-9_]+", key.strip()):
            settings[key.strip()] = value.strip().rstrip(",").strip()
    return settings


def _flag(settings: dict[str, str], name: str) -> bool | None:
    value = settings.get(name)
    if value is None:
        return None
    upper = value.upper()
    return True if upper in _ON else False if upper in _OFF else None


def parse_config(config: str) -> dict[str, Any]:
    """Build facts from ``torch.__config__.show()``: flags, build type, cuDNN/MIOpen built against."""
    settings = parse_build_settings(config)
    defines = set(re.findall(r"-D([A-Z][A-Z0-9_]*)\b", settings.get("CXX_FLAGS", "") + " " + config))
    flags: dict[str, bool | None] = {}
    for name in DEFINE_FLAGS:
        flags[name] = (name in defines) if settings else None
    for name in SETTING_FLAGS:
        flags[name] = _flag(settings, name)
    cudnn = re.search(r"^\s*-\s*CuDNN\s+([\d.]+)", config, re.M)
    miopen = re.search(r"^\s*-\s*MIOpen\s+([\d.]+)", config, re.M)
    return {
        "build_type": settings.get("BUILD_TYPE") or None,
        "cudnn_version": settings.get("CUDNN_VERSION") or (cudnn.group(1) if cudnn else None),
        "miopen_version": miopen.group(1) if miopen else None,
        "build_flags": flags,
    }


def install_kind(torch_path: Path, direct_url: str | None, prefix: str) -> str:
    """editable, source, conda, wheel or unknown."""
    if direct_url:
        try:
            if json.loads(direct_url).get("dir_info", {}).get("editable"):
                return "editable"
        except (ValueError, AttributeError):
            pass
    if source_tree_of(torch_path) is not None:
        return "source"
    if list(Path(prefix, "conda-meta").glob("pytorch-*.json")):
        return "conda"
    if list(torch_path.parent.glob("torch-*.dist-info")):
        return "wheel"
    return "unknown"


def source_tree_of(torch_path: Path) -> Path | None:
    """The PyTorch checkout holding ``torch_path`` (a folder with ``.git`` and ``third_party``), if any."""
    for folder in (torch_path.parent, *torch_path.parent.parents[:2]):
        if (folder / ".git").exists() and (folder / "third_party").is_dir():
            return folder
    return None


def _editable_source(direct_url: str | None) -> Path | None:
    try:
        url = json.loads(direct_url or "{}").get("url", "")
    except ValueError:
        return None
    return Path(url[len("file://"):]) if url.startswith("file://") else None


def _direct_url(torch_path: Path) -> str | None:
    for dist in torch_path.parent.glob("torch-*.dist-info"):
        return read_text(dist / "direct_url.json")
    return None


def submodule_commits(tree: Path) -> tuple[dict[str, str | None], list[str]]:
    """``git rev-parse HEAD`` of each known submodule in a PyTorch checkout, and why any is missing."""
    commits: dict[str, str | None] = {}
    causes: list[str] = []
    for name, rel in SUBMODULES.items():
        folder = tree / rel
        if not folder.is_dir():
            commits[name] = None
            continue  # not every PyTorch version has every submodule
        result = run_command(["git", "-C", str(folder), "rev-parse", "HEAD"])
        commit = result.stdout.strip() if result.ok else ""
        commits[name] = commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None
        if commits[name] is None:
            causes.append(f"{name}: {result.error or 'not a checked-out submodule'}")
    return commits, causes


def _fill_sources(block: dict[str, Any], torch_path: Path, why: Reasons) -> None:
    direct_url = _direct_url(torch_path)
    block["install_kind"] = install_kind(torch_path, direct_url, sys.prefix)
    override = os.environ.get("SOL_EXECBENCH_PYTORCH_SRC")
    tree = Path(override) if override else (_editable_source(direct_url) or source_tree_of(torch_path))
    if tree is not None and (tree / "third_party").is_dir():
        block["source_tree"] = str(tree)
        block["submodule_commits"], causes = submodule_commits(tree)
        for cause in causes:
            why.add("submodule_commits", cause)
        return
    commit = block["git_commit"]
    where = SOURCE_URL.format(commit=commit) if commit else "the PyTorch release's third_party folder"
    why.add(
        "submodule_commits",
        f"no PyTorch source tree ({block['install_kind']} install); the pinned submodules are listed at {where} "
        "(or set SOL_EXECBENCH_PYTORCH_SRC to a checkout)",
    )


def _from_record(block: dict[str, Any], record: dict[str, Any], declared: dict[str, Any] | None, why: Reasons) -> None:
    """Fill the torch-reported fields: ``torch/version.py`` first (read now), the imported torch's record second."""
    pick = {"version": "__version__", "git_version": "git_version", "cuda": "cuda", "hip": "hip", "debug": "debug"}
    values = {name: (declared or {}).get(attr, record.get(name)) for name, attr in pick.items()}
    commit = values["git_version"]
    block.update(
        version=values["version"],
        git_commit=commit if commit and commit != "Unknown" else None,
        cuda_version=values["cuda"],
        hip_version=values["hip"],
        debug=values["debug"],
        install_path=record.get("install_path"),
        cxx11_abi=record.get("cxx11_abi"),
    )
    if record.get("config") is not None:
        block.update(parse_config(record["config"]))
    else:
        why.add("build_flags", record.get("config_error") or "torch.__config__.show() gave nothing")
    flags = record.get("arch_flags")
    block["arch_list"] = sorted(set(flags.split())) if isinstance(flags, str) and flags.strip() else None


def probe(ctx: Context) -> tuple[dict[str, Any], list[str]]:
    block, why = empty(), Reasons("pytorch_build")
    record, error = ctx.build_facts()
    if record is None:
        why.add("", error or "torch is not importable")
        return block, why.lines
    _from_record(block, record, ctx.facts.declared if ctx.facts is not None else None, why)
    torch_path = Path(record.get("install_path") or ctx.facts.path)
    _fill_sources(block, torch_path, why)
    if ctx.extended:
        block["bundled_symbols"] = bundled_symbols(torch_path, why)
    return block, why.lines
