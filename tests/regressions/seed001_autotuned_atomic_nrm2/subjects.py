"""Seed 001, attempt 2: ||x||_2 with ``tl.atomic_add`` into one accumulator, under ``triton.autotune``.

The autotuner benchmarks every config by launching the kernel on the real
arguments.  Without ``reset_to_zero`` each trial adds its sum of squares into
the same output, so the first (tuning) call returns the sum over all trials
(the notebook saw 1265x the truth) while later, cached calls are right.  The
harness calls it "tuning_trial" and shrank it to N = 1.

The fix: ``reset_to_zero=["out_ptr"]`` makes the autotuner zero the accumulator
before every trial, so the tuning call's result is that of one launch.
"""
import torch
import triton
import triton.language as tl

from tritondiff.base import device  # noqa: F401  (device decision before any kernel is defined)
from tritondiff.harness import subject, tensor

NORM = dict(reference=lambda x: torch.linalg.vector_norm(x),
            inputs={"x": tensor(("N",), dtypes=("float32", "float16"),
                                values=("normal", "uniform_pos", "large_offset", "zeros", "integer"))},
            dims={"N": (0, 3_000_000)})
CONFIGS = [triton.Config({"BLOCK": b}) for b in (1024, 2048, 4096)]


@triton.jit
def _sumsq_atomic(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x * x))


_accumulates_across_trials = triton.autotune(configs=CONFIGS, key=["n"])(_sumsq_atomic)
_reset_before_each_trial = triton.autotune(configs=CONFIGS, key=["n"], reset_to_zero=["out_ptr"])(_sumsq_atomic)


def _norm(kernel, x):
    out = torch.zeros((), device=x.device, dtype=torch.float32)
    n = x.numel()
    kernel[lambda meta: (max(1, triton.cdiv(n, meta["BLOCK"])),)](x.contiguous(), out, n)
    return torch.sqrt(out).to(x.dtype)


@subject(name="regressions.seed001_autotuned_atomic_nrm2.buggy", **NORM)
def buggy(x):
    return _norm(_accumulates_across_trials, x)


@subject(name="regressions.seed001_autotuned_atomic_nrm2.fixed", deterministic=False, **NORM)
def fixed(x):          # float atomics: the order of additions may vary run to run on a GPU
    return _norm(_reset_before_each_trial, x)
