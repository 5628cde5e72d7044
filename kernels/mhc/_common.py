"""Input validation and small helpers shared by the three mHC-lite op modules.

Every op validates its arguments eagerly (in the real and in the fake
implementation, so ``torch.compile`` reports the same error at trace time) and
raises :class:`kernels.exc.UnsupportedInput`, a ``ValueError`` whose message
says what was given and what is supported.
"""
from __future__ import annotations

from typing import Sequence

import torch
import triton
import triton.language as tl

from tritondiff.base import device as _device
from tritondiff.kernels.exc import UnsupportedInput
from tritondiff.kernels.launch import pow2_ceil as next_pow2  # noqa: F401  (re-exported for the mHC modules)

#: The only stream count the kernels are specialised for.
N_STREAMS = 4

#: Activation dtypes (x, layer_output, gradients).  float64 is accepted so that
#: ``torch.autograd.gradcheck`` can run on the ops; it is not a performance target.
ACTIVATION_DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64)

_DTYPE_LIST = "bfloat16, float16, float32 (float64 for gradcheck)"


def coef_dtype(x_dtype: torch.dtype) -> torch.dtype:
    """Dtype the mixing coefficients must have: float32, or float64 beside float64 activations."""
    return torch.float64 if x_dtype == torch.float64 else torch.float32


def acc_dtype(x_dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype of the references and kernels: at least float32."""
    return torch.promote_types(x_dtype, torch.float32)


def check_n(op: str, n: int, *, argument: str = "x_streams", reference: str | None = None) -> None:
    """n = 4 streams; ``argument`` is the tensor n was read from, ``reference`` the eager function to
    point at (kernels.mhc.reference.<reference>, by default the op's own name)."""
    if n != N_STREAMS:
        raise UnsupportedInput(
            f"{op}: mHC-lite kernels support n=4 only (got n={n} streams in {argument}); "
            f"use the eager reference (kernels.mhc.reference.{reference or op}) for other stream counts",
            argument=argument)


def check_activation(op: str, name: str, t: torch.Tensor, ndim: int) -> None:
    if not isinstance(t, torch.Tensor):
        raise UnsupportedInput(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}", argument=name)
    if t.dtype not in ACTIVATION_DTYPES:
        raise UnsupportedInput(f"{op}: {name} has dtype {t.dtype}; supported dtypes are {_DTYPE_LIST}",
                               argument=name)
    if t.dim() != ndim:
        raise UnsupportedInput(f"{op}: {name} must be {ndim}-D, got shape {tuple(t.shape)}", argument=name)


def check_same_dtype(op: str, name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    if t.dtype != ref.dtype:
        raise UnsupportedInput(
            f"{op}: {name} has dtype {t.dtype} but {ref_name} has {ref.dtype}; they must match "
            f"(cast {name} with .to({ref.dtype}))", argument=name)


def check_coef(op: str, name: str, t: torch.Tensor, shape: Sequence[int], x: torch.Tensor, *,
               kind: str = "coefficients") -> None:
    """Mixing coefficients (or another ``kind`` of tensor kept in the coefficient dtype, such as a
    forward's saved float32 outputs): float32 (float64 beside float64 x) of an exact shape."""
    if not isinstance(t, torch.Tensor):
        raise UnsupportedInput(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}", argument=name)
    want = coef_dtype(x.dtype)
    if t.dtype != want:
        raise UnsupportedInput(
            f"{op}: {name} has dtype {t.dtype}; {kind} must be {want} for x of dtype {x.dtype} "
            f"(pass {name}.to({want}))", argument=name)
    check_shape(op, name, t, shape)


def check_shape(op: str, name: str, t: torch.Tensor, shape: Sequence[int]) -> None:
    if tuple(t.shape) != tuple(shape):
        raise UnsupportedInput(f"{op}: {name} has shape {tuple(t.shape)}, expected {tuple(shape)}", argument=name)


def check_devices(op: str, **tensors: torch.Tensor) -> None:
    """All tensors on one device, of the kind the kernels run on (see tritondiff.base.device)."""
    want = _device.torch_device().type
    first_name, first = next(iter(tensors.items()))
    for name, t in tensors.items():
        if t.device != first.device:
            raise UnsupportedInput(
                f"{op}: {name} is on {t.device} but {first_name} is on {first.device}; "
                f"move every input to one device", argument=name)
    if first.device.type not in (want, "meta"):
        raise UnsupportedInput(
            f"{op}: inputs are on {first.device} but the kernels run on {want} "
            f"({_device.describe()}); move the inputs with .to({want!r})", argument=first_name)


# ---------------------------------------------------------------------------- Triton helpers
#
# Masked lanes of a tile load read 1.0, not 0.0, and a kernel zeroes them
# (tl.where after the upcast) only where they would reach a reduction.  Zero
# has a subnormal-style exponent, which sends the Triton interpreter's
# bfloat16 <-> float32 conversion down a slow path (4-8x per tile); on a GPU
# the choice of fill value is free and the select costs nothing next to the
# memory traffic.


@triton.jit
def load_tile(ptrs, mask, ACC: tl.constexpr):
    """A tile upcast to ACC whose masked lanes hold 1.0 (only for values that never reach a reduction)."""
    return tl.load(ptrs, mask=mask, other=1.0).to(ACC)


@triton.jit
def load_tile_zeroed(ptrs, mask, ACC: tl.constexpr):
    """A tile upcast to ACC whose masked lanes are 0 (safe inside sums over C)."""
    return tl.where(mask, tl.load(ptrs, mask=mask, other=1.0).to(ACC), 0.0)


@triton.jit
def load_coef4(h_ptr, rows64, stride_ht, mask_t, ACC: tl.constexpr):
    """The four per-row coefficients h[t, 0..3] as [BLOCK_T] vectors (0 on masked rows)."""
    base = h_ptr + rows64 * stride_ht
    h0 = tl.load(base + 0, mask=mask_t, other=0.0).to(ACC)
    h1 = tl.load(base + 1, mask=mask_t, other=0.0).to(ACC)
    h2 = tl.load(base + 2, mask=mask_t, other=0.0).to(ACC)
    h3 = tl.load(base + 3, mask=mask_t, other=0.0).to(ACC)
    return h0, h1, h2, h3


def tl_acc(dtype: torch.dtype):
    """The Triton accumulation dtype for activations of ``dtype``."""
    return tl.float64 if dtype == torch.float64 else tl.float32
