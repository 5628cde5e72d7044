"""mm / addmm / bmm: the GEMM template node, or the lowering registered before this one, or ATen.

``config.matmul`` decides: "template" and "autotune" lower a matmul whose inner size K is past
``config.matmul_small_k_max`` to a ``GemmTemplate`` (its pointwise consumers may then be fused
into it as an epilogue); "extern" keeps the ATen call.  "auto" (the default) keeps the ATen call
on a CUDA device -- cuBLAS, as Inductor does by default: on the H200 the template's tiles ran each
model-sized GEMM 2-4x slower than cuBLAS, more than a fused epilogue saves -- except where the
template reads an operand narrow (an fp32 GEMM of widened fp16 / bf16 values: tensor cores, and no
widened copy), and lowers to the template elsewhere (the interpreter, where the template is the
code under test).  Small inner sizes go to whatever
lowering was registered for the op before this module (a pointwise + reduction lowering), and
to ATen when there is none.  Dtypes other than fp32 / fp16 / bf16, mixed dtypes and empty
outputs call ATen.  What the template reads for A and B comes from ``matmul_operands``: a
float32 up-cast of an fp16 / bf16 buffer is read narrow and widened in the kernel, and (mm,
bmm) a per-row factor of A or per-column factor of B is hoisted out of the K-sum into a
pointwise consumer of the output, which becomes the template's epilogue.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from ..config import config
from ..counters import counters
from ..exc import Unsupported
from ..ir import ExternOutput, IRNode, Layout, TensorArg, current_graph, realize
from .registry import lowerings, register_lowering
from ..templates.gemm import DTYPES, GemmTemplate, grid_fits
from .matmul_operands import read_operands, reads_narrow
from .views import expand

aten = torch.ops.aten

# Captured at import: this module is imported after the other lowering families.
_EARLIER: dict[Any, Optional[Callable]] = {t: lowerings.get(t) for t in (aten.mm.default, aten.addmm.default,
                                                                          aten.bmm.default)}


def _delegate(target: Any, *args: Any, **kwargs: Any) -> Any:
    earlier = _EARLIER.get(target)
    if earlier is None:
        raise Unsupported(f"{target} is not given to the GEMM template here")
    return earlier(*args, **kwargs)


def _cublas() -> bool:
    """Whether this graph's kernels run on a CUDA device (the ATen matmuls there are cuBLAS)."""
    return current_graph().device_type == "cuda"


def _wants_template(dtypes: list[torch.dtype], sizes: tuple[int, ...], k: int, a: IRNode, b: IRNode,
                    hoist: bool = True) -> bool:
    if config.matmul == "extern" or len(set(dtypes)) != 1 or dtypes[0] not in DTYPES:
        return False
    if k <= config.matmul_small_k_max or not all(s > 0 for s in sizes):
        return False
    if config.matmul == "auto" and _cublas():
        if not reads_narrow(a, b, dtypes[0], hoist=hoist):
            counters["gemm_template.auto_extern"] += 1
            return False
    return True


def _emit(target: Any, inputs: list[IRNode], template: tuple, size: tuple[int, ...], dtype: torch.dtype, *,
          batch: int, m: int, n: int, k: int, alpha: float = 1.0, beta: float = 0.0,
          operands: tuple = (0, 1, None)) -> IRNode:
    graph = current_graph()
    a_pos, b_pos, _ = operands
    realized = [realize(x) if i not in (a_pos, b_pos) else None for i, x in enumerate(inputs)]
    # addmm adds its bias after the product: a hoisted scale would multiply it too
    realized[a_pos], realized[b_pos], finish = read_operands(inputs[a_pos], inputs[b_pos], dtype,
                                                             hoist=target != aten.addmm.default)
    node = GemmTemplate(graph._new_name("gemm"), target, template, realized, graph.origin, batch=batch, m=m,
                        n=n, k=k, dtype=dtype, alpha=alpha, beta=beta, operands=operands)
    out = ExternOutput(f"{node.name}_out0", Layout.contiguous(size, dtype), node)
    node.outputs.append(out)
    node.structure = out
    graph.nodes.append(node)
    graph.buffers[out.name] = out
    counters[f"gemm_template.{target.overloadpacket.__name__}"] += 1
    return finish(out)


def _check(x: Any, rank: int, what: str) -> None:
    if not isinstance(x, IRNode) or x.ndim != rank:
        raise Unsupported(f"{what} of an unexpected rank")


@register_lowering(aten.mm.default)
def mm(a: IRNode, b: IRNode):
    _check(a, 2, "mm")
    _check(b, 2, "mm")
    (m, k), (_, n) = a.get_size(), b.get_size()
    if not _wants_template([a.get_dtype(), b.get_dtype()], (m, n), k, a, b):
        return _delegate(aten.mm.default, a, b)
    return _emit(aten.mm.default, [a, b], ((TensorArg(0), TensorArg(1)), {}), (m, n), a.get_dtype(),
                 batch=1, m=m, n=n, k=k)


@register_lowering(aten.addmm.default)
def addmm(bias: IRNode, a: IRNode, b: IRNode, *, beta: Any = 1, alpha: Any = 1):
    _check(a, 2, "addmm")
    _check(b, 2, "addmm")
    (m, k), (_, n) = a.get_size(), b.get_size()
    if not isinstance(bias, IRNode) or bias.ndim > 2 or isinstance(beta, bool) or isinstance(alpha, bool) \
            or not _wants_template([a.get_dtype(), b.get_dtype(), bias.get_dtype()], (m, n), k, a, b, hoist=False):
        return _delegate(aten.addmm.default, bias, a, b, beta=beta, alpha=alpha)
    full = expand(bias, [m, n])
    template = ((TensorArg(0), TensorArg(1), TensorArg(2)), {"beta": beta, "alpha": alpha})
    return _emit(aten.addmm.default, [full, a, b], template, (m, n), a.get_dtype(), batch=1, m=m, n=n, k=k,
                 alpha=float(alpha), beta=float(beta), operands=(1, 2, 0))


@register_lowering(aten.bmm.default)
def bmm(a: IRNode, b: IRNode):
    _check(a, 3, "bmm")
    _check(b, 3, "bmm")
    (batch, m, k), (_, _, n) = a.get_size(), b.get_size()
    if not grid_fits(batch, m, n) or not _wants_template([a.get_dtype(), b.get_dtype()], (batch, m, n), k, a, b):
        return _delegate(aten.bmm.default, a, b)
    return _emit(aten.bmm.default, [a, b], ((TensorArg(0), TensorArg(1)), {}), (batch, m, n), a.get_dtype(),
                 batch=batch, m=m, n=n, k=k)
