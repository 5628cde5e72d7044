"""Seed 001, attempt 1: ||x||_2 where ``tl.sum`` was taken for a global reduction.

``tl.sum`` reduces one program's block.  In the buggy kernel every program
stores its block's norm to the same output, so the result is the norm of
whichever block stored last: wrong as soon as N exceeds one block (the
harness shrank it to N = 1025, one element past a 1024 block).

The fix keeps the blockwise first stage but makes the reduction global: program
``p`` stores its block's sum of squares to slot ``p``, and a one-program kernel
adds the slots in order (deterministic, no atomics), then the host takes the
square root:

    ||x||_2 = sqrt( sum_p sum_{i in block p} x_i^2 )
"""
import torch
import triton
import triton.language as tl

from tritondiff.base import device  # noqa: F401  (device decision before any kernel is defined)
from tritondiff.harness import subject, tensor

BLOCK = 1024
NORM = dict(reference=lambda x: torch.linalg.vector_norm(x),
            inputs={"x": tensor(("N",), dtypes=("float32", "float16"),
                                values=("normal", "uniform_pos", "large_offset", "zeros", "integer"))},
            dims={"N": (0, 3_000_000)})


@triton.jit
def _blockwise_norm_overwrites(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr, tl.sqrt(tl.sum(x * x)))           # the bug: one output, every program stores to it


@subject(name="regressions.seed001_blockwise_sum_nrm2.buggy", **NORM)
def buggy(x):
    out = torch.zeros((), device=x.device, dtype=torch.float32)
    n = x.numel()
    _blockwise_norm_overwrites[(max(1, triton.cdiv(n, BLOCK)),)](x.contiguous(), out, n, BLOCK=BLOCK)
    return out.to(x.dtype)


@triton.jit
def _block_sumsq_to_slot(x_ptr, slot_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(slot_ptr + pid, tl.sum(x * x))              # one slot per program: nothing is overwritten


@triton.jit
def _sum_slots_in_order(slot_ptr, out_ptr, n_slots, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_slots, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(slot_ptr + offs, mask=offs < n_slots, other=0.0)
    tl.store(out_ptr, tl.sum(acc))


@subject(name="regressions.seed001_blockwise_sum_nrm2.fixed", **NORM)
def fixed(x):
    n = x.numel()
    slots = max(1, triton.cdiv(n, BLOCK))
    partial = torch.empty(slots, device=x.device, dtype=torch.float32)
    _block_sumsq_to_slot[(slots,)](x.contiguous(), partial, n, BLOCK=BLOCK)
    total = torch.empty((), device=x.device, dtype=torch.float32)
    _sum_slots_in_order[(1,)](partial, total, slots, BLOCK=BLOCK)
    return torch.sqrt(total).to(x.dtype)
