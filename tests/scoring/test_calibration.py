"""``calibrate`` and ``bound --ceilings measured``: the real measuring path on the CPU (small sizes),
the cache's keying and invalidation, and the file format."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.platform import current
from sol_execbench.platform.ceilings import (CeilingsError, calibration_key, calibration_path, ceilings_for,
                                             load_calibration, measured_peaks, other_environments, store_calibration)
from sol_execbench.platform.peaks import peaks_for
from sol_execbench.schema.calibration import Calibration, CeilingMeasurement

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def run(cache):
    _register()
    return lambda *args, root=cache: CliRunner().invoke(cli, list(args), env={"SOL_EXECBENCH_CACHE_DIR": str(root)})


@pytest.fixture(scope="module")
def cpu_calibration(run):
    done = run("calibrate", "--device", "cpu", "--json")
    assert done.exit_code == 0, done.output
    return Calibration.model_validate_json(done.stdout)


def test_cpu_calibration_measures_every_gemm_and_the_copy(cpu_calibration):
    cal = cpu_calibration
    names = {c.name for c in cal.ceilings}
    assert {"gemm fp64", "gemm fp32", "gemm bf16", "gemm fp16", "copy"} <= names
    assert {s.name for s in cal.skipped} >= {"gemm tf32"} and names.isdisjoint(s.name for s in cal.skipped)
    assert cal.key.device_id.startswith("cpu:") and cal.part is None and not cal.from_cache
    for c in cal.ceilings:
        assert c.method == "cpu" and c.latency_ms > 0
        assert c.achieved_per_s == pytest.approx(c.work / (c.latency_ms / 1e3))
        if c.name == "copy":
            assert c.rate == "memory" and c.work == 2 * c.shape[0]  # read once, written once
        else:
            m, n, k = c.shape
            assert c.work == 2 * m * n * k and c.rate == f"matrix {c.name.split()[1]}"
        assert c.datasheet_per_s is None and c.fraction_of_datasheet is None


def test_the_cache_file_is_the_calibration_under_its_key(cpu_calibration, run, cache):
    path = Path(cpu_calibration.cache_file)
    assert path.parent == cache / "calibration" and path.is_file()
    stored = json.loads(path.read_text())
    assert "cache_file" not in stored and "from_cache" not in stored  # facts of the reading, not of the file
    assert Calibration.model_validate(stored).ceilings == cpu_calibration.ceilings
    again = run("calibrate", "--device", "cpu", "--json")
    cached = Calibration.model_validate_json(again.stdout)
    assert cached.from_cache and cached.measured_at == cpu_calibration.measured_at
    assert cached.ceilings == cpu_calibration.ceilings


def test_a_changed_driver_or_torch_is_another_key(cpu_calibration, cache, monkeypatch):
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(cache))
    key = cpu_calibration.key
    assert load_calibration(key).measured_at == cpu_calibration.measured_at
    for changed in (key.model_copy(update={"torch": key.torch + "-other"}),
                    key.model_copy(update={"driver": "kernel 0.0"})):
        assert calibration_path(changed) != calibration_path(key)
        assert load_calibration(changed) is None  # nothing measured under that key: calibrate measures again
        assert calibration_path(key) in other_environments(changed)


def test_a_file_of_another_key_or_unreadable_is_refused(cpu_calibration, tmp_path, monkeypatch):
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path))
    key = cpu_calibration.key
    moved = cpu_calibration.model_copy(update={"key": key.model_copy(update={"device_name": "elsewhere"})})
    calibration_path(key).parent.mkdir(parents=True)
    calibration_path(key).write_text(moved.model_dump_json())
    with pytest.raises(CeilingsError, match="key is"):
        load_calibration(key)
    calibration_path(key).write_text("{not json")
    with pytest.raises(CeilingsError, match=f"{calibration_path(key)}: not a readable calibration.*--refresh"):
        load_calibration(key)


def test_calibrate_measures_over_an_unreadable_cache_file(run, tmp_path):
    first = Calibration.model_validate_json(run("calibrate", "--device", "cpu", "--json", root=tmp_path).stdout)
    Path(first.cache_file).write_text("garbage")
    refused = run("bound", str(ROOT / "examples/softmax"), "--ceilings", "measured", "--device", "cpu", root=tmp_path)
    assert refused.exit_code == 2 and first.cache_file in refused.output and "Traceback" not in refused.output
    again = run("calibrate", "--device", "cpu", "--json", root=tmp_path)
    assert again.exit_code == 0 and not Calibration.model_validate_json(again.stdout).from_cache
    assert Calibration.model_validate_json(Path(first.cache_file).read_text()).ceilings


def test_bound_priced_on_measured_ceilings_says_so(cpu_calibration, run):
    done = run("bound", str(ROOT / "examples/softmax"), "--ceilings", "measured", "--device", "cpu", "--json")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    copy = next(c for c in cpu_calibration.ceilings if c.name == "copy")
    assert doc["ceilings"] == "measured" and "memory" in doc["hardware"]["measured"]
    assert doc["hardware"]["memory_bandwidth_bytes_per_s"] == pytest.approx(copy.achieved_per_s)
    for w in doc["workloads"]:
        assert w["memory_time_s"] == pytest.approx(w["bytes_moved"] / copy.achieved_per_s)
    table = run("bound", str(ROOT / "examples/rmsnorm"), "--ceilings", "measured", "--device", "cpu")
    assert table.exit_code == 0 and "measured ceilings" in table.output


def test_measured_rates_replace_the_datasheet_ones_and_only_those():
    h100 = peaks_for("H100")
    cal = Calibration(key={"device_id": "GPU-x", "device_name": "NVIDIA H100 80GB HBM3", "driver": "d", "torch": "t"},
                      part="H100", measured_at="now", tool_version="0", timing={}, cache_file="f.json", ceilings=[
                          CeilingMeasurement(name="gemm bf16", rate="matrix bf16", shape=[8, 8, 8], work=1024,
                                             latency_ms=1.0, relative_iqr=0.0, method="device", achieved_per_s=7e14),
                          CeilingMeasurement(name="gemm fp32", rate="vector fp32", shape=[8, 8, 8], work=1024,
                                             latency_ms=1.0, relative_iqr=0.0, method="device", achieved_per_s=5e13),
                          CeilingMeasurement(name="copy", rate="memory", shape=[8], work=16, latency_ms=1.0,
                                             relative_iqr=0.0, method="device", achieved_per_s=3e12)])
    priced = measured_peaks(cal, h100)
    assert priced.ceilings == "measured" and priced.measured == ("matrix bf16", "vector fp32", "memory")
    assert (priced.matrix["bf16"], priced.vector["fp32"], priced.memory_bandwidth) == (7e14, 5e13, 3e12)
    assert priced.matrix["fp16"] == h100.matrix["fp16"] and priced.vector["fp64"] == h100.vector["fp64"]
    assert "f.json" in priced.source and h100.source in priced.source


def test_datasheet_ceilings_need_a_part_and_measured_ones_a_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path))
    cpu = current("cpu")
    assert ceilings_for("datasheet", "H200 NVL", None).peaks.name == "H200NVL"
    with pytest.raises(CeilingsError, match="pass --hardware"):
        ceilings_for("datasheet", None, cpu)
    with pytest.raises(CeilingsError, match="sol-execbench calibrate --device cpu"):
        ceilings_for("measured", None, cpu)
    store_calibration(Calibration(key=calibration_key(cpu), measured_at="now", tool_version="0", timing={},
                                  ceilings=[]))
    with pytest.raises(CeilingsError, match="has no memory, vector fp32"):  # nothing measured, no datasheet
        ceilings_for("measured", None, cpu)


@pytest.mark.parametrize("args, says", [
    (["calibrate"], "calibrate needs a GPU"),
    (["calibrate", "--device", "tpu:0"], "--device"),
    (["bound", "examples/softmax", "--ceilings", "measured"], "no GPU found here"),
    (["bound", "examples/softmax", "--ceilings", "measured", "--device", "cpu", "--hardware", "H100"], "drop --hardware"),
    (["bound", "examples/softmax", "--ceilings", "guessed", "--hardware", "H100"], "datasheet"),
])
def test_bad_inputs_exit_2_with_one_line(run, tmp_path, args, says):
    import torch

    if torch.cuda.is_available() and "--device" not in args:
        pytest.skip("a GPU is here: these are the CPU-only answers")
    done = run(*[str(ROOT / a) if a.startswith("examples/") else a for a in args], root=tmp_path)
    assert done.exit_code == 2 and says in done.output and "Traceback" not in done.output


@pytest.mark.gpu
def test_gpu_calibration_is_near_the_datasheet(tmp_path, monkeypatch):
    """On a GPU of the table every ceiling is measured by the device method and lands between 5% and
    150% of its datasheet rate (above that, the FLOP or byte count would be wrong)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    from sol_execbench.scoring.calibration import calibrate

    monkeypatch.setenv("SOL_EXECBENCH_CACHE_DIR", str(tmp_path))
    cal = calibrate(current())
    assert {"gemm bf16", "gemm fp16", "copy"} <= {c.name for c in cal.ceilings}, cal.skipped
    for c in cal.ceilings:
        assert c.method in ("device", "events")
        if c.fraction_of_datasheet is not None:
            assert 0.05 < c.fraction_of_datasheet < 1.5, c
