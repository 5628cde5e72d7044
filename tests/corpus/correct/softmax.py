"""Row softmax, two ways: the tutorial's one-row-per-program kernel and an online (single
read for the statistics) looped kernel for rows longer than one block."""
import torch
import tritondiff  # noqa: F401  (decides the device before any @triton.jit)
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


@triton.jit
def _softmax_row_kernel(x_ptr, y_ptr, n_cols, sx_row, sx_col, sy_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * sx_row + cols * sx_col, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * sy_row + cols, (num / den).to(y_ptr.dtype.element_ty), mask=mask)


@subject(reference=lambda x: torch.softmax(x, dim=-1),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS)}, dims={"M": (0, 256), "N": (1, 8192)})
def softmax_tutorial(x):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    _softmax_row_kernel[(M,)](x, y, N, x.stride(0), x.stride(1), y.stride(0), BLOCK=triton.next_power_of_2(N))
    return y


@triton.jit
def _softmax_online_kernel(x_ptr, y_ptr, n_cols, sx_row, sx_col, sy_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * sx_row
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols * sx_col, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # a tile (or a prefix) of -inf leaves m_new at -inf: shift by 0 then, never by -inf
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    shift = tl.where(m == -float("inf"), 0.0, m)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols * sx_col, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * sy_row + cols, (tl.exp(x - shift) / s).to(y_ptr.dtype.element_ty), mask=mask)


@subject(reference=lambda x: torch.softmax(x, dim=-1),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS)}, dims={"M": (0, 4), "N": (1, 1_200_000)})
def softmax_online_looped(x):
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0:
        return y
    _softmax_online_kernel[(M,)](x, y, N, x.stride(0), x.stride(1), y.stride(0), BLOCK=4096)
    return y
