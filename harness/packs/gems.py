"""``wild.gems.*``: every ATen op flag-gems overrides, called the torch way with its kernels on, against the
same call with flag-gems off (``harness.packs.overrides``: OpInfo samples, widened).

flag-gems lists its overrides as ``(aten name, function)`` pairs and switches a subset on with
``flag_gems.use_gems(include=[function names])``; each subject switches on the functions registered for its
op's name only, so a finding names the kernel at fault.  flag-gems imports only where it finds a GPU: on a
machine without one this pack is a usage error that says so.
"""
from __future__ import annotations

import flag_gems

from .overrides import declare

#: Ops whose flag-gems kernels are not a function of their inputs alone.
SKIP = {"_assert_async": "an assertion, no output", "_functional_sym_constrain_range_for_size": "no output",
        "_local_scalar_dense": "a host value"}


def _functions_by_op() -> dict[str, list[str]]:
    """ATen op name -> the names of the flag-gems functions registered for its overloads."""
    out: dict[str, set[str]] = {}
    for entry in flag_gems._FULL_CONFIG:
        if not entry or len(entry) < 2:
            continue
        name, fn = entry[0], entry[1]
        out.setdefault(name.split(".")[0], set()).add(getattr(fn, "__name__", str(fn)))
    return {op: sorted(names) for op, names in out.items()}


FUNCTIONS = _functions_by_op()


def _enabled(op: str):
    return flag_gems.use_gems(include=FUNCTIONS[op])


def _standalone(op: str) -> tuple[str, str, str]:
    return "flag-gems", "import flag_gems", f"flag_gems.use_gems(include={FUNCTIONS[op]!r})"


SUBJECTS = declare("wild.gems", FUNCTIONS, _enabled, __name__, "cuda", SKIP, standalone=_standalone)
globals().update({f"_subject_{i}": s for i, s in enumerate(SUBJECTS.values())})   # found by subjects_in()
