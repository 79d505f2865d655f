import glob
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.platform.peaks import peaks_for
from sol_execbench.scoring import BoundInputError, bound_problem

ROOT = Path(__file__).resolve().parents[2]
H100 = peaks_for("H100")


def _problem(tmp_path: Path, definition: dict, workloads: list[dict]) -> Path:
    (tmp_path / "definition.json").write_text(json.dumps(definition))
    (tmp_path / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return tmp_path


def _gemm(tmp_path: Path, dtype: str) -> Path:
    definition = {"name": "gemm", "axes": {"M": {"type": "var"}, "N": {"type": "var"}, "K": {"type": "var"}},
                  "inputs": {"a": {"shape": ["M", "K"], "dtype": dtype}, "b": {"shape": ["K", "N"], "dtype": dtype}},
                  "outputs": {"c": {"shape": ["M", "N"], "dtype": dtype}},
                  "reference": "import torch\n\ndef run(a, b):\n    return a @ b\n"}
    return _problem(tmp_path, definition, [{"uuid": "g", "axes": {"M": 256, "N": 512, "K": 1024}}])


@pytest.mark.parametrize("dtype, size, rate", [("bfloat16", 2, "matrix bf16"), ("float32", 4, "matrix fp16")])
def test_gemm_bound_is_the_hand_count(tmp_path, dtype, size, rate):
    M, N, K = 256, 512, 1024
    (w,) = bound_problem(_gemm(tmp_path, dtype), H100, "H100").workloads
    assert w.total_flops == 2 * M * N * K and w.bytes_moved == (M * K + K * N + M * N) * size
    (priced,) = w.flops
    assert priced.unit == "matrix" and priced.priced_as == rate
    assert w.compute_time_s == pytest.approx(2 * M * N * K / H100.matrix[rate.split()[1]])
    assert w.memory_time_s == pytest.approx(w.bytes_moved / H100.memory_bandwidth)
    assert w.t_sol_s == max(w.compute_time_s, w.memory_time_s)
    assert w.bound_by == ("compute" if w.compute_time_s > w.memory_time_s else "memory")
    assert w.arithmetic_intensity == pytest.approx(w.total_flops / w.bytes_moved)


def test_fp8_gemm_on_a_part_without_fp8_is_priced_at_fp16(tmp_path):
    (w,) = bound_problem(_gemm(tmp_path, "float8_e4m3fn"), peaks_for("A100"), "A100").workloads
    assert w.bytes_moved == 256 * 1024 + 1024 * 512 + 256 * 512
    assert w.flops[0].priced_as == "matrix fp16" if w.flops else w.bytes_only_reason


def test_rmsnorm_bytes_and_flops_are_the_hand_count():
    report = bound_problem(ROOT / "examples/rmsnorm", H100, "H100")
    for w in report.workloads:
        rows, hidden = w.axes["rows"], w.axes["hidden"]
        assert w.bytes_moved == (2 * rows * hidden + hidden) * 2  # x and y in bf16, weight; eps is a scalar
        # pow, mean (over its input), x*inv_rms, *weight per element; +eps and rsqrt per row
        assert w.total_flops == 4 * rows * hidden + 2 * rows and w.bound_by == "memory"


def test_softmax_bytes_and_flops_are_the_hand_count():
    for w in bound_problem(ROOT / "examples/softmax", H100, "H100").workloads:
        elements = w.axes["rows"] * w.axes["cols"]
        assert w.bytes_moved == 2 * elements * 2 and w.total_flops == 5 * elements


PROBLEMS = sorted({str(Path(p).parent.relative_to(ROOT)) for p in
                   glob.glob(str(ROOT / "examples/*/definition.json"))
                   + glob.glob(str(ROOT / "tests/data/conformance/**/definition.json"), recursive=True)})


def test_every_bundled_and_conformance_problem_gets_a_bound():
    assert len(PROBLEMS) >= 20
    for problem in PROBLEMS:
        report = bound_problem(ROOT / problem, H100, "H100")
        assert report.workloads, problem
        for w in report.workloads:
            assert w.t_sol_s > 0 and w.bytes_moved > 0, (problem, w.uuid)
            assert (w.total_flops is None) == (w.bytes_only_reason is not None), (problem, w.uuid)
    paged = bound_problem(ROOT / "tests/data/conformance/samples/gqa_paged_decode", H100, "H100")
    assert all("item()" in w.bytes_only_reason for w in paged.workloads)


@pytest.fixture(scope="module")
def run():
    _register()
    return lambda *args: CliRunner().invoke(cli, list(args))


def test_cli_json_and_table(run):
    done = run("bound", str(ROOT / "examples/softmax"), "--hardware", "AMD Instinct MI300X", "--json")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.output)
    assert doc["hardware"]["name"] == "MI300X" and doc["workloads"][0]["bound_by"] == "memory"
    table = run("bound", str(ROOT / "examples/rmsnorm"), "--hardware", "H100")
    assert table.exit_code == 0 and "datasheet" in table.output


@pytest.mark.parametrize("args, says", [
    (["examples/rmsnorm", "--hardware", "Radeon 7900"], "known parts: H100"),
    (["tests", "--hardware", "H100"], "definition.json: not found"),
    (["no/such/dir", "--hardware", "H100"], "not a directory"),
])
def test_cli_bad_inputs_exit_2_with_one_line(run, args, says):
    done = run("bound", *[str(ROOT / a) if i == 0 else a for i, a in enumerate(args)])
    assert done.exit_code == 2 and says in done.output and "Traceback" not in done.output


def test_a_workload_missing_an_axis_names_the_file(tmp_path):
    problem = _gemm(tmp_path, "float16")
    (problem / "workload.jsonl").write_text(json.dumps({"uuid": "g", "axes": {"M": 1, "N": 2}}) + "\n")
    with pytest.raises(BoundInputError, match="workload.jsonl"):
        bound_problem(problem, H100, "H100")
