"""``--dump-failures``: what is needed to reproduce a failing workload in a notebook."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from sol_execbench.schema import Definition, EvaluationStatus, Workload

if TYPE_CHECKING:
    from .calls import FailureEvidence

SECRET_SEED_NOTE = ("the inputs came from a secret seed that is not recorded (so that a solution cannot "
                    "predict them): load them from tensors.safetensors")


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:120]


def _element(values: list[Any] | None, pick: int | None, index: list[int] | None) -> float | None:
    if values is None or pick is None or index is None or pick >= len(values):
        return None
    t = values[pick]
    if not isinstance(t, torch.Tensor) or t.dim() != len(index):
        return None
    try:
        return float(t[tuple(index)].float())
    except Exception:
        return None


def _own_copy(t: torch.Tensor) -> torch.Tensor:
    # A copy of its own, not .contiguous(): safetensors refuses tensors that share memory, and an
    # output may alias an input or another output.
    return t.detach().to("cpu").clone(memory_format=torch.contiguous_format)


def dump_failure(root: Path, definition: Definition, solution: str, workload: Workload, status: EvaluationStatus,
                 reason: str, evidence: FailureEvidence) -> Path:
    """Write inputs, solution and reference outputs (safetensors) and a JSON note; returns the folder."""
    from safetensors.torch import save_file

    folder = root / _safe_name(definition.name) / _safe_name(workload.uuid)
    folder.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for name, value in zip(definition.inputs, evidence.inputs):
        if isinstance(value, torch.Tensor):
            tensors[f"input.{name}"] = _own_copy(value)
        else:
            scalars[name] = value
    for prefix, values in (("solution", evidence.solution_outputs), ("reference", evidence.reference_outputs)):
        for name, value in zip(definition.outputs, values or []):
            if isinstance(value, torch.Tensor):
                tensors[f"{prefix}.{name}"] = _own_copy(value)
    save_file(tensors, str(folder / "tensors.safetensors"))
    names = list(definition.outputs)
    pick = names.index(evidence.worst_output) if evidence.worst_output in names else None
    index = evidence.worst_index
    note = {
        "definition": definition.name, "solution": solution, "workload": workload.model_dump(mode="json"),
        "status": status.value, "reason": reason, "where": evidence.where, "round": evidence.round_index,
        "seed": evidence.seed, "seed_note": SECRET_SEED_NOTE if evidence.seed is None else None,
        "scalar_inputs": scalars,
        "outputs_present": {"solution": evidence.solution_outputs is not None,
                            "reference": evidence.reference_outputs is not None},
        "worst": {"output": evidence.worst_output, "index": index,
                  "solution_value": _element(evidence.solution_outputs, pick, index),
                  "reference_value": _element(evidence.reference_outputs, pick, index)},
        "reproduce": "load tensors.safetensors (input.<name>, solution.<output>, reference.<output>); or, "
                     "with a seed, sol_execbench.evaluate.child.inputs.seed_all(seed) then make_inputs(definition, "
                     "workload, device, blobs, custom_inputs_fn) remakes the inputs",
    }
    (folder / "failure.json").write_text(json.dumps(note, indent=2, default=str))
    return folder
