"""Inputs the candidate writes without declaring it (``mutates=``): each input is snapshotted before the
call and compared after it, NaN matching NaN."""
from __future__ import annotations

import torch

from ..oracle import locate
from ..verdict import fail
from .base import Hunter


class Mutation(Hunter):
    name = "mutation"
    summary = "input snapshots and the comparison after the call"

    def arm(self, call, stack) -> None:
        call.state[self.name] = {k: v.clone() for k, v in call.kwargs.items()
                                 if isinstance(v, torch.Tensor) and k not in call.subject.mutates}

    def observe(self, call) -> None:
        for k, before in call.state.get(self.name, {}).items():
            after = call.kwargs[k]
            same = (after == before) | (torch.isnan(after) & torch.isnan(before)) if after.dtype.is_floating_point \
                else after == before
            if not bool(same.all()):
                kind, where = locate(~same)
                call.result.mutated[k] = f"{int((~same).sum())} element(s) changed, {where}"

    def call_finding(self, result, label):
        if not result.mutated:
            return None
        name, msg = next(iter(result.mutated.items()))
        return fail("input_mutation", f"input {name!r} was modified by the call ({msg}); declare "
                    f"mutates=({name!r},) if that is intended", label, result, name, mutated=result.mutated)
