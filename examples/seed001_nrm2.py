"""The L2-norm kernels of seed 001 ("The Misadventures of L2 Norm Triton Kernel"), as tritondiff subjects.

    tritondiff check examples/seed001_nrm2.py

Four attempts at ||x||_2, each declared against ``torch.linalg.vector_norm``:

* ``blockwise_sum_nrm2``  -- ``tl.sum`` is a per-block reduction, not a global one: the
  result is one block's norm.  FAIL (mismatch) as soon as N exceeds one block.
* ``autotuned_atomic_nrm2`` -- a single kernel with ``tl.atomic_add`` under
  ``triton.autotune`` and no ``reset_to_zero``: every tuning trial adds into the
  output (the notebook saw 1265x the truth).  FAIL (tuning_trial).
* ``autotuned_atomic_nrm2_reset`` -- the same kernel with ``reset_to_zero``: passes.
* ``two_kernel_nrm2`` -- per-block partial sums to distinct slots, then one
  sequential final sum: passes.

Changes from the notebook, so the subjects have the reference's contract (0-d
result in the input's dtype) and stay quick in the interpreter: float32
accumulation, grids from the chosen block size, blocks of 1024-4096.
"""
import torch
import triton
import triton.language as tl

from tritondiff import subject, tensor

# The notebook's kernels square in float32 without scaling, so |x| ~ 1e20 (float32 near
# its max included) overflows and |x| ~ 1e-38 underflows: real limits of these kernels
# (kernels.nrm2 scales and has neither), so the examples leave those value families out of
# their domain.  (Eager float32 on CPU accumulates in float64, so it does not overflow.)
NORM = dict(reference=lambda x: torch.linalg.vector_norm(x),
            inputs={"x": tensor(("N",), dtypes=("float32", "float16"),
                                values=("normal", "uniform_pos", "large_offset", "zeros", "integer"))},
            dims={"N": (0, 3_000_000)})


# ----------------------------------------------------------------------------- attempt 1: tl.sum per block

@triton.jit
def _blockwise_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    # tl.sum reduces this block only; every program overwrites the one output.
    tl.store(out_ptr, tl.sqrt(tl.sum(x * x)))


@subject(**NORM)
def blockwise_sum_nrm2(x):
    out = torch.zeros((), device=x.device, dtype=torch.float32)
    n = x.numel()
    _blockwise_sum_kernel[(max(1, triton.cdiv(n, 1024)),)](x.contiguous(), out, n, BLOCK=1024)
    return out.to(x.dtype)


# ----------------------------------------------------------------------------- attempt 2: autotuned atomic_add

_ATOMIC_CONFIGS = [triton.Config({"BLOCK": b}) for b in (1024, 2048, 4096)]


@triton.jit
def _atomic_sum_body(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x * x))


_atomic_sum_kernel = triton.autotune(configs=_ATOMIC_CONFIGS, key=["n"])(_atomic_sum_body)
_atomic_sum_kernel_reset = triton.autotune(configs=_ATOMIC_CONFIGS, key=["n"],
                                           reset_to_zero=["out_ptr"])(_atomic_sum_body)


def _atomic_nrm2(kernel, x):
    out = torch.zeros((), device=x.device, dtype=torch.float32)
    n = x.numel()
    kernel[lambda meta: (max(1, triton.cdiv(n, meta["BLOCK"])),)](x.contiguous(), out, n)
    return torch.sqrt(out).to(x.dtype)


@subject(**NORM)
def autotuned_atomic_nrm2(x):
    return _atomic_nrm2(_atomic_sum_kernel, x)


@subject(**NORM, deterministic=False)   # float atomics: the order of additions varies run to run
def autotuned_atomic_nrm2_reset(x):
    return _atomic_nrm2(_atomic_sum_kernel_reset, x)


# ----------------------------------------------------------------------------- attempt 3: two kernels

@triton.autotune(configs=[triton.Config({"BLOCK": b}) for b in (1024, 2048, 4096)], key=["n"])
@triton.jit
def _nrm2_partial_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    # each program owns one slot: safe under autotuning, no atomics
    tl.store(partial_ptr + pid, tl.sum(x * x))


@triton.jit
def _nrm2_final_kernel(partial_ptr, out_ptr, n_partial, BLOCK: tl.constexpr):
    # one program walks the partials in order: deterministic
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_partial, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < n_partial, other=0.0)
    tl.store(out_ptr, tl.sum(acc))


@subject(**NORM)
def two_kernel_nrm2(x):
    n = x.numel()
    # As in the notebook, the grid has one program per slot for the smallest block, whatever
    # block the autotuner picks: programs past the data store 0, so every slot is rewritten by
    # every trial.  (Sizing the grid from the chosen block leaves stale slots from earlier
    # trials: tritondiff reports that variant as a tuning_trial finding.)
    slots = max(1, triton.cdiv(n, 1024))
    partial = torch.empty(slots, device=x.device, dtype=torch.float32)
    _nrm2_partial_kernel[(slots,)](x.contiguous(), partial, n)
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _nrm2_final_kernel[(1,)](partial, out, partial.numel(), BLOCK=1024)
    return torch.sqrt(out).to(x.dtype)
