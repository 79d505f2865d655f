"""The cases of benchmarks/fidelity.py (also borrowed by benchmarks/launch_overhead.py).

Each case builds ``(fn, values)``: a callable and its argument list, all on the current CUDA
device. ``CASES`` maps a name to (description, builder). ``PLAIN_LOOP_CASES`` are the multi-kernel
launch-bound ones, judged against a plain unprofiled loop rather than Nsight Compute.
"""

from __future__ import annotations

from typing import Callable

import torch

Case = tuple[Callable, list]


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, device="cuda", dtype=dtype)


def _add(n: int) -> Case:
    return (lambda x, y: x + y), [_randn(n), _randn(n)]


def _softmax(rows: int, cols: int) -> Case:
    return (lambda x: torch.softmax(x, dim=-1)), [_randn(rows, cols)]


def _gemm(m: int, n: int, k: int) -> Case:
    return (lambda a, b: a @ b), [_randn(m, k, dtype=torch.bfloat16), _randn(k, n, dtype=torch.bfloat16)]


def _empty_kernel() -> Case:
    """A kernel that does nothing (``torch.cuda._sleep`` for zero cycles): what each instrument
    reads for no work at all, its own floor."""
    return (lambda: torch.cuda._sleep(0)), []


def _gemm_relu(m: int, n: int, k: int) -> Case:
    return (lambda a, b: torch.relu(a @ b)), [_randn(m, k, dtype=torch.bfloat16), _randn(k, n, dtype=torch.bfloat16)]


def _second_stream(rows: int, cols: int) -> Case:
    side = torch.cuda.Stream()

    def on_side_stream(x):
        current = torch.cuda.current_stream()
        side.wait_stream(current)
        with torch.cuda.stream(side):
            y = torch.softmax(x, dim=-1)
        current.wait_stream(side)
        y.record_stream(current)
        return y

    return on_side_stream, [_randn(rows, cols)]


def _rmsnorm(rows: int, hidden: int) -> Case:
    """One fused RMSNorm kernel (Triton; PyTorch's fused ``rms_norm`` where Triton is missing)."""
    values = [_randn(rows, hidden, dtype=torch.bfloat16), torch.ones(hidden, device="cuda", dtype=torch.bfloat16)]
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return (lambda x, w: torch.nn.functional.rms_norm(x, (hidden,), w, 1e-5)), values

    @triton.jit
    def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0).to(tl.float32)
        inv = tl.rsqrt(tl.sum(x * x, axis=0) / n + eps)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n + offs, (x * inv * w).to(tl.bfloat16), mask=mask)

    def rmsnorm(x, w):
        y = torch.empty_like(x)
        rmsnorm_kernel[(x.shape[0],)](x, w, y, hidden, 1e-5, BLOCK=triton.next_power_of_2(hidden))
        return y

    return rmsnorm, values


def _eager_rmsnorm(rows: int, hidden: int) -> Case:
    """RMSNorm written as PyTorch eager operators, one kernel each (a dozen: float, pow, mean, add
    eps, rsqrt, mul, casts, mul weight, clamp ...), the way many reference implementations are."""
    def rmsnorm(x, w):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        h = torch.clamp(h.to(x.dtype).float() * (1.0 + w.float()), -65504.0, 65504.0)
        return (h * 1.0 + 0.0).to(x.dtype)

    return rmsnorm, [_randn(rows, hidden, dtype=torch.bfloat16), _randn(hidden, dtype=torch.bfloat16)]


def _linear_backward(batch: int, d_in: int, d_out: int) -> Case:
    """A linear layer's backward as explicit operators (grad input, grad weight, grad bias: a few
    kernels). Explicit, not ``torch.autograd.grad``: the timed arguments are fresh copies, which
    carry no autograd graph."""
    def backward(x, w, grad_y):
        return grad_y @ w, grad_y.t() @ x, grad_y.sum(0)

    return backward, [_randn(batch, d_in, dtype=torch.bfloat16), _randn(d_out, d_in, dtype=torch.bfloat16),
                      _randn(batch, d_out, dtype=torch.bfloat16)]


def _adds(n: int, count: int) -> Case:
    def adds(x, y):
        for _ in range(count):
            x = x + y
        return x

    return adds, [_randn(n), _randn(n)]


CASES: dict[str, tuple[str, Callable[[], Case]]] = {
    "empty_kernel": ("an empty kernel (each instrument's floor)", _empty_kernel),
    "add_4k": ("fp32 add, 4,096 elements", lambda: _add(4096)),
    "add_1m": ("fp32 add, 1M elements", lambda: _add(1 << 20)),
    "softmax_64x8192": ("fp32 softmax 64x8192", lambda: _softmax(64, 8192)),
    "gemm_256x4096x4096": ("bf16 GEMM 256x4096x4096", lambda: _gemm(256, 4096, 4096)),
    "rmsnorm_4096x4096": ("bf16 RMSNorm 4096x4096 (one Triton kernel)", lambda: _rmsnorm(4096, 4096)),
    "add_16m": ("fp32 add, 16M elements", lambda: _add(1 << 24)),
    "softmax_4096x8192": ("fp32 softmax 4096x8192", lambda: _softmax(4096, 8192)),
    "two_kernel_gemm_relu": ("bf16 GEMM 4096^3 then ReLU (two kernels)", lambda: _gemm_relu(4096, 4096, 4096)),
    "second_stream_softmax": ("softmax 4096x8192 on a second stream, joined", lambda: _second_stream(4096, 8192)),
    "add_64m": ("fp32 add, 64M elements", lambda: _add(1 << 26)),
    "gemm_8192x4096x4096": ("bf16 GEMM 8192x4096x4096", lambda: _gemm(8192, 4096, 4096)),
    "gemm_8192x8192x8192": ("bf16 GEMM 8192^3 (~2 ms)", lambda: _gemm(8192, 8192, 8192)),
    # Launch-bound, several kernels per call: judged against a plain loop (PLAIN_LOOP_CASES).
    "eager_rmsnorm_7x4096": ("eager RMSNorm 7x4096, a dozen operators (launch-bound)", lambda: _eager_rmsnorm(7, 4096)),
    "eager_rmsnorm_512x4096": ("eager RMSNorm 512x4096, a dozen operators", lambda: _eager_rmsnorm(512, 4096)),
    "linear_backward_small": ("bf16 linear backward 64x1024 -> 1024 (grad input, weight, bias)",
                              lambda: _linear_backward(64, 1024, 1024)),
    "add_4k_x10": ("ten fp32 adds of 4,096 elements in one call (launch-bound)", lambda: _adds(4096, 10)),
}

PLAIN_LOOP_CASES = frozenset({"eager_rmsnorm_7x4096", "eager_rmsnorm_512x4096", "linear_backward_small", "add_4k_x10"})
