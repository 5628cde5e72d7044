"""Corrections to Triton's interpreter, applied once where kernels run there (:func:`install`), and the
conversion of jit functions decorated before interpreter mode was chosen (:func:`adopt_compiled_functions`).

bfloat16.  numpy has no bfloat16, so the interpreter keeps bf16 values as their raw 16-bit patterns
(uint16) and applies numpy's arithmetic to those patterns: ``x * 1.0 + x`` on bf16 returns values
like -4.9e5 for x = 0.3, ``tl.dot`` multiplies bit patterns, comparisons order negative numbers
backwards.  A kernel that computes in bf16 (rather than casting to float32 first) is then wrong on
CPU only, and the harness would report the interpreter's bug as the kernel's.  Here every floating
operation with a bf16 operand computes on the operands' float32 values and rounds its result to
bf16 (nearest even), which is what a GPU's bf16 operation returns: the exact result rounded once
(an fp32 sum rounded again to bf16 can differ by one bf16 ulp in rare halfway cases).  Selections
(``tl.where``), loads, stores and bit operations keep working on the patterns, as before.  Casts: the
interpreter truncates float32 to bf16 where a GPU rounds to nearest even (``x.to(tl.bfloat16)``: half the
values one ulp off, and statistics computed from them biased), and it converts float64, float16 (through a
truncating float32 step) and integers to bf16, and bf16 to integers and float64, by reinterpreting the
patterns as numbers (garbage).  Here every conversion to bf16 rounds the value to nearest even (float64
through a round-to-odd float32, so the result is rounded once), and every conversion from bf16 starts from
its float32 value.

float8.  The interpreter converts to float8 by cutting the mantissa: a value that rounds up into the next
power of two loses its carry (31.4 -> 16, 7.9 -> 4 in e4m3: 2.6% of randn * 100 values halved), values below
the smallest normal become 0 instead of subnormals, and values past the largest finite one wrap to other
values (3e4 -> 480 in e4m3, whose 0x7F is NaN).  A GPU (``cvt.rn.satfinite`` on NVIDIA) rounds to nearest
even and saturates at the largest finite value (NaN stays NaN).  Here conversions to ``float8e4nv`` (e4m3fn)
and ``float8e5`` (e5m2) with round-to-nearest-even compute that from the value (torch's conversion of the
clamped float32 value); the other float8 formats and round-toward-zero keep Triton's.  Conversions from
them read e4m3's NaN as 480, e5m2's infinities and NaNs as numbers past 57344, and flushed e5m2's
subnormals on the way to float16: here they start from the value torch decodes.

Warnings.  A launch runs with numpy's floating-point warnings off, as a GPU overflows silently.

Sums.  The interpreter reduces ``tl.sum`` with ``numpy.sum``, which adds the rows of an ``axis=0`` sum one
after another: a column sum over 2188 equal rows is then 260 ulp off where a GPU, which reduces a block as
a tree (each thread's elements, then shuffles between lanes and warps), is a few ulp off.  A correct kernel
would be judged on an order no GPU uses.  Here floating sums add pairwise along the axis, halving it each
step (elements i and i + n/2), a tree like the hardware's; ``tl.cumsum`` likewise scans in log2(n) steps
(Hillis-Steele: element i adds element i - d, d = 1, 2, 4, ...) where numpy's ``cumsum`` runs along the axis
(4027 equal values: 674 ulp at the end).  Integer sums and scans are exact in any order and keep numpy's.
"""
from __future__ import annotations

import functools
import inspect

_INSTALLED = False


def adopt_compiled_functions() -> int:
    """Make every compiled jit function that exists (a ``JITFunction``: decorated while ``TRITON_INTERPRET``
    was unset) run in the interpreter, in place; returns how many.  Objects that hold one -- an autotuner,
    a module, ``tl.tensor``'s member functions -- see the change, as the instance stays the same: its class
    becomes a subclass whose launches and device calls go to an ``InterpretedFunction`` of the same Python
    function (with the same pre-run hooks).  Triton keeps no registry of its functions: the garbage
    collector's list of objects is it."""
    import gc

    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    class Adopted(JITFunction):
        """A jit function decorated before interpreter mode was chosen, run by the interpreter."""

        def _interpreted(self) -> InterpretedFunction:
            it = self.__dict__.get("_tritondiff_interpreted")
            if it is None:
                it = self._tritondiff_interpreted = InterpretedFunction(self.fn)
                it.pre_run_hooks = self.pre_run_hooks
            return it

        def run(self, *args, grid, warmup, **kwargs):
            return self._interpreted().run(*args, grid=grid, warmup=warmup, **kwargs)

        def __call__(self, *args, **kwargs):
            return self._interpreted()(*args, **kwargs)

        def __get__(self, obj, objclass=None):
            # tl.tensor's member functions (x.max(0)): bound to the tensor, as the interpreter's wrappers are
            return self if obj is None else functools.partial(self.__call__, obj)

    adopted = 0
    for obj in gc.get_objects():
        if type(obj) is JITFunction:
            if not hasattr(obj, "pre_run_hooks"):
                obj.pre_run_hooks = []
            obj.__class__ = Adopted
            adopted += 1
    return adopted


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
    _install_bf16_casts(interp, np, tl, is_bf16, widen)
    _install_fp8_casts(interp, np, tl, widen)
    _install_float_scalars(interp, np, tl)
    _install_libdevice(tl)
    _install_tree_sum(interp, np, is_bf16, widen, narrow)
    _install_silent_arithmetic(interp, np)
    _install_half_atomic_add(interp, np, tl)
    _INSTALLED = True


def bf16_patterns(data, np):
    """bf16 bit patterns (uint16) of the values ``data`` (any float or integer array), rounded to nearest even
    once: float64 goes through float32 rounded to odd (truncated, its last bit set when inexact), which
    keeps the second rounding exact; integers through float64."""
    data = np.asarray(data)
    with np.errstate(all="ignore"):
        if data.dtype.kind in "iub":
            data = data.astype(np.float64)
        if data.dtype == np.float64:
            near = data.astype(np.float32)
            over = np.abs(near.astype(np.float64)) > np.abs(data)            # rounded away from zero
            toward = np.where(over, np.nextafter(near, np.float32(0)), near)
            inexact = (toward.astype(np.float64) != data) & np.isfinite(data)
            bits = toward.view(np.uint32) | inexact.astype(np.uint32)
            data = bits.view(np.float32)
        data = data.astype(np.float32)
        bits = data.view(np.uint32)
        rounded = ((bits + (((bits >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)
        return np.where(np.isnan(data), np.uint16(0x7FC0), rounded).astype(np.uint16)


def _install_bf16_casts(interp, np, tl, is_bf16, widen) -> None:
    """Conversions to bf16 round the value to nearest even (:func:`bf16_patterns`), as a GPU's do;
    conversions from bf16 to anything but float32 start from its float32 value."""
    builder = interp.InterpreterBuilder
    original = builder.cast_impl
    bf16 = tl.bfloat16

    @functools.wraps(original)
    def cast_impl(self, src, dst_type):
        src_type, dst = src.dtype.scalar, dst_type.scalar
        if dst == bf16 and src_type != bf16 and (src_type.is_int() or (src_type.is_floating()
                                                                      and src_type.primitive_bitwidth >= 16)):
            return interp.TensorHandle(bf16_patterns(src.data, np), bf16)       # fp8 sources keep Triton's
        if is_bf16(src) and dst != bf16 and dst != tl.float32:
            return original(self, widen(src), dst_type)
        return original(self, src, dst_type)
    builder.cast_impl = cast_impl           # the interpreter's create_fp_trunc, create_si_to_fp, ... call it

    to_fp = builder.create_fp_to_fp

    @functools.wraps(to_fp)
    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        # float64 -> bf16 comes here with round-to-nearest-even, which Triton's interpreter rounds half away
        # from zero; round-toward-zero and the fp8 conversions keep its own
        rtne = rounding_mode is None or rounding_mode == interp._ir.ROUNDING_MODE.RTNE
        if dst_type.scalar == bf16 and rtne and src.dtype.scalar.primitive_bitwidth >= 16:
            return cast_impl(self, src, dst_type)
        return to_fp(self, src, dst_type, rounding_mode)
    builder.create_fp_to_fp = create_fp_to_fp


def _install_fp8_casts(interp, np, tl, widen) -> None:
    """Conversions to e4m3fn and e5m2 round the value to nearest even and saturate, as a GPU's do; conversions
    from them start from the value."""
    import torch

    formats = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}
    builder = interp.InterpreterBuilder
    original = builder.create_fp_to_fp       # bf16's correction (installed first) for every other conversion

    @functools.wraps(original)
    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        dst, src_type = dst_type.scalar, src.dtype.scalar
        if src_type in formats and dst not in formats:          # decode the value, then cast it from float32
            values = torch.from_numpy(np.ascontiguousarray(src.data)).view(formats[src_type]).float().numpy()
            wide = interp.TensorHandle(values, tl.float32)
            return wide if dst == tl.float32 else self.cast_impl(wide, dst_type)
        rtne = rounding_mode is None or rounding_mode == interp._ir.ROUNDING_MODE.RTNE
        if dst not in formats or not rtne or not src_type.is_floating() or src_type.primitive_bitwidth < 16:
            return original(self, src, dst_type, rounding_mode)
        values = np.asarray(widen(src).data).astype(np.float32)       # float16 / bf16 exactly, float64 rounded
        fmt = formats[dst]
        top = torch.finfo(fmt).max
        patterns = torch.from_numpy(values).clamp(-top, top).to(fmt).view(torch.uint8).numpy()
        return interp.TensorHandle(patterns, dst)
    builder.create_fp_to_fp = create_fp_to_fp


def _install_half_atomic_add(interp, np, tl) -> None:
    """``tl.atomic_add`` on float16 and bfloat16, as a GPU does it: each lane in turn reads its cell, adds in
    full precision and rounds once to the cell's dtype, an overflow giving inf.  Triton's interpreter raises
    OverflowError on a float16 sum past 65504 and refuses bfloat16 cells ("Unsupported data type"), so a
    kernel accumulating gradients in half precision failed with an exception no GPU raises."""
    import ctypes

    builder = interp.InterpreterBuilder
    original = builder.create_atomic_rmw
    fadd = interp._ir.ATOMIC_OP.FADD

    def value(bits, kind):
        if kind == tl.bfloat16:
            return float((np.asarray(bits, dtype=np.uint32) << 16).view(np.float32))
        return float(np.asarray(bits, dtype=np.uint16).view(np.float16))

    def pattern(total, kind):
        if kind == tl.bfloat16:
            return int(bf16_patterns(np.float64(total), np))
        with np.errstate(all="ignore"):
            return int(np.float16(total).view(np.uint16))

    @functools.wraps(original)
    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        kind = val.dtype.scalar
        if rmwOp != fadd or kind not in (tl.float16, tl.bfloat16):
            return original(self, rmwOp, ptr, val, mask, sem, scope)
        shape = np.shape(val.data)
        addresses = np.broadcast_to(np.asarray(ptr.data), shape).ravel()
        lanes = np.broadcast_to(np.asarray(mask.data, dtype=bool), shape).ravel()
        adds = np.ascontiguousarray(val.data).view(np.uint16).ravel()
        old = np.zeros(adds.shape, dtype=np.uint16)
        for i in np.flatnonzero(lanes):
            cell = ctypes.c_uint16.from_address(int(addresses[i]))
            old[i] = cell.value
            cell.value = pattern(value(cell.value, kind) + value(adds[i], kind), kind)   # exact in float64
        data = old.reshape(shape)
        return interp.TensorHandle(data.view(np.float16) if kind == tl.float16 else data, kind)
    builder.create_atomic_rmw = create_atomic_rmw


def _install_float_scalars(interp, np, tl) -> None:
    """A Python float argument reaches the kernel as a float32 scalar tensor, as a compiled launch passes it
    (Triton types a float argument ``fp32``): the interpreter hands the bare float through, and kernels that
    use it as a tensor (``eps.to(tl.float32)``, public RMSNorm and SwiGLU kernels) raise
    ``'float' object has no attribute 'to'`` on the CPU while compiling fine on a GPU."""
    convert = interp._implicit_cvt

    @functools.wraps(convert)
    def implicit_cvt(arg):
        if type(arg) is float:
            return tl.tensor(interp.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return convert(arg)
    interp._implicit_cvt = implicit_cvt


#: libdevice functions ``tl.math`` lacks, evaluated elementwise by numpy under the interpreter (libdevice
#: name -> numpy's).
_NUMPY_UNARY = {"tanh": "tanh", "sinh": "sinh", "cosh": "cosh", "tan": "tan", "asin": "arcsin", "acos": "arccos",
                "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "expm1": "expm1",
                "log1p": "log1p"}


def _install_libdevice(tl) -> None:
    """``triton.language.extra.libdevice`` functions that ``tl.math`` also has run as ``tl.math``'s under the
    interpreter (and the unary ones of ``_NUMPY_UNARY`` as numpy's).  The module's functions are bodiless
    stubs that a compiled kernel lowers to the device library; the interpreter patches ``tl`` and ``tl.math``
    only, so a kernel that imported ``rsqrt`` from libdevice (public RMSNorm / LayerNorm kernels do) got
    ``None`` back on the CPU.  The stubs are imported by name into kernel modules before any launch, so each
    stub's code is swapped in place to call ``tl.math``'s builtin of the same name (looked up when called,
    when the interpreter has patched it)."""
    try:
        from triton.language.extra import libdevice
    except ImportError:
        return
    namespace = vars(libdevice)
    import numpy as np
    from triton.runtime import interpreter as interp

    def numpy_unary(x, name):
        data = np.asarray(x.handle.data)
        with np.errstate(all="ignore"):
            out = getattr(np, _NUMPY_UNARY[name])(data).astype(data.dtype)
        return tl.tensor(interp.TensorHandle(out, x.handle.dtype), x.type)

    namespace.setdefault("_tritondiff_math", tl.math)
    namespace.setdefault("_tritondiff_numpy_unary", numpy_unary)
    for name, stub in list(namespace.items()):
        if name.startswith("_") or not inspect.isfunction(stub) or stub.__globals__ is not namespace \
                or stub.__code__.co_code != _STUB_CODE:
            continue                                   # not a bodiless stub of this module: leave it
        params = ", ".join(stub.__code__.co_varnames[:stub.__code__.co_argcount])
        if tl.core.is_builtin(getattr(tl.math, name, None)):
            body = f"_tritondiff_math.{name}({params})"
        elif name in _NUMPY_UNARY and stub.__code__.co_argcount == 1:
            body = f"_tritondiff_numpy_unary({params}, {name!r})"
        else:
            continue
        scope: dict = {}
        exec(f"def {name}({params}):\n    return {body}\n", namespace, scope)
        stub.__code__ = scope[name].__code__


def _stub():
    ...


_STUB_CODE = _stub.__code__.co_code


def _install_silent_arithmetic(interp, np) -> None:
    """A kernel's launch runs with numpy's floating-point warnings off: a GPU overflows to inf and makes
    NaN of inf - inf silently, and under ``-W error`` (pytest's ``filterwarnings = error``) numpy's
    RuntimeWarning would otherwise surface as the kernel's ``InterpreterError``."""
    executor = getattr(interp, "GridExecutor", None)
    launch = getattr(executor, "__call__", None)
    if launch is None or getattr(launch, "_tritondiff_silent", False):
        return

    @functools.wraps(launch)
    def silent(self, *args, **kwargs):
        with np.errstate(all="ignore"):
            return launch(self, *args, **kwargs)

    silent._tritondiff_silent = True
    executor.__call__ = silent


def tree_sum(data, axis, keepdims: bool, np):
    """``numpy.sum(data, axis, keepdims=keepdims)`` added as a tree: pairs (i, i + half) along the axis,
    halving it each step, an odd element carried to the next step."""
    data = np.asarray(data)
    if axis is None:
        out = tree_sum(data.reshape(-1), 0, False, np)
        return out.reshape((1,) * data.ndim) if keepdims else out
    axis = axis % max(data.ndim, 1)
    a = np.moveaxis(data, axis, 0)
    if a.shape[0] == 0:
        return np.sum(data, axis=axis, keepdims=keepdims)
    with np.errstate(over="ignore", invalid="ignore"):   # inf and NaN sum as a GPU sums them, silently
        while a.shape[0] > 1:
            half = a.shape[0] // 2
            pairs = a[:half] + a[half:2 * half]
            a = np.concatenate([pairs, a[2 * half:]]) if a.shape[0] % 2 else pairs
    out = a[0]
    return np.expand_dims(out, axis) if keepdims else out


def tree_cumsum(data, axis: int, np):
    """``numpy.cumsum(data, axis)`` in log2(n) steps: each step adds to element i the element d before it
    (d = 1, 2, 4, ...), the shape of a GPU's warp scan."""
    a = np.moveaxis(np.array(data, copy=True), axis, 0)
    d = 1
    with np.errstate(over="ignore", invalid="ignore"):
        while d < a.shape[0]:
            a[d:] = a[d:] + a[:-d]      # the right side is evaluated before the write: the previous step's values
            d *= 2
    return np.moveaxis(a, 0, axis)


def _install_tree_sum(interp, np, is_bf16, widen, narrow) -> None:
    reduce_ops = getattr(interp, "ReduceOps", None)
    original = getattr(reduce_ops, "sum", None)
    if original is None:              # another interpreter layout: keep its own order
        return

    @functools.wraps(original)
    def tree_ordered(self, input):
        if is_bf16(input.handle):
            # bf16 handles hold 16-bit patterns, which the interpreter summed as integers (a softmax backward's
            # tl.sum(dy * y) came out ~1e23): sum the values in float32 -- as compiled Triton accumulates a
            # bf16 sum -- and round the result to bf16 once
            total = np.asarray(tree_sum(widen(input.handle).data, self.axis, self.keep_dims, np), dtype=np.float32)
            patterns = narrow(interp.TensorHandle(total.reshape(-1), interp.tl.float32)).data
            return self.to_tensor(patterns.reshape(total.shape) if total.shape else patterns[0], input.dtype)
        data = input.handle.data
        if not np.issubdtype(np.asarray(data).dtype, np.floating):
            return original(self, input)
        return self.to_tensor(tree_sum(data, self.axis, self.keep_dims, np), input.dtype)

    reduce_ops.sum = tree_ordered
    scan_ops = getattr(interp, "ScanOps", None)
    scan = getattr(scan_ops, "cumsum", None)
    if scan is None:
        return

    @functools.wraps(scan)
    def tree_scanned(self, input):
        data = input.handle.data
        if not np.issubdtype(np.asarray(data).dtype, np.floating) or np.asarray(data).ndim == 0:
            return scan(self, input)
        return [self.to_tensor(tree_cumsum(data, self.axis, np), dtype=input.dtype)]

    scan_ops.cumsum = tree_scanned
