"""PyTorch, Python, Triton and the NVIDIA Python DSLs: imported from the staging directory."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

from sol_execbench.schema import EvaluationStatus, IsolationMode, Language, Solution

from .base import BuildFailure, BuildOutcome, register

# Language -> (module that must import, package to install). A DSL without its package is a
# COMPILE_ERROR naming the package, not a crash.
REQUIRED_MODULES: dict[Language, tuple[str, str]] = {
    Language.TRITON: ("triton", "triton"),
    Language.CUTE_DSL: ("cutlass.cute", "nvidia-cutlass-dsl"),
    Language.CUTILE: ("cuda.tile", "cuda-tile"),
    Language.CUDNN_FRONTEND: ("cudnn", "nvidia-cudnn-frontend"),
    Language.TILELANG: ("tilelang", "tilelang"),
}


def _module_available(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class PythonFamilyBuilder:
    languages = frozenset({Language.PYTORCH, Language.PYTHON, *REQUIRED_MODULES})

    def prepare(self, solution: Solution, source_dir: Path, *, vendor: str, timeout_s: float,
                use_cache: bool, isolation: IsolationMode = IsolationMode.AUTO) -> BuildOutcome:
        return BuildOutcome()  # nothing to compile ahead; Triton JIT happens on the first call

    def load(self, solution: Solution, source_dir: Path, outcome: dict[str, Any]) -> Callable[..., Any]:
        for language in solution.spec.languages:
            if language in REQUIRED_MODULES:
                module, package = REQUIRED_MODULES[language]
                if not _module_available(module):
                    raise BuildFailure(EvaluationStatus.COMPILE_ERROR,
                                       f"language '{language.value}' needs the Python package '{package}' "
                                       f"(module '{module}'), which is not installed here")
        entry = Path(solution.spec.entry_file)
        module_name = ".".join(entry.with_suffix("").parts)
        sys.path.insert(0, str(source_dir))
        try:
            module = importlib.import_module(module_name)
        except SyntaxError as exc:
            raise BuildFailure(EvaluationStatus.COMPILE_ERROR, f"{entry}: syntax error: {exc}") from exc
        except ImportError as exc:
            raise BuildFailure(EvaluationStatus.COMPILE_ERROR, f"{entry}: import failed: {exc}") from exc
        fn = getattr(module, solution.spec.entry_symbol, None)
        if not callable(fn):
            raise BuildFailure(EvaluationStatus.COMPILE_ERROR,
                               f"{entry} defines no callable '{solution.spec.entry_symbol}'")
        return fn


register(PythonFamilyBuilder())
