"""Calls that are not repeatable: a second call on identical inputs must pass too and, for a subject
declared deterministic, agree with the first bit for bit (leftover state, races, counters never reset)."""
from __future__ import annotations

from ..oracle import bitwise_diff
from ..verdict import fail, second_label
from .base import Hunter


class Idempotence(Hunter):
    name = "idempotence"
    summary = "the second call on identical inputs"

    def wants_second_call(self, first) -> bool:
        return True

    def check_pass(self, ex, first, second):
        if second is None or not ex.subject.deterministic:
            return None
        diff = bitwise_diff(first.output, second.output)
        if not diff:
            return None
        return fail("nondeterministic", f"two calls on identical inputs differ bitwise: {diff[1]}",
                    second_label(first), second, diff[0])
