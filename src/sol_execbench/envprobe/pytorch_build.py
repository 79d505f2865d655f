"""Block ``pytorch_build``: which PyTorch this is and how it was built.

Build flags come from ``torch.__config__.show()``. They are CMake-time facts (``USE_ROCM_CK_SDPA``
is a compile definition, not a runtime variable: setting it in the environment does nothing).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from ._common import Context, Reasons, error_text, read_text, run_command
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


def probe(ctx: Context) -> tuple[dict[str, Any], list[str]]:
    block, why = empty(), Reasons("pytorch_build")
    torch = ctx.torch
    if torch is None:
        why.add("", ctx.torch_error or "torch is not importable")
        return block, why.lines
    version = getattr(torch, "version", None)
    commit = getattr(version, "git_version", None)
    block.update(
        version=getattr(torch, "__version__", None),
        git_commit=commit if commit and commit != "Unknown" else None,
        cuda_version=getattr(version, "cuda", None),
        hip_version=getattr(version, "hip", None),
        debug=getattr(version, "debug", None),
        install_path=str(Path(torch.__file__).parent),
        cxx11_abi=getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None),
    )
    try:
        block.update(parse_config(torch.__config__.show()))
    except Exception as exc:  # noqa: BLE001
        why.add("build_flags", f"torch.__config__.show() failed: {error_text(exc)}")
    arch_flags = getattr(torch._C, "_cuda_getArchFlags", None)
    try:
        flags = arch_flags() if callable(arch_flags) else None
    except Exception:  # noqa: BLE001 - CPU builds raise or return None
        flags = None
    block["arch_list"] = sorted(set(flags.split())) if flags else None
    _fill_sources(block, Path(torch.__file__).parent, why)
    if ctx.extended:
        block["bundled_symbols"] = bundled_symbols(Path(torch.__file__).parent, why)
    return block, why.lines
