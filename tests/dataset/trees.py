"""Small source trees in the layouts the migrations read, written by the tests, and the helpers that
check a migration's output with the real loader and evaluator."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sol_execbench import evaluate
from sol_execbench.cli.main import _register, cli
from sol_execbench.schema import load_definition, load_workloads

from ..problems import ADD_REFERENCE, LIGHT_CONFIG, add_definition, workloads

_register()

SCALE_REFERENCE = "import torch\n\ndef run(x, alpha):\n    return x * alpha\n"


def scale_definition() -> dict[str, Any]:
    return {"name": "scale", "axes": {"R": {"type": "var"}, "C": {"type": "const", "value": 4}},
            "inputs": {"x": {"shape": ["R", "C"], "dtype": "float32"}, "alpha": {"shape": None, "dtype": "float32"}},
            "outputs": {"y": {"shape": ["R", "C"], "dtype": "float32"}}, "reference": SCALE_REFERENCE}


def scale_workloads() -> list[dict[str, Any]]:
    return [{"uuid": f"scale-{r}", "axes": {"R": r}, "inputs": {"x": {"type": "random"},
                                                                "alpha": {"type": "scalar", "value": 0.5}}}
            for r in (2, 3)]


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))
    return path


def write_jsonl(path: Path, values: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(v) + "\n" for v in values))
    return path


def sol_tree(root: Path) -> Path:
    """Upstream's layout, below benchmark/: two categories, a reference kept in reference.py, a config,
    and one of each problem-level blocker (a folder without workloads, a definition that does not load,
    a workload that does not fit its definition)."""
    bench = root / "benchmark"
    add = add_definition()
    del add["reference"]  # upstream's download may keep it in reference.py only
    write_json(bench / "L1/001_vector_add/definition.json", add)
    (bench / "L1/001_vector_add/reference.py").write_text(ADD_REFERENCE)
    write_jsonl(bench / "L1/001_vector_add/workload.jsonl", workloads(8, 16) + [{"uuid": "no-axes", "axes": {}}])
    write_json(bench / "L1/001_vector_add/config.json", LIGHT_CONFIG)
    write_json(bench / "L1/002_no_workloads/definition.json", add_definition())
    bad = add_definition()
    bad["reference"] = "def run(x):\n    return x\n"
    write_json(bench / "L1/003_bad_reference/definition.json", bad)
    write_jsonl(bench / "L1/003_bad_reference/workload.jsonl", workloads(8))
    write_json(bench / "L2/001_scale/definition.json", scale_definition())
    write_jsonl(bench / "L2/001_scale/workload.jsonl", scale_workloads())
    return root


def parquet_rows() -> list[dict[str, Any]]:
    """The parquet export's rows: axes, inputs, outputs and workloads as JSON strings."""
    rows = []
    for definition, wls in ((add_definition(), workloads(8, 16)), (scale_definition(), scale_workloads())):
        rows.append({"name": definition["name"], "description": f"the {definition['name']} problem", "hf_id": None,
                     "axes": json.dumps(definition["axes"]), "inputs": json.dumps(definition["inputs"]),
                     "outputs": json.dumps(definition["outputs"]), "reference": definition["reference"],
                     "custom_inputs_entrypoint": None, "workloads": json.dumps(wls)})
    return rows


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def migrate(*args: str | Path):
    """Run ``sol-execbench dataset ARGS`` in process; stdout and stderr apart."""
    return CliRunner().invoke(cli, ["dataset", *map(str, args)], catch_exceptions=False)


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def check_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Every file under OUT but the manifest is listed with its sha256, and nothing else is."""
    files = {f["path"]: f["sha256"] for f in manifest["files"]}
    on_disk = {path: hashlib.sha256(data).hexdigest() for path, data in tree_bytes(out).items()
               if path != "migration-manifest.json"}
    assert files == on_disk


def migrated(command: str, src: Path, out: Path, *args: str) -> dict[str, Any]:
    """Run a migration that must succeed; its manifest, checked against the files under OUT."""
    result = migrate(command, src, out, *args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "migration-manifest.json").read_text())
    check_manifest(out, manifest)
    return manifest


def load_problem(folder: Path) -> tuple[Any, list[Any]]:
    """The real loader on a migrated problem folder."""
    definition = load_definition(folder / "definition.json")
    return definition, load_workloads(folder / "workload.jsonl", definition=definition)


def evaluate_reference(folder: Path) -> list[Any]:
    """A problem's reference submitted as its own solution, as upstream builds it, on the CPU."""
    definition = load_definition(folder / "definition.json")
    solution = {"name": f"{definition.name}_reference", "definition": definition.name, "author": "reference",
                "spec": {"languages": ["pytorch"], "entry_point": "reference.py::run", "destination_passing_style": False},
                "sources": [{"path": "reference.py", "content": definition.reference}]}
    return evaluate(folder / "definition.json", folder / "workload.jsonl", solution, LIGHT_CONFIG, device="cpu")


KB_MATMUL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M, K, N = 8, 16, 4


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
'''

# Weights made in __init__ (the reference and the solution must hold the same ones), a scalar input,
# two outputs, and a print when the file is run.
KB_LINEAR = '''import torch
import torch.nn as nn

print("problem loaded")


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x, scale):
        y = self.linear(x) * scale
        return torch.relu(y), y.sum(dim=1)


def get_inputs():
    return [torch.randn(3, 8), 0.5]


def get_init_inputs():
    return [8, 5]
'''

KB_DATA_DEPENDENT = KB_MATMUL.replace("return torch.matmul(A, B)", "return A[: int(B.sum().item())]")
KB_COMPLEX = KB_MATMUL.replace("return torch.matmul(A, B)", "return torch.matmul(A, B).to(torch.complex64)")


def kernelbench_tree(root: Path) -> Path:
    """KernelBench's layout (KernelBench/level<N>/<n>_<name>.py), with one problem per blocker."""
    level1, level2 = root / "KernelBench/level1", root / "KernelBench/level2"
    level1.mkdir(parents=True)
    level2.mkdir(parents=True)
    (level1 / "1_Matmul.py").write_text(KB_MATMUL)
    (level1 / "2_DataDependent.py").write_text(KB_DATA_DEPENDENT)
    (level1 / "3_Complex.py").write_text(KB_COMPLEX)
    (level2 / "1_Linear_ReLU_Sum.py").write_text(KB_LINEAR)
    return root


def _flashinfer_solution(name: str, language: str, entry: str, content: str, **spec: Any) -> dict[str, Any]:
    return {"name": name, "definition": "vector_add", "author": "tests",
            "spec": {"language": language, "target_hardware": ["NVIDIA_H100"], "entry_point": entry, **spec},
            "sources": [{"path": entry.split("::")[0], "content": content}]}


def flashinfer_tree(root: Path) -> Path:
    """A trace set: vector_add with workloads, traces and four solutions (a Python one that converts, a
    CUDA one bound through torch, a CUDA one through tvm-ffi, one in a language without counterpart);
    a definition without workloads, a duplicate definition name, and a workload of no definition."""
    add = {**add_definition(), "op_type": "elementwise", "tags": ["status:verified"]}
    write_json(root / "definitions/elementwise/vector_add.json", add)
    write_json(root / "definitions/elementwise/vector_add_copy.json", add)
    write_json(root / "definitions/misc/scale.json", scale_definition())
    lines = [{"definition": "vector_add", "solution": None, "workload": w, "evaluation": None} for w in workloads(8, 16)]
    lines.append({"definition": "missing", "solution": None, "workload": workloads(4)[0], "evaluation": None})
    write_jsonl(root / "workloads/elementwise/vector_add.jsonl", lines)
    sources = "#include <torch/extension.h>\ntorch::Tensor add(torch::Tensor a, torch::Tensor b) { return a + b; }\n"
    for solution in (
        _flashinfer_solution("add_python", "python", "main.py::run", "def run(a, b):\n    return a + b\n",
                             destination_passing_style=False),
        _flashinfer_solution("add_cuda_torch", "cuda", "kernel.cu::add", sources, binding="torch"),
        _flashinfer_solution("add_cuda_ffi", "cuda", "kernel.cu::add", sources),
        _flashinfer_solution("add_rust", "rust", "lib.rs::add", "fn add() {}"),
    ):
        write_json(root / f"solutions/elementwise/vector_add/{solution['name']}.json", solution)
    trace = {"definition": "vector_add", "workload": workloads(8)[0], "solution": "add_python",
             "evaluation": {"status": "PASSED", "environment": {"hardware": "NVIDIA_H100"}, "timestamp": "2025-01-01"}}
    write_jsonl(root / "traces/elementwise/vector_add.jsonl", [trace, trace])
    return root
