"""``--dump-failures``: what is needed to reproduce a failing workload in a notebook."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from sol_execbench.schema import Definition, Workload


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:120]


def _element(t: Any, index: list[int] | None) -> float | None:
    if not isinstance(t, torch.Tensor) or index is None or t.dim() != len(index):
        return None
    try:
        return float(t[tuple(index)].float())
    except Exception:
        return None


def dump_failure(root: Path, definition: Definition, solution: str, workload: Workload, seed: int, round_index: int,
                 inputs: list[Any], sol_out: list[Any], ref_out: list[Any], reason: str | None,
                 worst_output: str | None, worst_index: list[int] | None) -> Path:
    """Write inputs, solution and reference outputs (safetensors) and a JSON note; returns the folder."""
    from safetensors.torch import save_file

    folder = root / _safe_name(definition.name) / _safe_name(workload.uuid)
    folder.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for name, value in zip(definition.inputs, inputs):
        if isinstance(value, torch.Tensor):
            tensors[f"input.{name}"] = value.detach().cpu().contiguous()
        else:
            scalars[name] = value
    for prefix, values in (("solution", sol_out), ("reference", ref_out)):
        for name, value in zip(definition.outputs, values):
            if isinstance(value, torch.Tensor):
                tensors[f"{prefix}.{name}"] = value.detach().cpu().contiguous()
    save_file(tensors, str(folder / "tensors.safetensors"))
    names = list(definition.outputs)
    pick = names.index(worst_output) if worst_output in names else None
    note = {
        "definition": definition.name, "solution": solution, "workload": workload.model_dump(mode="json"),
        "seed": seed, "round": round_index, "reason": reason, "scalar_inputs": scalars,
        "worst": {"output": worst_output, "index": worst_index,
                  "solution_value": _element(sol_out[pick], worst_index) if pick is not None else None,
                  "reference_value": _element(ref_out[pick], worst_index) if pick is not None else None},
        "reproduce": "torch.manual_seed(seed) then make the inputs as the definition says, or load "
                     "tensors.safetensors: input.<name>, solution.<output>, reference.<output>",
    }
    (folder / "failure.json").write_text(json.dumps(note, indent=2, default=str))
    return folder
