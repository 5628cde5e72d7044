"""Harness subjects for the GEMM template: mm, addmm with a fused bias + activation epilogue, bmm.

Every candidate runs through the compiler and refuses to pass unless the template (not the
ATen call) computed the product -- and, for the epilogue subjects, unless the pointwise tail
was fused into the template's kernel.  Operands are drawn in every layout the harness knows
(transposed, strided, offset, expanded), in fp32 / fp16 / bf16, with sizes from 1 and odd
primes up; K starts past ``config.matmul_small_k_max`` so the template is what is tested.
Two subjects require the operand rewrites of ``lowerings.matmul_operands`` (a row / column
scale hoisted out of the K-sum into the epilogue; fp16 / bf16 operands read narrow).  Sizes
stay small enough for Triton's interpreter (a few programs per example).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from tritondiff.harness import subject, tensor

from tritondiff.compiler.config import config
from tritondiff.compiler.counters import counters
from tritondiff.compiler.exc import CompilerError
from tritondiff.harness.subjects.compiler import run_compiled
from tritondiff.compiler.workloads import _acc, mhc_rmsnorm_project

FLOATS = ("float32", "float16", "bfloat16")
# Not drawn: "large" and "near_max".  Their products overflow fp32 partway through a dot product,
# and whether the sum is then +inf, -inf or NaN depends on the order the products are added:
# CPU BLAS (eager), numpy and a GPU's fp32 dot disagree there (the harness found both ways).
# NaN / inf sprinkled into the operands (well defined: they propagate) are still drawn.
VALUES = ("normal", "uniform_pos", "large_offset", "tiny", "zeros", "integer")
K_MIN = config.matmul_small_k_max + 1


def _through_template(fn: Callable, *args: Any, kind: str, epilogue: bool = False, rewrites: tuple = ()) -> Any:
    """``fn(*args)`` compiled; raises unless the GEMM template (and its epilogue) did the work.

    ``rewrites``: ``gemm_template.*`` counters (``hoisted_scale.rows``, ``cast_prologue``, ...)
    that must move too, so the subject tests the operand rewrites rather than a fallback.
    """
    names = [f"gemm_template.{kind}", "gemm_template.epilogues"] + [f"gemm_template.{r}" for r in rewrites]
    before = {name: counters[name] for name in names}
    out = run_compiled(fn, *args, matmul="template")
    if counters[names[0]] == before[names[0]]:
        raise CompilerError(f"{kind} did not reach the GEMM template (lowered elsewhere or ran eagerly)")
    if epilogue and counters[names[1]] == before[names[1]]:
        raise CompilerError(f"the pointwise tail of {kind} was not fused into the template's kernel")
    for name in names[2:]:
        if counters[name] == before[name]:
            raise CompilerError(f"{name} did not happen: the operand rewrite was not made")
    return out


def mm(a, b):
    return a @ b


def linear_bias_relu(x, w, bias):
    return torch.relu(torch.nn.functional.linear(x, w, bias))


def addmm_scaled_sigmoid(bias, a, b):
    return torch.sigmoid(torch.addmm(bias, a, b, beta=0.5, alpha=2.0))


def bmm_scaled(a, b, s):
    return torch.bmm(a, b) * s


def projection_row_scale(x, w):
    """mHC-lite's fused RMSNorm + projection, with the rsqrt(mean(x^2)) row scale as the epilogue."""
    xf = x.float() if x.dtype != torch.float32 else x
    inv_rms = torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6).to(x.dtype)
    return (x @ w.t()) * inv_rms


def rmsnorm_project(x, w):
    """mHC-lite's K1 as written (``workloads.mhc_rmsnorm_project``): xf * rsqrt(mean(xf^2) + eps) @ w^T."""
    return mhc_rmsnorm_project(x, w)


def row_reductions(x, w):
    """Reductions over A's rows that only the epilogue reads (a mean of squares, a max): the template
    folds them from the A tiles its K loop loads (``templates.row_reductions``)."""
    xf = _acc(x)
    return ((xf @ _acc(w).t()) * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6)
            + xf.amax(-1, keepdim=True)).to(x.dtype)


def bmm_scaled_operands(a, b, s, t):
    """Row scale on A, column scale on B, both bounded (so hoistable), operands up-cast from fp16 / bf16."""
    return torch.bmm(_acc(a) * torch.sigmoid(_acc(s)), _acc(b) * torch.rsqrt(_acc(t) * _acc(t) + 1.0))


def _narrow(x: torch.Tensor) -> tuple:
    return ("cast_prologue",) if x.dtype in (torch.float16, torch.bfloat16) else ()


@subject(name="compiler.gemm_template.mm", reference=mm,
         inputs={"a": tensor(("M", "K"), dtypes=FLOATS, values=VALUES),
                 "b": tensor(("K", "N"), dtype_like="a", values=VALUES)},
         dims={"M": (1, 300), "K": (K_MIN, 300), "N": (1, 300)})
def gemm_mm(a, b):
    return _through_template(mm, a, b, kind="mm")


@subject(name="compiler.gemm_template.addmm_bias_relu", reference=linear_bias_relu,
         inputs={"x": tensor(("M", "K"), dtypes=FLOATS, values=VALUES),
                 "w": tensor(("N", "K"), dtype_like="x", values=VALUES),
                 "bias": tensor(("N",), dtype_like="x", values=VALUES)},
         dims={"M": (1, 260), "K": (K_MIN, 260), "N": (1, 260)})
def gemm_addmm_bias_relu(x, w, bias):
    return _through_template(linear_bias_relu, x, w, bias, kind="addmm", epilogue=True)


@subject(name="compiler.gemm_template.addmm_alpha_beta_sigmoid", reference=addmm_scaled_sigmoid,
         inputs={"bias": tensor(("M", "N"), dtypes=FLOATS, values=VALUES),
                 "a": tensor(("M", "K"), dtype_like="bias", values=VALUES),
                 "b": tensor(("K", "N"), dtype_like="bias", values=VALUES)},
         dims={"M": (1, 200), "K": (K_MIN, 200), "N": (1, 200)})
def gemm_addmm_alpha_beta_sigmoid(bias, a, b):
    return _through_template(addmm_scaled_sigmoid, bias, a, b, kind="addmm", epilogue=True)


@subject(name="compiler.gemm_template.bmm", reference=bmm_scaled,
         inputs={"a": tensor(("B", "M", "K"), dtypes=FLOATS, values=VALUES),
                 "b": tensor(("B", "K", "N"), dtype_like="a", values=VALUES),
                 "s": tensor(("B", "M", 1), dtype_like="a", values=VALUES)},
         dims={"B": (1, 4), "M": (1, 130), "K": (K_MIN, 130), "N": (1, 130)})
def gemm_bmm(a, b, s):
    return _through_template(bmm_scaled, a, b, s, kind="bmm", epilogue=True)


@subject(name="compiler.gemm_template.projection_row_scale", reference=projection_row_scale,
         inputs={"x": tensor(("T", "C"), dtypes=FLOATS, values=VALUES),
                 "w": tensor((24, "C"), dtype_like="x", values=VALUES)},
         dims={"T": (1, 300), "C": (K_MIN, 512)})
def gemm_projection_row_scale(x, w):
    return _through_template(projection_row_scale, x, w, kind="mm", epilogue=True)


@subject(name="compiler.gemm_template.rmsnorm_project_hoisted", reference=rmsnorm_project,
         inputs={"x": tensor(("T", "C"), dtypes=FLOATS, values=VALUES),
                 "w": tensor((24, "C"), dtype_like="x", values=VALUES)},
         dims={"T": (1, 300), "C": (K_MIN, 512)})
def gemm_rmsnorm_project_hoisted(x, w):
    """mHC-lite's K1 as written: the inv-rms row scale hoisted out of the K-sum, x and w read narrow."""
    return _through_template(rmsnorm_project, x, w, kind="mm", epilogue=True,
                             rewrites=("hoisted_scale.rows",) + _narrow(x))


@subject(name="compiler.gemm_template.row_reductions", reference=row_reductions,
         inputs={"x": tensor(("T", "C"), dtypes=FLOATS, values=VALUES),
                 "w": tensor((24, "C"), dtype_like="x", values=VALUES)},
         dims={"T": (1, 300), "C": (K_MIN, 512)})
def gemm_row_reductions(x, w):
    # C == 24: the product has one element per element of x, so the pointwise tail fuses into the reductions'
    # own kernel instead (the scheduler's earlier, equally legal choice): the template has no epilogue and
    # nothing to fold
    tail = x.shape[1] != 24
    return _through_template(row_reductions, x, w, kind="mm", epilogue=tail, rewrites=("row_reductions",) if tail else ())


@subject(name="compiler.gemm_template.bmm_scaled_operands", reference=bmm_scaled_operands,
         inputs={"a": tensor(("B", "M", "K"), dtypes=FLOATS, values=VALUES),
                 "b": tensor(("B", "K", "N"), dtype_like="a", values=VALUES),
                 "s": tensor(("B", "M", 1), dtype_like="a", values=VALUES),
                 "t": tensor(("B", 1, "N"), dtype_like="a", values=VALUES)},
         dims={"B": (1, 4), "M": (1, 130), "K": (K_MIN, 130), "N": (1, 130)})
def gemm_bmm_scaled_operands(a, b, s, t):
    return _through_template(bmm_scaled_operands, a, b, s, t, kind="bmm", epilogue=True,
                             rewrites=("hoisted_scale.rows", "hoisted_scale.columns") + _narrow(a))
