"""Layer norm over the last dimension, forward and backward, as torch custom ops.

Contract: ``torch.nn.functional.layer_norm(x, (N,), weight, bias, eps)`` where N
is x's last dimension, for float32 / float16 / bfloat16 x (weight and bias of
x's dtype or float32), with dx, dweight and dbias.  Statistics and sums run in
float32.  Ops: ``tritondiff::layer_norm(x, normalized_shape, weight, bias, eps)
-> (y, mean, rstd)`` (like ``aten.native_layer_norm``; mean and rstd are float32
of shape x.shape[:-1]) and ``tritondiff::layer_norm_backward(dy, x, weight,
rstd, dweight_dtype, dbias_dtype) -> (dx, dweight, dbias)``; :func:`layer_norm`
returns y.

Maths, per row x of length N (all sums over the row):
    mean = sum(x) / N
    var  = sum((x - mean)**2) / N           (biased, as torch)
    rstd = 1 / sqrt(var + eps)
    xhat = (x - mean) * rstd
    y    = xhat * w + b
Stability.  Variance is never E[x**2] - E[x]**2 (which cancels catastrophically
when |mean| >> std).  More than that, a float32 mean near 1e4 is itself only
good to half an ulp (5e-4), which is 5% of a 1e-2 std; so rows are centred
twice: d = x - shift with shift within a few std of the mean (exact for x
within a factor 2 of shift), then xc = d - mean(d).  Rows held in registers
take the row's first element as shift; rows too wide for registers take shift
from their first chunk
and merge per-chunk (mean, M2) pairs of d with Chan et al.'s rule,
M2 = M2_a + M2_b + delta**2 * n_a * n_b / n.  The backward recentres x the same
way instead of trusting the rounded saved mean, so it needs only rstd.

Range.  Squares of |x| above ~1.8e19 overflow float32 and squares of subnormals
underflow, so every kernel first scales each row by a power of two,
xs = x * scale with scale = 2**k chosen from the exponent of the row's max |x|
so that max |xs| is in [2, 4) (subnormal rows: scale 2**126, exact since
multiplying by 2**k drops no bits).  mean, var and xhat are taken of xs:
var_s = var * scale**2, mean = mean_s / scale, and xhat = xc_s * rstd_s with
rstd_s = rstd / scale, so xhat needs no unscaling.  rstd itself is
    rstd = 1 / sqrt(var + eps) = scale / sqrt(var_s + eps * scale**2):
var = var_s / scale**2 may itself overflow (near_max rows: ~1e76) or
underflow, this form never does.  eps * scale**2 overflows for tiny rows
(scale up to 2**126); where it passes 2**40 the scaled variance (< 16) is below
its rounding, and where var_s = 0 (a constant row) rstd is exactly
1 / sqrt(eps): both take rstd = 1 / sqrt(eps) directly, and rstd_s =
rstd / scale clamped to float32's max (it only multiplies xc = 0 there).  A
constant row is centred on its own value, so xc is exactly 0: float32 noise in
its mean, normalised by a variance that no longer sits below eps, would be O(1).
The stored rstd of a near_max row is ~5e-39, a float32 subnormal with 22
significant bits, as torch's own float32 rstd.  No extra pass over HBM: the
row-resident kernels find max |x| in registers; the looped ones take the scale
from the first chunk, like the shift, and rescale their running sums by
2**-j (exact) when a later chunk needs a smaller scale.

Backward.  With g = dy * w (elementwise) and using d xhat_j / d x_i =
rstd * (delta_ij - 1/N - xhat_i * xhat_j / N):
    dx_i = sum_j g_j * d xhat_j / d x_i
         = rstd * (g_i - mean(g) - xhat_i * mean(g * xhat))
    dweight = sum over rows of dy * xhat,    dbias = sum over rows of dy.
The dweight/dbias reduction runs over all M rows (1,152,000 in the seed, up to
2**24): it is split into per-program partial rows of length N in a workspace,
then reduced in a fixed order by a second kernel.  No atomics, no block larger
than a tile: results are bitwise reproducible.  These sums (and the products
dy * xhat) run in float64: |dy * xhat| reaches max(dtype) * sqrt(N), and a sum
of M such terms stays below 2**1024 for any M below 2**31, so no partial sum
overflows where the true sum is finite (float32 partials of near-max dy gave
inf - inf = NaN where the exact dbias is finite or +-inf); the result is
rounded once, at the store.  A float16 dy is the exception: |xhat| <= sqrt(N),
so a product is at most 65504 * sqrt(N) < 2**33, and a program's sum over fewer
than 2**31 rows cannot overflow float32: the row-resident backward keeps its
per-element sums in float32 and folds them in float64, sparing a float64
conversion per element.  dx keeps float32 arithmetic like torch's own
kernels: g = dy * w overflows where |dy * w| passes the dtype's max, as eager's
does.

Paths (chosen from the launch table below):
  * row-resident (next_pow2(N) <= max_row_*): a [BLOCK_M, BLOCK_N] tile holds
    BLOCK_M whole rows.  The backward is a persistent grid that also
    accumulates its rows' dweight/dbias partials in registers (x and dy are
    read once).
  * wide (rows past max_row_fwd / max_row_bwd whose pieces fit max_row_wide,
    on a GPU): a row in two power-of-two pieces (10240 = 8192 + 2048, no
    padding), whole in registers, persistent over rows; the backward keeps
    float32 dweight/dbias partials (redone scaled by 2**-64 where they
    overflow), then the reduce.
  * looped (wider rows): one row per program, chunks of ``loop_block``;
    the backward's dweight/dbias then come from a column-block x M-split kernel.

Host side.  Launch plans are cached per (M, N, itemsize, launch table, SMs);
arguments are validated once per call (by the op); the autograd glue does not
materialise zero gradients for mean and rstd; a backward that fits one
persistent program writes dweight/dbias itself (no workspace, no reduce launch).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional, Sequence

import torch
import triton
import triton.language as tl

from tritondiff.base import device as _device

from . import fast_path
from . import launch as _launch
from .launch import cdiv, pow2_ceil, pow2_floor
from .config import config, register_launch_names, sm_count, store_dtype
from .exc import UnsupportedInput


def launch(kernel, grid: tuple, *args, **meta) -> None:
    """``kernels.launch.launch`` without FMA contraction (``enable_fp_fusion=False``).

    The kernels rely on exact cancellations -- a constant row's x * scale - shift is 0, so is
    g - mean(g) at N = 1 -- that a contracted a * b + c breaks: on an H100 every M = N = 1
    backward gave dx ~ -7.7e-7 (eager: 0) until contraction was switched off.  The kernels are memory-bound: FMA saves nothing here.
    """
    _launch.launch(kernel, grid, *args, enable_fp_fusion=False, **meta)


_SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------- kernels
# Nested @triton.jit helpers cost milliseconds per call in the interpreter, so
# each kernel is written out in full.  Row offsets are 64-bit: M * N may pass 2**31.
# The row scale (module docstring, "Range") is the same lines in every kernel:
#   field = clamp(255 - biased_exponent(max |x|), 1, 253)
#   scale = 2**(field - 127) (bits field << 23),  1 / scale = 2**(127 - field) (bits (254 - field) << 23)
# so max |x| * scale lies in [2, 4) (in [2**-23, 4) for subnormal rows).  3.4028234663852886e38
# is float32's max (the identity of max / min over masked lanes); 1099511627776.0 is 2**40.


@triton.jit
def _layer_norm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x, eps,
                           HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Rows [pid * BLOCK_M, +BLOCK_M), each whole in registers (BLOCK_N >= N).
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    # Each row's first element (one more load of a line just read): the shift.
    x0 = tl.load(x_ptr + rows64 * stride_x, mask=row_mask, other=0.0).to(tl.float32)
    # xs = x * scale, max |xs| in [2, 4): exact, and no square or sum below can
    # overflow (|x| near float32 max) or lose bits (subnormal x).
    field = 255 - (tl.max(tl.abs(x), axis=1).to(tl.int32, bitcast=True) >> 23)
    field = tl.minimum(tl.maximum(field, 1), 253)
    scale = (field << 23).to(tl.float32, bitcast=True)
    inv_scale = ((254 - field) << 23).to(tl.float32, bitcast=True)
    xs = x * scale[:, None]
    # Centre twice: d = xs - shift with shift the row's first element (exact
    # for xs within a factor 2 of it, as a row whose |mean| >> std has all its
    # elements), then xc = d - mean(d), var_s = mean(xc**2) = var * scale**2.
    # A constant row is its own shift, so xc is exactly 0 (see "Range").
    shift = x0 * scale
    d = tl.where(mask, xs - shift[:, None], 0.0)
    d_mean = tl.sum(d, axis=1) / N
    xc = tl.where(mask, d - d_mean[:, None], 0.0)
    var_s = tl.sum(xc * xc, axis=1) / N
    # rstd = scale / sqrt(var_s + eps * scale**2); xhat = xc * rstd_s, rstd_s = rstd / scale.
    # Where var_s is 0 or negligible against eps * scale**2 (> 2**40), rstd = 1 / sqrt(eps).
    eps_s = eps * scale * scale
    direct = (var_s == 0.0) | (eps_s > 1099511627776.0)
    rstd_eps = 1.0 / tl.sqrt(eps + tl.zeros_like(var_s))
    rstd_s = 1.0 / tl.sqrt(tl.where(direct, 1.0, var_s + eps_s))
    rstd_s = tl.where(direct, tl.where(rstd_eps <= 3.4028234663852886e38,
                                       tl.minimum(rstd_eps * inv_scale, 3.4028234663852886e38), rstd_eps), rstd_s)
    rstd = tl.where(direct, rstd_eps, rstd_s * scale)
    y = xc * rstd_s[:, None]
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + rows64[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + rows, (shift + d_mean) * inv_scale, mask=row_mask)
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)


@triton.jit
def _layer_norm_fwd_wide_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, M, N, stride_x, eps,
                                HAS_W: tl.constexpr, HAS_B: tl.constexpr, HEAD: tl.constexpr, TAIL: tl.constexpr,
                                STAGES: tl.constexpr):
    # The row-resident forward for rows in a [HEAD] and a [TAIL] piece (as _layer_norm_bwd_wide_kernel),
    # persistent over rows p, p + P, ..., the next row's loads in flight during this row's maths.
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    ch = tl.arange(0, HEAD)
    ct = HEAD + tl.arange(0, TAIL)
    mt = ct < N
    # the next row's loads are issued before this row's maths (the last row is loaded again at the end)
    n64 = tl.zeros([], dtype=tl.int64) + tl.minimum(pid, M - 1)
    xh_next = tl.load(x_ptr + n64 * stride_x + ch)
    xt_next = tl.load(x_ptr + n64 * stride_x + ct, mask=mt, other=0.0)
    for row in tl.range(pid, M, num_programs, num_stages=STAGES):
        r64 = tl.zeros([], dtype=tl.int64) + row  # a Python int in the interpreter
        xh = xh_next.to(tl.float32)
        xt = xt_next.to(tl.float32)
        n64 = tl.zeros([], dtype=tl.int64) + tl.minimum(row + num_programs, M - 1)
        xh_next = tl.load(x_ptr + n64 * stride_x + ch)
        xt_next = tl.load(x_ptr + n64 * stride_x + ct, mask=mt, other=0.0)
        x0 = tl.load(x_ptr + r64 * stride_x).to(tl.float32)
        field = 255 - (tl.maximum(tl.max(tl.abs(xh), axis=0),
                                  tl.max(tl.abs(xt), axis=0)).to(tl.int32, bitcast=True) >> 23)
        field = tl.minimum(tl.maximum(field, 1), 253)
        scale = (field << 23).to(tl.float32, bitcast=True)
        inv_scale = ((254 - field) << 23).to(tl.float32, bitcast=True)
        shift = x0 * scale
        dh = xh * scale - shift
        dt = tl.where(mt, xt * scale - shift, 0.0)
        d_mean = (tl.sum(dh, axis=0) + tl.sum(dt, axis=0)) / N
        xch = dh - d_mean
        xct = tl.where(mt, dt - d_mean, 0.0)
        var_s = (tl.sum(xch * xch, axis=0) + tl.sum(xct * xct, axis=0)) / N
        eps_s = eps * scale * scale
        direct = (var_s == 0.0) | (eps_s > 1099511627776.0)
        rstd_eps = 1.0 / tl.sqrt(eps + tl.zeros_like(var_s))
        rstd_s = 1.0 / tl.sqrt(tl.where(direct, 1.0, var_s + eps_s))
        rstd_s = tl.where(direct, tl.where(rstd_eps <= 3.4028234663852886e38,
                                           tl.minimum(rstd_eps * inv_scale, 3.4028234663852886e38), rstd_eps), rstd_s)
        rstd = tl.where(direct, rstd_eps, rstd_s * scale)
        yh = xch * rstd_s
        yt = xct * rstd_s
        if HAS_W:
            yh = yh * tl.load(w_ptr + ch).to(tl.float32)
            yt = yt * tl.load(w_ptr + ct, mask=mt, other=0.0).to(tl.float32)
        if HAS_B:
            yh = yh + tl.load(b_ptr + ch).to(tl.float32)
            yt = yt + tl.load(b_ptr + ct, mask=mt, other=0.0).to(tl.float32)
        tl.store(y_ptr + r64 * N + ch, yh.to(y_ptr.dtype.element_ty))
        tl.store(y_ptr + r64 * N + ct, yt.to(y_ptr.dtype.element_ty), mask=mt)
        tl.store(mean_ptr + row, (shift + d_mean) * inv_scale)
        tl.store(rstd_ptr + row, rstd)


@triton.jit
def _layer_norm_fwd_looped_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, N, stride_x, eps,
                                  HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK_N: tl.constexpr):
    # One row per program, too wide for registers.  scale and shift come from
    # the first chunk (shift = its mean, or its value when it is constant).
    # Pass 1 folds chunks into a running (mean, M2) of d = xs - shift with
    # Chan's merge: for the merged part a (n_a elements, all earlier chunks)
    # and chunk b (n_b, its own two-pass stats),
    #   delta = mean_b - mean_a,  n = n_a + n_b
    #   mean  = mean_a + delta * n_b / n
    #   M2    = M2_a + M2_b + delta**2 * n_a * n_b / n
    # A chunk whose max |x| needs a smaller scale first rescales shift, mean
    # and M2 by r = new_scale / scale = 2**-j (exact, or an underflow far below
    # the new chunk's ulp), so no pass over HBM is added.  Pass 2 normalises
    # (the row's second read mostly hits L2).
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK_N)
    x0 = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    hi = tl.max(tl.where(cols < N, x0, -3.4028234663852886e38), axis=0)
    lo = tl.min(tl.where(cols < N, x0, 3.4028234663852886e38), axis=0)
    amax = tl.maximum(tl.abs(hi), tl.abs(lo))
    field = tl.minimum(tl.maximum(255 - (amax.to(tl.int32, bitcast=True) >> 23), 1), 253)
    scale = (field << 23).to(tl.float32, bitcast=True)
    shift = tl.where(hi == lo, hi * scale, tl.sum(x0 * scale, axis=0) / tl.minimum(N, BLOCK_N))
    mean = tl.zeros((), dtype=tl.float32)
    m2 = tl.zeros((), dtype=tl.float32)
    for start in tl.range(0, N, BLOCK_N):
        mask = start + cols < N
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=0))
        new_field = tl.minimum(tl.maximum(255 - (amax.to(tl.int32, bitcast=True) >> 23), 1), 253)
        r = (new_field << 23).to(tl.float32, bitcast=True) * ((254 - field) << 23).to(tl.float32, bitcast=True)
        field = new_field
        scale = (field << 23).to(tl.float32, bitcast=True)
        shift = shift * r
        mean = mean * r
        m2 = m2 * r * r
        n_a = start * 1.0
        n_b = tl.minimum(N - start, BLOCK_N) * 1.0
        d = tl.where(mask, x * scale - shift, 0.0)
        mean_b = tl.sum(d, axis=0) / n_b
        e = tl.where(mask, d - mean_b, 0.0)
        delta = mean_b - mean
        mean = mean + delta * (n_b / (n_a + n_b))
        m2 = m2 + tl.sum(e * e, axis=0) + delta * delta * (n_a * n_b / (n_a + n_b))
    inv_scale = ((254 - field) << 23).to(tl.float32, bitcast=True)
    var_s = m2 / N
    # rstd as in the row-resident kernel.
    eps_s = eps * scale * scale
    direct = (var_s == 0.0) | (eps_s > 1099511627776.0)
    rstd_eps = 1.0 / tl.sqrt(eps + tl.zeros_like(var_s))
    rstd_s = 1.0 / tl.sqrt(tl.where(direct, 1.0, var_s + eps_s))
    rstd_s = tl.where(direct, tl.where(rstd_eps <= 3.4028234663852886e38,
                                       tl.minimum(rstd_eps * inv_scale, 3.4028234663852886e38), rstd_eps), rstd_s)
    rstd = tl.where(direct, rstd_eps, rstd_s * scale)
    for start in tl.range(0, N, BLOCK_N):
        mask = start + cols < N
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = ((x * scale - shift) - mean) * rstd_s
        if HAS_W:
            y = y * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, (shift + mean) * inv_scale)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _layer_norm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, part_ptr, dw_ptr, db_ptr,
                           M, N, stride_dy, stride_x,
                           HAS_W: tl.constexpr, FUSE_DWDB: tl.constexpr, FINAL_DWDB: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, TILE_ACC: tl.constexpr,
                           STAGES: tl.constexpr, F32_TILE_SUMS: tl.constexpr):
    # Persistent: program p of P takes row blocks p, p + P, ...  Per row,
    #   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * w.
    # xhat is rebuilt from x in registers exactly as the forward does (scale,
    # shift, residual mean of d = xs - shift) rather than from the saved
    # float32 mean, whose rounding is up to half an ulp of |mean|:
    # xhat = xc * rstd_s with rstd_s = rstd / scale (clamped to float32's max:
    # only a constant row, xc = 0, reaches it).
    # With FUSE_DWDB it also keeps sum(dy * xhat) and sum(dy) over its rows --
    # in [BLOCK_M, BLOCK_N] registers with TILE_ACC (elementwise adds, no
    # per-tile reduction), else in [BLOCK_N] (each tile's column sums added:
    # fewer registers, a reduction across rows per tile) -- and writes them as
    # partial rows part[0, p, :] and part[1, p, :]; with FINAL_DWDB (a single
    # program) they are dweight and dbias themselves.  With F32_TILE_SUMS (a
    # float16 dy: |dy * xhat| <= 65504 * sqrt(N), so a program's sums over fewer
    # than 2**31 rows stay below 2**64, see "Backward") the per-element sums run in
    # float32 and only the final fold in float64: no float64 conversion per
    # element.  STAGES > 1 pipelines the row-block loop (the next block's loads in
    # flight during this one's math).
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    else:
        w = tl.full([BLOCK_N], 1.0, dtype=tl.float32)
    if F32_TILE_SUMS:
        dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)  # a float16 dy: see "Backward"
        db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    elif TILE_ACC:
        dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float64)  # float64: see "Backward"
        db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float64)
    else:
        dw_acc = tl.zeros([BLOCK_N], dtype=tl.float64)
        db_acc = tl.zeros([BLOCK_N], dtype=tl.float64)
    # ceil(M / BLOCK_M) as (M - 1) // BLOCK_M + 1 (M >= 1 here): tl.cdiv's M + BLOCK_M - 1 wraps for an
    # int32 M near 2**31
    for block in tl.range(pid, (M - 1) // BLOCK_M + 1, num_programs, num_stages=STAGES):
        rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        rows64 = rows.to(tl.int64)
        x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        x0 = tl.load(x_ptr + rows64 * stride_x, mask=row_mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows64[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
        field = 255 - (tl.max(tl.abs(x), axis=1).to(tl.int32, bitcast=True) >> 23)
        field = tl.minimum(tl.maximum(field, 1), 253)
        scale = (field << 23).to(tl.float32, bitcast=True)
        inv_scale = ((254 - field) << 23).to(tl.float32, bitcast=True)
        xs = x * scale[:, None]
        shift = x0 * scale
        d = tl.where(mask, xs - shift[:, None], 0.0)
        rstd_s = tl.where(rstd <= 3.4028234663852886e38, tl.minimum(rstd * inv_scale, 3.4028234663852886e38), rstd)
        xhat = tl.where(mask, (d - (tl.sum(d, axis=1) / N)[:, None]) * rstd_s[:, None], 0.0)
        g = dy * w[None, :]
        c1 = tl.sum(xhat * g, axis=1) / N  # mean(g * xhat)
        c2 = tl.sum(g, axis=1) / N  # mean(g)
        dx = (g - (xhat * c1[:, None] + c2[:, None])) * rstd[:, None]
        tl.store(dx_ptr + rows64[:, None] * N + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
        if FUSE_DWDB:
            if F32_TILE_SUMS:
                dw_acc += dy * xhat
                db_acc += dy
            elif TILE_ACC:
                dy64 = dy.to(tl.float64)
                dw_acc += dy64 * xhat.to(tl.float64)
                db_acc += dy64
            else:
                dy64 = dy.to(tl.float64)
                dw_acc += tl.sum(dy64 * xhat.to(tl.float64), axis=0)
                db_acc += tl.sum(dy64, axis=0)
    if F32_TILE_SUMS:
        dw_sum = tl.sum(dw_acc.to(tl.float64), axis=0)
        db_sum = tl.sum(db_acc.to(tl.float64), axis=0)
    elif TILE_ACC:
        dw_sum = tl.sum(dw_acc, axis=0)
        db_sum = tl.sum(db_acc, axis=0)
    else:
        dw_sum = dw_acc
        db_sum = db_acc
    if FINAL_DWDB:
        tl.store(dw_ptr + cols, dw_sum.to(tl.float32).to(dw_ptr.dtype.element_ty), mask=col_mask)
        tl.store(db_ptr + cols, db_sum.to(tl.float32).to(db_ptr.dtype.element_ty), mask=col_mask)
    elif FUSE_DWDB:
        slot = pid.to(tl.int64) * N
        tl.store(part_ptr + slot + cols, dw_sum, mask=col_mask)
        tl.store(part_ptr + num_programs.to(tl.int64) * N + slot + cols, db_sum, mask=col_mask)


@triton.jit
def _layer_norm_bwd_wide_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, part_ptr, scale_ptr, M, N, stride_dy,
                                stride_x, HAS_W: tl.constexpr, HEAD: tl.constexpr, TAIL: tl.constexpr,
                                STAGES: tl.constexpr):
    # Rows too wide for a power-of-two tile in registers (10240 would pad to 16384, leaving no registers for
    # the dweight/dbias sums): a row is a [HEAD] piece (a power of two <= N) and a [TAIL] piece (the next
    # power of two >= N - HEAD), 10240 = 8192 + 2048 with no padding at all.  Persistent: program p of P
    # takes rows p, p + P, ..., each whole in registers, x and dy read once (loading the next row ahead,
    # as the forward does, cost the float32 backward registers: 0.185 -> 0.245 ms at 4096 x 10240), and keeps
    # its rows' sum(dy * xhat) and sum(dy) per column in float32.  The maths per
    # row is the row-resident kernel's.
    # The sums are float32, not float64 (twice the registers): they overflow only for dy near float32's max
    # (|dy * xhat| <= |dy| sqrt(N), over fewer than 2**31 rows).  A program whose sums came out non-finite
    # runs its rows again with dy scaled by 2**-64 (exact: a power of two; the dy it flushes towards zero are
    # 2**126 times smaller than the terms that made the sums overflow) and says so in scale[p], which the
    # final reduce multiplies its partial rows by, in float64.  Non-finite dy take the second pass too, and
    # come out non-finite again, as they should.
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    ch = tl.arange(0, HEAD)
    ct = HEAD + tl.arange(0, TAIL)
    mt = ct < N
    if HAS_W:
        wh = tl.load(w_ptr + ch).to(tl.float32)
        wt = tl.load(w_ptr + ct, mask=mt, other=0.0).to(tl.float32)
    else:
        wh = tl.full([HEAD], 1.0, dtype=tl.float32)
        wt = tl.full([TAIL], 1.0, dtype=tl.float32)
    dw_h = tl.zeros([HEAD], dtype=tl.float32)
    db_h = tl.zeros([HEAD], dtype=tl.float32)
    dw_t = tl.zeros([TAIL], dtype=tl.float32)
    db_t = tl.zeros([TAIL], dtype=tl.float32)
    dy_scale = tl.full([], 1.0, dtype=tl.float32)
    todo = tl.full([], 1, dtype=tl.int32)
    for attempt in range(0, 2):
        if todo != 0:
            dw_h = tl.zeros([HEAD], dtype=tl.float32)
            db_h = tl.zeros([HEAD], dtype=tl.float32)
            dw_t = tl.zeros([TAIL], dtype=tl.float32)
            db_t = tl.zeros([TAIL], dtype=tl.float32)
            for row in tl.range(pid, M, num_programs, num_stages=STAGES):
                r64 = tl.zeros([], dtype=tl.int64) + row  # a Python int in the interpreter
                xh = tl.load(x_ptr + r64 * stride_x + ch).to(tl.float32)
                xt = tl.load(x_ptr + r64 * stride_x + ct, mask=mt, other=0.0).to(tl.float32)
                dyh = tl.load(dy_ptr + r64 * stride_dy + ch).to(tl.float32)
                dyt = tl.load(dy_ptr + r64 * stride_dy + ct, mask=mt, other=0.0).to(tl.float32)
                x0 = tl.load(x_ptr + r64 * stride_x).to(tl.float32)
                rstd = tl.load(rstd_ptr + row)
                field = 255 - (tl.maximum(tl.max(tl.abs(xh), axis=0),
                                          tl.max(tl.abs(xt), axis=0)).to(tl.int32, bitcast=True) >> 23)
                field = tl.minimum(tl.maximum(field, 1), 253)
                scale = (field << 23).to(tl.float32, bitcast=True)
                inv_scale = ((254 - field) << 23).to(tl.float32, bitcast=True)
                shift = x0 * scale
                dh = xh * scale - shift
                dt = tl.where(mt, xt * scale - shift, 0.0)
                d_mean = (tl.sum(dh, axis=0) + tl.sum(dt, axis=0)) / N
                rstd_s = tl.where(rstd <= 3.4028234663852886e38,
                                  tl.minimum(rstd * inv_scale, 3.4028234663852886e38), rstd)
                xhat_h = (dh - d_mean) * rstd_s
                xhat_t = tl.where(mt, (dt - d_mean) * rstd_s, 0.0)
                gh = dyh * wh
                gt = dyt * wt
                c1 = (tl.sum(xhat_h * gh, axis=0) + tl.sum(xhat_t * gt, axis=0)) / N  # mean(g * xhat)
                c2 = (tl.sum(gh, axis=0) + tl.sum(gt, axis=0)) / N  # mean(g)
                dxh = (gh - (xhat_h * c1 + c2)) * rstd
                dxt = (gt - (xhat_t * c1 + c2)) * rstd
                tl.store(dx_ptr + r64 * N + ch, dxh.to(dx_ptr.dtype.element_ty))
                tl.store(dx_ptr + r64 * N + ct, dxt.to(dx_ptr.dtype.element_ty), mask=mt)
                dyh = dyh * dy_scale
                dyt = dyt * dy_scale
                dw_h += dyh * xhat_h
                db_h += dyh
                dw_t += dyt * xhat_t
                db_t += dyt
            # s - s is 0 for a finite s, NaN for inf or NaN
            bad = (tl.sum(((dw_h - dw_h) != 0.0).to(tl.int32), axis=0)
                   + tl.sum(((db_h - db_h) != 0.0).to(tl.int32), axis=0)
                   + tl.sum(((dw_t - dw_t) != 0.0).to(tl.int32), axis=0)
                   + tl.sum(((db_t - db_t) != 0.0).to(tl.int32), axis=0))
            todo = tl.where((bad > 0) & (attempt == 0), 1, 0)
            dy_scale = tl.where(todo != 0, 5.421010862427522e-20, dy_scale)  # 2**-64
    slot = pid.to(tl.int64) * N
    db_slot = num_programs.to(tl.int64) * N + slot
    tl.store(part_ptr + slot + ch, dw_h)
    tl.store(part_ptr + slot + ct, dw_t, mask=mt)
    tl.store(part_ptr + db_slot + ch, db_h)
    tl.store(part_ptr + db_slot + ct, db_t, mask=mt)
    tl.store(scale_ptr + pid, 1.0 / dy_scale)


@triton.jit
def _layer_norm_bwd_dx_looped_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, center_ptr, M, N, stride_dy, stride_x,
                                     HAS_W: tl.constexpr, BLOCK_N: tl.constexpr):
    # One wide row per program.  scale and shift from the first chunk as in
    # the looped forward (rescaled, with the per-lane sums of d and g * d, when
    # a later chunk needs a smaller scale); d = xs - shift.  Pass 1 sums d,
    # g * d and g per lane, giving
    #   mean_d = sum(d) / N,  mean(g) = sum(g) / N,
    #   mean(g * xhat) = rstd_s * (sum(g * d) - mean_d * sum(g)) / N
    # (xhat = (d - mean_d) * rstd_s, rstd_s = rstd / scale); pass 2 writes dx
    # chunk by chunk.  The row's (shift, mean_d, scale, rstd_s) go to
    # center[0..3, row] for the dweight / dbias kernel, which cannot see whole rows.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    dy_row = dy_ptr + row * stride_dy
    dx_row = dx_ptr + row * N
    rstd = tl.load(rstd_ptr + row)
    cols = tl.arange(0, BLOCK_N)
    x0 = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    hi = tl.max(tl.where(cols < N, x0, -3.4028234663852886e38), axis=0)
    lo = tl.min(tl.where(cols < N, x0, 3.4028234663852886e38), axis=0)
    amax = tl.maximum(tl.abs(hi), tl.abs(lo))
    field = tl.minimum(tl.maximum(255 - (amax.to(tl.int32, bitcast=True) >> 23), 1), 253)
    scale = (field << 23).to(tl.float32, bitcast=True)
    shift = tl.where(hi == lo, hi * scale, tl.sum(x0 * scale, axis=0) / tl.minimum(N, BLOCK_N))
    d_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    gd_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    g_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in tl.range(0, N, BLOCK_N):
        mask = start + cols < N
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(dy_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_W:
            g = g * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.max(tl.abs(x), axis=0))
        new_field = tl.minimum(tl.maximum(255 - (amax.to(tl.int32, bitcast=True) >> 23), 1), 253)
        r = (new_field << 23).to(tl.float32, bitcast=True) * ((254 - field) << 23).to(tl.float32, bitcast=True)
        field = new_field
        scale = (field << 23).to(tl.float32, bitcast=True)
        shift = shift * r
        d_acc = d_acc * r
        gd_acc = gd_acc * r
        d = tl.where(mask, x * scale - shift, 0.0)
        d_acc += d
        gd_acc += g * d
        g_acc += g
    inv_scale = ((254 - field) << 23).to(tl.float32, bitcast=True)
    rstd_s = tl.where(rstd <= 3.4028234663852886e38, tl.minimum(rstd * inv_scale, 3.4028234663852886e38), rstd)
    d_mean = tl.sum(d_acc, axis=0) / N
    g_sum = tl.sum(g_acc, axis=0)
    c1 = rstd_s * (tl.sum(gd_acc, axis=0) - d_mean * g_sum) / N
    c2 = g_sum / N
    for start in tl.range(0, N, BLOCK_N):
        mask = start + cols < N
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(dy_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_W:
            g = g * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        xhat = ((x * scale - shift) - d_mean) * rstd_s
        dx = (g - (xhat * c1 + c2)) * rstd
        tl.store(dx_row + start + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(center_ptr + row, shift)
    tl.store(center_ptr + M + row, d_mean)
    tl.store(center_ptr + 2 * M + row, scale)
    tl.store(center_ptr + 3 * M + row, rstd_s)


@triton.jit
def _layer_norm_bwd_dwdb_kernel(dy_ptr, x_ptr, center_ptr, part_ptr, M, N, stride_dy, stride_x,
                                rows_per_split, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Program (c, s): columns [c * BLOCK_N, +BLOCK_N) over the row split
    # [s * rows_per_split, +rows_per_split); writes partial rows
    # part[0, s, cols] = sum(dy * xhat) and part[1, s, cols] = sum(dy), with
    # xhat = ((x * scale - shift) - mean_d) * rstd_s from the dx kernel's center rows.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    split = tl.program_id(1)
    num_splits = tl.num_programs(1)
    col_mask = cols < N
    row_end = tl.minimum(M, (split + 1) * rows_per_split)
    dw_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float64)  # float64: see "Backward"
    db_acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float64)
    for start in tl.range(split * rows_per_split, row_end, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        row_mask = rows < row_end
        mask = row_mask[:, None] & col_mask[None, :]
        rows64 = rows.to(tl.int64)
        x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + rows64[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        shift = tl.load(center_ptr + rows, mask=row_mask, other=0.0)
        d_mean = tl.load(center_ptr + M + rows, mask=row_mask, other=0.0)
        scale = tl.load(center_ptr + 2 * M + rows, mask=row_mask, other=0.0)
        rstd_s = tl.load(center_ptr + 3 * M + rows, mask=row_mask, other=0.0)
        xhat = ((x * scale[:, None] - shift[:, None]) - d_mean[:, None]) * rstd_s[:, None]
        dy64 = dy.to(tl.float64)
        dw_acc += dy64 * tl.where(mask, xhat, 0.0).to(tl.float64)
        db_acc += dy64
    slot = split.to(tl.int64) * N
    tl.store(part_ptr + slot + cols, tl.sum(dw_acc, axis=0), mask=col_mask)
    tl.store(part_ptr + num_splits.to(tl.int64) * N + slot + cols, tl.sum(db_acc, axis=0), mask=col_mask)


@triton.jit
def _layer_norm_bwd_reduce_kernel(part_ptr, scale_ptr, dw_ptr, db_ptr, R, N, SCALED: tl.constexpr,
                                  BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    # dweight[j] = sum_r part[0, r, j],  dbias[j] = sum_r part[1, r, j]:
    # R partial rows in a fixed order, per-lane accumulators, one tree at the end.  Partials are float64, or
    # (SCALED: the wide-row kernel's) float32 rows to multiply by scale[r] first.
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw_acc = tl.zeros([BLOCK_R, BLOCK_N], dtype=tl.float64)
    db_acc = tl.zeros([BLOCK_R, BLOCK_N], dtype=tl.float64)
    for start in tl.range(0, R, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        mask = (rows < R)[:, None] & col_mask[None, :]
        dw_offs = rows.to(tl.int64)[:, None] * N + cols[None, :]
        db_offs = (rows + R).to(tl.int64)[:, None] * N + cols[None, :]
        dw = tl.load(part_ptr + dw_offs, mask=mask, other=0.0).to(tl.float64)
        db = tl.load(part_ptr + db_offs, mask=mask, other=0.0).to(tl.float64)
        if SCALED:
            row_scale = tl.load(scale_ptr + rows, mask=rows < R, other=0.0).to(tl.float64)[:, None]
            dw = dw * row_scale
            db = db * row_scale
        dw_acc += dw
        db_acc += db
    tl.store(dw_ptr + cols, tl.sum(dw_acc, axis=0).to(tl.float32).to(dw_ptr.dtype.element_ty), mask=col_mask)
    tl.store(db_ptr + cols, tl.sum(db_acc, axis=0).to(tl.float32).to(db_ptr.dtype.element_ty), mask=col_mask)


# --------------------------------------------------------------------------- launch


@dataclasses.dataclass(frozen=True)
class LayerNormLaunch:
    """Launch parameters (override with ``launch_overrides={"layer_norm": {...}}``)."""

    fwd_tile_bytes: int  # bytes of x per forward tile [BLOCK_M, BLOCK_N] (BLOCK_N = next_pow2(N))
    bwd_tile_bytes: int  # bytes of x per backward tile
    max_row_fwd: int  # widest BLOCK_N the forward holds in registers; wider rows loop over N
    max_row_bwd: int  # the same for the backward (whose row-resident path fuses dweight/dbias)
    loop_block: int  # chunk width, elements, of the looped kernels
    col_block: int  # column block of the dweight/dbias split and final-reduce kernels
    values_per_thread: int  # float32 values a thread holds per forward tile (half in the backward): num_warps
    programs_per_sm: int  # persistent backward grid, and M-splits of the dweight/dbias kernel
    reduce_tile_numel: int  # float64 partials per tile of the final dweight/dbias reduce (one wide program)
    bwd_tile_acc: bool = True  # row-resident backward: dweight/dbias sums kept per tile element, not per column
    bwd_stages: int = 1  # row-resident backward: pipelining depth of its row-block loop (1: none) ...
    bwd_stages_fp32: int = 1  # ... and of float32 inputs' (whose float64 sums take longer a block)
    max_row_wide: int = 1  # rows wider than max_row_bwd whose [head] + [tail] pieces fit this many elements take
    #                        the wide backward (whole rows in registers, no padding to a power of two); 1: never
    wide_warps: int = 8  # the wide backward's warps ...
    wide_stages: int = 1  # ... pipelining depth of its row loop (and the forward's) ...
    wide_programs_per_sm: int = 1  # ... and programs per SM (its registers allow one)
    wide_fwd_warps: int = 4  # the wide forward's warps (rows past max_row_fwd, same pieces) ...
    wide_fwd_programs_per_sm: int = 4  # ... and programs per SM


# One table per architecture.  GPU: 16 KiB forward / 8 KiB backward tiles
# (16-byte vector loads, several CTAs per SM), rows up to 16K / 8K elements in
# registers, 4 programs per SM for the persistent backward so the dweight/dbias
# partials are a few hundred rows.  Interpreter: few, large tiles.
_LAUNCH = {
    "interpreter": LayerNormLaunch(fwd_tile_bytes=1 << 20, bwd_tile_bytes=1 << 20, max_row_fwd=1 << 18,
                                   max_row_bwd=1 << 18, loop_block=1 << 16, col_block=1 << 16,
                                   values_per_thread=16, programs_per_sm=4, reduce_tile_numel=1 << 16),
    "sm90": LayerNormLaunch(fwd_tile_bytes=4096, bwd_tile_bytes=4096, max_row_fwd=8192, max_row_bwd=8192,
                            loop_block=4096, col_block=256, values_per_thread=32, programs_per_sm=4,
                            reduce_tile_numel=8192, bwd_stages=2, bwd_stages_fp32=3, max_row_wide=12288),
    "default": LayerNormLaunch(fwd_tile_bytes=4096, bwd_tile_bytes=4096, max_row_fwd=8192, max_row_bwd=8192,
                               loop_block=4096, col_block=256, values_per_thread=32, programs_per_sm=4,
                               reduce_tile_numel=8192, bwd_stages=2, bwd_stages_fp32=3, max_row_wide=12288),
}
register_launch_names("layer_norm")


def _num_warps(numel: int, values_per_thread: int) -> int:
    return max(1, min(16, pow2_floor(numel // (32 * max(values_per_thread, 1)))))


def _tile_rows(tile_bytes: int, itemsize: int, block_n: int, m: int) -> int:
    """Rows per [BLOCK_M, BLOCK_N] tile: fill tile_bytes, no more rows than M needs."""
    return max(1, min(pow2_floor(tile_bytes // itemsize) // block_n, pow2_ceil(m)))


# Launch plans are pure functions of (M, N, itemsize, launch parameters, SMs), cached: the
# per-call host work is a dict lookup.  (triton.cdiv / next_power_of_2 are @jit functions
# whose host calls cost microseconds each; the plans use plain ints.)


@functools.lru_cache(maxsize=512)
def _forward_plan(m: int, n: int, itemsize: int, lp: LayerNormLaunch, sms: int) -> tuple[str, tuple, dict]:
    """(kernel: "resident", "wide" or "looped"; grid; meta) of the forward."""
    block_n = pow2_ceil(n)
    head, tail = _row_pieces(n) if n >= 2 else (1, 1)
    if block_n > lp.max_row_fwd and n >= 2 and head + tail <= lp.max_row_wide:
        programs = max(1, min(m, sms * lp.wide_fwd_programs_per_sm))
        return "wide", (programs,), dict(HEAD=head, TAIL=tail, STAGES=lp.wide_stages, num_warps=lp.wide_fwd_warps)
    if block_n <= lp.max_row_fwd:
        block_m = _tile_rows(lp.fwd_tile_bytes, itemsize, block_n, m)
        return "resident", (cdiv(m, block_m),), dict(BLOCK_M=block_m, BLOCK_N=block_n,
                                                       num_warps=_num_warps(block_m * block_n, lp.values_per_thread))
    block = min(pow2_floor(lp.loop_block), block_n)
    return "looped", (m,), dict(BLOCK_N=block, num_warps=_num_warps(block, lp.values_per_thread))


#: Partial dweight / dbias elements (per sum) the row-resident backward's programs write at most.
_PARTIALS_NUMEL = 1 << 20


@functools.lru_cache(maxsize=512)
def _backward_plan(m: int, n: int, itemsize: int, lp: LayerNormLaunch, sms: int) -> dict:
    """Grids and meta-parameters of the backward's kernels (keys as used in _backward)."""
    block_n = pow2_ceil(n)
    target_programs = sms * lp.programs_per_sm
    block_c = min(pow2_floor(lp.col_block), block_n)
    head, tail = _row_pieces(n) if n >= 2 else (1, 1)
    plan: dict = {"looped": block_n > lp.max_row_bwd, "wide": False}
    if plan["looped"] and n >= 2 and head + tail <= lp.max_row_wide:
        programs = max(1, min(m, sms * lp.wide_programs_per_sm))
        plan.update(looped=False, wide=True, grid=(programs,), n_part=programs, meta=dict(
            HEAD=head, TAIL=tail, STAGES=lp.wide_stages, num_warps=lp.wide_warps))
    elif not plan["looped"]:
        block_m = _tile_rows(lp.bwd_tile_bytes, itemsize, block_n, m)
        # at most _PARTIALS_NUMEL partial dweight/dbias elements: wide rows take fewer programs, so the final
        # reduce reads at most 16 MB (4096 columns x 528 programs x 2 x float64 was 35 MB)
        programs = max(1, min(target_programs, cdiv(m, block_m), _PARTIALS_NUMEL // n))
        plan.update(grid=(programs,), n_part=programs, meta=dict(
            BLOCK_M=block_m, BLOCK_N=block_n, FINAL_DWDB=programs == 1, TILE_ACC=lp.bwd_tile_acc,
            STAGES=lp.bwd_stages_fp32 if itemsize == 4 else lp.bwd_stages,
            num_warps=_num_warps(block_m * block_n, lp.values_per_thread // 2)))
    else:
        block = min(pow2_floor(lp.loop_block), block_n)
        block_m = _tile_rows(lp.bwd_tile_bytes, itemsize, block_c, m)
        col_blocks = cdiv(n, block_c)
        splits = max(1, min(cdiv(target_programs, col_blocks), cdiv(m, block_m), 65535))
        rows_per_split = cdiv(cdiv(m, splits), block_m) * block_m
        splits = cdiv(m, rows_per_split)
        plan.update(dx_meta=dict(BLOCK_N=block, num_warps=_num_warps(block, lp.values_per_thread // 2)),
                    grid=(col_blocks, splits), n_part=splits, rows_per_split=rows_per_split,
                    meta=dict(BLOCK_M=block_m, BLOCK_N=block_c,
                              num_warps=_num_warps(block_m * block_c, lp.values_per_thread // 2)))
    # The final reduce is one program per column block over a few hundred partial rows, just written
    # (L2-resident): wide tiles and many warps, so it takes one or two dependent steps, not dozens; narrower
    # column blocks where that leaves fewer programs than SMs (a 4096-wide row: 16 blocks of 256).
    block_c = max(min(block_c, 16), min(block_c, pow2_floor(max(1, n // sms))))
    block_r = max(1, min(pow2_ceil(plan["n_part"]), pow2_floor(lp.reduce_tile_numel) // block_c))
    plan.update(reduce_grid=(cdiv(n, block_c),), reduce_meta=dict(
        SCALED=plan["wide"], BLOCK_R=block_r, BLOCK_N=block_c,
        num_warps=_num_warps(block_r * block_c, lp.values_per_thread)))
    return plan


def _row_pieces(n: int) -> tuple[int, int]:
    """A row of n >= 2 as a [head] and a [tail] piece, both powers of two: head <= n and < n, tail >= n - head
    (10240 = 8192 + 2048, 12288 = 8192 + 4096, 16384 = 8192 + 8192)."""
    head = pow2_floor(n)
    if head == n:
        head //= 2
    return head, pow2_ceil(n - head)


def _as_rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """t as an (M, N) matrix with unit column stride: a view when strides allow, else a copy."""
    rows = t.reshape(-1, n)
    if n > 1 and rows.stride(1) != 1:
        rows = rows.contiguous()
    return rows


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t if t.dtype == dtype else t.to(dtype)


def _forward(x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
             eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = x.shape[-1]
    dev = x.device
    y = torch.empty(x.shape, dtype=store_dtype(x.dtype), device=dev)
    mean = torch.empty(x.shape[:-1], dtype=torch.float32, device=dev)
    rstd = torch.empty(x.shape[:-1], dtype=torch.float32, device=dev)
    m = mean.numel()
    if m == 0 or n == 0:  # nothing to normalise (N = 0: empty rows, statistics undefined)
        return _cast(y, x.dtype), mean.fill_(math.nan), rstd.fill_(math.nan)
    x2 = _as_rows(x, n)
    lp = config.launch("layer_norm", _LAUNCH, dev)
    path, grid, meta = _forward_plan(m, n, x.element_size(), lp, sm_count(dev))
    # weight / bias may be strided (a pointer + unit stride is all the kernels take); x2 stands
    # in as a placeholder pointer, never read, when one is absent.
    w = x2 if weight is None else weight if weight.is_contiguous() else weight.contiguous()
    b = x2 if bias is None else bias if bias.is_contiguous() else bias.contiguous()
    if path == "wide":
        launch(_layer_norm_fwd_wide_kernel, grid, x2, y, w, b, mean, rstd, m, n, x2.stride(0), eps,
               HAS_W=weight is not None, HAS_B=bias is not None, **meta)
    elif path == "looped":
        launch(_layer_norm_fwd_looped_kernel, grid, x2, y, w, b, mean, rstd, n, x2.stride(0), eps,
               HAS_W=weight is not None, HAS_B=bias is not None, **meta)
    else:
        launch(_layer_norm_fwd_kernel, grid, x2, y, w, b, mean, rstd, m, n, x2.stride(0), eps,
               HAS_W=weight is not None, HAS_B=bias is not None, **meta)
    return _cast(y, x.dtype), mean, rstd


def _backward(dy: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor], rstd: torch.Tensor,
              dweight_dtype: torch.dtype, dbias_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = x.shape[-1]
    m = rstd.numel()
    dev = x.device
    if m == 0 or n == 0:  # sums over no rows are zero
        return (torch.empty(x.shape, dtype=x.dtype, device=dev), torch.zeros(n, dtype=dweight_dtype, device=dev),
                torch.zeros(n, dtype=dbias_dtype, device=dev))
    dx = torch.empty(x.shape, dtype=store_dtype(x.dtype), device=dev)
    dw = torch.empty(n, dtype=store_dtype(dweight_dtype), device=dev)
    db = torch.empty(n, dtype=store_dtype(dbias_dtype), device=dev)
    x2, dy2 = _as_rows(x, n), _as_rows(dy, n)
    rstd = rstd.reshape(-1)
    w = x2 if weight is None else weight if weight.is_contiguous() else weight.contiguous()  # x2: never read
    plan = _backward_plan(m, n, x.element_size(), config.launch("layer_norm", _LAUNCH, dev), sm_count(dev))
    scales = None
    if plan["wide"]:
        # Whole rows in two pieces, persistent, float32 partials with a scale per program.
        part = torch.empty(2 * plan["n_part"] * n, dtype=torch.float32, device=dev)
        scales = torch.empty(plan["n_part"], dtype=torch.float32, device=dev)
        launch(_layer_norm_bwd_wide_kernel, plan["grid"], dy2, x2, w, rstd, dx, part, scales, m, n, dy2.stride(0),
               x2.stride(0), HAS_W=weight is not None, **plan["meta"])
    elif not plan["looped"]:
        # Row-resident, persistent, dweight/dbias partials fused: x and dy read once.  A single
        # program (small M) writes dweight / dbias itself: no workspace, no reduce launch.
        final = plan["meta"]["FINAL_DWDB"]
        part = dw if final else torch.empty(2 * plan["n_part"] * n, dtype=torch.float64, device=dev)
        launch(_layer_norm_bwd_kernel, plan["grid"], dy2, x2, w, rstd, dx, part, dw, db, m, n, dy2.stride(0),
               x2.stride(0), HAS_W=weight is not None, FUSE_DWDB=True,
               F32_TILE_SUMS=dy.dtype == torch.float16, **plan["meta"])
        if final:
            return _cast(dx, x.dtype), _cast(dw, dweight_dtype), _cast(db, dbias_dtype)
    else:
        # Wide rows: dx per row in chunks, then dweight/dbias by column block x M-split.
        center = torch.empty(4 * m, dtype=torch.float32, device=dev)
        launch(_layer_norm_bwd_dx_looped_kernel, (m,), dy2, x2, w, rstd, dx, center, m, n, dy2.stride(0),
               x2.stride(0), HAS_W=weight is not None, **plan["dx_meta"])
        part = torch.empty(2 * plan["n_part"] * n, dtype=torch.float64, device=dev)
        launch(_layer_norm_bwd_dwdb_kernel, plan["grid"], dy2, x2, center, part, m, n, dy2.stride(0),
               x2.stride(0), plan["rows_per_split"], **plan["meta"])
    launch(_layer_norm_bwd_reduce_kernel, plan["reduce_grid"], part, part if scales is None else scales, dw, db,
           plan["n_part"], n, **plan["reduce_meta"])
    return _cast(dx, x.dtype), _cast(dw, dweight_dtype), _cast(db, dbias_dtype)


# --------------------------------------------------------------------------- validation


def _check_device(name: str, t: torch.Tensor, want: Optional[str] = None) -> None:
    want = want or _device.torch_device().type
    if t.device.type != want:
        raise UnsupportedInput(
            f"layer_norm: {name} is on {t.device} but kernels run on {want} ({_device.describe()}); "
            f"move it with .to({want!r}) or choose the device with TRITONDIFF_DEVICE", argument=name)


def _check_args(x: object, normalized_shape: object, weight: object, bias: object, eps: object) -> list[int]:
    """Validate the forward's arguments; returns normalized_shape as ``[N]``."""
    if not isinstance(x, torch.Tensor):
        raise UnsupportedInput(f"layer_norm: x must be a torch.Tensor, got {type(x).__name__}", argument="x")
    if x.dtype not in _SUPPORTED:
        raise UnsupportedInput(f"layer_norm: x has dtype {x.dtype}; supported are float32, float16 and "
                               f"bfloat16 (cast with x.float() first)", argument="x")
    want = _device.torch_device().type
    _check_device("x", x, want)
    if x.dim() == 0:
        raise UnsupportedInput("layer_norm: x is 0-d; it needs a last dimension to normalise over", argument="x")
    n = x.shape[-1]
    if isinstance(normalized_shape, int) and not isinstance(normalized_shape, bool):
        shape = [normalized_shape]
    elif isinstance(normalized_shape, (list, tuple, torch.Size)):
        shape = list(normalized_shape)
    else:
        raise UnsupportedInput(f"layer_norm: normalized_shape must be an int or a sequence of ints, got "
                               f"{type(normalized_shape).__name__}", argument="normalized_shape")
    if len(shape) != 1:
        raise UnsupportedInput(
            f"layer_norm: normalized_shape={tuple(shape)}, but this kernel normalises over the last dimension "
            f"only, so normalized_shape must be ({n},); to normalise over the last {len(shape)} dims, flatten "
            f"them into one first (x.flatten(-{max(len(shape), 1)}))", argument="normalized_shape")
    if shape[0] != n:
        raise UnsupportedInput(f"layer_norm: normalized_shape=({shape[0]},) does not match x's last dimension "
                               f"{n}; pass ({n},)", argument="normalized_shape")
    if x.numel() // max(n, 1) >= 2**31 or n >= 2**31:
        raise UnsupportedInput(f"layer_norm: x has shape {tuple(x.shape)}; rows and row length must each be "
                               f"below 2**31", argument="x")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise UnsupportedInput(f"layer_norm: {name} must be a tensor or None, got {type(p).__name__}",
                                   argument=name)
        if tuple(p.shape) != (n,):
            raise UnsupportedInput(f"layer_norm: {name} has shape {tuple(p.shape)}; it must be ({n},), "
                                   f"x's last dimension", argument=name)
        if p.dtype not in (x.dtype, torch.float32):
            raise UnsupportedInput(f"layer_norm: {name} has dtype {p.dtype}; it must be x's dtype ({x.dtype}) "
                                   f"or float32", argument=name)
        _check_device(name, p, want)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0.0 <= eps < math.inf):
        raise UnsupportedInput(f"layer_norm: eps must be a finite float >= 0, got {eps!r}", argument="eps")
    return shape


def _check_backward_args(dy: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor], rstd: torch.Tensor,
                         dweight_dtype: torch.dtype, dbias_dtype: torch.dtype) -> None:
    """Validate the backward op's arguments: as the forward returned and took them (weight: None or (N,)
    of x's dtype or float32; rstd: float32 of x.shape[:-1]), all on the kernels' device."""
    want = _device.torch_device().type
    for name, t in (("dy", dy), ("x", x)):
        if t.dtype not in _SUPPORTED:
            raise UnsupportedInput(f"layer_norm_backward: {name} has dtype {t.dtype}; supported are float32, "
                                   f"float16 and bfloat16", argument=name)
        _check_device(name, t, want)
    if x.dim() == 0:
        raise UnsupportedInput("layer_norm_backward: x is 0-d; it needs a last dimension (the forward's N)",
                               argument="x")
    if dy.shape != x.shape:
        raise UnsupportedInput(f"layer_norm_backward: dy has shape {tuple(dy.shape)}, x {tuple(x.shape)}; "
                               f"they must match", argument="dy")
    n = x.shape[-1]
    if weight is not None:
        if tuple(weight.shape) != (n,):
            raise UnsupportedInput(f"layer_norm_backward: weight has shape {tuple(weight.shape)}; it must be "
                                   f"({n},), x's last dimension (the forward's weight)", argument="weight")
        if weight.dtype not in (x.dtype, torch.float32):
            raise UnsupportedInput(f"layer_norm_backward: weight has dtype {weight.dtype}; it must be x's dtype "
                                   f"({x.dtype}) or float32 (the forward's weight)", argument="weight")
        _check_device("weight", weight, want)
    if rstd.dtype != torch.float32 or rstd.shape != x.shape[:-1]:
        raise UnsupportedInput(f"layer_norm_backward: rstd must be float32 of shape {tuple(x.shape[:-1])} "
                               f"(as the forward returns it), got {rstd.dtype} {tuple(rstd.shape)}", argument="rstd")
    _check_device("rstd", rstd, want)
    for name, t in (("dy", dy), ("weight", weight), ("rstd", rstd)):
        if t is not None and t.device != x.device:
            raise UnsupportedInput(f"layer_norm_backward: {name} is on {t.device} but x is on {x.device}; move "
                                   f"every input to one device", argument=name)
    for name, dt in (("dweight_dtype", dweight_dtype), ("dbias_dtype", dbias_dtype)):
        if dt not in _SUPPORTED:
            raise UnsupportedInput(f"layer_norm_backward: {name}={dt} is not float32, float16 or bfloat16",
                                   argument=name)


# --------------------------------------------------------------------------- reference


def layer_norm_reference(x: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor] = None,
                         bias: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    """Eager reference: ``F.layer_norm`` in float64, cast back to x's dtype."""
    w = weight.double() if weight is not None else None
    b = bias.double() if bias is not None else None
    return torch.nn.functional.layer_norm(x.double(), list(normalized_shape), w, b, eps).to(x.dtype)


# --------------------------------------------------------------------------- registration


@torch.library.custom_op("tritondiff::layer_norm", mutates_args=())
def _layer_norm_op(x: torch.Tensor, normalized_shape: Sequence[int], weight: Optional[torch.Tensor],
                   bias: Optional[torch.Tensor], eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_args(x, normalized_shape, weight, bias, eps)
    return _forward(x, weight, bias, eps)


@_layer_norm_op.register_fake
def _layer_norm_fake(x, normalized_shape, weight, bias, eps):
    _check_args(x, normalized_shape, weight, bias, eps)
    stats_shape = x.shape[:-1]
    return (x.new_empty(x.shape), x.new_empty(stats_shape, dtype=torch.float32),
            x.new_empty(stats_shape, dtype=torch.float32))


@torch.library.custom_op("tritondiff::layer_norm_backward", mutates_args=())
def _layer_norm_backward_op(dy: torch.Tensor, x: torch.Tensor, weight: Optional[torch.Tensor], rstd: torch.Tensor,
                            dweight_dtype: torch.dtype,
                            dbias_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_backward_args(dy, x, weight, rstd, dweight_dtype, dbias_dtype)
    return _backward(dy, x, weight, rstd, dweight_dtype, dbias_dtype)


@_layer_norm_backward_op.register_fake
def _layer_norm_backward_fake(dy, x, weight, rstd, dweight_dtype, dbias_dtype):
    _check_backward_args(dy, x, weight, rstd, dweight_dtype, dbias_dtype)
    n = x.shape[-1]
    return x.new_empty(x.shape), x.new_empty((n,), dtype=dweight_dtype), x.new_empty((n,), dtype=dbias_dtype)


def _layer_norm_setup_context(ctx, inputs, output) -> None:
    x, _normalized_shape, weight, bias, _eps = inputs
    _y, mean, rstd = output
    ctx.mark_non_differentiable(mean, rstd)  # saved statistics, not a differentiable result
    ctx.set_materialize_grads(False)  # no zero-filled gradients for mean and rstd (two fills per backward)
    ctx.save_for_backward(x, weight, rstd)
    ctx.has_weight = weight is not None
    ctx.has_bias = bias is not None
    ctx.dweight_dtype = weight.dtype if weight is not None else x.dtype
    ctx.dbias_dtype = bias.dtype if bias is not None else x.dtype


def _layer_norm_backward(ctx, dy, _dmean, _drstd):
    if dy is None:  # y took no part in the loss
        return None, None, None, None, None
    x, weight, rstd = ctx.saved_tensors
    dx, dw, db = _layer_norm_backward_op(dy, x, weight, rstd, ctx.dweight_dtype, ctx.dbias_dtype)
    return dx, None, dw if ctx.has_weight else None, db if ctx.has_bias else None, None


_layer_norm_op.register_autograd(_layer_norm_backward, setup_context=_layer_norm_setup_context)


class _LayerNormFunction(torch.autograd.Function):
    """The eager fast path (kernels/fast_path.py): the op's launchers and backward, no dispatcher."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                eps: float) -> torch.Tensor:
        y, _mean, rstd = _forward(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, rstd)
        ctx.has_bias = bias is not None
        ctx.dweight_dtype = weight.dtype if weight is not None else x.dtype
        ctx.dbias_dtype = bias.dtype if bias is not None else x.dtype
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable   # Triton kernels: a second derivative raises, as the op's does
    def backward(ctx, dy: torch.Tensor):
        x, weight, rstd = ctx.saved_tensors
        dx, dw, db = _backward(dy, x, weight, rstd, ctx.dweight_dtype, ctx.dbias_dtype)
        return dx, dw if weight is not None else None, db if ctx.has_bias else None, None


def layer_norm(x: torch.Tensor, normalized_shape: Sequence[int] | int, weight: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, eps: float = 1e-5) -> torch.Tensor:
    """``F.layer_norm`` over the last dimension (see the module docstring); returns y."""
    # The op validates everything (once); here only what its schema needs: arguments of the
    # ordinary types go straight through, anything else gets the full check and its clear error.
    if type(normalized_shape) is int:
        shape = [normalized_shape]
    elif type(normalized_shape) in (list, tuple, torch.Size) and all(type(v) is int for v in normalized_shape):
        shape = list(normalized_shape)
    else:
        shape = None
    checked = shape is None or type(eps) is not float or not isinstance(x, torch.Tensor)
    if checked:
        shape = _check_args(x, normalized_shape, weight, bias, eps)
    if fast_path.plain_eager(x, weight, bias):
        if not checked:                # the op validates on its path; here nothing else would
            _check_args(x, shape, weight, bias, eps)
        if fast_path.needs_grad(x, weight, bias):
            return _LayerNormFunction.apply(x, weight, bias, float(eps))
        return _forward(x, weight, bias, float(eps))[0]
    y, _mean, _rstd = _layer_norm_op(x, shape, weight, bias, float(eps))
    return y
