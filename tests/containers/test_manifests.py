"""docker/rocm-targets.json and docker/cuda-targets.json: valid, exactly the declared stacks, and a
broken manifest is one error line naming the file and the field."""

from __future__ import annotations

import json

import pytest

from sol_execbench.containers.targets import TargetRequest, load_manifests, select_target
from sol_execbench.schema import unknown_keys
from sol_execbench.schema.containers import DockerTargetManifest
from sol_execbench.schema.loading import FormatError

from .conftest import MANIFESTS, REPO, clean_environ

DECLARED = {
    # target id: (base image tag, torch, torchvision, triton)
    "rocm-7.0.2-ubuntu-24.04-container": ("7.0.2-complete", "2.10.0+rocm7.0", "0.25.0+rocm7.0", "3.6.0"),
    "rocm-7.1.1-ubuntu-24.04-container": ("7.1.1-complete", "2.10.0+rocm7.1", "0.25.0+rocm7.1", "3.6.0"),
    "rocm-7.2.0-ubuntu-24.04-container": ("7.2-complete", "2.11.0+rocm7.2", "0.26.0+rocm7.2", "3.6.0"),
    "cuda-12.8-ubuntu-24.04-container": (None, "2.10.0+cu128", None, "3.6.0"),
    "cuda-13.0-ubuntu-24.04-container": (None, "2.11.0+cu130", None, "3.6.0"),
}


def test_manifests_declare_exactly_the_targets_of_the_configuration_reference():
    manifests = load_manifests(REPO)
    assert manifests["rocm"].default_target_id == "rocm-7.1.1-ubuntu-24.04-container"
    found = {t.target_id: t for m in manifests.values() for t in m.targets}
    assert set(found) == set(DECLARED)
    for target_id, (tag, torch, torchvision, triton) in DECLARED.items():
        target, wheels = found[target_id], found[target_id].pytorch_dependency_policy
        assert (wheels.torch_version, wheels.triton_version) == (torch, triton)
        if tag is not None:
            assert target.docker_image_tag == tag and target.docker_image_repository == "rocm/dev-ubuntu-24.04"
            assert wheels.torchvision_version == torchvision and wheels.triton_distribution == "triton-rocm"
            assert target.requested_rocm_user_space_version == target_id.split("-")[1]
        assert target.validation_status.value == "not_tested" and "native_host" in target.does_not_claim
        assert (REPO / target.dockerfile).is_file()
    for manifest in manifests.values():
        assert unknown_keys(manifest) == []


def test_default_target_resolves_to_the_reference_image():
    selected = select_target(load_manifests(REPO), TargetRequest.from_environ(None, False, clean_environ()))
    assert selected.selection.base_image == "rocm/dev-ubuntu-24.04:7.1.1-complete"
    assert selected.selection.image == "sol-execbench:rocm-7.1.1-complete"


def _broken(change) -> dict:
    data = json.loads(json.dumps(MANIFESTS["rocm"]))
    change(data)
    return data


@pytest.mark.parametrize("change, needle", [
    (lambda d: d["targets"].append(d["targets"][0]), "declared more than once"),
    (lambda d: d.update(default_target_id="rocm-9.9"), "default_target_id 'rocm-9.9'"),
    (lambda d: d["targets"][0]["pytorch_dependency_policy"].update(torch_version="2.10.0+rocm7.1"), "torch_version"),
    (lambda d: d["targets"][0].pop("requested_rocm_user_space_version"), "requested_rocm_user_space_version"),
    (lambda d: d["targets"][0]["pytorch_dependency_policy"].update(triton_distribution="triton"), "triton_distribution"),
    (lambda d: d["targets"][0].update(validation_status="validated"), "validation_status"),
])
def test_a_broken_manifest_names_the_field(change, needle):
    with pytest.raises(Exception) as caught:
        DockerTargetManifest.model_validate(_broken(change))
    assert needle in str(caught.value)


def test_a_broken_manifest_is_one_error_line_on_the_command_line(tmp_path, docker_cli):
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "cuda-targets.json").write_text(json.dumps(MANIFESTS["cuda"]))
    broken = _broken(lambda d: d.update(default_target_id="rocm-9.9"))
    (tmp_path / "docker" / "rocm-targets.json").write_text(json.dumps(broken))
    code, out, err = docker_cli(["preflight", "--dry-run", "--repo-root", str(tmp_path)], clean_environ())
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "rocm-targets.json" in err and "default_target_id" in err
    with pytest.raises(FormatError):
        load_manifests(tmp_path)


def test_an_undeclared_target_needs_the_allow_flag(docker_cli):
    env = clean_environ(ROCM_DOCKER_IMAGE="rocm/dev-ubuntu-24.04", ROCM_DOCKER_TAG="7.9-complete")
    code, out, err = docker_cli(["preflight", "--dry-run", "--target", "rocm-7.9"], env)
    assert code == 2 and "--allow-unknown-target" in err and len(err.strip().splitlines()) == 1
    code, out, _ = docker_cli(["preflight", "--dry-run", "--target", "rocm-7.9", "--allow-unknown-target"], env)
    target = json.loads(out)["target"]
    assert (target["declared"], target["base_image"], target["validation_status"]) == (
        False, "rocm/dev-ubuntu-24.04:7.9-complete", "not_tested")
    assert target["build_args"]["ROCM_DOCKER_TAG"] == "7.9-complete"
