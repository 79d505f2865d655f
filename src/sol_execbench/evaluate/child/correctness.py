"""Comparing a solution's output with the reference's, upstream's rule.

An element matches when ``|out - ref| <= atol + rtol * |ref|``. NaN or Inf in either tensor
fails (matching -inf may be allowed); an all-zero output where the reference is not fails; the
matched ratio must reach ``required_matched_ratio``; ``max_error_cap`` bounds every element.
"""

from __future__ import annotations

import math
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


def _non_finite_reason(x_bad: torch.Tensor, y_bad: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> str:
    """Which side holds the NaN or Inf: a reference that produces one is named, not the solution."""
    parts = []
    for bad, values, side in ((y_bad, y, "the reference output"), (x_bad, x, "the solution's output")):
        if bool(bad.any()):
            kind = "NaN" if bool(torch.isnan(values[bad]).any()) else "Inf"
            parts.append(f"{kind} in {side}")
    return "; ".join(parts)


def compare(output: torch.Tensor, reference: torch.Tensor, tol: ToleranceSpec) -> Comparison:
    """Element-wise comparison under ``tol``. Every statistic is computed on the tensors' device and
    read back in one synchronisation (they were eight, each a wait on a GPU). NaN and Inf are looked
    for only when the largest error is not finite: ``x - y`` is finite wherever both are (short of an
    overflow, which the search then rules out), so a clean comparison makes no pass of its own for
    them; on a 4096x8192 output each pass is a read of 128 MB."""
    x, y = _as_float(output), _as_float(reference)
    both_neg_inf = None
    if tol.allow_negative_inf:
        both_neg_inf = (x == float("-inf")) & (y == float("-inf"))
        # Zero both sides where both are -inf, rather than selecting the other elements: those
        # positions then match exactly and every index stays in the output's own coordinates.
        x, y = x.masked_fill(both_neg_inf, 0.0), y.masked_fill(both_neg_inf, 0.0)
    if x.numel() == 0:
        return Comparison(Correctness(), False)
    abs_err = (x - y).abs()
    y_abs = y.abs()
    exceeds = abs_err > (tol.max_atol + tol.max_rtol * y_abs)
    ranked = abs_err if both_neg_inf is None else abs_err.masked_fill(both_neg_inf, -1.0)  # never point at a -inf
    top, worst_flat = ranked.reshape(-1).max(dim=0)  # the first largest, as argmax finds it, in the same pass
    parts = [both_neg_inf.sum() if both_neg_inf is not None else torch.zeros((), device=x.device),
             torch.linalg.vector_norm(y), torch.linalg.vector_norm(x), exceeds.sum(),
             top if both_neg_inf is None else abs_err.max(), (abs_err / y_abs.clamp(min=tol.max_atol)).max(), worst_flat]
    (neg_inf_pairs, ref_norm, out_norm, exceeding, max_abs, max_rel,
     worst_flat) = torch.stack([p.to(torch.float64) for p in parts]).tolist()
    if not math.isfinite(max_abs):
        # The -inf pairs are zeros by now, so whatever is not finite here is not allowed.
        x_bad, y_bad = ~torch.isfinite(x), ~torch.isfinite(y)
        if bool(x_bad.any()) or bool(y_bad.any()):
            has_nan = bool(torch.isnan(x).any()) or bool(torch.isnan(y).any())
            first_bad = x_bad | y_bad
            where = _unravel(int(first_bad.flatten().to(torch.uint8).argmax()), tuple(first_bad.shape))
            return Comparison(Correctness(has_nan=has_nan, has_inf=not has_nan), True, 0.0, where,
                              reason=_non_finite_reason(x_bad, y_bad, x, y))
    counted = x.numel() - int(neg_inf_pairs)  # matching -inf positions are not counted
    if counted == 0:
        return Comparison(Correctness(), False)
    if ref_norm > 0 and out_norm == 0:
        return Comparison(Correctness(max_absolute_error=ref_norm, max_relative_error=ref_norm), True, 0.0,
                          reason="output is all zeros where the reference is not")
    matched = 1.0 - exceeding / counted
    worst = _unravel(int(worst_flat), tuple(abs_err.shape))
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
