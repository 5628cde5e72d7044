"""Autotuned kernels that write state the trials would corrupt, made safe the documented ways:
reset_to_zero, restore_value, a config pre_hook that zeroes, and autotune pre/post hooks."""
import torch
import tritondiff  # noqa: F401
import triton
import triton.language as tl

from tritondiff import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


@triton.jit
def _rowsum_atomic_body(x_ptr, out_ptr, N, sm, sn, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * sm + cols * sn, mask=cols < N, other=0.0).to(tl.float32)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))


_rowsum_reset = triton.autotune([triton.Config({"BLOCK": b}) for b in (256, 1024)], key=["N"],
                                reset_to_zero=["out_ptr"])(_rowsum_atomic_body)


def _zero_out(nargs):
    nargs["out_ptr"].zero_()


_rowsum_prehook = triton.autotune([triton.Config({"BLOCK": b}, pre_hook=_zero_out) for b in (256, 1024)],
                                  key=["N"])(_rowsum_atomic_body)


def _rowsum(kernel, x):
    M, N = x.shape
    out = torch.zeros(M, dtype=torch.float32, device=x.device)
    if M:
        kernel[lambda m: (M, triton.cdiv(N, m["BLOCK"]))](x, out, N, x.stride(0), x.stride(1))
    return out.to(x.dtype)


ROWS = dict(reference=lambda x: x.sum(-1), inputs={"x": tensor(("M", "N"), dtypes=FLOATS)},
            dims={"M": (0, 64), "N": (1, 8192)}, deterministic=False)


@subject(**ROWS)
def rowsum_autotune_reset_to_zero(x):
    return _rowsum(_rowsum_reset, x)


@subject(**ROWS)
def rowsum_autotune_config_prehook(x):
    return _rowsum(_rowsum_prehook, x)


@triton.jit
def _axpy_inplace_body(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (y + alpha * x).to(y_ptr.dtype.element_ty), mask=mask)


_axpy_restore = triton.autotune([triton.Config({"BLOCK": b}) for b in (512, 2048)], key=["n"],
                                restore_value=["y_ptr"])(_axpy_inplace_body)

_saved = {}


def _save_y(args, reset_only=False):
    _saved["y"] = args["y_ptr"].clone()


def _restore_y(args, exception=None):
    args["y_ptr"].copy_(_saved.pop("y"))


_axpy_hooks = triton.autotune([triton.Config({"BLOCK": b}) for b in (512, 2048)], key=["n"],
                              pre_hook=_save_y, post_hook=_restore_y)(_axpy_inplace_body)

AXPY = dict(reference=lambda x, y: y + 2.5 * x,
            inputs={"x": tensor(("N",), dtypes=FLOATS), "y": tensor(("N",), dtype_like="x", layouts=("contiguous",))},
            dims={"N": (0, 200_000)}, mutates=("y",))


def _axpy(kernel, x, y):
    n = y.numel()
    if n:
        kernel[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x.contiguous(), y, n, 2.5)
    return y


@subject(**AXPY)
def axpy_autotune_restore_value(x, y):
    return _axpy(_axpy_restore, x, y)


@subject(**AXPY)
def axpy_autotune_pre_post_hooks(x, y):
    return _axpy(_axpy_hooks, x, y)
