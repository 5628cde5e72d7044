"""Buggy kernels, each re-creating a bug class seen in public bug reports (rewritten from scratch;
the docstrings say where the class comes from and what goes wrong).  Every subject here must FAIL."""
import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


# --------------------------------------------------------------------------- missing mask on the last block
@triton.jit
def _scale_nomask(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)                     # BUG: no mask; the last block reads past the end
    tl.store(y_ptr + offs, x * 2, mask=offs < n)


@subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",), dtypes=FLOATS)}, dims={"N": (1, 100_000)})
def bug_missing_mask_last_block(x):
    """Elementwise kernels in many repos mask the store but forget the load: on the GPU the tail block
    reads out of bounds (usually harmless garbage, sometimes an illegal address).  Expected: out_of_bounds."""
    x = x.contiguous()
    y = torch.empty_like(x)
    _scale_nomask[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


# --------------------------------------------------------------------------- strides ignored
@triton.jit
def _softmax_assume_contig(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf")).to(tl.float32)   # BUG: stride = N
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * N + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=cols < N)


@subject(reference=lambda x: torch.softmax(x, -1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (1, 64), "N": (1, 1024)})
def bug_strides_ignored(x):
    """Reports against fused softmax/norm kernels whose wrapper passes a transposed or sliced tensor
    and the kernel indexes row * N, as if it were contiguous.  Expected: mismatch on non-contiguous x."""
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    _softmax_assume_contig[(M,)](x, y, N, BLOCK=triton.next_power_of_2(N))
    return y


# --------------------------------------------------------------------------- int32 offset overflow
@triton.jit
def _rowcopy_int32(x_ptr, y_ptr, N, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)                       # int32
    cols = tl.arange(0, BLOCK)
    # BUG: row * stride is int32 and wraps past 2^31 elements (real code casts row to int64 first)
    tl.store(y_ptr + row * stride + cols, tl.load(x_ptr + row * stride + cols, mask=cols < N), mask=cols < N)


@subject(reference=lambda x: x.clone(), inputs={"x": tensor(("M", "N"), dtypes=("float16", "float32"))},
         dims={"M": (1, 4096), "N": (1, 1024)})
def bug_int32_offset_overflow(x):
    """Large-tensor reports (cross entropy over big vocabularies, embeddings with > 2^31 elements):
    program_id * stride computed in int32 wraps.  Only inputs past 2^31 elements show it, which the
    CPU interpreter cannot draw: EXPECTED NOT FOUND ON CPU (tritondiff fuzz --huge on a GPU)."""
    x = x.contiguous()
    y = torch.empty_like(x)
    M, N = x.shape
    _rowcopy_int32[(M,)](x, y, N, x.stride(0), BLOCK=triton.next_power_of_2(N))
    return y


# --------------------------------------------------------------------------- autotune leaks state
@triton.autotune([triton.Config({"BLOCK": b}) for b in (256, 1024)], key=["N"])   # BUG: no reset_to_zero
@triton.jit
def _rowsum_atomic_leak(x_ptr, out_ptr, N, sm, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sm + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr + row, tl.sum(x, 0))


@subject(reference=lambda x: x.sum(-1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
         dims={"M": (1, 32), "N": (1, 4096)}, deterministic=False)
def bug_autotune_atomic_no_reset(x):
    """Split-K GEMMs and atomic reductions under triton.autotune without reset_to_zero: every
    benchmark trial adds into the same output, so the tuning call returns a multiple of the truth."""
    x = x.contiguous()
    M, N = x.shape
    out = torch.zeros(M, dtype=torch.float32, device=x.device)
    _rowsum_atomic_leak[lambda m: (M, triton.cdiv(N, m["BLOCK"]))](x, out, N, x.stride(0))
    return out.to(x.dtype)


# --------------------------------------------------------------------------- per-block sum as a global sum
@triton.jit
def _mean_blockwise(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr, tl.sum(x, 0) / n)        # BUG: tl.sum reduces this block only; last writer wins


@subject(reference=lambda x: x.mean(), inputs={"x": tensor(("N",), dtypes=FLOATS)}, dims={"N": (1, 200_000)})
def bug_block_sum_as_global(x):
    """Forum questions 'my Triton sum is wrong for large inputs': tl.sum inside one program is taken
    for a reduction over the whole grid, and every program stores to the same scalar."""
    x = x.contiguous()
    out = torch.empty((), dtype=torch.float32, device=x.device)
    _mean_blockwise[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out.to(x.dtype)


# --------------------------------------------------------------------------- fp16 accumulation overflow
@triton.jit
def _rms_fp16_acc(x_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)     # BUG: stays fp16, sum of squares in fp16
    ss = tl.sum(x * x, 0)
    rstd = 1 / tl.sqrt(ss.to(tl.float32) / N + eps)
    tl.store(y_ptr + row * N + cols, (x.to(tl.float32) * rstd).to(tl.float16), mask=cols < N)


@subject(reference=lambda x: F.rms_norm(x, (x.shape[-1],), eps=1e-6),
         inputs={"x": tensor(("M", "N"), dtypes=("float16",))}, dims={"M": (1, 16), "N": (1, 16384)})
def bug_fp16_accumulation_overflow(x):
    """RMSNorm/LayerNorm ports that accumulate the sum of squares in the input's half precision:
    rows with |x| of a few tens overflow 65504 and the row normalises to 0."""
    x = x.contiguous()
    y = torch.empty_like(x)
    M, N = x.shape
    _rms_fp16_acc[(M,)](x, y, N, 1e-6, BLOCK=triton.next_power_of_2(N))
    return y


# --------------------------------------------------------------------------- dtype round trip
@triton.jit
def _sumsq_partials(x_ptr, part_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(part_ptr + pid, tl.sum(x * x, 0).to(part_ptr.dtype.element_ty))


@subject(reference=lambda x: torch.linalg.vector_norm(x), inputs={"x": tensor(("N",), dtypes=("float16", "bfloat16"))},
         dims={"N": (1, 500_000)})
def bug_fp32_intermediate_stored_half(x):
    """Two-stage reductions whose partial buffer is allocated like the input (torch.empty(..., dtype=x.dtype)):
    the fp32 partial sum of squares is rounded to fp16 (overflowing past 65504) before the final pass."""
    x = x.contiguous()
    n = x.numel()
    parts = torch.empty(triton.cdiv(n, 1024), dtype=x.dtype, device=x.device)     # BUG: should be float32
    _sumsq_partials[(parts.numel(),)](x, parts, n, BLOCK=1024)
    return torch.sqrt(parts.float().sum()).to(x.dtype)


# --------------------------------------------------------------------------- online softmax, -inf first tile
@triton.jit
def _softmax_leftpad(x_ptr, start_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    start = tl.load(start_ptr + row)
    m = -float("inf")
    s = 0.0
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        x = tl.where(cols < start, -float("inf"), x)
        m_new = tl.maximum(m, tl.max(x, 0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)   # BUG: -inf - -inf = NaN on a fully masked tile
        m = m_new
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        x = tl.where(cols < start, -float("inf"), x)
        tl.store(y_ptr + row * N + cols, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=cols < N)


def _leftpad_ref(x, start):
    pos = torch.arange(x.shape[-1], device=x.device)
    return torch.softmax(x.masked_fill(pos[None, :] < start[:, None], float("-inf")), -1)


@subject(reference=_leftpad_ref,
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS), "start": tensor(("M",), dtypes=("int64",), low=0, high="N")},
         dims={"M": (1, 16), "N": (1, 2048)})
def bug_online_softmax_neg_inf_tile(x, start):
    """Flash-attention / online-softmax kernels with left padding or sliding windows: a first key
    tile that is fully masked leaves the running max at -inf and exp(-inf - -inf) is NaN."""
    x = x.contiguous()
    M, N = x.shape
    y = torch.empty_like(x)
    _softmax_leftpad[(M,)](x, start.contiguous(), y, N, BLOCK=128)
    return y
