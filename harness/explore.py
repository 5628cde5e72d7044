"""Fuzz one subject with Hypothesis under a wall-clock budget; shrink and dump one finding.

Hypothesis drives generation, replay of saved failures (its example database
lives under the output directory) and shrinking; every example executes through
an :mod:`executor` (a worker process by default).  The budget bounds the whole
exploration: when it runs out during generation the subject passes.

Which failure is reported (:class:`Failures`): Hypothesis stops generating at
the first failure and shrinks it, and a shrink may *slip* into another failure
class (a ``nonfinite`` case with an inf sprinkled in shrinks into the plain
``mismatch`` underneath).  The finding is the failure Hypothesis finally raises,
its shrunk one; when the budget (or a crash or hang) ends the search first, it
is the smallest failing case seen (:func:`~harness.strategies.example_cost`)
over every class.  One exploration reports one finding, whatever the classes it
passed through.
"""
from __future__ import annotations

import dataclasses
import os
import secrets
import time
from collections import Counter
from typing import TYPE_CHECKING, Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Unsatisfiable

from .api import Subject, registry
from .case import Case
from .config import config
from .counters import counters
from .coverage import ALLOWANCES, CoverageTally
from .dump import write_dump
from .exc import SubjectFailed, UsageError
from .executor import Executor, make_executor
from .loader import bundled, ref
from .runner import Verdict, enabled_hazards
from .strategies import cases, example_cost

if TYPE_CHECKING:
    from .huge import HugePlan


class _BudgetSpent(BaseException):
    """Stops Hypothesis without being mistaken for a failure of the subject."""


class Finding(Exception):
    """Raised inside the Hypothesis test when an example fails (one subclass per failure class).

    Carries the failing ``case`` and its ``verdict``, so the exception Hypothesis raises at the end (the
    replay of its shrunk failure) says which example that was.
    """

    def __init__(self, case: Case, verdict: Verdict):
        super().__init__(verdict.message)
        self.case, self.verdict = case, verdict


_FINDING_TYPES: dict[str, type] = {}


def _finding_type(klass: str) -> type:
    # Hypothesis tells failures apart by exception type (one saved example each); with
    # report_multiple_bugs=False its shrinker may still slip from one type to another (see Failures).
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
    seed: int | None = None           # Hypothesis's seed (drawn when none was given): --seed N replays the run
    failure_class: str | None = None
    message: str = ""
    signature: str | None = None
    dump: str | None = None
    case: Case | None = None
    verdict: Verdict | None = None
    coverage: dict = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        stats = f"{self.examples} examples, {self.skipped} skipped, {self.seconds:.1f} s, seed {self.seed}"
        tally = self.coverage.get("allowance", {})
        loosened = [f"{k}: {tally[k]}" for k in ALLOWANCES[1:] if tally.get(k)]
        if loosened:                 # passes that needed the oracle's allowances say so (harness.coverage)
            stats += "; passed on " + ", ".join(loosened)
        if self.status == "pass":
            return f"pass  {self.subject}  ({stats})"
        return f"FAIL  {self.subject}  {self.failure_class}: {self.message}  ({stats})\n      dump: {self.dump}"


class Failures:
    """The failing examples of one exploration, per failure class, and the one to report.

    ``add`` keeps the smallest failing case of each class (by
    :func:`~harness.strategies.example_cost`; on a tie the later one, which
    Hypothesis's shrinker judged simpler).  ``report`` gives the failure
    Hypothesis raised at the end (``raised``), else the one that stopped the
    search (a crash or hang: ``stopped_by``), else the smallest over all classes.
    ``known`` answers a case already seen failing: Hypothesis replays a failure
    when its shrinking starts and once more at the end, and a multi-million
    element example costs ~17 s in the interpreter each time.
    """

    def __init__(self):
        self.smallest_by_class: dict[str, tuple[tuple[int, int], Case, Verdict]] = {}
        self.count: Counter = Counter()
        self.raised: tuple[Case, Verdict] | None = None
        self.stopped_by: tuple[Case, Verdict] | None = None
        self._verdicts: dict[str, Verdict] = {}

    def add(self, case: Case, verdict: Verdict) -> None:
        klass = verdict.failure_class or "unknown"
        self.count[klass] += 1
        key = (example_cost(case), -sum(self.count.values()))
        best = self.smallest_by_class.get(klass)
        if best is None or key < best[0]:
            self.smallest_by_class[klass] = (key, case, verdict)
        self._verdicts[case.dumps()] = verdict

    def known(self, case: Case) -> Verdict | None:
        """The verdict of ``case`` when it already failed in this exploration."""
        return self._verdicts.get(case.dumps())

    def smallest(self) -> tuple[Case, Verdict] | None:
        if not self.smallest_by_class:
            return None
        _, case, verdict = min(self.smallest_by_class.values(), key=lambda entry: entry[0])
        return case, verdict

    def report(self) -> tuple[Case, Verdict] | None:
        return self.raised or self.stopped_by or self.smallest()


class _State:
    def __init__(self):
        self.failures = Failures()
        self.coverage = CoverageTally()          # counts the examples and the skipped ones too
        self.judged = False                      # has an example run to a verdict (not cut short)?
        self.last_skip: str = ""                 # why the reference refused the last example it refused


def new_seed() -> int:
    """A fresh Hypothesis seed for a run given none (recorded, so ``--seed`` can replay the run)."""
    return secrets.randbits(31)


def explore(subject: Subject, *, budget_s: float | None = None, max_examples: int = 10_000,
            seed: int | None = None, out_dir: str | None = None, disabled: frozenset = frozenset(),
            executor: Executor | None = None, database: bool = True,
            on_example: Callable[[Case, Verdict], None] | None = None,
            huge: "HugePlan | None" = None) -> SubjectResult:
    """Search ``subject``'s input space for a failure; shrink it and write its dump.

    ``seed`` seeds Hypothesis; without one a fresh seed is drawn
    (:func:`new_seed`) and recorded in the result and the dump's ``summary.json``.
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
    seed = new_seed() if seed is None else seed
    hazards = enabled_hazards(subject, disabled)
    own_executor = executor is None
    executor = executor or make_executor(hazards, timeout_s)
    subject_ref = ref(subject)
    executor.prepare(subject_ref)             # worker start-up and imports are not the subject's budget
    state = _State()
    start = time.monotonic()
    probe = _probe(state, executor, subject_ref, hazards, start + budget_s, budget_s, on_example)
    try:
        try:
            _search(_hypothesis_test(subject, probe, max_examples=max_examples, seed=seed, out_dir=out_dir,
                                     database=database, huge=huge), state.failures)
        except Unsatisfiable:
            if not state.coverage.skipped:
                raise UsageError(f"{subject.name}: no drawn dims satisfied its where= predicates; widen the dims "
                                 "or relax the predicates") from None
            raise UsageError(f"{subject.name}: every example drawn was outside the subject's domain "
                             f"({state.coverage.skipped} drawn, the reference raised on each; last: "
                             f"{state.last_skip or 'no message'}); declare the dims, dtypes and values the "
                             "reference accepts") from None
    finally:
        if own_executor:
            executor.close()
    tally = state.coverage
    result = SubjectResult(subject.name, "pass", tally.examples, tally.skipped, time.monotonic() - start,
                           seed=seed, coverage=tally.counts())
    failure = state.failures.report()
    if failure is not None:
        case, verdict = failure
        counters["findings"] += 1
        result.status = "fail"
        result.failure_class = verdict.failure_class
        result.message = verdict.message
        result.signature = verdict.signature(subject.name)
        result.case, result.verdict = case, verdict
        result.dump = write_dump(out_dir, subject, subject_ref, case, verdict, seed=seed, hazards=hazards)
        verdict.dump = result.dump
    return result


def check(subject: Subject | str, **options) -> SubjectResult:
    """Fuzz ``subject`` (a :class:`Subject`, or the name of a registered or bundled one) as
    :func:`explore` does, with the same keyword options; return the passing result, or raise
    :class:`~harness.exc.SubjectFailed` carrying the failing one."""
    if isinstance(subject, str):
        known = registry()
        if subject not in known:             # the bundled subjects are heavy to import: only when needed
            known = {**bundled(), **registry()}
        if subject not in known:
            raise UsageError(f"no subject named {subject!r}: declare it with @subject(...) (or import the file "
                             "that does) before check({subject!r})")
        subject = known[subject]
    if not isinstance(subject, Subject):
        raise UsageError(f"check() takes a @subject-declared function or a subject's name, got "
                         f"{type(subject).__name__}; declare the kernel's entry point with @subject(...)")
    result = explore(subject, **options)
    if result.status != "pass":
        raise SubjectFailed(result)
    return result


def _probe(state: _State, executor: Executor, subject_ref: dict, hazards: frozenset, deadline: float,
           budget_s: float, on_example: Callable[[Case, Verdict], None] | None) -> Callable[[Case], None]:
    """The body of the Hypothesis test: run one example, record it, raise :class:`Finding` when it fails."""

    def probe(case: Case) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _BudgetSpent()
        verdict = state.failures.known(case)         # Hypothesis replaying a failure: judged already
        if verdict is None:
            # a long example may overrun the budget by at most 20%; then it is cut short, not judged.  Not the
            # first: until one example is judged it runs to its hang limit, since an exploration that judges
            # nothing proves nothing, and a first example also pays the subject's JIT compiles (kernels.mhc.block
            # took 11 s on a cold GPU cache, four workers at once, against the ci profile's 9-s budget)
            limit = remaining + 0.2 * budget_s if state.judged else None
            verdict = executor.run(subject_ref, case, hazards, timeout_s=limit)
            if verdict.status == "budget":
                raise _BudgetSpent()
            state.judged = True
            state.coverage.observe(case, verdict)
            if on_example is not None:
                on_example(case, verdict)
            if verdict.status == "skip":
                state.last_skip = verdict.message
                reject()
            if verdict.status == "fail":
                state.failures.add(case, verdict)
                if verdict.failure_class in ("hang", "crash"):
                    state.failures.stopped_by = (case, verdict)
                    raise _BudgetSpent()             # each shrink attempt would cost a timeout / a new worker
        if verdict.status == "fail":
            # one raise site for a first run and a replay: Hypothesis tells failures apart by where they rise
            raise _finding_type(verdict.failure_class)(case, verdict)

    return probe


def _hypothesis_test(subject: Subject, probe: Callable[[Case], None], *, max_examples: int, seed: int,
                     out_dir: str, database: bool, huge: "HugePlan | None") -> Callable[[], None]:
    db = DirectoryBasedExampleDatabase(os.path.join(out_dir, ".hypothesis")) if database else None
    test = settings(max_examples=max_examples, deadline=None, database=db, derandomize=False,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False,
                    verbosity=Verbosity.quiet,
                    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink))(
        given(cases(subject, huge=huge))(probe))
    mode = ":huge" if huge is not None else ""     # huge failures replay only in huge mode
    test._hypothesis_internal_database_key = f"tritondiff:{subject.name}:{subject.file}{mode}".encode()
    return hypothesis_seed(seed)(test)


def _search(test: Callable[[], None], failures: Failures) -> None:
    """Run the Hypothesis test; note the failure it raises at the end (its shrunk one) in ``failures``."""
    try:
        test()
    except Finding as e:
        failures.raised = (e.case, e.verdict)
    except _BudgetSpent:
        pass
    except Unsatisfiable:
        if failures.smallest() is None:
            raise
    except Exception:
        # e.g. Hypothesis's FlakyFailure when a replay fails differently (a crash that replays as a
        # hang on a loaded machine): the failures already recorded stand; anything else is ours.
        if failures.smallest() is None:
            raise
