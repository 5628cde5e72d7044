"""Bugs seen only with non-finite inputs: found as `edge` findings (they fail under ``--strict``).

By the harness's tiers a divergence that needs NaN or inf in the inputs is an edge finding: recorded, shrunk,
dumped and warned about, failing a run only when strict.  These cases check that it is found at that tier.
"""
import torch
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


# --------------------------------------------------------------------------- NaN dropped by max
@triton.jit
def _rowmax_where(x_ptr, y_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=-float("inf")).to(tl.float32)
        m = tl.where(x > m, x, m)              # BUG: x > m is False for NaN, so NaN never enters the max
    tl.store(y_ptr + row, tl.max(m, 0).to(y_ptr.dtype.element_ty))


@subject(reference=lambda x: x.amax(-1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (1, 64), "N": (1, 8192)})
def bug_nan_dropped_by_max(x):
    """Max/argmax reductions built from comparisons (or fmax-style maximum) drop NaN where torch
    propagates it; reports of NaN losses that vanish inside a fused kernel."""
    M, N = x.shape
    y = torch.empty(M, dtype=x.dtype, device=x.device)
    _rowmax_where[(M,)](x, y, N, x.stride(0), x.stride(1), BLOCK=1024)
    return y
