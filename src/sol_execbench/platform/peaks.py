"""Vendor datasheet peaks per part: dense FLOP/s per dtype, memory bandwidth and GPU-to-GPU link bandwidth.

Every rate is the vendor's *dense* figure (sparse figures, which NVIDIA and AMD print with an
asterisk or in a second column, are halved back to dense). Matrix rates are the tensor-core /
matrix-core rates; vector rates are the non-matrix (CUDA core / SIMD) rates. Keys are the part
names of the build's arch table (``build.native_arch.TARGET_ARCHS``); a device name such as
"NVIDIA H100 80GB HBM3" or "AMD Instinct MI300X" resolves through ``platform.parts.match_part``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .parts import match_part, normalize_part_name

TERA = 1e12

# Dtype names of the rates (the names pricing uses; schema dtypes map onto them in scoring/).
MATRIX_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
VECTOR_DTYPES = ("fp64", "fp32")


class UnknownPartError(Exception):
    """No peak table entry for a name; the message lists the known parts."""


@dataclass(frozen=True)
class PartPeaks:
    """One part's datasheet peaks (FLOP/s and B/s)."""

    name: str  # the table key, as native_arch names the part: "H100", "MI300X"
    label: str  # the exact product the numbers are for: "NVIDIA H100 SXM5 80GB"
    vendor: str  # "cuda" or "rocm" ("cpu" for a calibrated CPU, see platform.ceilings)
    memory_bandwidth: float  # B/s
    matrix: dict[str, float]  # dtype -> dense matrix-core FLOP/s; a dtype the part lacks is absent
    vector: dict[str, float]  # dtype -> non-matrix FLOP/s (fp64, fp32)
    source: str  # datasheet name and URL
    aliases: tuple[str, ...] = field(default=())  # other spellings (normalised like the names)
    ceilings: str = "datasheet"  # "measured" where platform.ceilings put calibrated rates in
    measured: tuple[str, ...] = ()  # the rates that are measured ("matrix bf16", "memory"); the rest are the datasheet's
    link_bandwidth: float | None = None
    """B/s per direction: the GPU's total NVLink / Infinity Fabric bandwidth to its peers as the datasheet
    gives it, a bidirectional total halved; None where no datasheet figure is entered."""
    link_source: str | None = None  # the datasheet's line the link figure comes from


# Link figures, per direction (the datasheets print bidirectional totals).
_NVLINK4_SXM = 450e9
_NVLINK4_SXM_SOURCE = "datasheet: NVLink 900 GB/s per GPU (18 NVLink 4 links; bidirectional total), halved"
_NVLINK_BRIDGE_600 = 300e9
_NVLINK_BRIDGE_600_SOURCE = "datasheet: NVLink bridge 600 GB/s per GPU (bidirectional total), halved"
_INFINITY_FABRIC_CDNA3 = 448e9
_INFINITY_FABRIC_CDNA3_SOURCE = ("datasheet: 7 Infinity Fabric links of 128 GB/s, 896 GB/s aggregate peer bandwidth "
                                 "(bidirectional), halved; in a fully connected 8-GPU mesh two GPUs share one link")


_H100_SOURCE = ("NVIDIA H100 Tensor Core GPU datasheet (SXM5 and PCIe columns; tensor rates printed with "
                "sparsity, halved here), https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet")
_H100_NVL_SOURCE = ("NVIDIA H100 Tensor Core GPU product page and datasheet (H100 NVL column, 94 GB HBM3, 3.9 TB/s; "
                    "tensor rates printed with sparsity, halved here), https://www.nvidia.com/en-us/data-center/h100/")
_H200_SOURCE = ("NVIDIA H200 Tensor Core GPU product page and datasheet ({column} column; tensor rates printed with "
                "sparsity, halved here), https://www.nvidia.com/en-us/data-center/h200/")
# The H200 has the H100 SXM's compute; only its memory (141 GB HBM3e, 4.8 TB/s) differs.
_HOPPER_SXM_MATRIX = {"fp64": 67 * TERA, "tf32": 494.7 * TERA, "bf16": 989.4 * TERA, "fp16": 989.4 * TERA,
                      "fp8": 1978.9 * TERA}
_HOPPER_SXM_VECTOR = {"fp64": 34 * TERA, "fp32": 67 * TERA}
# H100 NVL and H200 NVL (PCIe cards, 400 W and 600 W) share one compute column: FP64 30, FP64 tensor 60,
# FP32 60, TF32 835*, BF16/FP16 1671*, FP8 3341* (* with sparsity).
_HOPPER_NVL_MATRIX = {"fp64": 60 * TERA, "tf32": 417.5 * TERA, "bf16": 835.5 * TERA, "fp16": 835.5 * TERA,
                      "fp8": 1670.5 * TERA}
_HOPPER_NVL_VECTOR = {"fp64": 30 * TERA, "fp32": 60 * TERA}
# MI325X has the MI300X's compute (CDNA 3, 304 CUs at 2.1 GHz); only its memory (256 GB HBM3e, 6 TB/s) differs.
_CDNA3_MATRIX = {"fp64": 163.4 * TERA, "fp32": 163.4 * TERA, "tf32": 653.7 * TERA, "bf16": 1307.4 * TERA,
                 "fp16": 1307.4 * TERA, "fp8": 2614.9 * TERA}
_CDNA3_VECTOR = {"fp64": 81.7 * TERA, "fp32": 163.4 * TERA}

PEAKS: tuple[PartPeaks, ...] = (
    PartPeaks("H100", "NVIDIA H100 SXM5 80GB", "cuda", 3.35 * TERA, _HOPPER_SXM_MATRIX, _HOPPER_SXM_VECTOR,
              _H100_SOURCE, aliases=("H100SXM", "H100SXM5"), link_bandwidth=_NVLINK4_SXM,
              link_source=_NVLINK4_SXM_SOURCE),
    PartPeaks("H100PCIE", "NVIDIA H100 PCIe 80GB", "cuda", 2.0 * TERA,
              {"fp64": 51 * TERA, "tf32": 378 * TERA, "bf16": 756 * TERA, "fp16": 756 * TERA, "fp8": 1513 * TERA},
              {"fp64": 26 * TERA, "fp32": 51 * TERA}, _H100_SOURCE, link_bandwidth=_NVLINK_BRIDGE_600,
              link_source=_NVLINK_BRIDGE_600_SOURCE),
    PartPeaks("H100NVL", "NVIDIA H100 NVL 94GB", "cuda", 3.9 * TERA, _HOPPER_NVL_MATRIX, _HOPPER_NVL_VECTOR,
              _H100_NVL_SOURCE, link_bandwidth=_NVLINK_BRIDGE_600, link_source=_NVLINK_BRIDGE_600_SOURCE),
    PartPeaks("H200", "NVIDIA H200 SXM 141GB", "cuda", 4.8 * TERA, _HOPPER_SXM_MATRIX, _HOPPER_SXM_VECTOR,
              _H200_SOURCE.format(column="H200 SXM"), aliases=("H200SXM",), link_bandwidth=_NVLINK4_SXM,
              link_source=_NVLINK4_SXM_SOURCE),
    PartPeaks("H200NVL", "NVIDIA H200 NVL 141GB", "cuda", 4.8 * TERA, _HOPPER_NVL_MATRIX, _HOPPER_NVL_VECTOR,
              _H200_SOURCE.format(column="H200 NVL"), link_bandwidth=450e9,
              link_source="datasheet: 2- or 4-way NVLink bridge, 900 GB/s per GPU (bidirectional total), halved"),
    # Bandwidth: the HGX B200 page's per-GPU figure (7.7 TB/s; "up to 62 TB/s" over 8 GPUs). The DGX B200
    # datasheet's 64 TB/s over 8 GPUs (8 TB/s) is the earlier figure for the same board.
    PartPeaks("B200", "NVIDIA B200 (HGX B200, 1000 W)", "cuda", 7.7 * TERA,
              {"fp64": 37 * TERA, "tf32": 1100 * TERA, "bf16": 2250 * TERA, "fp16": 2250 * TERA, "fp8": 4500 * TERA,
               "fp4": 9000 * TERA},
              {"fp64": 37 * TERA, "fp32": 75 * TERA},
              "NVIDIA HGX B200 specifications (individual GPU column: 180 GB HBM3e at 7.7 TB/s; tensor rates "
              "printed with sparsity, halved here; FP64 and FP32 dense), https://www.nvidia.com/en-us/data-center/hgx/",
              aliases=("HGXB200", "DGXB200"), link_bandwidth=900e9,
              link_source="datasheet: NVLink 1.8 TB/s per GPU (18 NVLink 5 links; bidirectional total), halved"),
    PartPeaks("A100", "NVIDIA A100 SXM4 80GB", "cuda", 2.039 * TERA,
              {"fp64": 19.5 * TERA, "tf32": 156 * TERA, "bf16": 312 * TERA, "fp16": 312 * TERA},
              {"fp64": 9.7 * TERA, "fp32": 19.5 * TERA},
              "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column; dense figures), "
              "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
              "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf", aliases=("A100SXM", "A100SXM480GB"),
              link_bandwidth=300e9,
              link_source="datasheet: NVLink 600 GB/s per GPU (12 NVLink 3 links; bidirectional total), halved"),
    PartPeaks("MI300X", "AMD Instinct MI300X OAM", "rocm", 5.3 * TERA, _CDNA3_MATRIX, _CDNA3_VECTOR,
              "AMD Instinct MI300X data sheet (dense column), https://www.amd.com/content/dam/amd/en/documents/"
              "instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf",
              link_bandwidth=_INFINITY_FABRIC_CDNA3, link_source=_INFINITY_FABRIC_CDNA3_SOURCE),
    PartPeaks("MI325X", "AMD Instinct MI325X OAM", "rocm", 6.0 * TERA, _CDNA3_MATRIX, _CDNA3_VECTOR,
              "AMD Instinct MI325X product page and data sheet (dense column), "
              "https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html"),
    # CDNA 4 has no TF32 matrix path (TF32 is emulated through BF16), hence no tf32 rate.
    PartPeaks("MI355X", "AMD Instinct MI355X OAM", "rocm", 8.0 * TERA,
              {"fp64": 78.6 * TERA, "fp32": 157.3 * TERA, "bf16": 2516.6 * TERA, "fp16": 2516.6 * TERA,
               "fp8": 5033.2 * TERA, "fp4": 10066.3 * TERA},
              {"fp64": 78.6 * TERA, "fp32": 157.3 * TERA},
              "AMD Instinct MI355X product page and data sheet (dense column), "
              "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html"),
)

_BY_KEY: dict[str, PartPeaks] = {normalize_part_name(alias): part
                                 for part in PEAKS for alias in (part.name, *part.aliases)}


def known_parts() -> list[str]:
    return [part.name for part in PEAKS]


def peaks_for(name: str) -> PartPeaks:
    """The peaks of the part ``name`` denotes (a table name, an alias or a device name).

    Raises UnknownPartError naming the known parts."""
    key = match_part(name, _BY_KEY)
    if key is None:
        raise UnknownPartError(f"no peak table entry for '{name}'; known parts: {', '.join(known_parts())}")
    return _BY_KEY[key]
