"""Writes and reads past an input's memory: every tensor input is built inside guard regions of a
canary value (NaN for floats).  A guard changed after the call is a write out of bounds; an output
that is NaN where the truth is finite, and not with an input's guards zero-filled, read that guard."""
from __future__ import annotations

import torch

from ..oracle import flatten, has_new_nan
from ..tensors import guards_intact, torch_dtype
from ..verdict import fail
from .base import Hunter


class Canary(Hunter):
    name = "canary"
    summary = "guard regions around inputs and their check"

    def guards_inputs(self) -> bool:
        return True

    def observe(self, call) -> None:
        for k, v in call.kwargs.items():
            if isinstance(v, torch.Tensor):
                msg = guards_intact(v)
                if msg:
                    call.result.canary[k] = msg

    def call_finding(self, result, label):
        if not result.canary:
            return None
        name, msg = next(iter(result.canary.items()))
        return fail("out_of_bounds", f"write past the guard of input {name!r}: {msg}", label, result, "canary",
                    canary=result.canary)

    def diagnose(self, ex, first, second, cmp, label):
        if not has_new_nan(first.output, ex.truth()):
            return None
        read = _guard_read(ex, first.output)
        if read is None:
            return None
        name, side, cleared = read
        return fail("out_of_bounds", f"out-of-bounds read {side} input {name!r}: the kernel read its canary guard "
                    f"(NaN): {cleared} output element(s) are NaN where the reference is finite, and not NaN with "
                    f"that guard zero-filled. {cmp.message}", label, first, f"canary_read:{name}",
                    canary_read={"tensor": name, "side": side, "elements": cleared}, comparison=cmp.to_json())


def _guard_read(ex, output) -> tuple[str, str, int] | None:
    """Which input's guard a NaN of ``output`` came from: (name, "past the end of" / "before the start
    of" / "around", how many new-NaN elements it explains), or None.

    Control runs, only for an output that has NaN where the truth has none: each floating input in
    turn gets zero-filled guards instead of the NaN canary; the first whose zeros clear some of those
    NaN is the tensor read out of bounds.  Then the side: the guard after it alone, else before it."""
    new_nan = [torch.isnan(c.cpu()) & ~torch.isnan(t.cpu())
               if isinstance(c, torch.Tensor) and c.dtype.is_floating_point and isinstance(t, torch.Tensor)
               and c.shape == t.shape else None for c, t in zip(flatten(output), flatten(ex.truth()))]

    def cleared(fill: dict) -> int:
        res = ex.call(ex.hazards, guard_fill=fill)
        if res.error:
            return 0
        n = 0
        for mask, c in zip(new_nan, flatten(res.output)):
            if mask is not None and isinstance(c, torch.Tensor) and c.shape == mask.shape:
                n += int((mask & ~torch.isnan(c.cpu())).sum())
        return n

    for name, tc in ex.case.tensors.items():
        if name not in ex.subject.inputs or not torch_dtype(tc.dtype).is_floating_point:
            continue
        both = cleared({name: (0.0, 0.0)})
        if not both:
            continue
        if cleared({name: (None, 0.0)}):
            return name, "past the end of", both
        if cleared({name: (0.0, None)}):
            return name, "before the start of", both
        return name, "around", both
    return None
