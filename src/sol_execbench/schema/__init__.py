"""Pure-data formats (pydantic, no torch import): definitions, workloads, solutions, traces, config."""

from .base import UnknownKey, unknown_keys
from .config import BenchmarkConfig, TimingConfig
from .definition import AxisConst, AxisExpr, AxisVar, Definition, TensorSpec
from .dtypes import DTYPES, DType, torch_dtype
from .isolation import IsolationMode, IsolationRecord
from .loading import FormatError, Loaded, load_config, load_definition, load_solution, load_workloads, merge_configs
from .migration import BLOCKER_MEANING, Blocker, BlockerCode, BlockerScope, MigrationManifest, MigrationSourceKind
from .solution import NATIVE_LANGUAGES, PYTHON_LANGUAGES, BuildSpec, CompileOptions, Language, Solution, SourceFile
from .trace import (
    STATUS_MEANING,
    BuildRecord,
    ClockRecord,
    ClockSample,
    Correctness,
    DeviceRecord,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    SanitizerReport,
    SideRounds,
    SpeedupInterval,
    TimingRounds,
    TimingStats,
    Trace,
)
from .workload import CustomInput, RandomInput, SafetensorsInput, ScalarInput, ToleranceSpec, Workload

__all__ = [
    "AxisConst", "AxisExpr", "AxisVar", "BLOCKER_MEANING", "BenchmarkConfig", "Blocker", "BlockerCode", "BlockerScope",
    "BuildRecord", "BuildSpec", "ClockRecord", "ClockSample", "CompileOptions",
    "Correctness", "CustomInput", "DTYPES", "DType", "Definition", "DeviceRecord", "Environment", "Evaluation", "IsolationMode", "IsolationRecord",
    "EvaluationStatus", "FormatError", "Language", "Loaded", "MigrationManifest", "MigrationSourceKind",
    "NATIVE_LANGUAGES", "PYTHON_LANGUAGES",
    "Performance", "RandomInput", "SpeedupInterval", "STATUS_MEANING", "SafetensorsInput", "SanitizerReport", "ScalarInput", "SideRounds", "Solution", "SourceFile",
    "TensorSpec", "TimingConfig", "TimingRounds", "TimingStats", "ToleranceSpec", "Trace", "UnknownKey", "Workload", "load_config",
    "load_definition", "load_solution", "load_workloads", "merge_configs", "torch_dtype", "unknown_keys",
]
