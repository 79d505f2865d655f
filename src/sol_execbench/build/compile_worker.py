"""The compile process: ``python -m sol_execbench.build.compile_worker request.json``.

Builds one PyTorch C++ extension with ``torch.utils.cpp_extension.load`` (ninja, parallel jobs)
into the request's build directory, imports it once to prove it loads and defines the entry
symbol, and writes ``result.json``. The parent runs it in its own session under the compile
timeout and kills the whole process group (ninja and the compilers too) when time runs out.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any


class WorkerError(Exception):
    def __init__(self, stage: str, message: str):
        super().__init__(message)
        self.stage = stage  # "compile", "load" or "symbol"


def _patch_toolkit_home(ce: Any, request: dict[str, Any]) -> None:
    """A CPU-only torch leaves CUDA_HOME unset and refuses .cu files; give it the toolkit found by the
    parent so device code still compiles (the link then fails for want of torch's CUDA libraries)."""
    if request["family"] == "cuda" and getattr(ce, "CUDA_HOME", None) is None and request.get("toolkit_home"):
        ce.CUDA_HOME = request["toolkit_home"]
        print(f"note: this torch has no CUDA support; compiling device code with {ce.CUDA_HOME}", flush=True)


def build(request: dict[str, Any]) -> str:
    """Compile and import the extension; the path of the built library."""
    import torch  # noqa: F401  (the extension links against it)
    import torch.utils.cpp_extension as ce

    _patch_toolkit_home(ce, request)
    source_dir = Path(request["source_dir"])
    includes = [str(source_dir / d) if not Path(d).is_absolute() else d for d in request["include_dirs"]]
    try:
        module = ce.load(name=request["name"], sources=[str(source_dir / s) for s in request["sources"]],
                         extra_cflags=request["cflags"], extra_cuda_cflags=request["cuda_cflags"],
                         extra_ldflags=request["ldflags"], extra_include_paths=includes,
                         build_directory=request["build_dir"], verbose=False,
                         with_cuda=request["family"] in ("cuda", "rocm"))
    except (RuntimeError, OSError, ValueError) as exc:
        raise WorkerError("compile", str(exc)) from exc
    except ImportError as exc:  # built, but dlopen failed (an undefined symbol, a missing library)
        raise WorkerError("load", f"the library was built but does not load: {exc}") from exc
    symbol = request["entry_symbol"]
    if not callable(getattr(module, symbol, None)):
        defined = sorted(n for n in dir(module) if not n.startswith("_"))
        raise WorkerError("symbol", f"the built module defines no '{symbol}' (PYBIND11_MODULE must "
                                    f"m.def(\"{symbol}\", ...)); it defines {defined}")
    return str(module.__file__)


def _enter_sandbox(request: dict[str, Any]) -> None:
    """Write only the build folder from here on (the compiler, ninja, and the import that proves the
    library loads run the solution's code); its temp files go there too."""
    from sol_execbench.sandbox import RunFolders, enforce_in_process
    from sol_execbench.schema import IsolationRecord

    build_dir = Path(request["build_dir"])
    if not request.get("isolation"):
        return
    record = IsolationRecord.model_validate(request["isolation"])
    if record.mechanism != "none":
        (build_dir / "tmp").mkdir(exist_ok=True)
        os.environ["TMPDIR"] = str(build_dir / "tmp")
        tempfile.tempdir = None
    record = enforce_in_process(record, RunFolders(private=(build_dir,)), strict=False)
    print(f"build sandbox: {record.mechanism} {record.version or ''} {record.reason or ''}".rstrip(), flush=True)


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    result_path = Path(request["result_path"])
    began = time.monotonic()
    try:
        # torch first: its bytecode may be written to the bytecode cache, which the sandbox then closes.
        import torch.utils.cpp_extension  # noqa: F401

        _enter_sandbox(request)
        library = build(request)
        result = {"ok": True, "library": library}
    except WorkerError as exc:
        result = {"ok": False, "stage": exc.stage, "message": str(exc)}
    except Exception as exc:  # anything else is still this build's failure, with its traceback
        result = {"ok": False, "stage": "worker", "message": f"{exc!r}\n{traceback.format_exc()}"}
    result["seconds"] = round(time.monotonic() - began, 3)
    print(json.dumps({k: v for k, v in result.items() if k != "message"}), flush=True)
    if not result["ok"]:
        print(result["message"], flush=True)
    result_path.write_text(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
