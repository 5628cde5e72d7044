"""View ops by index rewriting: reshape, permute, expand, slice, select, squeeze, unsqueeze, ...

Each returns an ``ir.View`` whose ``reindex`` maps an index of the view to an index of its
input; nothing is copied.  ``replay`` repeats the view on a meta tensor so that a view of a
buffer can be passed to an extern op as a strided tensor.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

import sympy
import torch

from .. import indexing
from ..exc import Unsupported
from ..ir import ComputedBuffer, InputBuffer, IRNode, Layout, StridedView, View, realize
from .registry import register_lowering
from .common import check_dtype, normalize_dim, numel

aten = torch.ops.aten
prims = torch.ops.prims


def _view(x: IRNode, size: Sequence[int], reindex, desc: str, replay=None) -> View:
    check_dtype(x.get_dtype())  # a complex view would reach a kernel; externs handle those
    return View(x, size, reindex, desc, replay)


@register_lowering(aten.permute.default, prims.transpose.default)
def permute(x: IRNode, dims: Sequence[int]):
    dims = [normalize_dim(d, x.ndim) for d in dims]
    size = [x.get_size()[d] for d in dims]
    inverse = [dims.index(k) for k in range(len(dims))]
    return _view(x, size, lambda idx: tuple(idx[inverse[k]] for k in range(len(dims))), f"permute{dims}",
                 lambda t: t.permute(dims))


@register_lowering(aten.transpose.int)
def transpose(x: IRNode, dim0: int, dim1: int):
    dims = list(range(x.ndim))
    if x.ndim == 0:
        return x
    a, b = normalize_dim(dim0, x.ndim), normalize_dim(dim1, x.ndim)
    dims[a], dims[b] = dims[b], dims[a]
    return permute(x, dims)


@register_lowering(aten.t.default)
def t(x: IRNode):
    return x if x.ndim < 2 else transpose(x, 0, 1)


@register_lowering(aten.expand.default)
def expand(x: IRNode, size: Sequence[int], *, implicit: bool = False):
    size = list(size)
    lead = len(size) - x.ndim
    if lead < 0:
        raise Unsupported(f"expand of a {x.ndim}-d tensor to {len(size)} dims")
    xsize = x.get_size()
    out = [xsize[k - lead] if (s == -1 and k >= lead) else int(s) for k, s in enumerate(size)]
    for k, s in enumerate(xsize):
        if s != 1 and s != out[lead + k]:
            raise Unsupported(f"expand {list(xsize)} -> {out}")

    def reindex(idx):
        return tuple(0 if (s == 1 and out[lead + k] != 1) else idx[lead + k] for k, s in enumerate(xsize))
    return _view(x, out, reindex, f"expand{out}", lambda m: m.expand(out))


@register_lowering(prims.broadcast_in_dim.default)
def broadcast_in_dim(x: IRNode, shape: Sequence[int], broadcast_dimensions: Sequence[int]):
    shape = [int(s) for s in shape]
    xsize = x.get_size()
    bdims = list(broadcast_dimensions)

    def reindex(idx):
        return tuple(0 if (xsize[k] == 1 and shape[d] != 1) else idx[d] for k, d in enumerate(bdims))

    def replay(m):
        unsq = [1] * len(shape)
        for k, d in enumerate(bdims):
            unsq[d] = xsize[k]
        return m.view(unsq).expand(shape)
    return _view(x, shape, reindex, f"broadcast_in_dim{shape}", replay)


@register_lowering(aten.unsqueeze.default)
def unsqueeze(x: IRNode, dim: int):
    dim = dim % (x.ndim + 1) if -(x.ndim + 1) <= dim <= x.ndim else None
    if dim is None:
        raise Unsupported("unsqueeze dim out of range")
    size = list(x.get_size())
    size.insert(dim, 1)
    return _view(x, size, lambda idx: tuple(idx[:dim]) + tuple(idx[dim + 1:]), f"unsqueeze({dim})",
                 lambda m: m.unsqueeze(dim))


@register_lowering(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, prims.squeeze.default)
def squeeze(x: IRNode, dims: Any = None):
    size = list(x.get_size())
    if dims is None:
        dims = [k for k, s in enumerate(size) if s == 1]
    elif isinstance(dims, int):
        dims = [dims]
    dims = sorted({normalize_dim(d, x.ndim) for d in dims} if x.ndim else set())
    dims = [d for d in dims if size[d] == 1]
    keep = [k for k in range(len(size)) if k not in dims]
    out = [size[k] for k in keep]

    def reindex(idx):
        full = [sympy.Integer(0)] * len(size)
        for pos, k in enumerate(keep):
            full[k] = idx[pos]
        return tuple(full)
    return _view(x, out, reindex, f"squeeze{dims}", lambda m: m.squeeze(dims) if dims else m)


@register_lowering(aten.slice.Tensor)
def slice_(x: IRNode, dim: int = 0, start: Any = None, end: Any = None, step: int = 1):
    if x.ndim == 0:
        raise Unsupported("slice of a 0-d tensor")
    dim = normalize_dim(dim, x.ndim)
    size = x.get_size()[dim]
    start = 0 if start is None else int(start)
    end = size if end is None else int(min(end, sys.maxsize))
    if step < 1:
        raise Unsupported("slice step must be positive")
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    length = (end - start + step - 1) // step
    out = list(x.get_size())
    out[dim] = length

    def reindex(idx):
        idx = list(idx)
        idx[dim] = start + step * sympy.sympify(idx[dim])
        return tuple(idx)
    return _view(x, out, reindex, f"slice(dim={dim}, {start}:{end}:{step})",
                 lambda m: m[(slice(None),) * dim + (slice(start, end, step),)])


@register_lowering(aten.select.int)
def select(x: IRNode, dim: int, index: int):
    dim = normalize_dim(dim, x.ndim)
    size = x.get_size()[dim]
    if not -size <= index < size:
        raise Unsupported(f"select index {index} out of range for size {size}")
    index = index % size
    out = list(x.get_size())
    del out[dim]

    def reindex(idx):
        idx = list(idx)
        idx.insert(dim, sympy.Integer(index))
        return tuple(idx)
    return _view(x, out, reindex, f"select(dim={dim}, {index})", lambda m: m.select(dim, index))


def _reshape_groups(old: Sequence[int], new: Sequence[int]):
    groups = []
    i = j = 0
    while i < len(old) and j < len(new):
        oi, nj = [i], [j]
        po, pn = old[i], new[j]
        i, j = i + 1, j + 1
        while po != pn:
            if po < pn:
                oi.append(i)
                po *= old[i]
                i += 1
            else:
                nj.append(j)
                pn *= new[j]
                j += 1
        groups.append((oi, nj))
    while i < len(old):
        groups.append(([i], []))
        i += 1
    while j < len(new):
        groups.append(([], [j]))
        j += 1
    return groups


def reshape_reindex(old: Sequence[int], new: Sequence[int]):
    """index of ``new`` -> index of ``old`` for a row-major reshape (dims grouped, no global div/mod)."""
    old, new = [int(s) for s in old], [int(s) for s in new]
    if numel(old) == 0:
        return lambda idx: tuple(sympy.Integer(0) for _ in old)
    groups = _reshape_groups(old, new)

    def reindex(idx):
        out = [sympy.Integer(0)] * len(old)
        for oi, nj in groups:
            if not oi:
                continue
            sizes_new = [new[j] for j in nj]
            linear = indexing.linearize([idx[j] for j in nj], indexing.contiguous_strides(sizes_new))
            parts = indexing.delinearize(linear, [old[i] for i in oi])
            for i, p in zip(oi, parts):
                out[i] = p
        return tuple(out)
    return reindex


@register_lowering(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default)
def view(x: IRNode, size: Sequence[int]):
    if isinstance(size, torch.dtype):
        raise Unsupported("view as another dtype (bitcast) is not lowered")
    size = [int(s) for s in size]
    total = numel(x.get_size())
    if -1 in size:
        known = numel([s for s in size if s != -1])
        size[size.index(-1)] = total // known if known else 0
    if numel(size) != total:
        raise Unsupported(f"view {list(x.get_size())} -> {size}")
    if list(size) == list(x.get_size()):
        return x
    return _view(x, size, reshape_reindex(x.get_size(), size), f"reshape{size}", lambda m: m.view(size))


@register_lowering(prims.collapse_view.default, prims.collapse.default)
def collapse(x: IRNode, start: int, end: int):
    size = list(x.get_size())
    new = size[:start] + [numel(size[start:end])] + size[end:]
    return view(x, new)


@register_lowering(prims.split_dim.default)
def split_dim(x: IRNode, dim: int, outer_length: int):
    size = list(x.get_size())
    new = size[:dim] + [outer_length, size[dim] // outer_length] + size[dim + 1:]
    return view(x, new)


@register_lowering(aten.alias.default, aten.detach.default, aten.lift_fresh.default, prims.view_of.default,
                   aten.clone.default, aten.lift_fresh_copy.default, aten.alias_copy.default,
                   aten.detach_copy.default)
def alias(x: IRNode, *args: Any, memory_format: Any = None, **kwargs: Any):
    # The IR is functional: a copy and the original hold the same values.  Graph outputs get
    # their own buffer with the strides the graph expects, whatever the value came from.
    check_dtype(x.get_dtype())
    return x


@register_lowering(aten.expand_copy.default)
def expand_copy(x: IRNode, size: Sequence[int], *, implicit: bool = False):
    return expand(x, size)


@register_lowering(aten.permute_copy.default)
def permute_copy(x: IRNode, dims: Sequence[int]):
    return permute(x, dims)


@register_lowering(aten.unsqueeze_copy.default)
def unsqueeze_copy(x: IRNode, dim: int):
    return unsqueeze(x, dim)


@register_lowering(aten.diagonal.default, aten.diagonal_copy.default)
def diagonal(x: IRNode, offset: int = 0, dim1: int = 0, dim2: int = 1):
    d1, d2 = normalize_dim(dim1, x.ndim), normalize_dim(dim2, x.ndim)
    if d1 == d2:
        raise Unsupported("diagonal with dim1 == dim2")
    size = list(x.get_size())
    length = max(0, min(size[d1] + min(offset, 0), size[d2] - max(offset, 0)))
    keep = [k for k in range(len(size)) if k not in (d1, d2)]
    out = [size[k] for k in keep] + [length]

    def reindex(idx):
        full = [sympy.Integer(0)] * len(size)
        for pos, k in enumerate(keep):
            full[k] = idx[pos]
        i = sympy.sympify(idx[-1])
        full[d1] = i + max(-offset, 0)
        full[d2] = i + max(offset, 0)
        return tuple(full)
    return _view(x, out, reindex, f"diagonal({offset}, {d1}, {d2})",
                 lambda m: m.diagonal(offset, d1, d2))


@register_lowering(aten.unfold.default)
def unfold(x: IRNode, dimension: int, size: int, step: int):
    if x.ndim == 0:
        raise Unsupported("unfold of a 0-d tensor")
    dim = normalize_dim(dimension, x.ndim)
    xsize = list(x.get_size())
    count = (xsize[dim] - size) // step + 1
    out = xsize[:dim] + [count] + xsize[dim + 1:] + [size]

    def reindex(idx):
        idx = list(idx)
        inner = idx.pop()
        idx[dim] = sympy.sympify(idx[dim]) * step + inner
        return tuple(idx)
    return _view(x, out, reindex, f"unfold({dim}, {size}, {step})", lambda m: m.unfold(dim, size, step))


@register_lowering(aten.as_strided.default, aten.as_strided_copy.default, prims.as_strided.default)
def as_strided(x: IRNode, size: Sequence[int], stride: Sequence[int], storage_offset: Any = None):
    base = realize(x)
    if isinstance(base, StridedView):
        buffer, base_offset = base.buffer, base.layout.offset
    else:
        buffer, base_offset = base, 0
    own = buffer.storage_offset if isinstance(buffer, InputBuffer) else 0
    if storage_offset is None:
        offset = base_offset
    else:
        offset = int(storage_offset) - own
    if offset < 0:
        raise Unsupported("as_strided reaching before the start of the tensor it was given")
    if isinstance(buffer, ComputedBuffer):
        buffer.fixed_layout = True
    layout = Layout(tuple(int(s) for s in size), tuple(int(s) for s in stride), x.get_dtype(), offset)
    if layout.storage_span > buffer.layout.storage_span:
        raise Unsupported("as_strided past the end of its base")
    return StridedView(buffer, layout)


@register_lowering(aten.flip.default)
def flip(x: IRNode, dims):
    """Reversed dims by index rewriting.  No replay: a reversed view has negative strides, which
    torch tensors cannot express, so an extern consumer gets a copy."""
    dims = {normalize_dim(d, x.ndim) for d in dims}
    size = x.get_size()

    def reindex(idx):
        return tuple(size[k] - 1 - sympy.sympify(i) if k in dims else i for k, i in enumerate(idx))
    return _view(x, size, reindex, f"flip{sorted(dims)}")


@register_lowering(aten.split.Tensor, aten.unsafe_split.Tensor)
def split(x: IRNode, split_size: int, dim: int = 0):
    dim = normalize_dim(dim, x.ndim)
    size = x.get_size()[dim]
    step = max(int(split_size), 1)
    return [slice_(x, dim, start, min(start + step, size)) for start in range(0, max(size, 1), step)]


@register_lowering(aten.split_with_sizes.default, aten.unsafe_split_with_sizes.default)
def split_with_sizes(x: IRNode, split_sizes, dim: int = 0):
    dim = normalize_dim(dim, x.ndim)
    out, start = [], 0
    for n in split_sizes:
        out.append(slice_(x, dim, start, start + int(n)))
        start += int(n)
    return out


@register_lowering(aten.unbind.int)
def unbind(x: IRNode, dim: int = 0):
    dim = normalize_dim(dim, x.ndim)
    return [select(x, dim, i) for i in range(x.get_size()[dim])]


__all__ = ["permute", "transpose", "expand", "unsqueeze", "squeeze", "slice_", "select", "view", "reshape_reindex",
           "as_strided"]
