"""Fuzz one subject with Hypothesis under a wall-clock budget; shrink and dump each distinct finding.

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
over every class.  That is one search; the exploration then searches again,
passing by what it found (by tier and class, :func:`finding_key`), until the
budget or ``max_findings`` runs out -- after an ``edge`` finding in the
normal-range values first (:mod:`harness.tiers`), so that it cannot hide a
``wrong`` one.  The first edge sighting of the whole-space search is not shrunk
there: shrinking costs dozens of examples (minutes on a GPU, where each new
shape compiles), which would leave the normal-range search no budget.  The
search stops at the sighting; the normal range is searched, for at most half
the budget left (where a wrong failure its control run revealed is found again
and shrunk); then the whole space again, where the edge failure is found and
shrunk as any other -- or, when the budget runs out first, the sighting is
reported as it was seen.
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

from . import baseline
from .api import Subject, runnable_here
from .case import Case
from .config import config
from .counters import counters
from .coverage import ALLOWANCES, CoverageTally
from .coverage import summary as coverage_summary
from .dump import write_dump
from .exc import SubjectFailed, UsageError
from .executor import Executor, make_executor
from .loader import ref
from .packs import named
from .runner import Verdict, enabled_hazards
from .strategies import cases, example_cost
from .tiers import normalized, tier_of

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
    """An exploration's outcome.  Its failure fields describe the primary finding (the first ``wrong``
    one, else the first ``edge`` one); ``findings`` holds every finding, each a result of its own."""

    subject: str
    status: str                       # "pass" | "fail" (a wrong finding; an edge one too when strict)
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
    tier: str | None = None           # "wrong" | "edge" (harness.tiers)
    findings: list = dataclasses.field(default_factory=list)
    covered: str = ""                 # what the examples exercised (harness.coverage.summary)
    untested: list = dataclasses.field(default_factory=list)   # parts of the declared space never drawn
    accepted: str | None = None       # the baseline's reason, where the finding's signature is accepted

    def line(self) -> str:
        stats = f"{self.examples} examples, {self.skipped} skipped, {self.seconds:.1f} s, seed {self.seed}"
        tally = self.coverage.get("allowance", {})
        loosened = [f"{k}: {tally[k]}" for k in ALLOWANCES[1:] if tally.get(k)]
        if loosened:                 # passes that needed the oracle's allowances say so (harness.coverage)
            stats += "; passed on " + ", ".join(loosened)
        if self.status == "pass":
            head = f"pass  {self.subject}  ({stats})"
        else:
            head = (f"FAIL  {self.subject}  {self.failure_class}: {self.message}  ({stats})\n"
                    f"      dump: {self.dump}")
        others = [f for f in self.findings if f.dump != self.dump]
        lines = [head, *(f.finding_line() for f in others)]
        if self.covered:
            lines.append(f"      covered: {self.covered}")
        if self.untested:
            lines.append(f"      untested: {'; '.join(self.untested)}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        """The verdict as plain data (``tritondiff check --json``): the run's status and stats, every
        finding, and the coverage."""
        def finding(f: "SubjectResult") -> dict:
            return {"tier": f.tier, "failure_class": f.failure_class, "fails_run": f.status == "fail",
                    "accepted": f.accepted,
                    "message": f.message, "signature": f.signature, "case": f.case.describe() if f.case else None,
                    "dump": f.dump}

        return {"subject": self.subject, "status": self.status, "examples": self.examples, "skipped": self.skipped,
                "seconds": round(self.seconds, 3), "seed": self.seed,
                "primary": finding(self) if self.status == "fail" else None,
                "findings": [finding(f) for f in self.findings], "covered": self.covered,
                "untested": list(self.untested), "coverage": self.coverage}

    def finding_line(self) -> str:
        """One line for a finding beside the primary one: ``also`` when it fails the run too, ``warn`` for an
        edge finding that does not (not strict)."""
        if self.accepted:
            return (f"accepted  {self.subject}  {self.tier} {self.failure_class} ({self.accepted}): "
                    f"{_one_line(self.message)}  dump: {self.dump}")
        tag = "also" if self.status == "fail" else "warn"
        return f"{tag}  {self.subject}  {self.tier} {self.failure_class}: {_one_line(self.message)}  dump: {self.dump}"


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


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

    def __init__(self, verdicts: dict[str, Verdict] | None = None):
        self.smallest_by_class: dict[str, tuple[tuple[int, int], Case, Verdict]] = {}
        self.count: Counter = Counter()
        self.raised: tuple[Case, Verdict] | None = None
        self.stopped_by: tuple[Case, Verdict] | None = None
        self._verdicts: dict[str, Verdict] = {} if verdicts is None else verdicts   # shared by an exploration's searches

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
        self.ignored: set[tuple[str, str]] = set()   # finding keys already found: later searches pass them by
        self.deferred = False                    # the last search stopped at an edge sighting, unshrunk


def new_seed() -> int:
    """A fresh Hypothesis seed for a run given none (recorded, so ``--seed`` can replay the run)."""
    return secrets.randbits(31)


def explore(subject: Subject, *, budget_s: float | None = None, max_examples: int = 10_000,
            seed: int | None = None, out_dir: str | None = None, disabled: frozenset = frozenset(),
            executor: Executor | None = None, database: bool | str = True,
            on_example: Callable[[Case, Verdict], None] | None = None,
            on_finding: Callable[["SubjectResult"], None] | None = None,
            huge: "HugePlan | None" = None, strict: bool | None = None,
            max_findings: int | None = None) -> SubjectResult:
    """Search ``subject``'s input space for failures; shrink and dump each distinct one.

    The search goes on after a finding, within the budget, for up to ``max_findings``
    (``config.max_findings``) distinct ones -- distinct by tier and failure class
    (:mod:`harness.tiers`) -- and an ``edge`` finding never hides a ``wrong`` one: after an
    edge finding the next search draws normal-range values only.  The result fails on a
    wrong finding, and on an edge one too when ``strict`` (``config.strict``);
    ``on_finding`` gets each finding's result as it is dumped.

    ``seed`` seeds Hypothesis; without one a fresh seed is drawn
    (:func:`new_seed`) and recorded in the result and the dump's ``summary.json``.
    ``database``: Hypothesis's example database, ``<out_dir>/.hypothesis`` (or the folder given); the
    failures saved there by earlier runs replay first, whatever the seed.  False: none.
    ``huge`` (a :class:`harness.huge.HugePlan`) draws the subject's size dim past
    2^31 elements; with ``config.huge_shapes`` on and no plan, one is made from
    the free GPU memory now.  Huge mode runs on CUDA only
    (:class:`~harness.exc.HugeShapesUnavailable` otherwise, before anything runs).
    """
    why = runnable_here(subject)
    if why is not None:
        raise UsageError(f"{subject.name}: {why}; Triton's interpreter runs the kernels here (no GPU, or "
                         "TRITON_INTERPRET=1): run it on a CUDA machine")
    timeout_s = None
    if huge is not None or config.huge_shapes:
        from . import huge as huge_shapes

        huge_shapes.require_cuda()
        huge = huge or huge_shapes.plan_on_device(subject)
        timeout_s = max(config.example_timeout_s, huge_shapes.EXAMPLE_TIMEOUT_S)
    budget_s = config.budget_s if budget_s is None else budget_s
    out_dir = out_dir or config.out_dir
    seed = new_seed() if seed is None else seed
    strict = config.strict if strict is None else strict
    max_findings = config.max_findings if max_findings is None else max_findings
    hazards = enabled_hazards(subject, disabled)
    own_executor = executor is None
    executor = executor or make_executor(hazards, timeout_s)
    subject_ref = ref(subject)
    executor.prepare(subject_ref)             # worker start-up and imports are not the subject's budget
    state = _State()
    start = time.monotonic()
    deadline = start + budget_s
    findings: list[SubjectResult] = []
    normal = False                            # the first search draws the whole declared space
    normal_done = False                       # the normal-range values are searched once at most
    deferred = None                           # an edge sighting left unshrunk while the normal range is searched
    search_deadline = deadline                # the normal range after a deferred sighting: half what is left
    try:
        for search in range(2 * max_findings + 2):
            normal_done = normal_done or normal
            state.failures = Failures(state.failures._verdicts)      # a failing case runs once per exploration
            defer = not normal and not normal_done and not any(f.tier == "wrong" for f in findings)
            probe = _probe(state, executor, subject_ref, hazards, search_deadline, budget_s, on_example,
                           defer_edge=defer)
            search_deadline = deadline
            test = _hypothesis_test(subject, probe, max_examples=max_examples, seed=seed + search, out_dir=out_dir,
                                    database=database, huge=huge.led_by(seed + search) if huge else None,
                                    normal=normal, reuse=search == 0)
            try:
                _search(test, state.failures)
            except Unsatisfiable:
                if findings or state.coverage.examples > state.coverage.skipped:
                    break                     # this space is used up; what was found stands
                _unsatisfiable(subject, state)
            failure = state.failures.report()
            if failure is None:
                if not normal:
                    break                     # the whole space passed within the budget
                normal = False                # the normal range passed: the rest of the space, found ones aside
                continue
            sighted = finding_key(failure[0], failure[1])
            failure = _wrong_without_the_edge(failure, executor, subject_ref, hazards, deadline, budget_s,
                                              state.coverage)
            key = finding_key(failure[0], failure[1])
            if state.deferred and time.monotonic() < deadline:
                # an unshrunk edge sighting: the normal range first, then the whole space again, where each
                # failure is sighted once more and shrunk -- the wrong one of a failing control run too --;
                # reported as seen if the budget runs out before
                state.deferred, deferred, normal = False, failure, True
                now = time.monotonic()
                search_deadline = now + (deadline - now) / 2     # the other half shrinks the sighting
                continue
            state.deferred = False
            # an edge sighting whose control run fails is that wrong finding: both keys are done, and a wrong
            # finding already made is not made twice (the next search sighted the edge case again and reported
            # the same wrong finding into the same dump folder)
            state.ignored.update({sighted, key})
            if key in {finding_key(f.case, f.verdict) for f in findings}:
                continue
            found = _finding(subject, subject_ref, failure, seed, out_dir, hazards, strict)
            findings.append(found)
            if on_finding is not None:
                on_finding(found)
            if len(findings) >= max_findings or time.monotonic() >= deadline:
                break
            # an edge finding must not hide a wrong one: look in the normal range first
            normal = not normal_done and found.tier == "edge" and not any(f.tier == "wrong" for f in findings)
        if deferred is not None and finding_key(*deferred) not in {finding_key(f.case, f.verdict) for f in findings} \
                and len(findings) < max_findings:
            found = _finding(subject, subject_ref, deferred, seed, out_dir, hazards, strict)
            findings.append(found)
            if on_finding is not None:
                on_finding(found)
    finally:
        if own_executor:
            executor.close()
    tally = state.coverage
    covered, untested = coverage_summary(subject, tally)
    if tally.skipped * 2 > tally.examples:
        untested.insert(0, f"the reference raised on {tally.skipped} of {tally.examples} examples, which were not "
                           f"judged (last: {state.last_skip or 'no message'}); declare the inputs it accepts")
    result = SubjectResult(subject.name, "pass", tally.examples, tally.skipped, time.monotonic() - start,
                           seed=seed, coverage=tally.counts(), findings=findings, covered=covered, untested=untested)
    failing = [f for f in findings if f.status == "fail"]
    if failing:
        primary = next((f for f in failing if f.tier == "wrong"), failing[0])
        result.status = "fail"
        for name in ("failure_class", "message", "signature", "dump", "case", "verdict", "tier"):
            setattr(result, name, getattr(primary, name))
    return result


def finding_key(case: Case, verdict: Verdict) -> tuple[str, str]:
    """What makes findings distinct within one exploration: tier and failure class (a second mismatch
    on normal inputs is the same bug seen elsewhere; a wrong one beside an edge one is not)."""
    return tier_of(case, verdict.failure_class), verdict.failure_class or "unknown"


def _wrong_without_the_edge(failure: tuple[Case, Verdict], executor: Executor, subject_ref: dict,
                            hazards: frozenset, deadline: float, budget_s: float,
                            tally: CoverageTally | None = None) -> tuple[Case, Verdict]:
    """An edge finding's control run: its case with the edge inputs made ordinary
    (:func:`~harness.tiers.normalized`; an example like any other, counted in ``tally``).  When that fails
    too, the finding is that ``wrong`` one."""
    case, verdict = failure
    control = normalized(case) if tier_of(case, verdict.failure_class) == "edge" else None
    if control is None:
        return failure
    again = executor.run(subject_ref, control, hazards, timeout_s=max(0.0, deadline - time.monotonic()) + 0.2 * budget_s)
    if tally is not None and again.status != "budget":
        tally.observe(control, again)
    return (control, again) if again.status == "fail" else failure


def _finding(subject: Subject, subject_ref: dict, failure: tuple[Case, Verdict], seed: int, out_dir: str,
             hazards: frozenset, strict: bool) -> SubjectResult:
    """A finding's own result, its dump written."""
    case, verdict = failure
    tier = tier_of(case, verdict.failure_class)
    signature = verdict.signature(subject.name)
    accepted = baseline.reason(signature)
    fails = (tier == "wrong" or strict) and accepted is None
    found = SubjectResult(subject.name, "fail" if fails else "pass", seed=seed,
                          failure_class=verdict.failure_class, message=verdict.message,
                          signature=signature, case=case, verdict=verdict, tier=tier, accepted=accepted)
    verdict.details.setdefault("tier", tier)
    counters["findings"] += 1
    found.dump = write_dump(out_dir, subject, subject_ref, case, verdict, seed=seed, hazards=hazards)
    verdict.dump = found.dump
    return found


def _unsatisfiable(subject: Subject, state: "_State") -> None:
    """Hypothesis gave up: every draw was rejected, before any example was judged."""
    if not state.coverage.skipped:
        raise UsageError(f"{subject.name}: no drawn dims satisfied its where= predicates; widen the dims "
                         "or relax the predicates") from None
    raise UsageError(f"{subject.name}: every example drawn was outside the subject's domain "
                     f"({state.coverage.skipped} drawn, the reference raised on each; last: "
                     f"{state.last_skip or 'no message'}); declare the dims, dtypes and values the "
                     "reference accepts") from None


def check(subject: Subject | str, **options) -> SubjectResult:
    """Fuzz ``subject`` (a :class:`Subject`, or the name of a registered or bundled one) as
    :func:`explore` does, with the same keyword options; return the passing result, or raise
    :class:`~harness.exc.SubjectFailed` carrying the failing one."""
    if isinstance(subject, str):
        found = named(subject)
        if found is None:
            raise UsageError(f"no subject named {subject!r}: declare it with @subject(...) (or import the file "
                             "that does) before check({subject!r})")
        subject = found
    if not isinstance(subject, Subject):
        raise UsageError(f"check() takes a @subject-declared function or a subject's name, got "
                         f"{type(subject).__name__}; declare the kernel's entry point with @subject(...)")
    result = explore(subject, **options)
    if result.status != "pass":
        raise SubjectFailed(result)
    return result


def _probe(state: _State, executor: Executor, subject_ref: dict, hazards: frozenset, deadline: float,
           budget_s: float, on_example: Callable[[Case, Verdict], None] | None, *,
           defer_edge: bool = False) -> Callable[[Case], None]:
    """The body of the Hypothesis test: run one example, record it, raise :class:`Finding` when it fails.
    ``defer_edge``: an edge-tier failure stops the search unshrunk (``state.deferred``; see the module
    docstring) instead."""

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
            if verdict.status == "fail" and finding_key(case, verdict) in state.ignored:
                return                                  # found already: look for another
            if verdict.status == "fail":
                state.failures.add(case, verdict)
                if verdict.failure_class in ("hang", "crash"):
                    state.failures.stopped_by = (case, verdict)
                    raise _BudgetSpent()             # each shrink attempt would cost a timeout / a new worker
                if defer_edge and tier_of(case, verdict.failure_class) == "edge":
                    state.failures.stopped_by, state.deferred = (case, verdict), True
                    raise _BudgetSpent()             # shrunk later, after the normal range is searched
        if verdict.status == "fail" and finding_key(case, verdict) not in state.ignored:
            # one raise site for a first run and a replay: Hypothesis tells failures apart by where they rise
            raise _finding_type(verdict.failure_class)(case, verdict)

    return probe


def _hypothesis_test(subject: Subject, probe: Callable[[Case], None], *, max_examples: int, seed: int,
                     out_dir: str, database: bool | str, huge: "HugePlan | None",
                     normal: bool = False, reuse: bool = True) -> Callable[[], None]:
    """The Hypothesis test of one search.  ``reuse``: replay the database's saved failures first (the first
    search of an exploration; a later one looks for other findings, and saves what it finds)."""
    folder = database if isinstance(database, str) else os.path.join(out_dir, ".hypothesis")
    db = DirectoryBasedExampleDatabase(folder) if database else None
    # the settings go on after the seed: @seed alone turns the example database off, and a run with a seed
    # (every run has one, drawn when none is given) must still replay the failures saved by earlier runs
    test = settings(max_examples=max_examples, deadline=None, database=db, derandomize=False,
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False,
                    verbosity=Verbosity.quiet,
                    phases=(Phase.explicit, *([Phase.reuse] if reuse else []), Phase.generate, Phase.target,
                            Phase.shrink))(
        hypothesis_seed(seed)(given(cases(subject, huge=huge, normal=normal))(probe)))
    mode = (":huge" if huge is not None else "") + (":normal" if normal else "")   # each space replays its own
    test._hypothesis_internal_database_key = f"tritondiff:{subject.name}:{subject.file}{mode}".encode()
    return test


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
