"""The protocol every hazard hunter implements, and the view of one example it is given.

A hunter is a small class with a ``name`` (what users pass to ``disable=`` / ``TRITONDIFF_DISABLE``)
and hooks the runner calls, for every enabled hunter in registry order, at fixed points of an
example (``harness.runner``):

* one call of the candidate: ``guards_inputs`` (inputs built inside canary guards), ``arm`` (before
  the call: enter contexts on the call's ``ExitStack``, take snapshots), ``observe`` (after it:
  record evidence on the :class:`~harness.verdict.CallResult`), ``call_finding`` (the call's own
  evidence judged: an out-of-bounds access, a mutated input);
* the example: ``before_example`` (reset state before the first call), ``wants_second_call``,
  ``diagnose`` (the first call is wrong: control runs that name the cause), ``second_call_wrong``
  (the first call right, the second wrong), ``check_pass`` (both right: what else must hold);
* the run: ``isolates`` (examples run in a worker process).

Every hook has a do-nothing default, so a hunter overrides only what it uses, and adding a hunter is
one module in this package plus its line in ``hunters/__init__.py``.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from ..api import Subject
    from ..case import Case
    from ..oracle import Comparison
    from ..verdict import CallResult, Verdict


class Example(Protocol):
    """What the runner hands a hunter about the example being judged."""

    subject: "Subject"
    case: "Case"
    hazards: frozenset

    def call(self, hazards: frozenset, *, contexts: tuple = (),
             guard_fill: dict[str, tuple] | None = None) -> "CallResult":
        """One more call of the candidate on fresh inputs, with the hunters in ``hazards`` armed; a control
        run also enters ``contexts`` (context-manager factories) around the call, or puts ``guard_fill``'s
        values around the named inputs."""

    def passes(self, output: Any) -> bool:
        """Whether ``output`` passes the oracle against this example's reference."""

    def oracle(self, output: Any) -> "Comparison":
        """The oracle's comparison of ``output`` with this example's reference."""

    def truth(self) -> Any:
        """The float64 truth of this example."""

    def small_enough_for_control_runs(self) -> bool:
        """Whether the example is small enough for control runs of every call variant (each costs a full
        call): at most ``config.config_check_max_numel`` input elements."""


class Call:
    """One call of the candidate while it is being made: its inputs, what hunters stash, its result."""

    def __init__(self, subject: "Subject", kwargs: dict, result: "CallResult"):
        self.subject, self.kwargs, self.result = subject, kwargs, result
        self.state: dict[str, Any] = {}          # per-hunter scratch space, keyed by hunter name


class Hunter:
    """Base of a hazard hunter: a name, a one-line summary, and do-nothing hooks."""

    #: The name users switch the hunter off by.
    name: ClassVar[str] = ""
    #: What it finds and what it costs, in one line (the overhead benchmark prints it).
    summary: ClassVar[str] = ""

    # ---------------------------------------------------------------- one call
    def guards_inputs(self) -> bool:
        """Build this call's inputs inside canary guard regions."""
        return False

    def arm(self, call: Call, stack: contextlib.ExitStack) -> None:
        """Before the call (inputs built): enter contexts on ``stack``, take snapshots into ``call.state``."""

    def observe(self, call: Call) -> None:
        """After the call (contexts exited): record evidence on ``call.result``."""

    def call_finding(self, result: "CallResult", label: str) -> "Verdict | None":
        """The call's own evidence judged, before its output is: a finding, or None."""
        return None

    # ---------------------------------------------------------------- the example
    def before_example(self) -> None:
        """Before the first call of an example."""

    def wants_second_call(self, first: "CallResult") -> bool:
        """Whether the example needs a second call on the same inputs."""
        return False

    def diagnose(self, ex: Example, first: "CallResult", second: "CallResult | None",
                 cmp: "Comparison", label: str) -> "Verdict | None":
        """The first call's output is wrong (``cmp``): a finding that names the cause, or None."""
        return None

    def second_call_wrong(self, ex: Example, first: "CallResult", second: "CallResult",
                          cmp: "Comparison") -> "Verdict | None":
        """The first call was right and the second is wrong: a finding that names the cause, or None."""
        return None

    def check_pass(self, ex: Example, first: "CallResult", second: "CallResult | None") -> "Verdict | None":
        """Both calls' outputs are right: a finding about something else that must hold, or None."""
        return None

    # ---------------------------------------------------------------- the run
    def isolates(self) -> bool:
        """Examples run in a worker process (crashes, hangs and leaked state stay there)."""
        return False
