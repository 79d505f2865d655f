"""Small native solutions for the build tests, and a way to run the CLI on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.schema import Solution, Trace

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vector_add_native"
DATA = ROOT / "tests" / "data" / "build"

# A Python extension written to the C API: builds in about a second (no torch or pybind11 headers),
# so the cache tests compile for real without paying for torch/extension.h. run(a) = a + OFFSET.
TINY_MODULE = r"""
#include <Python.h>
#ifndef OFFSET
#define OFFSET 1
#endif
#define STR_(x) #x
#define STR(x) STR_(x)
#define INIT_(name) PyInit_##name
#define INIT(name) INIT_(name)

static PyObject* run(PyObject* self, PyObject* args) {
    long a;
    if (!PyArg_ParseTuple(args, "l", &a)) return NULL;
    return PyLong_FromLong(a + OFFSET);
}
static PyMethodDef methods[] = {{"run", run, METH_VARARGS, "a + OFFSET"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, STR(TORCH_EXTENSION_NAME), NULL, -1, methods};
PyMODINIT_FUNC INIT(TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&module); }
"""


def native_solution(language: str, files: dict[str, str], entry: str, *, name: str = "native_candidate",
                    **spec: Any) -> Solution:
    return Solution.model_validate({
        "name": name, "definition": "vector_add_f32", "author": "tests",
        "spec": {"languages": [language], "entry_point": entry, "binding": "torch", **spec},
        "sources": [{"path": path, "content": content} for path, content in files.items()],
    })


def tiny_solution(cflags: list[str] | None = None, **spec: Any) -> Solution:
    if cflags is not None:
        spec["compile_options"] = {**spec.get("compile_options", {}), "cflags": cflags}
    return native_solution("cpp", {"module.c": TINY_MODULE}, "module.c::run", **spec)


def write_solution(path: Path, solution: Solution | dict) -> Path:
    data = solution.model_dump(mode="json") if isinstance(solution, Solution) else solution
    path.write_text(json.dumps(data, indent=1))
    return path


def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[list[Trace], str]:
    """``sol-execbench ARGS --json``: the traces and the CLI's combined output."""
    _register()
    result = CliRunner().invoke(cli, [*args, "--json"], env=env, catch_exceptions=False)
    traces = [Trace.model_validate_json(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return traces, result.output


def statuses(traces: list[Trace]) -> set[str]:
    return {t.evaluation.status.value for t in traces}
