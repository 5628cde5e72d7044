"""Ops that pick between inputs by index: cat, constant padding, slice / select / scatter, via masked loads."""
from __future__ import annotations

from typing import Any, Sequence

import sympy
import torch

from .. import indexing
from ..exc import Unsupported
from ..ir import Pointwise
from .registry import register_lowering
from ..ops import ops
from .common import check_dtype, is_ir, normalize_dim
from .gather import scatter_add as scatter_add_atomic

aten = torch.ops.aten


def _in_range(expr: Any, lo: int, hi: int):
    """ops value: lo <= expr < hi (bounds omitted when trivially true)."""
    conds = []
    if lo > 0:
        conds.append(ops.ge(ops.index_expr(expr, torch.int64), ops.constant(lo, torch.int64)))
    if hi is not None:
        conds.append(ops.lt(ops.index_expr(expr, torch.int64), ops.constant(hi, torch.int64)))
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = ops.logical_and(out, c)
    return out


@register_lowering(aten.cat.default)
def cat(tensors: Sequence[Any], dim: int = 0):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.get_size()[0] == 0)] or list(tensors[:1])
    if not all(is_ir(t) for t in tensors):
        raise Unsupported("cat of non-tensors")
    ndim = tensors[0].ndim
    dim = normalize_dim(dim, ndim)
    dtype = tensors[0].get_dtype()
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.get_dtype())
    check_dtype(dtype)
    size = list(tensors[0].get_size())
    offsets = []
    total = 0
    for t in tensors:
        if t.ndim != ndim:
            raise Unsupported("cat of tensors with different ranks")
        offsets.append(total)
        total += t.get_size()[dim]
    size[dim] = total
    pieces = [(t.make_loader(), off, off + t.get_size()[dim]) for t, off in zip(tensors, offsets)
              if t.get_size()[dim] > 0]
    if not pieces:
        return Pointwise.create(lambda index: ops.constant(0, dtype), size, dtype)

    def inner_fn(index):
        value = None
        for k, (load, lo, hi) in enumerate(pieces):
            def body(load=load, lo=lo):
                shifted = list(index)
                shifted[dim] = sympy.sympify(index[dim]) - lo
                return ops.to_dtype(load(tuple(shifted)), dtype)
            last = k == len(pieces) - 1
            mask = _in_range(index[dim], lo, None if last else hi)
            piece = body() if mask is None else ops.masked(mask, body, 0)
            if value is None:
                value = piece
            else:
                value = ops.where(_in_range(index[dim], lo, None), piece, value)
        return value
    return Pointwise.create(inner_fn, size, dtype)


@register_lowering(aten.constant_pad_nd.default)
def constant_pad_nd(x, pad: Sequence[int], value: Any = 0):
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise Unsupported("constant_pad_nd with a malformed pad")
    dtype = x.get_dtype()
    check_dtype(dtype)
    size = list(x.get_size())
    out = list(size)
    lefts = [0] * len(size)
    for k in range(len(pad) // 2):
        d = len(size) - 1 - k
        left, right = int(pad[2 * k]), int(pad[2 * k + 1])
        lefts[d] = left
        out[d] = size[d] + left + right
        if out[d] < 0:
            raise Unsupported("constant_pad_nd cropping past the tensor")
    load = x.make_loader()
    fill = bool(value) if dtype == torch.bool else (value if dtype.is_floating_point else int(value))

    def inner_fn(index):
        shifted = tuple(sympy.sympify(i) - lefts[d] for d, i in enumerate(index))
        mask = None
        for d, i in enumerate(index):
            if lefts[d] == 0 and out[d] <= size[d]:
                continue
            cond = _in_range(i, max(lefts[d], 0), lefts[d] + size[d])
            if cond is not None:
                mask = cond if mask is None else ops.logical_and(mask, cond)
        if mask is None:
            return load(shifted)
        return ops.masked(mask, lambda: load(shifted), fill)
    return Pointwise.create(inner_fn, out, dtype)


@register_lowering(aten.slice_scatter.default)
def slice_scatter(x, src, dim: int = 0, start=None, end=None, step: int = 1):
    """out = x, with out[..., start:end:step, ...] = src (the backward of slicing)."""
    from .views import slice_
    dim = normalize_dim(dim, x.ndim)
    window = slice_(x, dim, start, end, step)  # resolves start/end like the forward slice
    lo = 0 if start is None else (start + x.get_size()[dim] if start < 0 else start)
    lo = min(max(lo, 0), x.get_size()[dim])
    count = window.get_size()[dim]
    dtype = x.get_dtype()
    check_dtype(dtype)
    if src.get_dtype() != dtype or list(src.get_size()) != list(window.get_size()):
        raise Unsupported("slice_scatter with a mismatched source")
    load_x, load_src = x.make_loader(), src.make_loader()

    def inner_fn(index):
        i = sympy.sympify(index[dim])
        inside = _in_range(i, lo, lo + step * count)
        if step > 1:
            on_grid = ops.eq(ops.index_expr(indexing.Mod(i - lo + step * count, step), torch.int64),
                             ops.constant(0, torch.int64))
            inside = on_grid if inside is None else ops.logical_and(inside, on_grid)

        def from_src():
            shifted = list(index)
            shifted[dim] = (i - lo) // step if step == 1 else _floordiv(i - lo, step)
            return load_src(tuple(shifted))
        if inside is None:
            return from_src()
        return ops.where(inside, ops.masked(inside, from_src, 0), load_x(index))
    return Pointwise.create(inner_fn, x.get_size(), dtype)


def _floordiv(expr, n):
    from ..indexing import FloorDiv
    return FloorDiv(expr, n)


@register_lowering(aten.select_scatter.default)
def select_scatter(x, src, dim: int, index: int):
    """out = x, with out.select(dim, index) = src."""
    dim = normalize_dim(dim, x.ndim)
    size = x.get_size()[dim]
    index = index % size if size else 0
    dtype = x.get_dtype()
    check_dtype(dtype)
    if src.get_dtype() != dtype:
        raise Unsupported("select_scatter with a source of another dtype")
    load_x, load_src = x.make_loader(), src.make_loader()

    def inner_fn(idx):
        hit = ops.eq(ops.index_expr(idx[dim], torch.int64), ops.constant(index, torch.int64))
        rest = tuple(idx[:dim]) + tuple(idx[dim + 1:])
        return ops.where(hit, ops.masked(hit, lambda: load_src(rest), 0), load_x(idx))
    return Pointwise.create(inner_fn, x.get_size(), dtype)


# ----------------------------------------------------------------------- scatter along a short index

# scatter / scatter_add whose index is at most this long along ``dim`` become one Pointwise node: each output
# element compares its position with the index's few entries in its line.  Past it: scatter (lowerings.gather),
# ATen for scatter without accumulation.
SCATTER_MAX_HITS = 8


def _scatter(x: Any, dim: int, index: Any, src: Any, accumulate: bool) -> Any:
    """``x`` with ``out[.., index[p], ..] = src[p]`` (``+=`` when ``accumulate``) along ``dim`` for every position
    ``p`` of ``index``, as a gather over the index: output element ``o`` looks at the index entries ``p = o``
    with ``dim`` replaced by ``k < index.size(dim)``.  Writes to one element go in ``k`` order -- the last wins,
    or they sum in that order -- as ATen's CPU loop does (CUDA leaves duplicates' order unspecified).
    Out-of-range indices, which eager rejects, write nothing.  One-hot targets (``scatter(zeros, 1, t[:, None],
    v)``, a cross entropy's backward) become a compare and a select, fused with their neighbours."""
    if not is_ir(index) or index.get_dtype() != torch.int64 or index.ndim != x.ndim:
        raise Unsupported("scatter: index is not an int64 tensor of the input's rank")
    dim = normalize_dim(dim, x.ndim)
    dtype = x.get_dtype()
    check_dtype(dtype)
    sizes, isizes = list(x.get_size()), list(index.get_size())
    hits = isizes[dim] if x.ndim else 1
    if hits > SCATTER_MAX_HITS and accumulate and is_ir(src):      # atomic adds, not a compare per entry
        return scatter_add_atomic(x, dim, index, src)
    if hits > SCATTER_MAX_HITS or any(i > s for d, (i, s) in enumerate(zip(isizes, sizes)) if d != dim):
        raise Unsupported(f"scatter over {hits} index entries per line: left to ATen")
    if is_ir(src):
        if src.get_dtype() != dtype or src.ndim != x.ndim or \
                any(s < i for s, i in zip(src.get_size(), isizes)):
            raise Unsupported("scatter with a source of another dtype or smaller than its index")
        load_src = src.make_loader()
    else:
        value = src

        def load_src(_):
            return ops.constant(value, dtype)
    load_x, load_index = x.make_loader(), index.make_loader()
    short = [d for d in range(x.ndim) if d != dim and isizes[d] < sizes[d]]

    def inner_fn(o):
        out = load_x(o)
        if hits == 0:
            return out
        covered = None
        for d in short:
            c = ops.lt(ops.index_expr(o[d], torch.int64), ops.constant(isizes[d], torch.int64))
            covered = c if covered is None else ops.logical_and(covered, c)
        here = ops.index_expr(o[dim], torch.int64) if x.ndim else ops.constant(0, torch.int64)
        for k in range(hits):
            p = tuple(sympy.Integer(k) if d == dim else o[d] for d in range(x.ndim))
            at = load_index(p) if covered is None else ops.masked(covered, lambda p=p: load_index(p), -1)
            hit = ops.eq(at, here)
            picked = ops.masked(hit, lambda p=p: load_src(p), 0)
            out = ops.where(hit, ops.add(out, picked) if accumulate else picked, out)
        return out
    return Pointwise.create(inner_fn, tuple(sizes), dtype)


@register_lowering(aten.scatter.value)
def scatter_value(x, dim: int, index, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unsupported("scatter with a non-number value")
    return _scatter(x, dim, index, value, accumulate=False)


@register_lowering(aten.scatter.src)
def scatter_src(x, dim: int, index, src):
    return _scatter(x, dim, index, src, accumulate=False)


@register_lowering(aten.scatter_add.default)
def scatter_add(x, dim: int, index, src):
    if x.get_dtype() == torch.bool:
        raise Unsupported("scatter_add of bool")
    return _scatter(x, dim, index, src, accumulate=True)


# ----------------------------------------------------------------------- small-K matmuls
# mm / addmm / bmm whose inner size K is at most config.matmul_small_k_max (mHC's 4x4 stream
# mixing: a bmm of [T, 4, 4] x [T, 4, C]) become one Pointwise node, the K products unrolled,
# so they fuse with their neighbours instead of being an opaque extern call.  Larger K is
# declined here (Unsupported: ATen), and lowerings/matmul.py, imported after this module,
# sends it to the GEMM template first; it hands small K back to these lowerings.

_SMALL_MM_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def small_matmul(a: Any, b: Any, bias: Any = None, *, alpha: Any = 1, beta: Any = 1) -> Any:
    """``beta * bias + alpha * (a @ b)`` as one Pointwise node, or None when K is not small.

    ``a`` is [M, K] or [B, M, K], ``b`` [K, N] or [B, K, N] (same batch, same float dtype);
    ``bias`` (addmm) broadcasts to the output.  Products are summed in K order in float32
    (float64 for float64) and rounded once, as ATen's CPU kernels accumulate half types.
    """
    from ..config import config
    from ..counters import counters
    from .common import expand_loader

    if not (is_ir(a) and is_ir(b)) or a.ndim != b.ndim or a.ndim not in (2, 3):
        return None
    dtype = a.get_dtype()
    *batch, m, k = a.get_size()
    *batch_b, k_b, n = b.get_size()
    if b.get_dtype() != dtype or dtype not in _SMALL_MM_DTYPES or batch != batch_b or k != k_b:
        return None
    if k > config.matmul_small_k_max or isinstance(alpha, bool) or isinstance(beta, bool):
        return None
    if bias is not None and (not is_ir(bias) or bias.get_dtype() != dtype):
        return None
    size = tuple(batch) + (m, n)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    load_a, load_b = a.make_loader(), b.make_loader()
    load_bias = expand_loader(bias, size) if bias is not None and beta != 0 else None

    def inner_fn(index):
        *lead, i, j = index
        total = ops.constant(0, acc)
        for kk in range(k):
            term = ops.mul(ops.to_dtype(load_a((*lead, i, kk)), acc), ops.to_dtype(load_b((*lead, kk, j)), acc))
            total = term if kk == 0 else ops.add(total, term)
        if alpha != 1:
            total = ops.mul(total, ops.constant(alpha, acc))
        if load_bias is not None:
            shifted = ops.to_dtype(load_bias(index), acc)
            total = ops.add(shifted if beta == 1 else ops.mul(shifted, ops.constant(beta, acc)), total)
        return ops.to_dtype(total, dtype)
    counters["small_matmul_inlined"] += 1
    return Pointwise.create(inner_fn, size, dtype)


def _small_or_extern(result: Any) -> Any:
    if result is None:
        raise Unsupported("matmul whose inner size is past config.matmul_small_k_max (or not a float dtype)")
    return result


@register_lowering(aten.mm.default)
def mm(a, b):
    return _small_or_extern(small_matmul(a, b))


@register_lowering(aten.bmm.default)
def bmm(a, b):
    return _small_or_extern(small_matmul(a, b))


@register_lowering(aten.addmm.default)
def addmm(bias, a, b, *, beta: Any = 1, alpha: Any = 1):
    return _small_or_extern(small_matmul(a, b, bias, alpha=alpha, beta=beta))
# --------------------------------------------------------------------- end small-K matmuls
