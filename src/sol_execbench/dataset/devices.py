"""The evaluation slots of a run: ``--gpu-jobs N`` (or ``auto``, the visible GPUs) runs one
evaluation per GPU at a time on ``cuda:0`` ... ``cuda:N-1`` (torch's name on ROCm too); one slot
takes ``--device`` as given. On the CPU (``--device cpu``) N slots are N evaluations side by side."""

from __future__ import annotations

from sol_execbench.platform import parse_device_spec

from .discovery import DatasetUsageError
from .options import AUTO, resolve_count


def visible_gpus() -> int:
    """GPUs torch would see here (the environment probe's count, cached per host; no torch import)."""
    from sol_execbench.envprobe.snapshot import cached_snapshot

    return int(cached_snapshot().get("accelerator", {}).get("device_count") or 0)


def check_device(device: str | None) -> None:
    try:
        parse_device_spec(device)
    except ValueError:
        raise DatasetUsageError(f"--device {device}: give cpu, auto, an index N, cuda:N, hip:N or rocm:N") from None


def evaluation_slots(device: str | None, gpu_jobs: str) -> list[str | None]:
    check_device(device)
    kind = parse_device_spec(device)[0]
    device = None if kind == "auto" else device
    if gpu_jobs == "1":
        return [device]
    if kind == "cpu":
        return ["cpu"] * resolve_count("--gpu-jobs", gpu_jobs, 1)
    gpus = visible_gpus()
    count = resolve_count("--gpu-jobs", gpu_jobs, max(gpus, 1))
    if gpus == 0 and gpu_jobs == AUTO:
        return [device]  # no GPU: the evaluator's default device (the CPU)
    if device is not None:
        if count == 1:
            return [device]
        raise DatasetUsageError(f"--device {device} names one device but --gpu-jobs {gpu_jobs} runs on cuda:0..cuda:"
                                f"{count - 1}: drop --device (CUDA_VISIBLE_DEVICES chooses the GPUs)")
    if count > gpus:
        raise DatasetUsageError(f"--gpu-jobs {gpu_jobs}: {gpus} GPU(s) visible here; give at most {max(gpus, 1)} or "
                                "'auto'")
    return [f"cuda:{index}" for index in range(count)]
