import pytest

from sol_execbench.build.native_arch import lookup_target
from sol_execbench.platform.peaks import MATRIX_DTYPES, PEAKS, UnknownPartError, peaks_for


@pytest.mark.parametrize("name, part", [
    ("NVIDIA H100 80GB HBM3", "H100"), ("H100", "H100"), ("h100-sxm", "H100"), ("NVIDIA H100 PCIe", "H100PCIE"),
    ("AMD Instinct MI300X", "MI300X"), ("MI325X", "MI325X"), ("AMD Instinct MI355X", "MI355X"),
    ("NVIDIA H200", "H200"), ("NVIDIA B200", "B200"), ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA H100 NVL", "H100NVL"), ("NVIDIA H200 NVL", "H200NVL"), ("NVIDIA H200 SXM 141GB", "H200"),
])
def test_names_resolve_to_one_entry(name, part):
    assert peaks_for(name).name == part


def test_unknown_part_lists_the_known_ones():
    with pytest.raises(UnknownPartError, match="known parts: H100, .*MI355X"):
        peaks_for("Radeon 7900")


@pytest.mark.parametrize("name", ["H1000", "NVIDIA B2000", "MI3000X"])
def test_a_known_part_inside_a_longer_number_is_not_that_part(name):
    with pytest.raises(UnknownPartError):
        peaks_for(name)


def test_every_part_is_a_build_target_with_positive_rates_and_a_source():
    for part in PEAKS:
        assert lookup_target(part.name) is not None  # one name for the build and the peaks
        assert part.memory_bandwidth > 1e12 and part.source.count("https://") >= 1
        assert set(part.matrix) <= set(MATRIX_DTYPES) and all(rate > 1e12 for rate in part.matrix.values())
        assert {"fp16", "bf16"} <= set(part.matrix) and {"fp32", "fp64"} == set(part.vector)


def test_build_matcher_unchanged():
    assert lookup_target("NVIDIA H100 80GB HBM3") == ("cuda", "sm_90a")
    assert lookup_target("AMD Instinct MI300X") == ("rocm", "gfx942")
    assert lookup_target("Radeon 7900") is None


def test_nvl_cards_are_the_datasheet_column_halved_back_to_dense():
    """H100 NVL and H200 NVL print 835 (TF32), 1,671 (BF16/FP16) and 3,341 (FP8) TFLOPS with sparsity."""
    for name, bandwidth in (("H100NVL", 3.9e12), ("H200NVL", 4.8e12)):
        part = peaks_for(name)
        assert part.memory_bandwidth == bandwidth
        assert [part.matrix[d] / 1e12 for d in ("tf32", "bf16", "fp16", "fp8")] == [835 / 2, 1671 / 2, 1671 / 2, 3341 / 2]
        assert (part.matrix["fp64"], part.vector["fp64"], part.vector["fp32"]) == (60e12, 30e12, 60e12)


@pytest.mark.parametrize("name, per_direction", [
    ("NVIDIA H100 80GB HBM3", 450e9), ("NVIDIA H200", 450e9), ("NVIDIA H100 PCIe", 300e9), ("NVIDIA H100 NVL", 300e9),
    ("NVIDIA B200", 900e9), ("AMD Instinct MI300X", 448e9), ("AMD Instinct MI355X", None),
])
def test_link_bandwidth_is_the_datasheet_total_halved_per_direction(name, per_direction):
    part = peaks_for(name)
    assert part.link_bandwidth == per_direction
    assert (part.link_source is None) == (per_direction is None)
    if per_direction is not None:
        assert "halved" in part.link_source
