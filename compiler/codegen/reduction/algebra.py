"""One reduction's algebra: its identity, how a value is prepared, how lanes combine element-wise and how
a block reduces (``ReductionOp``); every strategy builds on it."""
from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from ...exc import CodegenError
from ...ops import reduction_identity
from ...scheduler import RSYM, XSYM, Placed
from ..kernel import CSEVar, TritonKernel, cast_source


@dataclasses.dataclass
class ReductionOp:
    """How one reduction type accumulates: representation, identity, block reduce, combine, finish."""

    rtype: str
    acc_dtype: torch.dtype
    out_dtype: torch.dtype

    @property
    def boolish(self) -> bool:
        return self.rtype in ("any", "all") or self.acc_dtype == torch.bool

    @property
    def is_arg(self) -> bool:
        return self.rtype in ("argmax", "argmin")

    @property
    def repr_dtype(self) -> torch.dtype:
        return torch.int32 if self.boolish else self.acc_dtype

    def identity(self):
        if self.boolish:
            return 0 if self.rtype in ("any", "max", "sum") else 1
        return reduction_identity(self.rtype, self.acc_dtype)

    def prepare(self, k: TritonKernel, value: CSEVar, axis: int = 1) -> CSEVar:
        """The element value in the accumulator's representation, masked lanes set to the identity.

        ``axis`` is the tile axis being reduced: 1 (the inner axis, RSYM) everywhere except the
        column reductions of a mixed-order kernel, which reduce over the rows (axis 0, XSYM).
        """
        if self.boolish:
            v = k.newvar(f"({cast_source(value, torch.bool)}).to(tl.int32)", torch.int32)
        else:
            v = k.newvar(cast_source(value, self.acc_dtype), self.acc_dtype) if value.dtype != self.acc_dtype else value
        # Only lanes past the reduced extent need the identity: lanes past the kept extent are never stored.
        reduced = RSYM if axis == 1 else XSYM
        mask = k.axes[reduced].mask if reduced in k.active else None
        mask = " & ".join([m for m in [mask] + k.mask_stack if m]) or None
        if mask is None:  # still a full tile: the value may not depend on both axes (a scalar, a row value)
            return k.newvar(f"tl.broadcast_to({v.name}, {k.tile})", self.repr_dtype)
        ident = k.newvar(k.full(k.scalar_shape, self.identity(), self.repr_dtype), self.repr_dtype)
        return k.newvar(f"tl.where({mask}, {v.name}, {ident.name})", self.repr_dtype)

    def block(self, k: TritonKernel, v: CSEVar, index_src: Optional[str], axis: int = 1) -> list[CSEVar]:
        """Reduce a [XBLOCK, N] block along ``axis`` (to [XBLOCK, 1], or [1, N] for axis 0).

        Builtin reductions only: ``tl.reduce`` with a Python combine function runs element
        by element in Triton's interpreter; everything here is vectorised instead: NaN
        handling by flags, the first index of the extreme by a masked ``tl.min`` of indices,
        products by a tree of reshape/split halvings (those two along axis 1 only).
        """
        dt = self.repr_dtype
        keep = "[:, None]" if axis == 1 else "[None, :]"
        if axis != 1 and (self.is_arg or self.rtype == "prod"):
            raise CodegenError(f"{self.rtype} is reduced along the inner axis only (a scheduler legality bug)")
        if self.rtype == "sum" and not self.boolish:
            return [k.newvar(f"tl.sum({v.name}, {axis}){keep}", dt)]
        if self.boolish:
            fn = "tl.max" if self.rtype in ("any", "max", "sum") else "tl.min"
            return [k.newvar(f"{fn}({v.name}, {axis}){keep}", dt)]
        if self.rtype == "prod":
            return [self._tree_product(k, v)]
        fn = "tl.max" if self.rtype in ("max", "argmax") else "tl.min"
        extreme = k.newvar(f"{fn}({v.name}, {axis}){keep}", dt)
        if not dt.is_floating_point:
            if not self.is_arg:
                return [extreme]
            return [extreme, self._first_index(k, f"{v.name} == {extreme.name}", index_src)]
        nans = k.newvar(f"{v.name} != {v.name}", torch.bool)
        has_nan = k.newvar(f"tl.max({nans.name}.to(tl.int32), {axis}){keep} > 0", torch.bool)
        nan = k.newvar(k.full(k.scalar_shape, float("nan"), dt), dt)
        value = k.newvar(f"tl.where({has_nan.name}, {nan.name}, {extreme.name})", dt)
        if not self.is_arg:
            return [value]
        first_extreme = self._first_index(k, f"{v.name} == {extreme.name}", index_src)
        first_nan = self._first_index(k, nans.name, index_src)
        index = k.newvar(f"tl.where({has_nan.name}, {first_nan.name}, {first_extreme.name})", torch.int64)
        return [value, index]

    @staticmethod
    def _first_index(k: TritonKernel, condition: str, index_src: str) -> CSEVar:
        big = k.newvar(k.full(k.scalar_shape, 2**62, torch.int64), torch.int64)
        return k.newvar(f"tl.min(tl.where({condition}, {index_src}, {big.name}), 1)[:, None]", torch.int64)

    def _tree_product(self, k: TritonKernel, v: CSEVar) -> CSEVar:
        xblock, width = k.tile
        cur = v.name
        while width > 1:
            width //= 2
            halves = k.fresh("tmp")
            k.emit(f"{halves} = tl.reshape({cur}, [{xblock}, {width}, 2])")
            a, b = k.fresh("lo"), k.fresh("hi")
            k.emit(f"{a}, {b} = tl.split({halves})")
            cur = k.fresh("tmp")
            k.emit(f"{cur} = {a} * {b}")
        if cur == v.name:
            return v
        return CSEVar(cur, self.repr_dtype)

    def init(self, k: TritonKernel, shape: list[int], rnumel: int) -> list[str]:
        """Accumulators of ``shape``: [XBLOCK, RBLOCK] lanes in a loop (one per tile element)."""
        names = [k.fresh("acc")]
        k.emit(f"{names[0]} = {k.full(shape, self.identity(), self.repr_dtype)}")
        if self.is_arg:
            names.append(k.fresh("acc_idx"))
            k.emit(f"{names[1]} = {k.full(shape, rnumel, torch.int64)}")
        return names

    def combine(self, k: TritonKernel, accs: list[str], chunk: list[CSEVar]) -> None:
        """Fold values into the accumulators element by element (emitted inside the loop).

        ``chunk`` has the accumulators' shape: a loop's [XBLOCK, RBLOCK] lane values (with their
        element indices for argmax / argmin), or a mixed-order kernel's column terms.
        """
        a = accs[0]
        c = chunk[0].name
        if self.is_arg:
            fn = "_td_argmax" if self.rtype == "argmax" else "_td_argmin"
            k.emit(f"{a}, {accs[1]} = {fn}({a}, {accs[1]}, {c}, {chunk[1].name})")
        elif self.boolish:
            fn = "tl.maximum" if self.rtype in ("any", "max", "sum") else "tl.minimum"
            k.emit(f"{a} = {fn}({a}, {c})")
        elif self.rtype == "sum":
            k.emit(f"{a} = {a} + {c}")
        elif self.rtype == "prod":
            k.emit(f"{a} = {a} * {c}")
        else:
            k.emit(f"{a} = {'_td_maximum' if self.rtype == 'max' else '_td_minimum'}({a}, {c})")

    def finish(self, k: TritonKernel, values: list[CSEVar]) -> CSEVar:
        """The stored value, cast after the loop."""
        v = values[1] if self.is_arg else values[0]
        if self.boolish:
            v = k.newvar(f"({v.name} != 0)", torch.bool)
        return v if v.dtype == self.out_dtype else k.newvar(cast_source(v, self.out_dtype), self.out_dtype)


def reduction_op(p: Placed) -> ReductionOp:
    data = p.node.buf.data
    return ReductionOp(data.reduction_type, data.acc_dtype, data.dtype)
