"""K1 of mHC-lite: fused RMSNorm + projection onto the coefficient heads.

    y[t, d] = r[t] * p[t, d],   p = x @ W^T,   r[t] = rsqrt(mean_k x[t, k]^2 + eps)

x is the flattened stream tensor x_flat[T, K] (K = n*C) and W[D, K] the head
projection (D = 2n + n! = 32 in MHCLiteBlock).  Scaling the product instead of
the input is what makes the fusion a single pass: the row's sum of squares and
its dot products with W accumulate side by side over K tiles, and the scale is
applied once at the end.

Gradients (g = dL/dy, and g_r = dL/dr for the saved r when it is used):

    dr[t]/dx[t, k] = -1/2 (m + eps)^-3/2 * 2 x[t, k] / K = -r^3 x[t, k] / K
    dL/dx[t, k] = sum_d g[t, d] (r W[d, k] + p[t, d] dr/dx[t, k]) + g_r[t] dr/dx[t, k]
                = r (g @ W)[t, k] - x[t, k] * coef[t]
    coef[t]     = r^3 / K * (sum_d g p + g_r) = r^2 / K * sum_d g[t, d] y[t, d] + r^3 / K * g_r[t]
    dL/dW       = (g * r)^T @ x                                   (a plain matmul)

so the dx kernel reads x once, writes dx once, and needs only y and r from the
forward (which is why the forward op also returns r).  The two terms of dx
cancel when g @ W is parallel to x (always at K = 1, where dx = r g W eps r^2),
so coef must come from the unrounded y: the forward keeps y in fp32 (fp64 for
fp64 x) and only the public op rounds it to x's dtype.

Ops: ``mhc::fused_rmsnorm_project_fwd(x, W, eps) -> (y, inv_rms)`` (both fp32,
fp64 for fp64 x) carries the autograd formula;
``mhc::fused_rmsnorm_project(x, W, eps) -> y`` is the public op (a
CompositeImplicitAutograd wrapper returning y in x's dtype), and
``mhc::fused_rmsnorm_project_bwd_dx`` is the backward kernel's op.
"""
from __future__ import annotations

import dataclasses
import functools

import torch
import triton
import triton.language as tl

from tritondiff.base import device as _device
from tritondiff.kernels.config import config as kernel_config
from tritondiff.kernels.config import store_dtype
from tritondiff.kernels.exc import LaunchConfigError, UnsupportedInput

from . import configs
from ._common import (acc_dtype, check_activation, check_coef, check_devices, check_same_dtype, check_shape,
                      coef_dtype, load_tile, load_tile_zeroed, next_pow2, tl_acc)

_OP = "fused_rmsnorm_project"

# K1 keeps D in one tile of at most this many heads; larger D is split over
# a second grid axis (forward) or an inner loop (backward).
_MAX_BLOCK_D = 64

# tl.dot operand tiles are never smaller than MIN_DOT_DIM along any dimension
# (M = BLOCK_T, N/K = BLOCK_D and BLOCK_K), whatever T, K or D is: tiny sizes are
# padded up to 16 with masked loads that read 0 (x, W and g lanes past T / K / D
# are zero, so the padded products add nothing), never served by a second,
# broadcast-multiply-and-sum code path.  Triton 3.6 on NVIDIA needs K >= 16 for
# 16-bit operands (older releases needed M, N, K >= 16); padding keeps one code
# path for every size, and the wasted tensor-core work is free in a kernel bound
# by reading x (D = 32 in MHCLiteBlock, so only toy head counts pad at all).
# k1_blocks() computes every launch's tiles and checks the rule.
MIN_DOT_DIM = 16

# Every tl.dot passes out_dtype=ACC: triton 3.6 defaults out_dtype to float32
# and asserts acc's dtype equals it, so a float64 accumulator without it fails
# to compile on a GPU (triton >= 3.7 and the interpreter take it from acc).

# How tl.dot is fed: NATIVE uses the operands' dtype (bf16/fp16 tensor cores,
# fp32/fp64 with input_precision="ieee", never tf32); UPCAST casts bf16/fp16 operands to
# fp32 first, which is exact (their products fit in fp32).  The interpreter
# needs UPCAST: its tl.dot multiplies bf16 as the raw uint16 bit patterns
# (triton 3.9 InterpreterBuilder.create_dot), returning garbage.  UPCAST also
# loads x with 1.0 tails zeroed after the upcast (see _common.load_tile).
_DOT_NATIVE = 0
_DOT_UPCAST = 1


# ---------------------------------------------------------------------------- kernels

@triton.jit
def _fused_rmsnorm_project_fwd_kernel(
    x_ptr, w_ptr, y_ptr, rinv_ptr,
    T, K, D, eps,
    stride_xt, stride_wd, stride_yt,
    ACC: tl.constexpr, DOT_MODE: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # One program: BLOCK_T rows x BLOCK_D heads.  Loop over K in BLOCK_K tiles:
    #   acc[t, d] += sum_k x[t, k] W[d, k]      (tl.dot, fp32/fp64 accumulate)
    #   ssq[t]    += sum_k x[t, k]^2
    # then y = acc * rsqrt(ssq / K + eps).  x is read exactly once when D <= BLOCK_D.
    # float32 x runs with ACC = float64 (see _accumulation).
    pid_t = tl.program_id(0)
    pid_d = tl.program_id(1)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    mask_t = offs_t < T
    mask_d = offs_d < D
    x_rows = x_ptr + offs_t.to(tl.int64)[:, None] * stride_xt
    w_rows = w_ptr + offs_d.to(tl.int64)[:, None] * stride_wd
    acc = tl.zeros([BLOCK_T, BLOCK_D], dtype=ACC)
    ssq = tl.zeros([BLOCK_T], dtype=ACC)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        m = mask_t[:, None] & mask_k[None, :]
        w = tl.load(w_rows + offs_k[None, :], mask=mask_d[:, None] & mask_k[None, :], other=0.0)
        if DOT_MODE == 1:
            xa = load_tile_zeroed(x_rows + offs_k[None, :], m, ACC)
            acc = tl.dot(xa, tl.trans(w.to(ACC)), acc, input_precision=PRECISION, out_dtype=ACC)
        else:
            x = tl.load(x_rows + offs_k[None, :], mask=m, other=0.0)
            xa = x.to(ACC)
            acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION, out_dtype=ACC)
        ssq += tl.sum(xa * xa, axis=1)
    rinv = 1.0 / tl.sqrt(ssq / K + eps)
    y = acc * rinv[:, None]
    y_ptrs = y_ptr + offs_t.to(tl.int64)[:, None] * stride_yt + offs_d[None, :]
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask_t[:, None] & mask_d[None, :])
    if pid_d == 0:
        tl.store(rinv_ptr + offs_t, rinv.to(rinv_ptr.dtype.element_ty), mask=mask_t)


@triton.jit
def _k1_g_at_w(gy_ptr, w_ptr, g0, rows64, mask_t, offs_k, mask_k, D, stride_gt, stride_wd,
               ACC: tl.constexpr, DOT_MODE: tl.constexpr, PRECISION: tl.constexpr, BLOCK_T: tl.constexpr,
               BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, ONE_D_TILE: tl.constexpr):
    """(g @ W)[t, k] on one [BLOCK_T, BLOCK_K] tile, accumulated in ACC over D tiles (g0: D's only tile).

    With one D tile there is no loop at all (a constexpr branch): the caller's loop over K tiles is
    then the innermost loop, the one Triton's software pipeliner prefetches (num_stages) -- a D loop
    of one trip left in its place took the pipelining and the K loop ran unprefetched (75% of copy
    bandwidth on an H100 for the backward dx kernel).
    """
    gw = tl.zeros([BLOCK_T, BLOCK_K], dtype=ACC)
    if ONE_D_TILE:
        offs_d = tl.arange(0, BLOCK_D)
        w = tl.load(w_ptr + offs_d.to(tl.int64)[:, None] * stride_wd + offs_k[None, :],
                    mask=(offs_d < D)[:, None] & mask_k[None, :], other=0.0)
        if DOT_MODE == 1:
            gw = tl.dot(g0, w.to(ACC), gw, input_precision=PRECISION, out_dtype=ACC)
        else:
            gw = tl.dot(g0, w, gw, input_precision=PRECISION, out_dtype=ACC)
    else:
        for d0 in range(0, D, BLOCK_D):
            offs_d = d0 + tl.arange(0, BLOCK_D)
            mask_d = offs_d < D
            g = tl.load(gy_ptr + rows64[:, None] * stride_gt + offs_d[None, :],
                        mask=mask_t[:, None] & mask_d[None, :], other=0.0)
            w = tl.load(w_ptr + offs_d.to(tl.int64)[:, None] * stride_wd + offs_k[None, :],
                        mask=mask_d[:, None] & mask_k[None, :], other=0.0)
            if DOT_MODE == 1:
                gw = tl.dot(g.to(ACC), w.to(ACC), gw, input_precision=PRECISION, out_dtype=ACC)
            else:
                gw = tl.dot(g, w, gw, input_precision=PRECISION, out_dtype=ACC)
    return gw


@triton.jit
def _k1_projection_tile(gy_ptr, w_ptr, x_ptr, g0, rows64, mask_t, offs_k, D, K, stride_gt, stride_wd, stride_xt,
                        ACC: tl.constexpr, DOT_MODE: tl.constexpr, PRECISION: tl.constexpr, BLOCK_T: tl.constexpr,
                        BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, ONE_D_TILE: tl.constexpr):
    """(g @ W, x) on one [BLOCK_T, BLOCK_K] tile, both in float64, x's masked lanes 0."""
    mask_k = offs_k < K
    gw = _k1_g_at_w(gy_ptr, w_ptr, g0, rows64, mask_t, offs_k, mask_k, D, stride_gt, stride_wd,
                    ACC, DOT_MODE, PRECISION, BLOCK_T, BLOCK_K, BLOCK_D, ONE_D_TILE).to(tl.float64)
    x = load_tile_zeroed(x_ptr + rows64[:, None] * stride_xt + offs_k[None, :],
                         mask_t[:, None] & mask_k[None, :], ACC).to(tl.float64)
    return gw, x


@triton.jit
def _k1_store_projected_dx(dx_ptr, gw, x, q, r, gr_ptr, rows64, offs_t, mask_t, offs_k, K, stride_dxt,
                           HAS_GR: tl.constexpr, ACC: tl.constexpr):
    """Store dx = r (g @ W - q x) (- x r^3 / K g_r) of one tile, formed in float64."""
    dx = (gw - x * q[:, None]) * r.to(tl.float64)[:, None]
    if HAS_GR:
        gr = tl.load(gr_ptr + offs_t, mask=mask_t, other=0.0).to(ACC)
        dx -= x * (r * r * r / K * gr).to(tl.float64)[:, None]
    # via ACC: float64 -> bfloat16 has no direct conversion on every target (or in the interpreter)
    tl.store(dx_ptr + rows64[:, None] * stride_dxt + offs_k[None, :], dx.to(ACC).to(dx_ptr.dtype.element_ty),
             mask=mask_t[:, None] & (offs_k < K)[None, :])


@triton.jit
def _fused_rmsnorm_project_bwd_dx_kernel(
    x_ptr, w_ptr, gy_ptr, y_ptr, rinv_ptr, gr_ptr, dx_ptr,
    T, K, D, k_eps,
    stride_xt, stride_wd, stride_gt, stride_yt, stride_dxt,
    HAS_GR: tl.constexpr, ACC: tl.constexpr, DOT_MODE: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr, ONE_D_TILE: tl.constexpr,
    ONE_K_TILE: tl.constexpr, TWO_PASS: tl.constexpr,
):
    # dx[t, k] = r[t] * (g @ W)[t, k] - x[t, k] * coef[t]
    # coef[t]  = r^2 / K * sum_d g[t, d] y[t, d]  (+ r^3 / K * g_r[t])
    pid_t = tl.program_id(0)
    offs_t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    mask_t = offs_t < T
    rows64 = offs_t.to(tl.int64)
    r = tl.load(rinv_ptr + offs_t, mask=mask_t, other=0.0).to(ACC)
    offs_d0 = tl.arange(0, BLOCK_D)
    g0 = tl.load(gy_ptr + rows64[:, None] * stride_gt + offs_d0[None, :],
                 mask=mask_t[:, None] & (offs_d0 < D)[None, :], other=0.0)
    if DOT_MODE == 1:
        g0 = g0.to(ACC)  # upcast once, not once per K tile
    if ONE_K_TILE or TWO_PASS:
        # The projection form.  With s = sum_k x (g @ W) = sum_d g p and r^2 / K = 1 / (ssq + K eps):
        #   dx = r * ((g @ W) - x * s / (ssq + K eps)).
        # The two terms cancel when g @ W is nearly parallel to x (always at K = 1: dx = r g W eps r^2; and at
        # x, W ~ 1000 +- 1), so s is summed from the same rounded g @ W tiles (their rounding then cancels
        # too) and the row sums and the difference are formed in float64.  Taken from the forward's y
        # instead, each rounding of y, r and acc comes back multiplied by the cancellation: float32 dx was
        # wrong by ~2**-24 * ssq / (K eps) relative at tiny K (6% at x ~ 1, eps = 1e-6), and at x, W ~ 1000
        # +- 1 4x eager's error (H100, K = 16,924) or 6x on some rows (CPU, K = 333, equal heads); now it is
        # within 1e-7 of its size, eager's within 1e-4.  One K tile (any dtype) reads x once; longer
        # float32 / float64 rows (TWO_PASS) read it twice, summing s and ssq first, at about twice the time
        # (reports/performance-log.md, mHC K1 in float32).
        # 16-bit rows over several tiles keep the one-pass form below: their own rounding is far larger.
        if ONE_K_TILE:
            offs_k = tl.arange(0, BLOCK_K)
            gw, x = _k1_projection_tile(gy_ptr, w_ptr, x_ptr, g0, rows64, mask_t, offs_k, D, K, stride_gt,
                                        stride_wd, stride_xt, ACC, DOT_MODE, PRECISION, BLOCK_T, BLOCK_K, BLOCK_D,
                                        ONE_D_TILE)
            q = tl.sum(x * gw, axis=1) / (tl.sum(x * x, axis=1) + k_eps)
            _k1_store_projected_dx(dx_ptr, gw, x, q, r, gr_ptr, rows64, offs_t, mask_t, offs_k, K, stride_dxt,
                                   HAS_GR, ACC)
        else:
            s = tl.zeros([BLOCK_T], dtype=tl.float64)
            ssq = tl.zeros([BLOCK_T], dtype=tl.float64)
            for k0 in range(0, K, BLOCK_K):
                gw, x = _k1_projection_tile(gy_ptr, w_ptr, x_ptr, g0, rows64, mask_t, k0 + tl.arange(0, BLOCK_K),
                                            D, K, stride_gt, stride_wd, stride_xt, ACC, DOT_MODE, PRECISION,
                                            BLOCK_T, BLOCK_K, BLOCK_D, ONE_D_TILE)
                s += tl.sum(x * gw, axis=1)
                ssq += tl.sum(x * x, axis=1)
            q = s / (ssq + k_eps)
            for k0 in range(0, K, BLOCK_K):
                offs_k = k0 + tl.arange(0, BLOCK_K)
                gw, x = _k1_projection_tile(gy_ptr, w_ptr, x_ptr, g0, rows64, mask_t, offs_k, D, K, stride_gt,
                                            stride_wd, stride_xt, ACC, DOT_MODE, PRECISION, BLOCK_T, BLOCK_K,
                                            BLOCK_D, ONE_D_TILE)
                _k1_store_projected_dx(dx_ptr, gw, x, q, r, gr_ptr, rows64, offs_t, mask_t, offs_k, K, stride_dxt,
                                       HAS_GR, ACC)
    else:
        # Phase 1 reduces g*y over D (tiny: [BLOCK_T, D]); phase 2 streams x -> dx
        # over K tiles, so x is read once and dx written once.
        gy_dot_y = tl.zeros([BLOCK_T], dtype=ACC)
        for d0 in range(0, D, BLOCK_D):
            offs_d = d0 + tl.arange(0, BLOCK_D)
            m = mask_t[:, None] & (offs_d < D)[None, :]
            gy = tl.load(gy_ptr + rows64[:, None] * stride_gt + offs_d[None, :], mask=m, other=0.0)
            yv = tl.load(y_ptr + rows64[:, None] * stride_yt + offs_d[None, :], mask=m, other=0.0)
            gy_dot_y += tl.sum(gy.to(ACC) * yv.to(ACC), axis=1)
        coef = r * r / K * gy_dot_y
        if HAS_GR:
            gr = tl.load(gr_ptr + offs_t, mask=mask_t, other=0.0).to(ACC)
            coef += r * r * r / K * gr
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            mask_k = offs_k < K
            gw = _k1_g_at_w(gy_ptr, w_ptr, g0, rows64, mask_t, offs_k, mask_k, D, stride_gt, stride_wd,
                            ACC, DOT_MODE, PRECISION, BLOCK_T, BLOCK_K, BLOCK_D, ONE_D_TILE)
            m = mask_t[:, None] & mask_k[None, :]
            x = load_tile(x_ptr + rows64[:, None] * stride_xt + offs_k[None, :], m, ACC)
            dx = r[:, None] * gw - x * coef[:, None]
            tl.store(dx_ptr + rows64[:, None] * stride_dxt + offs_k[None, :], dx.to(dx_ptr.dtype.element_ty),
                     mask=m)


# ---------------------------------------------------------------------------- launchers

def _dot_mode(dtype: torch.dtype) -> int:
    if _device.is_interpreter() and dtype in (torch.bfloat16, torch.float16):
        return _DOT_UPCAST
    return _DOT_NATIVE


def _precision(dtype: torch.dtype) -> str:
    """tl.dot input_precision: full fp32 ("ieee", not tf32) for fp32 / fp64 operands; the 16-bit
    dtypes ignore it and keep Triton's default."""
    return "ieee" if dtype in (torch.float32, torch.float64) or _dot_mode(dtype) == _DOT_UPCAST else "tf32"


#: GPUs (compute capability) with float64 tensor cores at a useful rate: A100, H100 / H200, B200.
_FLOAT64_MMA = {(8, 0), (9, 0), (10, 0)}
#: block_c of float32 K1 in float64 tiles (twice the registers per element): at the table's 128 the backward dx
#: kernel spilled 2,860 bytes (ptxas, sm_90a); the values are the fastest measured
#: (reports/performance-log.md, mHC K1 in float32).
_FLOAT64_TILE_BLOCK_C = {"k1_fwd": 32, "k1_bwd_dx": 64}


def _float64_tiles(dtype: torch.dtype, device: torch.device) -> bool:
    """Does float32 K1 run in float64 tiles on ``device`` (the interpreter, or a GPU in ``_FLOAT64_MMA``)?"""
    if dtype != torch.float32:
        return False
    return _device.is_interpreter() or _has_float64_mma(device.index if device.index is not None
                                                        else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _has_float64_mma(index: int) -> bool:
    return torch.cuda.get_device_capability(index) in _FLOAT64_MMA


def _accumulation(dtype: torch.dtype, device: torch.device) -> tuple:
    """(ACC, DOT_MODE, PRECISION) of K1's kernels for activations of ``dtype`` on ``device``.

    float32 runs in float64 where the GPU has float64 tensor cores (``_float64_tiles``): its tiles are upcast
    (exactly) and tl.dot sums in float64, on the H100 faster than the float32 "ieee" dot (an FMA loop):
    forward 1.56 ms (block_c 32) against 6.24 at T = 65536, K = 10240, D = 32.  That float32 dot summed all K products through
    acc in one rounding chain: y was 4.3e-6 off at x, W ~ 1000 +- 1 and K = 16,924 (eager 2.9e-7), and 4.3e-4 at
    K = 2**18; in float64 y and inv_rms are correctly rounded.  Elsewhere float64 runs at
    1/32-1/64 of float32's rate, so float32 keeps the float32 dot there, with that chain's error.  bf16 / fp16
    keep their tensor cores and float32 sums."""
    if _float64_tiles(dtype, device):
        return tl.float64, _DOT_UPCAST, "ieee"
    return tl_acc(dtype), _dot_mode(dtype), _precision(dtype)


def _block_d(D: int) -> int:
    return min(_MAX_BLOCK_D, max(MIN_DOT_DIM, triton.next_power_of_2(D)))


@dataclasses.dataclass(frozen=True)
class K1Blocks:
    """The tiles of one K1 launch (what the launchers pass as BLOCK_* constexprs)."""

    kernel: str  # "k1_fwd" or "k1_bwd_dx"
    block_t: int
    block_k: int
    block_d: int
    num_warps: int
    num_stages: int

    def dot_shapes(self) -> tuple[tuple[tuple[int, int], tuple[int, int]], ...]:
        """The (lhs, rhs) block shapes of every tl.dot in the kernel."""
        if self.kernel == "k1_fwd":
            return (((self.block_t, self.block_k), (self.block_k, self.block_d)),)  # x @ W^T
        return (((self.block_t, self.block_d), (self.block_d, self.block_k)),)  # g @ W


def k1_blocks(kernel: str, *, T: int, K: int, D: int, device: torch.device,
              config: configs.LaunchConfig | None = None, dtype: torch.dtype | None = None) -> K1Blocks:
    """The tiles a K1 launch of T rows, K = n*C features and D heads uses; raises LaunchConfigError
    if a tl.dot operand tile would be narrower than MIN_DOT_DIM along any dimension.  ``dtype``: x's; float32
    in float64 tiles on a GPU takes ``_FLOAT64_TILE_BLOCK_C`` at most, unless ``config`` or a launch override
    sets block_c."""
    if kernel not in ("k1_fwd", "k1_bwd_dx"):
        raise LaunchConfigError(f"k1_blocks: kernel must be 'k1_fwd' or 'k1_bwd_dx', got {kernel!r}",
                                kernel=str(kernel))
    cfg = configs.resolve(kernel, config, T=T, C=K, device=device)
    overridden = "block_c" in kernel_config.launch_overrides.get(configs.override_name(kernel), {})
    if (dtype is not None and config is None and not overridden and not _device.is_interpreter()
            and _float64_tiles(dtype, device)):
        cfg = dataclasses.replace(cfg, block_c=min(cfg.block_c, _FLOAT64_TILE_BLOCK_C[kernel]))
    blocks = K1Blocks(kernel, cfg.block_t, cfg.block_c, _block_d(D), cfg.num_warps, cfg.num_stages)
    for lhs, rhs in blocks.dot_shapes():
        if min(*lhs, *rhs) < MIN_DOT_DIM:
            raise LaunchConfigError(
                f"{kernel}: the launch (block_t={blocks.block_t}, block_c={blocks.block_k}, "
                f"BLOCK_D={blocks.block_d}) feeds tl.dot a {lhs[0]}x{lhs[1]} by {rhs[0]}x{rhs[1]} tile, but every "
                f"dot dimension must be >= {MIN_DOT_DIM} on NVIDIA GPUs; use a smaller block_c (so block_t "
                f"stays >= {MIN_DOT_DIM} under the {configs.MAX_TILE_ELEMENTS}-element tile limit)",
                kernel=kernel, parameter="block_c")
    return blocks


def rmsnorm_project_fwd(x: torch.Tensor, W: torch.Tensor, eps: float, *,
                        config: configs.LaunchConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch K1 forward on validated inputs: (y[T, D], inv_rms[T]), both fp32 (fp64 for fp64 x).

    y stays in the accumulation dtype: the backward's coef sums g * y over the
    heads, and at tiny K that term cancels r (g @ W) almost exactly, so a y
    rounded to bf16 (2**-9 relative) turned into errors of ~1000 ulps in dx.
    The public op rounds y to x's dtype (torch, round-to-nearest-even).
    """
    x = x.contiguous()
    W = W.contiguous()
    T, K = x.shape
    D = W.shape[0]
    y = torch.empty((T, D), dtype=coef_dtype(x.dtype), device=x.device)
    rinv = torch.empty((T,), dtype=coef_dtype(x.dtype), device=x.device)
    if T == 0:
        return y, rinv
    b = k1_blocks("k1_fwd", T=T, K=K, D=D, device=x.device, config=config, dtype=x.dtype)
    grid = (triton.cdiv(T, b.block_t), triton.cdiv(D, b.block_d))
    acc, dot_mode, precision = _accumulation(x.dtype, x.device)
    _fused_rmsnorm_project_fwd_kernel[grid](
        x, W, y, rinv, T, K, D, float(eps),
        x.stride(0), W.stride(0), y.stride(0),
        ACC=acc, DOT_MODE=dot_mode, PRECISION=precision,
        BLOCK_T=b.block_t, BLOCK_K=b.block_k, BLOCK_D=b.block_d,
        num_warps=b.num_warps, num_stages=b.num_stages,
    )
    return y, rinv


def rmsnorm_project_bwd_dx(x: torch.Tensor, W: torch.Tensor, gy: torch.Tensor, y: torch.Tensor,
                           inv_rms: torch.Tensor, g_inv_rms: torch.Tensor | None, eps: float, *,
                           config: configs.LaunchConfig | None = None) -> torch.Tensor:
    """Launch K1 backward dx: dx[T, K] in x's dtype (g_inv_rms may be None; eps as in the forward).

    gy is in x's dtype (the tensor-core operand of g @ W); y is the forward's
    fp32 / fp64 output, never a rounded copy (see :func:`rmsnorm_project_fwd`).
    """
    x, W, gy, y, inv_rms = (t.contiguous() for t in (x, W, gy, y, inv_rms))
    T, K = x.shape
    D = W.shape[0]
    # bf16 in the interpreter: stored as fp32 and rounded by torch (kernels.config.store_dtype).
    dx = torch.empty(x.shape, dtype=store_dtype(x.dtype), device=x.device)
    if T == 0:
        return dx.to(x.dtype)
    has_gr = g_inv_rms is not None
    gr = g_inv_rms.contiguous() if has_gr else inv_rms
    b = k1_blocks("k1_bwd_dx", T=T, K=K, D=D, device=x.device, config=config, dtype=x.dtype)
    grid = (triton.cdiv(T, b.block_t),)
    acc, dot_mode, precision = _accumulation(x.dtype, x.device)
    _fused_rmsnorm_project_bwd_dx_kernel[grid](
        x, W, gy, y, inv_rms, gr, dx, T, K, D, float(K * eps),
        x.stride(0), W.stride(0), gy.stride(0), y.stride(0), dx.stride(0),
        HAS_GR=has_gr, ACC=acc, DOT_MODE=dot_mode, PRECISION=precision,
        BLOCK_T=b.block_t, BLOCK_K=b.block_k, BLOCK_D=b.block_d, ONE_D_TILE=D <= b.block_d,
        ONE_K_TILE=K <= b.block_k, TWO_PASS=x.dtype in (torch.float32, torch.float64),
        num_warps=b.num_warps, num_stages=b.num_stages,
    )
    return dx.to(x.dtype)


# ---------------------------------------------------------------------------- eager reference

def reference_fused_rmsnorm_project(x_flat: torch.Tensor, W: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Pure-torch K1: (x @ W^T) * rsqrt(mean(x^2, -1) + eps), accumulated in float32 (float64 for float64)."""
    acc = acc_dtype(x_flat.dtype)
    xa = x_flat.to(acc)
    rinv = torch.rsqrt(xa.pow(2).mean(-1, keepdim=True) + eps)
    return ((xa @ W.to(acc).T) * rinv).to(x_flat.dtype)


def reference_rmsnorm_project_bwd_dx(x_flat: torch.Tensor, W: torch.Tensor, gy: torch.Tensor,
                                     y: torch.Tensor, inv_rms: torch.Tensor) -> torch.Tensor:
    """Pure-torch K1 backward dx from the saved y and inv_rms: r (g @ W) - x r^2/K sum_d(g y)."""
    acc = acc_dtype(x_flat.dtype)
    r = inv_rms.to(acc)[:, None]
    g = gy.to(acc)
    coef = r * r / x_flat.shape[1] * (g * y.to(acc)).sum(-1, keepdim=True)
    return (r * (g @ W.to(acc)) - x_flat.to(acc) * coef).to(x_flat.dtype)


# ---------------------------------------------------------------------------- validation

def _check(x_flat: torch.Tensor, W: torch.Tensor, eps: float, op: str = _OP) -> None:
    check_activation(op, "x_flat", x_flat, 2)
    check_activation(op, "W", W, 2)
    check_same_dtype(op, "W", W, "x_flat", x_flat)
    check_devices(op, x_flat=x_flat, W=W)
    if x_flat.shape[1] == 0:
        raise UnsupportedInput(f"{op}: x_flat has no features (shape {tuple(x_flat.shape)}); RMSNorm needs n*C >= 1",
                               argument="x_flat")
    if W.shape[1] != x_flat.shape[1]:
        raise UnsupportedInput(
            f"{op}: W has shape {tuple(W.shape)} but x_flat has {x_flat.shape[1]} features; "
            f"W must be [D, {x_flat.shape[1]}]", argument="W")
    if W.shape[0] == 0:
        raise UnsupportedInput(f"{op}: W has no rows (shape {tuple(W.shape)}); D must be >= 1", argument="W")
    if not (eps >= 0.0 and eps < float("inf")):
        raise UnsupportedInput(f"{op}: eps must be a finite number >= 0, got {eps!r}", argument="eps")


_SAVED = "the forward's saved outputs (y, inv_rms) and their gradients"


def _check_bwd_dx(x_flat, W, gy, y, inv_rms, g_inv_rms, eps) -> None:
    """K1 bwd dx: the forward's (x_flat, W, eps), its outputs y[T, D] and inv_rms[T] in the coefficient
    dtype (float32; float64 for float64 x), their gradients gy[T, D] (that dtype or x_flat's) and
    g_inv_rms[T] (None, or that dtype)."""
    op = f"{_OP}_bwd_dx"
    _check(x_flat, W, eps, op)
    T, D = x_flat.shape[0], W.shape[0]
    check_activation(op, "gy", gy, 2)
    if gy.dtype not in (x_flat.dtype, coef_dtype(x_flat.dtype)):
        raise UnsupportedInput(
            f"{op}: gy has dtype {gy.dtype}; it must be y's dtype ({coef_dtype(x_flat.dtype)}) or x_flat's "
            f"({x_flat.dtype}) (cast with gy.to({coef_dtype(x_flat.dtype)}))", argument="gy")
    check_shape(op, "gy", gy, (T, D))
    check_coef(op, "y", y, (T, D), x_flat, kind=_SAVED)
    check_coef(op, "inv_rms", inv_rms, (T,), x_flat, kind=_SAVED)
    tensors = dict(x_flat=x_flat, W=W, gy=gy, y=y, inv_rms=inv_rms)
    if g_inv_rms is not None:
        check_coef(op, "g_inv_rms", g_inv_rms, (T,), x_flat, kind=_SAVED)
        tensors["g_inv_rms"] = g_inv_rms
    check_devices(op, **tensors)


# ---------------------------------------------------------------------------- registration

@torch.library.custom_op("mhc::fused_rmsnorm_project_fwd", mutates_args=())
def _fwd_op(x_flat: torch.Tensor, W: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    _check(x_flat, W, eps)
    return rmsnorm_project_fwd(x_flat, W, eps)


@_fwd_op.register_fake
def _fwd_fake(x_flat, W, eps):
    _check(x_flat, W, eps)
    T = x_flat.shape[0]
    cdt = coef_dtype(x_flat.dtype)
    return x_flat.new_empty((T, W.shape[0]), dtype=cdt), x_flat.new_empty((T,), dtype=cdt)


@torch.library.custom_op("mhc::fused_rmsnorm_project_bwd_dx", mutates_args=())
def _bwd_dx_op(x_flat: torch.Tensor, W: torch.Tensor, gy: torch.Tensor, y: torch.Tensor,
               inv_rms: torch.Tensor, g_inv_rms: torch.Tensor | None, eps: float) -> torch.Tensor:
    _check_bwd_dx(x_flat, W, gy, y, inv_rms, g_inv_rms, eps)
    return rmsnorm_project_bwd_dx(x_flat, W, gy.to(x_flat.dtype), y, inv_rms, g_inv_rms, eps)


@_bwd_dx_op.register_fake
def _bwd_dx_fake(x_flat, W, gy, y, inv_rms, g_inv_rms, eps):
    _check_bwd_dx(x_flat, W, gy, y, inv_rms, g_inv_rms, eps)
    return torch.empty_like(x_flat, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output):
    x_flat, W, eps = inputs
    y, inv_rms = output
    ctx.save_for_backward(x_flat, W, y, inv_rms)
    ctx.eps = eps


def _backward(ctx, gy, g_inv_rms):
    x_flat, W, y, inv_rms = ctx.saved_tensors
    dx = dW = None
    if gy is None:
        gy = torch.zeros_like(y)
    if ctx.needs_input_grad[0]:
        dx = torch.ops.mhc.fused_rmsnorm_project_bwd_dx(x_flat, W, gy, y, inv_rms, g_inv_rms, ctx.eps)
    if ctx.needs_input_grad[1]:
        dW = weight_grad(gy, inv_rms, x_flat, W.dtype)
    return dx, dW, None


# ---------------------------------------------------------------------------- dW of 16-bit x
#
# dW = (g r)^T @ x, a sum over T that may cancel.  Rounding g r to x's 16-bit dtype for the GEMM lost 13 (fp16)
# or 16 (bf16) of float32's 24 bits in every term: fp16 x of integers, g near 2e4, 1644 rows -- dW RMS error 181
# against eager's 7.  Here g r is split into 16-bit parts that sum to it
# within float32's precision (two for fp16, three for bf16), each column first moved by a power of two; one
# tensor-core GEMM runs over the stacked parts with a float32 result (``torch.mm``'s ``out_dtype``, CUDA only:
# the interpreter multiplies the parts in float32, exactly), and the parts' products are summed, moved back and
# rounded to W's dtype.  Four launches and the GEMM.
#
# The shift takes each column's largest finite |g r| to [2^13, 2^14) for fp16 (inside its range; first parts
# stay normal for columns down to 2^-141), to [0.5, 1) for bf16 (float32's range: parts stay normal, and the
# shifted GEMM overflows only where the sum over T of |x| nears FLT_MAX).  Tensor cores and the fp32 -> 16-bit
# conversion may flush subnormals: bf16 dW of g near 1e-38 was 207 ulp off on the H100 without the shift.
# fp16's narrow range: a value more than 2^17 below its column's largest loses low bits, an error under 2^-38
# of that largest.


@triton.jit
def _scaled_tile(gy_ptr, r_ptr, T, D, stride_gt, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """One [BLOCK_T, BLOCK_D] tile of g r in float32, with its rows, columns and mask."""
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)[:, None]
    cols = tl.arange(0, BLOCK_D)[None, :]
    mask = (rows < T) & (cols < D)
    g = tl.load(gy_ptr + rows.to(tl.int64) * stride_gt + cols, mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + rows, rows < T, other=0.0).to(tl.float32)
    return g * r, rows, cols, mask


@triton.jit
def _column_top_kernel(gy_ptr, r_ptr, top_ptr, T, D, stride_gt, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    # top[d] = max over t of the finite |g r|, kept as its bits: for non-negative floats the int32 order is the
    # float order, so programs merge by atomic_max into a zeroed buffer.
    s, rows, cols, mask = _scaled_tile(gy_ptr, r_ptr, T, D, stride_gt, BLOCK_T, BLOCK_D)
    a = tl.abs(s)
    a = tl.where(mask & (a == a) & (a != float("inf")), a, 0.0)
    offs_d = tl.arange(0, BLOCK_D)
    tl.atomic_max(top_ptr + offs_d, tl.max(a, axis=0).to(tl.int32, bitcast=True), mask=offs_d < D)


@triton.jit
def _column_shift(top_ptr, cols, D, TARGET: tl.constexpr):
    """clamp(TARGET - e, -126, 127) per column, e = frexp(top)'s exponent (top = m 2^e, m in [0.5, 1); 0 -> 0),
    from the bits: a subnormal's exponent comes from its mantissa's length, read off the mantissa as a float."""
    bits = tl.load(top_ptr + cols, cols < D, other=0)
    biased = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    mant_len = ((mant.to(tl.float32).to(tl.int32, bitcast=True) >> 23) & 0xFF) - 126
    e = tl.where(biased > 0, biased - 126, tl.where(mant > 0, mant_len - 149, 0))
    return tl.minimum(tl.maximum(TARGET - e, -126), 127)


@triton.jit
def _split_parts_kernel(gy_ptr, r_ptr, top_ptr, out_ptr, T, D, stride_gt, TARGET: tl.constexpr,
                        PART: tl.constexpr, PARTS: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    # out[t, i * D + d] = the i-th PART-dtype part of (g r)[t, d] * 2^shift[d]: the parts sum to it within float32's
    # precision; a non-finite value is all in the first part.  Each part is stored as the float32 value of the
    # PART-dtype number (out is PART-typed on a GPU; float32 in the interpreter, which truncates bf16 stores).
    s, rows, cols, mask = _scaled_tile(gy_ptr, r_ptr, T, D, stride_gt, BLOCK_T, BLOCK_D)
    shift = _column_shift(top_ptr, cols, D, TARGET)
    rest = s * ((shift + 127) << 23).to(tl.float32, bitcast=True)      # an exact power of two, 2^-126 .. 2^127
    for i in tl.static_range(PARTS):
        part = rest.to(PART).to(tl.float32)
        tl.store(out_ptr + rows.to(tl.int64) * (PARTS * D) + i * D + cols, part, mask)
        rest = tl.where((part == part) & (tl.abs(part) != float("inf")), rest - part, 0.0)


@triton.jit
def _combine_parts_kernel(p_ptr, top_ptr, out_ptr, D, K, TARGET: tl.constexpr, PARTS: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    # out[d, k] = (p_0 + (p_1 + ... + p_last)) 2^-shift[d], the parts' products p_i = rows i * D + d of the GEMM's
    # [PARTS * D, K] result, smallest first.  An infinite p_0 is the answer (x infinite: the other parts' zeros
    # times inf are NaN).  The move back is exact in float64 and rounded to float32 (torch.ldexp's result, with
    # no float32 subnormal scale for a GPU to flush), then to out's dtype as the old .to() did.
    d = tl.program_id(1).to(tl.int64)
    offs_k = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    mask = offs_k < K
    total = tl.load(p_ptr + ((PARTS - 1) * D + d) * K + offs_k, mask, other=0.0)
    for i in tl.static_range(PARTS - 2, -1, -1):
        total = tl.load(p_ptr + (i * D + d) * K + offs_k, mask, other=0.0) + total
    first = tl.load(p_ptr + d * K + offs_k, mask, other=0.0)
    total = tl.where(tl.abs(first) == float("inf"), first, total)
    shift = _column_shift(top_ptr, d, D, TARGET)
    scale = ((1023 - shift).to(tl.int64) << 52).to(tl.float64, bitcast=True)
    out = (total.to(tl.float64) * scale).to(tl.float32)
    tl.store(out_ptr + d * K + offs_k, out.to(out_ptr.dtype.element_ty), mask)


@torch.library.custom_op("mhc::rmsnorm_project_weight_grad", mutates_args=())
def _weight_grad_op(gy: torch.Tensor, inv_rms: torch.Tensor, x_flat: torch.Tensor,
                    out_dtype: torch.dtype) -> torch.Tensor:
    """dL/dW [D, K] in ``out_dtype`` for 16-bit x_flat (the comment above); an op, so a backward traced by
    AOTAutograd (torch.compile of the block) calls it instead of launching on fake tensors."""
    gy, inv_rms = gy.contiguous(), inv_rms.contiguous()
    T, D = gy.shape
    K = x_flat.shape[1]
    out = torch.empty(D, K, dtype=store_dtype(out_dtype), device=gy.device)
    if not (T and D and K):
        return out.zero_().to(out_dtype)
    parts, target = (2, 14) if x_flat.dtype == torch.float16 else (3, 0)
    block_d = next_pow2(D)
    block_t = max(1, min(next_pow2(T), 4096 // block_d))
    grid = (triton.cdiv(T, block_t),)
    top = torch.zeros(D, dtype=torch.int32, device=gy.device)
    _column_top_kernel[grid](gy, inv_rms, top, T, D, gy.stride(0), BLOCK_T=block_t, BLOCK_D=block_d)
    stacked = torch.empty(T, parts * D, dtype=store_dtype(x_flat.dtype), device=gy.device)
    _split_parts_kernel[grid](gy, inv_rms, top, stacked, T, D, gy.stride(0), TARGET=target,
                              PART=tl.float16 if x_flat.dtype == torch.float16 else tl.bfloat16, PARTS=parts,
                              BLOCK_T=block_t, BLOCK_D=block_d)
    if x_flat.device.type == "cuda":
        products = torch.mm(stacked.T, x_flat, out_dtype=torch.float32)
    else:
        products = stacked.T.float() @ x_flat.float()
    block_k = min(1024, next_pow2(K))
    _combine_parts_kernel[(triton.cdiv(K, block_k), D)](products, top, out, D, K, TARGET=target, PARTS=parts,
                                                        BLOCK_K=block_k)
    return out.to(out_dtype)


@_weight_grad_op.register_fake
def _weight_grad_fake(gy, inv_rms, x_flat, out_dtype):
    return gy.new_empty((gy.shape[1], x_flat.shape[1]), dtype=out_dtype)


def weight_grad(gy: torch.Tensor, inv_rms: torch.Tensor, x_flat: torch.Tensor,
                out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """dL/dW = (gy r)^T @ x_flat, [D, K], from gy [T, D] and r = inv_rms [T]: in ``out_dtype`` (default the
    accumulation dtype, float32 or float64).  16-bit x_flat runs ``mhc::rmsnorm_project_weight_grad``, which
    keeps g r's float32 precision through a 16-bit tensor-core GEMM (the comment above)."""
    acc = acc_dtype(x_flat.dtype)
    out_dtype = out_dtype or acc
    if x_flat.dtype in (torch.float32, torch.float64):
        return ((gy.to(acc) * inv_rms.to(acc)[:, None]).T @ x_flat).to(out_dtype)
    return torch.ops.mhc.rmsnorm_project_weight_grad(gy, inv_rms, x_flat, out_dtype)


_fwd_op.register_autograd(_backward, setup_context=_setup_context)

# The public op returns y only; it decomposes (CompositeImplicitAutograd) into the
# (y, inv_rms) op above, so autograd, fake tensors and torch.compile see that op.
_lib = torch.library.Library("mhc", "FRAGMENT")
_lib.define("fused_rmsnorm_project(Tensor x_flat, Tensor W, float eps=1e-06) -> Tensor")


def _public_impl(x_flat: torch.Tensor, W: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return torch.ops.mhc.fused_rmsnorm_project_fwd(x_flat, W, eps)[0].to(x_flat.dtype)


_lib.impl("fused_rmsnorm_project", _public_impl, "CompositeImplicitAutograd")


def fused_rmsnorm_project(x_flat: torch.Tensor, W: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """K1: ``(x_flat @ W^T) * rsqrt(mean(x_flat^2, -1) + eps)`` -> [T, D] in x_flat's dtype.

    x_flat[T, K] and W[D, K] share a dtype (bfloat16, float16, float32; float64
    for gradcheck) and a device.  Differentiable in x_flat and W.
    """
    return torch.ops.mhc.fused_rmsnorm_project(x_flat, W, float(eps))
