"""Elementwise kernels as they are usually written: a flat 1-D grid over contiguous storage
(the wrapper makes the inputs contiguous), fp32 math, store in the input's dtype."""
import math

import torch
import torch.nn.functional as F
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")
ONE = {"x": tensor(("M", "N"), dtypes=FLOATS)}
DIMS = {"M": (0, 512), "N": (0, 4096)}
BLOCK = 1024


@triton.jit
def _gelu_tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (2 * tl.sigmoid(2 * inner))   # 1 + tanh(u) == 2 * sigmoid(2u)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_erf_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = 0.5 * x * (1 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * tl.sigmoid(x)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    silu = a * tl.sigmoid(a)
    # the torch reference rounds silu(a) to the input dtype before the product: so do we
    y = silu.to(y_ptr.dtype.element_ty).to(tl.float32) * b
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, *xs):
    xs = [t.contiguous() for t in xs]
    y = torch.empty_like(xs[0])
    n = y.numel()
    if n:
        kernel[(triton.cdiv(n, BLOCK),)](*xs, y, n, BLOCK=BLOCK)
    return y


@subject(reference=lambda x: F.gelu(x, approximate="tanh"), inputs=ONE, dims=DIMS)
def gelu_tanh(x):
    return _launch(_gelu_tanh_kernel, x)


@subject(reference=lambda x: F.gelu(x), inputs=ONE, dims=DIMS)
def gelu_erf(x):
    return _launch(_gelu_erf_kernel, x)


@subject(reference=lambda x: F.silu(x), inputs=ONE, dims=DIMS)
def silu(x):
    return _launch(_silu_kernel, x)


@subject(reference=lambda a, b: F.silu(a) * b,
         inputs={"a": tensor(("M", "N"), dtypes=FLOATS), "b": tensor(("M", "N"), dtype_like="a")}, dims=DIMS)
def swiglu(a, b):
    return _launch(_swiglu_kernel, a, b)


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, H, D, sx_t, sx_h, sx_d, sc_t, sc_d, ss_t, ss_d, BLOCK_H: tl.constexpr,
                 BLOCK_D: tl.constexpr):
    # GPT-NeoX style: rotate the two halves of the head dim; one program per position
    t = tl.program_id(0)
    half = D // 2
    rh = tl.arange(0, BLOCK_H)
    rd = tl.arange(0, BLOCK_D)
    m = (rh[:, None] < H) & (rd[None, :] < half)
    cos = tl.load(cos_ptr + t * sc_t + rd * sc_d, mask=rd < half, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + t * ss_t + rd * ss_d, mask=rd < half, other=0.0).to(tl.float32)
    base = x_ptr + t * sx_t + rh[:, None] * sx_h
    x1 = tl.load(base + rd[None, :] * sx_d, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(base + (rd[None, :] + half) * sx_d, mask=m, other=0.0).to(tl.float32)
    y1 = x1 * cos[None, :] - x2 * sin[None, :]
    y2 = x2 * cos[None, :] + x1 * sin[None, :]
    out = y_ptr + t * H * D + rh[:, None] * D
    tl.store(out + rd[None, :], y1.to(y_ptr.dtype.element_ty), mask=m)
    tl.store(out + rd[None, :] + half, y2.to(y_ptr.dtype.element_ty), mask=m)


def _rope_ref(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


@subject(reference=_rope_ref,
         inputs={"x": tensor(("T", "H", "D"), dtypes=FLOATS),
                 "cos": tensor(("T", "HALF"), dtype_like="x", low=-1.0, high=1.0),
                 "sin": tensor(("T", "HALF"), dtype_like="x", low=-1.0, high=1.0)},
         dims={"T": (0, 512), "H": (1, 16), "D": (2, 256), "HALF": (1, 128)},
         where=lambda D, HALF: D == 2 * HALF)
def rope(x, cos, sin):
    T, H, D = x.shape
    y = torch.empty((T, H, D), dtype=x.dtype, device=x.device)
    if T:
        _rope_kernel[(T,)](x, cos, sin, y, H, D, *x.stride(), *cos.stride(), *sin.stride(), BLOCK_H=triton.next_power_of_2(H),
                           BLOCK_D=triton.next_power_of_2(D // 2))
    return y
