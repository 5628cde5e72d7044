"""Fuzz one subject with Hypothesis under a wall-clock budget; shrink and dump the first finding.

Hypothesis drives generation, replay of saved failures (its example database
lives under the output directory) and shrinking; every example executes through
an :mod:`executor` (a worker process by default).  The budget bounds the whole
exploration: when it runs out during generation the subject passes; when it
runs out while shrinking, the smallest failing case seen so far is reported.
"""
from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from typing import TYPE_CHECKING, Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase

from .api import Subject
from .case import Case, shape_bucket
from .config import config
from .counters import counters
from .dump import write_dump
from .executor import Executor, make_executor
from .loader import ref
from .runner import Verdict, enabled_hazards
from .strategies import cases

if TYPE_CHECKING:
    from .huge import HugePlan


class _BudgetSpent(BaseException):
    """Stops Hypothesis without being mistaken for a failure of the subject."""


class Finding(Exception):
    """Raised inside the Hypothesis test when an example fails (one subclass per failure class)."""


_FINDING_TYPES: dict[str, type] = {}


def _finding_type(klass: str) -> type:
    # Hypothesis tells bugs apart by exception type: one type per class keeps shrinking on the same bug.
    if klass not in _FINDING_TYPES:
        _FINDING_TYPES[klass] = type(f"Finding_{klass}", (Finding,), {})
    return _FINDING_TYPES[klass]


@dataclasses.dataclass
class SubjectResult:
    subject: str
    status: str                       # "pass" | "fail"
    examples: int = 0
    skipped: int = 0
    seconds: float = 0.0
    failure_class: str | None = None
    message: str = ""
    signature: str | None = None
    dump: str | None = None
    case: Case | None = None
    verdict: Verdict | None = None
    coverage: dict = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        stats = f"{self.examples} examples, {self.skipped} skipped, {self.seconds:.1f} s"
        if self.status == "pass":
            return f"pass  {self.subject}  ({stats})"
        return f"FAIL  {self.subject}  {self.failure_class}: {self.message}  ({stats})\n      dump: {self.dump}"


class _State:
    def __init__(self):
        self.examples = 0
        self.skipped = 0
        self.failure: tuple[Case, Verdict] | None = None
        self.failure_class: str | None = None
        self.coverage: dict[str, Counter] = {"shape": Counter(), "values": Counter(), "dtype": Counter(),
                                             "layout": Counter()}

    def observe(self, case: Case) -> None:
        for t in case.tensors.values():
            self.coverage["shape"][shape_bucket(t.numel)] += 1
            self.coverage["values"][t.values + (f"+{t.nonfinite}" if t.nonfinite else "")] += 1
            self.coverage["dtype"][t.dtype] += 1
            self.coverage["layout"][t.layout] += 1


def explore(subject: Subject, *, budget_s: float | None = None, max_examples: int = 10_000,
            seed: int | None = None, out_dir: str | None = None, disabled: frozenset = frozenset(),
            executor: Executor | None = None, database: bool = True,
            on_example: Callable[[Case, Verdict], None] | None = None,
            huge: "HugePlan | None" = None) -> SubjectResult:
    """Search ``subject``'s input space for a failure; shrink it and write its dump.

    ``huge`` (a :class:`harness.huge.HugePlan`) draws the subject's size dim past
    2^31 elements; with ``config.huge_shapes`` on and no plan, one is made from
    the free GPU memory now.  Huge mode runs on CUDA only
    (:class:`~harness.exc.HugeShapesUnavailable` otherwise, before anything runs).
    """
    timeout_s = None
    if huge is not None or config.huge_shapes:
        from . import huge as huge_shapes

        huge_shapes.require_cuda()
        huge = huge or huge_shapes.plan_on_device(subject)
        timeout_s = max(config.example_timeout_s, huge_shapes.EXAMPLE_TIMEOUT_S)
    budget_s = config.budget_s if budget_s is None else budget_s
    out_dir = out_dir or config.out_dir
    hazards = enabled_hazards(subject, disabled)
    own_executor = executor is None
    executor = executor or make_executor(hazards, timeout_s)
    subject_ref = ref(subject)
    executor.prepare(subject_ref)             # worker start-up and imports are not the subject's budget
    state = _State()
    start = time.monotonic()
    deadline = start + budget_s

    def probe(case: Case) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _BudgetSpent()
        # a long example may overrun the budget by at most 20%; then it is cut short, not judged
        verdict = executor.run(subject_ref, case, hazards, timeout_s=remaining + 0.2 * budget_s)
        if verdict.status == "budget":
            raise _BudgetSpent()
        state.examples += 1
        state.observe(case)
        if on_example is not None:
            on_example(case, verdict)
        if verdict.status == "skip":
            state.skipped += 1
            reject()
        if verdict.status == "fail":
            if state.failure_class is None:
                state.failure_class = verdict.failure_class
            if verdict.failure_class == state.failure_class:
                state.failure = (case, verdict)      # Hypothesis only tries simpler cases: latest is smallest
            if verdict.failure_class in ("hang", "crash"):
                raise _BudgetSpent()                 # each shrink attempt would cost a timeout / a new worker
            raise _finding_type(verdict.failure_class)(verdict.message)

    db = DirectoryBasedExampleDatabase(os.path.join(out_dir, ".hypothesis")) if database else None
    test = settings(max_examples=max_examples, deadline=None, database=db, derandomize=False,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False,
                    verbosity=Verbosity.quiet,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink))(
        given(cases(subject, huge=huge))(probe))
    mode = ":huge" if huge is not None else ""     # huge failures replay only in huge mode
    test._hypothesis_internal_database_key = f"tritondiff:{subject.name}:{subject.file}{mode}".encode()
    if seed is not None:
        test = hypothesis_seed(seed)(test)
    try:
        test()
    except (_BudgetSpent, Finding):
        pass
    except Exception:
        # e.g. Hypothesis's FlakyFailure when a replay fails differently (a crash that replays as a
        # hang on a loaded machine): the failure already recorded stands; anything else is ours.
        if state.failure is None:
            raise
    finally:
        if own_executor:
            executor.close()
    result = SubjectResult(subject.name, "pass", state.examples, state.skipped, time.monotonic() - start,
                           coverage={k: dict(v) for k, v in state.coverage.items()})
    if state.failure is not None:
        case, verdict = state.failure
        counters["findings"] += 1
        result.status = "fail"
        result.failure_class = verdict.failure_class
        result.message = verdict.message
        result.signature = verdict.signature(subject.name)
        result.case, result.verdict = case, verdict
        result.dump = write_dump(out_dir, subject, subject_ref, case, verdict, seed=seed, hazards=hazards)
        verdict.dump = result.dump
    return result
