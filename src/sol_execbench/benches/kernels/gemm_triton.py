"""A tiled Triton GEMM, C = A @ B with fp32 accumulation: the GEMM sweep's shipped Triton variant.

This file is the source of a solution (read as text and staged by the evaluator), not a module the
package imports: it needs only torch and triton. ``run(A, B)`` takes A [M, K] and B [K, N]
(bf16, fp16), or for fp8 B as [N, K] (the layout ``torch._scaled_mm`` wants; C is bf16 then)."""

import os

import torch
import triton
import triton.language as tl


def _configs():
    if os.environ.get("TRITON_INTERPRET") == "1":  # the CPU interpreter: one small tile, no tuning
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, num_warps=4, num_stages=1)]
    return [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=4),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 1}, num_warps=4, num_stages=4),
    ]


@triton.autotune(configs=_configs(), key=["M", "N", "K"])
@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    # grouped order: GROUP_M row blocks share their B columns in L2
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=ks[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    out_rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


def run(A, B):
    fp8 = A.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
    b = B.t() if fp8 else B  # fp8: B is [N, K]; its transpose is a [K, N] view
    M, K = A.shape
    N = b.shape[1]
    C = torch.empty((M, N), device=A.device, dtype=torch.bfloat16 if fp8 else A.dtype)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _matmul[grid](A, b, C, M, N, K, A.stride(0), A.stride(1), b.stride(0), b.stride(1), C.stride(0), C.stride(1))
    return C
