"""Comparing a solution's output with the reference's, upstream's rule.

An element matches when ``|out - ref| <= atol + rtol * |ref|``. NaN or Inf in either tensor
fails (matching -inf may be allowed); an all-zero output where the reference is not fails; the
matched ratio must reach ``required_matched_ratio``; ``max_error_cap`` bounds every element.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from sol_execbench.schema import Correctness, ToleranceSpec


@dataclass
class Comparison:
    correctness: Correctness
    failed: bool
    matched_ratio: float = 1.0
    worst_index: list[int] | None = None
    reason: str | None = None


def _as_float(t: torch.Tensor) -> torch.Tensor:
    if getattr(torch, "float4_e2m1fn_x2", None) is not None and t.dtype == torch.float4_e2m1fn_x2:
        return t.view(torch.uint8).to(torch.float32)  # compare packed codes exactly
    return t.to(torch.float32)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """Index of a flat position (torch.unravel_index would import sympy: ~1 s per child)."""
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return index[::-1]


def compare(output: torch.Tensor, reference: torch.Tensor, tol: ToleranceSpec) -> Comparison:
    x, y = _as_float(output), _as_float(reference)
    x_bad, y_bad = ~torch.isfinite(x), ~torch.isfinite(y)
    if tol.allow_negative_inf:
        both_neg_inf = (x == float("-inf")) & (y == float("-inf"))
        x_bad, y_bad = x_bad & ~both_neg_inf, y_bad & ~both_neg_inf
    else:
        both_neg_inf = None
    if bool(x_bad.any()) or bool(y_bad.any()):
        has_nan = bool(torch.isnan(x).any()) or bool(torch.isnan(y).any())
        where = "reference" if bool(y_bad.any()) and not bool(x_bad.any()) else "output"
        return Comparison(Correctness(has_nan=has_nan, has_inf=not has_nan), True, 0.0,
                          reason=f"{'NaN' if has_nan else 'Inf'} in the {where}")
    if both_neg_inf is not None:
        keep = ~both_neg_inf
        x, y = x[keep], y[keep]
    if x.numel() == 0:
        return Comparison(Correctness(), False)
    ref_norm = float(torch.linalg.vector_norm(y))
    if ref_norm > 0 and float(torch.linalg.vector_norm(x)) == 0:
        return Comparison(Correctness(max_absolute_error=ref_norm, max_relative_error=ref_norm), True, 0.0,
                          reason="output is all zeros where the reference is not")
    abs_err = (x - y).abs()
    exceeds = abs_err > (tol.max_atol + tol.max_rtol * y.abs())
    matched = 1.0 - float(exceeds.sum()) / abs_err.numel()
    max_abs = float(abs_err.max())
    max_rel = float((abs_err / y.abs().clamp(min=tol.max_atol)).max())
    flat_worst = int(abs_err.argmax())
    worst = _unravel(flat_worst, tuple(abs_err.shape))
    failed = matched < tol.required_matched_ratio
    reason = f"matched ratio {matched:.4f} < required {tol.required_matched_ratio}" if failed else None
    if tol.max_error_cap is not None and max_abs > tol.max_error_cap:
        failed, reason = True, f"max absolute error {max_abs:.4g} exceeds max_error_cap {tol.max_error_cap}"
    return Comparison(Correctness(max_absolute_error=max_abs, max_relative_error=max_rel), failed, matched, worst, reason)


@dataclass
class RoundTally:
    """The worst comparison over all rounds and outputs of one workload."""

    worst: Correctness = field(default_factory=Correctness)
    min_matched_ratio: float = 1.0
    worst_output: str | None = None
    worst_index: list[int] | None = None
    rounds: int = 0

    def add(self, name: str, comp: Comparison) -> None:
        c = comp.correctness
        self.min_matched_ratio = min(self.min_matched_ratio, comp.matched_ratio)
        worse = (c.has_nan and not self.worst.has_nan) or (c.has_inf and not (self.worst.has_nan or self.worst.has_inf))
        if worse or c.max_absolute_error > self.worst.max_absolute_error:
            self.worst = c.model_copy()
            self.worst_output, self.worst_index = name, comp.worst_index
        else:
            self.worst.max_relative_error = max(self.worst.max_relative_error, c.max_relative_error)

    def result(self) -> Correctness:
        out = self.worst.model_copy()
        out.extra = {"matched_ratio": self.min_matched_ratio, "rounds": self.rounds,
                     "worst_output": self.worst_output, "worst_index": self.worst_index}
        return out
