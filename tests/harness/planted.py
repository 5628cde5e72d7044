"""Kernels with planted bugs, and their correct twins, declared as subjects.

Each buggy subject is wrong in exactly one way a real kernel goes wrong; the
tests in test_planted.py show the harness finds each one, with the right
failure class, and shrinks it to a minimal case.  The twins must pass.
Blocks are large so million-element examples stay quick in the interpreter.
"""
import torch
import triton
import triton.language as tl

from tritondiff.harness import subject, tensor

BLOCK = 1 << 16
FLOATS = ("float32", "float16", "bfloat16")


# ----------------------------------------------------------------------------- shared sum kernels

@triton.jit
def _partial_sum_kernel(x_ptr, part_ptr, n, BLOCK: tl.constexpr, SQUARE: tl.constexpr,
                        DROP_NAN: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    if DROP_NAN:
        # planted: NaN silently becomes 0 (tested on the bits: GPU compilers may fold x != x)
        bits = x.to(tl.int32, bitcast=True) & 0x7FFFFFFF
        x = tl.where(bits > 0x7F800000, 0.0, x)
    if SQUARE:
        x = x * x
    tl.store(part_ptr + pid, tl.sum(x))


@triton.jit
def _final_sum_kernel(part_ptr, out_ptr, n_part, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_part, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < n_part, other=0.0)
    tl.store(out_ptr, tl.sum(acc))


def _sum(x, n, *, square=False, drop_nan=False):
    x = x.contiguous()
    programs = max(1, triton.cdiv(n, BLOCK))
    part = torch.empty(programs, device=x.device, dtype=torch.float32)
    _partial_sum_kernel[(programs,)](x, part, n, BLOCK=BLOCK, SQUARE=square, DROP_NAN=drop_nan)
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _final_sum_kernel[(1,)](part, out, programs, BLOCK=1024)
    return out


SUM = dict(reference=lambda x: x.sum(), dims={"N": (0, 3_000_000)})


# ----------------------------------------------------------------------------- correct twins

@subject(**SUM, inputs={"x": tensor(("N",), dtypes=FLOATS)})
def correct_sum(x):
    """Looped float32 sum over millions of elements, any float dtype: must pass."""
    return _sum(x, x.numel()).to(x.dtype)


@subject(reference=lambda x: torch.linalg.vector_norm(x), dims={"N": (0, 3_000_000)},
         inputs={"x": tensor(("N",), dtypes=FLOATS, values=("normal", "uniform_pos", "large_offset", "zeros",
                                                             "integer"))})
def correct_sumsq_norm(x):
    return torch.sqrt(_sum(x, x.numel(), square=True)).to(x.dtype)


# ----------------------------------------------------------------------------- planted bugs

@subject(**SUM, inputs={"x": tensor(("N",), dtypes=("float32",), values=("uniform_pos",))})
def truncated_sum(x):
    """Planted: the reduction stops at Triton's block limit (sums only the first 2^20 elements)."""
    return _sum(x, min(x.numel(), 1 << 20)).to(x.dtype)


@subject(**SUM, inputs={"x": tensor(("N",), dtypes=("float32",), values=("uniform_pos",))})
def pow2_only_sum(x):
    """Planted: rounds the length down to a power of two (right only for powers of two)."""
    n = x.numel()
    return _sum(x, 1 << (n.bit_length() - 1) if n else 0).to(x.dtype)


@triton.jit
def _fp16_mean_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float16)   # planted: half-precision accumulators
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc.to(tl.float32)) / n)


# Values whose fp16 lane sums stay finite (large ones would overflow 65504 first: a nonfinite finding,
# not this one).  Zero-mean "normal" values show the bug from N ~ 10^4: each lane's running sum rounds
# at its own ulp; "uniform_pos" alone hid it below N ~ 4M (round-to-nearest stays unbiased until a lane
# passes 4096).
@subject(reference=lambda x: x.mean(), dims={"N": (1, 3_000_000)},
         inputs={"x": tensor(("N",), dtypes=("float16",), nonfinite=False,
                             values=("normal", "uniform_pos", "integer"))})
def fp16_accumulating_mean(x):
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _fp16_mean_kernel[(1,)](x.contiguous(), out, x.numel(), BLOCK=1024)
    return out.to(x.dtype)


@triton.jit
def _naive_var_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        s += x
        sq += x * x
    mean = tl.sum(s) / n
    tl.store(out_ptr, tl.sum(sq) / n - mean * mean)    # planted: E[x^2] - E[x]^2 cancels


# (values restricted so the finding is the cancellation, not the kernel's equally real underflow)
@subject(reference=lambda x: torch.var(x, correction=0), dims={"N": (1, 100_000)},
         inputs={"x": tensor(("N",), dtypes=("float32",), nonfinite=False,
                             values=("normal", "uniform_pos", "large_offset", "zeros", "integer"))})
def naive_variance(x):
    out = torch.empty((), device=x.device, dtype=torch.float32)
    _naive_var_kernel[(1,)](x.contiguous(), out, x.numel(), BLOCK=4096)
    return out


@triton.jit
def _naive_softmax_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
    e = tl.exp(x)                       # planted: no max subtraction, exp overflows for x > 88
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e), mask=mask)


@subject(reference=lambda x: torch.softmax(x, -1), dims={"M": (1, 64), "N": (1, 1024)},
         inputs={"x": tensor(("M", "N"), dtypes=("float32",), layouts=("contiguous",), nonfinite=False)})
def naive_softmax(x):
    out = torch.empty_like(x)
    _naive_softmax_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offs
        # planted: row-major contiguous addressing assumed, strides ignored
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc))


@subject(reference=lambda x: x.sum(-1), dims={"M": (1, 64), "N": (1, 4096)},
         inputs={"x": tensor(("M", "N"), dtypes=("float32",), layouts=("contiguous", "transposed", "strided", "offset"),
                             nonfinite=False)})
def contiguous_assumed_row_sum(x):
    out = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    _row_sum_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=1024)
    return out


@subject(**SUM, inputs={"x": tensor(("N",), dtypes=("float32",))})
def nan_dropping_sum(x):
    return _sum(x, x.numel(), drop_nan=True)


# ----------------------------------------------------------------------------- online softmax over masked rows

@triton.jit
def _online_softmax_kernel(x_ptr, y_ptr, n_cols, stride_row, BLOCK: tl.constexpr, GUARDED: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride_row
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, 0))
        if GUARDED:      # a tile with nothing unmasked yet keeps the shift finite
            shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        else:            # planted: exp(-inf - -inf) is NaN while every element so far is masked
            shift = m_new
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), 0)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * n_cols + cols, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def _online_softmax(x, guarded):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel():
        _online_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=64, GUARDED=guarded)
    return y


MASKED_SCORES = dict(reference=lambda x: torch.softmax(x, -1), dims={"M": (1, 16), "N": (1, 4096)},
                     inputs={"x": tensor(("M", "N"), dtypes=("float32",), layouts=("contiguous", "offset"),
                                         values=("normal", "masked"), nonfinite=False)})


@subject(**MASKED_SCORES)
def online_softmax_masked_first_tile(x):
    return _online_softmax(x, guarded=False)


@subject(**MASKED_SCORES)
def online_softmax_guarded(x):
    return _online_softmax(x, guarded=True)


# ----------------------------------------------------------------------------- 32-bit offsets (huge shapes)

@triton.jit
def _rms_norm_rows(x_ptr, w_ptr, y_ptr, stride, N, eps, WIDE_OFFSETS: tl.constexpr, BLOCK: tl.constexpr):
    # One row a program, as row-wise LLM kernels are written; without WIDE_OFFSETS, row * stride is int32
    # (planted: past 2^31 / stride rows it wraps and reads and writes another row, or outside the tensor)
    row = tl.program_id(0)
    if WIDE_OFFSETS:
        row = row.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def _rms_norm_reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _rms_norm(x, w, wide):
    x, w = x.contiguous(), w.contiguous()
    y = torch.empty_like(x)
    if x.numel():
        _rms_norm_rows[(x.shape[0],)](x, w, y, x.stride(0), x.shape[1], 1e-6, WIDE_OFFSETS=wide,
                                      BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


ROWS = dict(reference=_rms_norm_reference, dims={"T": (1, 64), "H": (1, 256)},
            inputs={"x": tensor(("T", "H"), dtypes=("float32", "float16")), "w": tensor(("H",), dtype_like="x")})


@subject(**ROWS)
def rms_norm_int32_offsets(x, w):
    """Planted: ``program_id * row_stride`` in int32 (right until the offset passes 2^31: huge shapes only)."""
    return _rms_norm(x, w, wide=False)


@subject(**ROWS)
def rms_norm_int64_offsets(x, w):
    """The twin with 64-bit row offsets: must pass at every size."""
    return _rms_norm(x, w, wide=True)
