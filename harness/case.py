"""One drawn example, as data: integer shapes, dtypes, layouts, value families and seeds.

Hypothesis draws a :class:`Case` (small, JSON-able, shrinkable); tensors are
materialised from it deterministically by :mod:`harness.tensors`, in any
process and on any device.  That is what lets a worker process, a dump and a
standalone repro rebuild exactly the inputs of a failure.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any


@dataclasses.dataclass(frozen=True)
class TensorCase:
    shape: tuple[int, ...]
    dtype: str
    layout: str           # contiguous | transposed | strided | offset | expanded
    layout_param: int     # step for "strided", offset for "offset", dim for "expanded"
    values: str           # value family
    seed: int
    nonfinite: str        # "" or the sprinkle of non-finite values: "nan", "inf", "-inf", "mixed"
    low: float | None = None
    high: float | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        extra = f"/{self.layout}" if self.layout != "contiguous" else ""
        nf = f"+{self.nonfinite}" if self.nonfinite else ""
        return f"{self.dtype}{list(self.shape)}{extra} {self.values}{nf}"


@dataclasses.dataclass(frozen=True)
class Case:
    dims: dict[str, int]
    tensors: dict[str, TensorCase]
    scalars: dict[str, Any]
    #: The scalars with their edge values made ordinary, where a scalar describes tensors at the edge of
    #: their dtype (``subject(edge=...)``: a described call scaled past the dtype's range); None otherwise.
    ordinary_scalars: dict[str, Any] | None = None
    #: The dim huge mode sized so that an input passes 2^31 elements (``harness.huge``); None otherwise.  A huge
    #: case's float64 truth may be computed a slice of it at a time (``harness.reference_chunks``).
    sized: str | None = None

    def to_json(self) -> dict:
        out = {"dims": dict(self.dims),
               "tensors": {k: dataclasses.asdict(v) for k, v in self.tensors.items()},
               "scalars": {k: _jsonable(v) for k, v in self.scalars.items()}}
        if self.ordinary_scalars is not None:
            out["ordinary_scalars"] = {k: _jsonable(v) for k, v in self.ordinary_scalars.items()}
        if self.sized is not None:
            out["sized"] = self.sized
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Case":
        tensors = {k: TensorCase(**{**v, "shape": tuple(v["shape"])}) for k, v in data["tensors"].items()}
        ordinary = data.get("ordinary_scalars")
        return cls(dict(data["dims"]), tensors, dict(data.get("scalars", {})),
                   dict(ordinary) if ordinary is not None else None, data.get("sized"))

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    def describe(self) -> str:
        parts = [f"{k}={v.describe()}" for k, v in self.tensors.items()]
        parts += [f"{k}={v!r}" for k, v in self.scalars.items()]
        return ", ".join(parts)

    def total_numel(self) -> int:
        return sum(t.numel for t in self.tensors.values())


def _jsonable(v: Any) -> Any:
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return repr(v)


#: Coarse size classes of a tensor, for coverage reports (see :func:`shape_bucket`).
SHAPE_BUCKETS = ("empty", "1", "<2^10", "<2^16", "<=2^20", ">2^20", ">=2^31-1")


def shape_bucket(numel: int) -> str:
    """Coarse size class of a tensor, for coverage reports: around Triton's 2^20 block limit, and the
    huge shapes (GPU only) where 32-bit offsets overflow."""
    if numel == 0:
        return "empty"
    if numel == 1:
        return "1"
    if numel < 1 << 10:
        return "<2^10"
    if numel < 1 << 16:
        return "<2^16"
    if numel <= 1 << 20:
        return "<=2^20"
    if numel < (1 << 31) - 1:
        return ">2^20"
    return ">=2^31-1"
