"""Eager evaluator: run IR bodies with torch ops over whole iteration domains.

This is the third interpretation of ``ops`` (beside analysis and Triton codegen).  A
body is called once with index symbols bound to broadcastable ``torch.arange`` tensors,
so each op acts on a whole domain at once.  Comparing the graph's eager result, this
evaluator on the lowered IR, the evaluator on the fused IR, and the Triton kernels tells
a lowering bug from a fusion bug from a codegen bug (``config.execution``).

Loads check bounds: an IR body that indexes outside its buffer raises
``VerificationError`` here instead of reading garbage.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import sympy
import torch

from . import indexing
from .analysis import body_symbols, output_symbols, run_body
from .exc import VerificationError
from .ir import ComputedBuffer, Layout, Reduction, Scan, Scatter, use_resolver
from .ops import reduction_identity, reduction_result_dtype, use_handler


def _tensor(value, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(value, dtype=dtype)


class EagerOps:
    """``ops`` on torch tensors.  ``storages`` maps buffer names to flat 1-D storage views."""

    def __init__(self, storages: Mapping[str, torch.Tensor], env: Mapping[sympy.Symbol, Any], location: str,
                 device: torch.device = torch.device("cpu")):
        self.storages = storages
        self.env = env
        self.location = location
        self.device = device
        self._masks: list[torch.Tensor] = []

    # ---- memory and structure
    def load(self, name, index):
        flat = self.storages[name]
        idx = indexing.evaluate(index, self.env)
        idx = torch.as_tensor(idx, dtype=torch.int64, device=flat.device)
        mask = self._mask()
        if mask is not None:
            idx, mask = torch.broadcast_tensors(idx, mask)
            idx = torch.where(mask, idx, torch.zeros((), dtype=torch.int64, device=idx.device))
        if idx.numel() == 0:  # an empty domain loads nothing
            return torch.zeros(idx.shape, dtype=flat.dtype, device=flat.device)
        if flat.numel() == 0:
            if mask is not None and not bool(mask.any()):
                return torch.zeros(idx.shape, dtype=flat.dtype, device=flat.device)
            raise VerificationError(f"{self.location}: load from empty buffer {name}", step="eager", node=name)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= flat.numel()):
            raise VerificationError(
                f"{self.location}: load of {name} at {index} reaches [{int(idx.min())}, {int(idx.max())}] but the "
                f"buffer spans {flat.numel()} elements", step="eager", node=name)
        return flat[idx]

    def store(self, name, index, value):
        flat = self.storages[name]
        idx = torch.as_tensor(indexing.evaluate(index, self.env), dtype=torch.int64, device=flat.device)
        idx, value = torch.broadcast_tensors(idx, value)
        flat[idx.reshape(-1)] = value.reshape(-1).to(flat.dtype)

    def constant(self, value, dtype):
        return _tensor(value, dtype)

    def index_expr(self, expr, dtype):
        return torch.as_tensor(indexing.evaluate(expr, self.env), device=self.device).to(dtype)

    def indirect_indexing(self, value, size):
        """Bind a fresh symbol to ``value`` wrapped as torch wraps negative indices; out of range (where the
        body's masks let it be read) raises as eager indexing does."""
        value = value.to(torch.int64)
        mask, live = self._mask(), value
        if mask is not None:
            live, mask = torch.broadcast_tensors(value, mask)
            live = live[mask]
        if live.numel() and (int(live.min()) < -size or int(live.max()) >= size):
            raise VerificationError(f"{self.location}: index {int(live.min())}..{int(live.max())} out of range for "
                                    f"a dimension of size {size}", step="eager")
        symbol = indexing.indirect_symbol(f"e{len(self.env)}")
        self.env[symbol] = torch.where(value < 0, value + size, value)
        return symbol

    def to_dtype(self, x, dtype):
        return x.to(dtype)

    def masked(self, mask, body, other):
        self._masks.append(mask)
        try:
            value = body()
        finally:
            self._masks.pop()
        return torch.where(mask, value, _tensor(other, value.dtype))

    def _mask(self) -> Optional[torch.Tensor]:
        if not self._masks:
            return None
        mask = self._masks[0]
        for m in self._masks[1:]:
            mask = mask & m
        return mask

    def where(self, cond, a, b):
        return torch.where(cond, a, b)

    def reduction(self, reduction_type, value, acc_dtype):
        raise AssertionError("the eager evaluator reduces in evaluate_node, not through ops.reduction")

    # ---- unary
    def abs(self, x): return torch.abs(x)
    def neg(self, x): return torch.neg(x)
    def exp(self, x): return torch.exp(x)
    def exp2(self, x): return torch.exp2(x)
    def expm1(self, x): return torch.expm1(x)
    def log(self, x): return torch.log(x)
    def log2(self, x): return torch.log2(x)
    def log1p(self, x): return torch.log1p(x)
    def sqrt(self, x): return torch.sqrt(x)
    def rsqrt(self, x): return torch.rsqrt(x)
    def sin(self, x): return torch.sin(x)
    def cos(self, x): return torch.cos(x)
    def tan(self, x): return torch.tan(x)
    def tanh(self, x): return torch.tanh(x)
    def erf(self, x): return torch.erf(x)
    def sigmoid(self, x): return torch.sigmoid(x)
    def floor(self, x): return torch.floor(x)
    def ceil(self, x): return torch.ceil(x)
    def trunc(self, x): return torch.trunc(x)
    def round(self, x): return torch.round(x)
    def sign(self, x): return torch.sign(x) if x.dtype != torch.bool else x
    def reciprocal(self, x): return torch.reciprocal(x)
    def isnan(self, x): return torch.isnan(x)
    def isinf(self, x): return torch.isinf(x)
    def logical_not(self, x): return torch.logical_not(x)
    def bitwise_not(self, x): return torch.bitwise_not(x)

    # ---- binary
    def add(self, a, b): return a + b if a.dtype != torch.bool else a | b
    def sub(self, a, b): return a - b
    def mul(self, a, b): return a * b if a.dtype != torch.bool else a & b
    def truediv(self, a, b): return a / b
    def floordiv(self, a, b): return torch.div(a, b, rounding_mode="floor")
    def truncdiv(self, a, b): return torch.div(a, b, rounding_mode="trunc")
    def remainder(self, a, b): return torch.remainder(a, b)
    def fmod(self, a, b): return torch.fmod(a, b)
    def maximum(self, a, b): return torch.maximum(a, b)
    def minimum(self, a, b): return torch.minimum(a, b)
    def eq(self, a, b): return a == b
    def ne(self, a, b): return a != b
    def lt(self, a, b): return a < b
    def le(self, a, b): return a <= b
    def gt(self, a, b): return a > b
    def ge(self, a, b): return a >= b
    def logical_and(self, a, b): return torch.logical_and(a, b)
    def logical_or(self, a, b): return torch.logical_or(a, b)
    def logical_xor(self, a, b): return torch.logical_xor(a, b)
    def bitwise_and(self, a, b): return a & b
    def bitwise_or(self, a, b): return a | b
    def bitwise_xor(self, a, b): return a ^ b


def _domain_env(symbols: tuple, sizes: tuple, rank: int, start: int, device: torch.device) -> dict:
    env = {}
    for k, (sym, size) in enumerate(zip(symbols, sizes)):
        if isinstance(sym, sympy.Symbol):
            shape = [1] * rank
            shape[start + k] = size
            env[sym] = torch.arange(size, dtype=torch.int64, device=device).view(shape)
    return env


def evaluate_node(node: ComputedBuffer, storages: Mapping[str, torch.Tensor], resolver: Any) -> torch.Tensor:
    """The node's value over its whole domain: a tensor of shape ``ranges`` and its dtype."""
    data = node.data
    if isinstance(data, Scatter):
        return _evaluate_scatter(node, storages, resolver)
    index, rindex, _ = body_symbols(node)
    rranges = data.reduction_ranges if isinstance(data, Reduction) else ()
    rank = len(data.ranges) + len(rranges)
    device = next(iter(storages.values())).device if storages else torch.device("cpu")
    env = _domain_env(index, data.ranges, rank, 0, device)
    env.update(_domain_env(rindex, rranges, rank, len(data.ranges), device))
    handler = EagerOps(storages, env, location=f"{node.name} ({node.origin})", device=device)
    value = run_body(node, handler, resolver, index, rindex)
    expected = data.src_dtype if isinstance(data, Reduction) else data.dtype
    if not isinstance(value, torch.Tensor) or value.dtype != expected:
        got = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
        raise VerificationError(f"{node.name} ({node.origin}): body returns {got}, node declares {expected}",
                                step="eager", node=node.name)
    full = tuple(data.ranges) + tuple(rranges)
    value = value.expand(full) if value.dim() <= len(full) else value
    if tuple(value.shape) != full:
        raise VerificationError(f"{node.name}: body value has shape {tuple(value.shape)}, domain is {full}",
                                step="eager", node=node.name)
    if isinstance(data, Scan):
        return torch.cumsum(value, -1, dtype=data.dtype)
    if not isinstance(data, Reduction):
        return value
    return _reduce(data, value.reshape(tuple(data.ranges) + (-1,)) if full else value.reshape(1))


def _evaluate_scatter(node: ComputedBuffer, storages: Mapping[str, torch.Tensor], resolver: Any) -> torch.Tensor:
    """The initial value over the output, then every source element's value added at its destination
    (``index_put_(accumulate=True)``, in source order)."""
    data = node.data
    device = next(iter(storages.values())).device if storages else torch.device("cpu")
    where = f"{node.name} ({node.origin})"

    def domain(symbols: tuple, sizes: tuple, body) -> tuple[torch.Tensor, dict]:
        env = _domain_env(symbols, sizes, len(sizes), 0, device)
        with use_handler(EagerOps(storages, env, location=where, device=device)), use_resolver(resolver):
            value = body()
        if not isinstance(value, torch.Tensor) or value.dtype != data.dtype:
            raise VerificationError(f"{where}: body returns {getattr(value, 'dtype', type(value).__name__)}, node "
                                    f"declares {data.dtype}", step="eager", node=node.name)
        return value.expand(sizes), env
    out_index = output_symbols(node)
    init, _ = domain(out_index, data.size, lambda: data.init(out_index))
    index = body_symbols(node)[0]
    dest: list = []

    def added() -> Any:
        dest.extend(data.dest(index))
        return data.inner_fn(index)
    value, env = domain(index, data.ranges, added)
    at = tuple(torch.as_tensor(indexing.evaluate(e, env), device=device).expand(data.ranges).reshape(-1) for e in dest)
    return init.clone().index_put_(at, value.reshape(-1), accumulate=True)


def _reduce(data: Reduction, value: torch.Tensor) -> torch.Tensor:
    rtype, acc = data.reduction_type, data.acc_dtype
    value = value.to(acc) if rtype not in ("any", "all") else value.to(torch.bool)
    out_dtype = reduction_result_dtype(rtype, acc)
    if value.shape[-1] == 0:
        ident = reduction_identity(rtype, acc)
        if rtype in ("argmax", "argmin"):
            ident = 0
        result = torch.full(value.shape[:-1], ident, dtype=out_dtype, device=value.device)
    elif rtype == "sum":
        result = value.sum(-1, dtype=acc) if acc != torch.bool else value.any(-1)
    elif rtype == "prod":
        result = value.prod(-1, dtype=acc)
    elif rtype == "max":
        result = value.amax(-1) if value.dtype != torch.bool else value.any(-1)
    elif rtype == "min":
        result = value.amin(-1) if value.dtype != torch.bool else value.all(-1)
    elif rtype == "argmax":
        result = value.argmax(-1)
    elif rtype == "argmin":
        result = value.argmin(-1)
    elif rtype == "any":
        result = value.any(-1)
    elif rtype == "all":
        result = value.all(-1)
    else:
        raise VerificationError(f"unknown reduction type {rtype}", step="eager")
    return result.to(data.dtype)


# ---------------------------------------------------------------------------- storages

def storage_view(tensor: torch.Tensor, layout: Layout) -> torch.Tensor:
    """A flat 1-D view of ``tensor``'s storage from its data pointer over ``layout.storage_span``."""
    return torch.as_strided(tensor, (layout.storage_span,), (1,), tensor.storage_offset())


def write(storage: torch.Tensor, layout: Layout, value: torch.Tensor) -> None:
    """Write ``value`` (shape ``layout.size``) into flat ``storage`` following ``layout``."""
    if layout.numel == 0:
        return
    idx = torch.zeros((), dtype=torch.int64, device=storage.device)
    for k, (size, stride) in enumerate(zip(layout.size, layout.stride)):
        shape = [1] * len(layout.size)
        shape[k] = size
        idx = idx + torch.arange(size, dtype=torch.int64, device=storage.device).view(shape) * stride
    idx = (idx + layout.offset).expand(layout.size)
    storage[idx.reshape(-1)] = value.to(storage.dtype).reshape(-1)


def nan_safe_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Exact equality with NaN == NaN (for tests of the evaluator itself)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        both_nan = torch.isnan(a) & torch.isnan(b)
        return bool(((a == b) | both_nan).all())
    return bool((a == b).all())


__all__ = ["EagerOps", "evaluate_node", "storage_view", "write", "nan_safe_equal"]
