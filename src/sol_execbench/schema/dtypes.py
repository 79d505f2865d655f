"""The one table of element types: name in the formats, torch attribute, width, kind.

No torch import here; ``torch_dtype`` resolves lazily for the layers that have torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class DType(str, Enum):
    """Element types a tensor in a definition may have (upstream's names)."""

    FLOAT64 = "float64"
    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8_E4M3FN = "float8_e4m3fn"
    FLOAT8_E5M2 = "float8_e5m2"
    FLOAT4_E2M1 = "float4_e2m1"
    FLOAT4_E2M1FN_X2 = "float4_e2m1fn_x2"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    UINT8 = "uint8"
    BOOL = "bool"


@dataclass(frozen=True)
class DTypeInfo:
    torch_name: str  # attribute of the torch module
    bits: int  # storage bits per element of the torch tensor
    kind: str  # "float", "int" or "bool"
    python_type: type


DTYPES: dict[DType, DTypeInfo] = {
    DType.FLOAT64: DTypeInfo("float64", 64, "float", float),
    DType.FLOAT32: DTypeInfo("float32", 32, "float", float),
    DType.FLOAT16: DTypeInfo("float16", 16, "float", float),
    DType.BFLOAT16: DTypeInfo("bfloat16", 16, "float", float),
    DType.FLOAT8_E4M3FN: DTypeInfo("float8_e4m3fn", 8, "float", float),
    DType.FLOAT8_E5M2: DTypeInfo("float8_e5m2", 8, "float", float),
    # Upstream stores both fp4 spellings as torch's packed type: two values per byte.
    DType.FLOAT4_E2M1: DTypeInfo("float4_e2m1fn_x2", 8, "float", float),
    DType.FLOAT4_E2M1FN_X2: DTypeInfo("float4_e2m1fn_x2", 8, "float", float),
    DType.INT64: DTypeInfo("int64", 64, "int", int),
    DType.INT32: DTypeInfo("int32", 32, "int", int),
    DType.INT16: DTypeInfo("int16", 16, "int", int),
    DType.INT8: DTypeInfo("int8", 8, "int", int),
    DType.UINT8: DTypeInfo("uint8", 8, "int", int),
    DType.BOOL: DTypeInfo("bool", 8, "bool", bool),
}


def torch_dtype(dtype: DType | str) -> Any:
    """The torch dtype for a format dtype name (imports torch)."""
    import torch

    return getattr(torch, DTYPES[DType(dtype)].torch_name)
