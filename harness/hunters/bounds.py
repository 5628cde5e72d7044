"""Out-of-bounds accesses, caught before they happen: in Triton's interpreter every load and store of a
launch is checked against the memory of the launch's tensor arguments (``harness.sanitizer``).  On a GPU
this hunter has nothing to arm; ``tritondiff replay --memcheck`` runs compute-sanitizer instead."""
from __future__ import annotations

from tritondiff.base import device

from ..verdict import fail
from .base import Hunter


class Bounds(Hunter):
    name = "bounds"
    summary = "the interpreter's lane-level address checks"

    def arm(self, call, stack) -> None:
        if device.is_interpreter():
            from .. import sanitizer

            call.state[self.name] = stack.enter_context(sanitizer.bounds_checking())

    def observe(self, call) -> None:
        checker = call.state.get(self.name)
        if checker is not None:
            call.result.violations = [v.message() for v in checker.violations]

    def call_finding(self, result, label):
        if not result.violations:
            return None
        more = f" (+{len(result.violations) - 1} more)" if len(result.violations) > 1 else ""
        return fail("out_of_bounds", f"{result.violations[0]}{more}", label, result, "bounds",
                    violations=result.violations)
