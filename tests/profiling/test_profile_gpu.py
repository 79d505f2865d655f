"""On a GPU: --profile torch records the Triton solution's kernel, --static-evidence reads Triton's
compiled-kernel metadata (skipped without a GPU; scripts/device/profiling.sh runs ncu too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sol_execbench.cli.main import _register, cli
from sol_execbench.schema.profiling import ProfileSidecar, StaticEvidenceSidecar

_register()
RMSNORM = Path(__file__).resolve().parents[2] / "examples" / "rmsnorm"


@pytest.mark.gpu
def test_profile_torch_and_triton_static_evidence_on_the_gpu(tmp_path):
    out = tmp_path / "traces.jsonl"
    result = CliRunner().invoke(cli, [str(RMSNORM), "--solution", str(RMSNORM / "solution_triton.json"), "--only",
                                      "rmsnorm-decode", "-o", str(out), "--profile", "torch", "--profile-calls", "5",
                                      "--static-evidence", "auto"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    profile = ProfileSidecar.model_validate_json((tmp_path / "traces.profile.torch.json").read_text())
    [workload] = profile.workloads
    assert profile.tool == "torch" and workload.calls == 5 and workload.kernels
    assert all(k.calls % 5 == 0 for k in workload.kernels) and workload.kernel_us_per_call > 0
    evidence = StaticEvidenceSidecar.model_validate_json((tmp_path / "traces.static-evidence.json").read_text())
    assert evidence.kernels and all(k.source == "triton" and k.registers for k in evidence.kernels)
