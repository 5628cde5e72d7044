"""Corrections to Triton's interpreter, applied once where kernels run there (:func:`install`).

bfloat16.  numpy has no bfloat16, so the interpreter keeps bf16 values as their raw 16-bit patterns
(uint16) and applies numpy's arithmetic to those patterns: ``x * 1.0 + x`` on bf16 returns values
like -4.9e5 for x = 0.3, ``tl.dot`` multiplies bit patterns, comparisons order negative numbers
backwards.  A kernel that computes in bf16 (rather than casting to float32 first) is then wrong on
CPU only, and the harness would report the interpreter's bug as the kernel's.  Here every floating
operation with a bf16 operand computes on the operands' float32 values and rounds its result to
bf16 (nearest even), which is what a GPU's bf16 operation returns: the exact result rounded once
(an fp32 sum rounded again to bf16 can differ by one bf16 ulp in rare halfway cases).  Selections
(``tl.where``), loads, stores, casts and bit operations keep working on the patterns, as before.
"""
from __future__ import annotations

import functools

_INSTALLED = False


def install() -> None:
    """Patch the interpreter's builder (idempotent).  Only meaningful in interpreter mode; harmless
    otherwise (the builder is the interpreter's alone)."""
    global _INSTALLED
    if _INSTALLED:
        return
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as interp

    builder = interp.InterpreterBuilder
    bf16 = tl.bfloat16

    def is_bf16(handle) -> bool:
        return isinstance(handle, interp.TensorHandle) and getattr(handle.dtype, "scalar", handle.dtype) == bf16

    def widen(handle):
        """A bf16 handle as float32 values (the pattern is the top half of the float32's)."""
        if not is_bf16(handle):
            return handle
        data = (np.asarray(handle.data).astype(np.uint32) << 16).view(np.float32)
        return interp.TensorHandle(data, tl.float32)

    def narrow(handle):
        """A float32 result back to bf16 patterns, rounded to nearest even (NaN stays a quiet NaN)."""
        data = np.asarray(handle.data)
        if data.dtype != np.float32:
            return handle                     # a comparison's booleans, an int result: not a bf16 value
        bits = data.view(np.uint32)
        rounded = ((bits + (((bits >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)
        rounded = np.where(np.isnan(data), np.uint16(0x7FC0), rounded).astype(np.uint16)
        return interp.TensorHandle(rounded, bf16)

    def in_float32(original, result_arg: int):
        """``original`` computing on float32 values where an operand is bf16; its result is rounded back
        to bf16 where the operand that types the result (``args[result_arg]``) is bf16."""
        @functools.wraps(original)
        def op(self, *args):
            if not any(is_bf16(a) for a in args):
                return original(self, *args)
            out = original(self, *[widen(a) for a in args])
            return narrow(out) if is_bf16(args[result_arg]) else out
        return op

    ternary = builder.ternary_op
    widened = in_float32(ternary, 2)

    @functools.wraps(ternary)
    def ternary_op(self, lhs, rhs, other, op):
        if op is np.where:                     # a selection moves patterns: nothing to compute
            return ternary(self, lhs, rhs, other, op)
        return widened(self, lhs, rhs, other, op)

    # which argument types the result: binary_op(lhs, rhs, op), unary_op(arg, op), create_fma(x, y, z),
    # create_dot(a, b, d, ...) accumulates into d's type
    for name, result_arg in (("binary_op", 0), ("unary_op", 0), ("create_fma", 2), ("create_dot", 2)):
        setattr(builder, name, in_float32(getattr(builder, name), result_arg))
    builder.ternary_op = ternary_op
    _INSTALLED = True
