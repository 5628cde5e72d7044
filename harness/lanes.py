"""A campaign's lanes: threads that each drive Hypothesis through their own worker process.

A lane (:class:`Lane`) pulls tasks -- (subject, shard) pairs with a time share --
from the campaign's scheduler and explores each with :func:`harness.explore.explore`
through its :class:`LaneExecutor`, a long-lived isolated worker process kept warm
across tasks.  Its :class:`Recorder` sees every example: it counts them and their
coverage (:class:`CoverageTally`, banked in the store every ``FLUSH_S``), commits
the first failing example of a task to the store at once, and installs the shrunk
one when the exploration ends.  Lanes talk to the coordinator (``harness.campaign``)
through :class:`LaneEvent` messages on its queue; the coordinator stops them by
setting their stop event and killing their worker (:class:`Stopped` unwinds the
lane's exploration).
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import math
import os
import shutil
import signal
import threading
import time
import uuid
from typing import TYPE_CHECKING, Callable, Iterator

from tritondiff.base import device
from .config import config
from .api import Subject
from .case import Case
from .coverage import COVERAGE_AXES, CoverageTally  # noqa: F401 - re-exported (older imports)
from .dump import dump_dir_for, write_dump
from .exc import HarnessError
from .executor import Isolated
from .explore import explore
from .loader import ref
from .runner import Verdict, enabled_hazards
from .tiers import tier_of
from .store import FindingRecord, Store, Task
from .strategies import example_cost
from .worker import Worker

if TYPE_CHECKING:
    from .campaign import _Campaign

MAX_EXAMPLES = 1_000_000       # per task: the budget, not a count, bounds a task
FLUSH_S = 2.0                  # how often a lane banks its example counts and coverage in the store
PREPARE_TIMEOUT_S = 300.0      # a lane's worker start-up (imports), whatever the example timeout


class Stopped(BaseException):
    """Raised inside a lane's exploration when the campaign stops it (Ctrl-C, hard deadline)."""


def lane_env(index: int, workers: int) -> dict[str, str]:
    share = str(max(1, (os.cpu_count() or 1) // workers))       # the host's cores, split between the lanes
    if device.MODE == "cuda":
        # CUDA's own variable: lanes split the GPUs this process may use, one each.  The compiler's compile
        # threads (one per core by default) split the cores, unless the user chose their number.
        ids = _visible_gpus()
        env = {"CUDA_VISIBLE_DEVICES": ids[index % len(ids)]} if ids else {}
        if "TRITONDIFF_COMPILE_WORKERS" not in os.environ:
            env["TRITONDIFF_COMPILE_WORKERS"] = share
        return env
    return {"OMP_NUM_THREADS": share}


def hang_limit_s(example_timeout_s: float | None, workers: int) -> float:
    """An example's hang limit in a campaign of ``workers`` lanes: the single-lane limit (``example_timeout_s``,
    else ``config.example_timeout_s``) times the lanes sharing a GPU (:func:`lanes_per_gpu`)."""
    return (example_timeout_s or config.example_timeout_s) * lanes_per_gpu(workers)


def lanes_per_gpu(workers: int) -> int:
    """How many lanes share one GPU (1 in the interpreter).  Processes on one GPU without MPS run in turn: an
    example that takes 7 s alone took over 120 s with 14 lanes on one H100, so the campaign gives each example that many times the hang limit."""
    if device.MODE != "cuda":
        return 1
    return max(1, math.ceil(workers / max(1, len(_visible_gpus()))))


def _visible_gpus() -> list[str]:
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return [v.strip() for v in visible.split(",") if v.strip()] if visible else \
        [str(i) for i in range(torch.cuda.device_count())]


# ---------------------------------------------------------------------------------------------- dumps

@contextlib.contextmanager
def dump_lock(root: str) -> Iterator[None]:
    """Serialise dump installation and finding bookkeeping (threads and processes alike)."""
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def install_dump(src: str, dst: str) -> None:
    """Move dump directory ``src`` to ``dst``, replacing what is there (two renames, never half a dump)."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    old = None
    if os.path.exists(dst):
        old = f"{dst}.old-{uuid.uuid4().hex[:8]}"
        os.rename(dst, old)
    os.rename(src, dst)
    if old:
        shutil.rmtree(old, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- lanes

class LaneExecutor(Isolated):
    """One lane's isolated executor: its own worker process, kept warm across tasks.

    Worker start-up (imports, then :func:`warm_up`) never runs on an example's
    clock.  Each task is a *slot* (``begin``): once it has run one example, an
    example that would start after the slot's end is answered ``"budget"`` (which
    ends the exploration, or its shrinking), and examples are cut short at the
    slot's end plus 20%; so a subject that crashes or hangs, whose worker must be
    restarted after every example, cannot keep a lane past its share.  The
    coordinator stops a lane by setting ``stop`` and killing the worker.
    """

    def __init__(self, env: dict[str, str], timeout_s: float | None, stop: threading.Event):
        super().__init__(timeout_s)
        self.worker = Worker(env=env)
        self.stop = stop
        self.slot_end = math.inf
        self.slack = 0.0
        self.ran = 0
        self.cut_short = False         # the current slot ended an exploration (or its shrinking) early
        self.start_cost = 0.0          # seconds the last worker (re)start took
        self._warm_pid: int | None = None

    def begin(self, budget_s: float) -> None:
        self.slot_end = time.monotonic() + budget_s
        self.slack = 0.2 * budget_s
        self.ran = 0
        self.cut_short = False

    def _call(self, target: str, *args) -> None:
        if self.stop.is_set():
            raise Stopped()
        res = self.worker.call(target, *args, timeout=max(PREPARE_TIMEOUT_S, self.timeout_s))
        if self.stop.is_set():
            raise Stopped()
        if res.status != "ok":
            what = f"load subject {args[0]['name']!r}" if args else "start"
            raise HarnessError(f"the worker could not {what}:\n{res.error}")

    def warm(self) -> None:
        """Start the worker and run the warm-up example (idempotent while the worker lives)."""
        if self._warm_pid is None or self.worker.pid != self._warm_pid:
            t0 = time.monotonic()
            self._call("tritondiff.harness.lanes:warm_up")
            self._warm_pid = self.worker.pid
            self.start_cost = time.monotonic() - t0

    def prepare(self, subject_ref: dict) -> None:
        self.warm()
        self._call("tritondiff.harness.executor:prepare", subject_ref)

    def run(self, subject_ref: dict, case: Case, hazards: frozenset, timeout_s: float | None = None) -> Verdict:
        if self.stop.is_set():
            raise Stopped()
        if self.ran and time.monotonic() >= self.slot_end:
            return self._over("the task's time slot is over")
        if self.worker.pid is None:   # replaced after a crash or a hang: re-import before the clock starts
            if self.ran and time.monotonic() + self.start_cost >= self.slot_end:
                return self._over("no time left in the slot to restart the worker")
            self.prepare(subject_ref)
        if self.ran:
            left = self.slot_end + self.slack - time.monotonic()
            if left <= 0:
                return self._over("the task's time slot is over")
            timeout_s = left if timeout_s is None else min(timeout_s, left)
        self.ran += 1
        try:
            verdict = super().run(subject_ref, case, hazards, timeout_s=timeout_s)
        except HarnessError:
            if self.stop.is_set():
                raise Stopped() from None
            raise
        if self.stop.is_set():        # the coordinator killed the worker to stop us: not a finding
            raise Stopped()
        return verdict

    def _over(self, why: str) -> Verdict:
        self.cut_short = True
        return Verdict("budget", message=why)

    def interrupt(self) -> None:
        pid = self.worker.pid
        if pid is None:
            return
        try:
            os.killpg(pid, signal.SIGKILL)    # the worker leads its own session
        except OSError:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def warm_up() -> None:
    """Worker target: judge one trivial example with every hazard hunter armed, so the lazy imports of
    the runner (torch._dynamo via torch.utils.deterministic, the sanitizer, ...) happen before the
    first real example's clock starts."""
    from .api import HAZARDS, Subject, Tolerance, tensor
    from .case import TensorCase
    from .runner import run_case

    def identity(x):
        return x.clone()

    subj = Subject(identity, reference=identity, inputs={"x": tensor(("N",))}, dims={"N": 4}, name="_warm_up",
                   tolerance=Tolerance(), mutates=(), deterministic=True, disable=(), max_example_bytes=None)
    case = Case({"N": 4}, {"x": TensorCase((4,), "float32", "contiguous", 0, "normal", 0, "")}, {})
    run_case(subj, case, frozenset(HAZARDS) - {"isolation"})


@dataclasses.dataclass
class LaneEvent:
    kind: str            # start | finding | done | error | lost (a Ray lane's actor died; its task is queued again)
    lane: int
    subject: str
    text: str = ""
    new: bool = False
    signature: str | None = None
    replaces: str | None = None      # a first sighting that shrank into this signature
    tier: str | None = None          # a finding's: "wrong" | "edge" (harness.tiers)
    examples: int = 0


class Lane(threading.Thread):
    """One lane: pulls tasks, explores them through its own isolated executor, records what it finds."""

    def __init__(self, campaign: "_Campaign", index: int):
        super().__init__(name=f"tritondiff-lane-{index}", daemon=True)
        self.c = campaign
        self.index = index
        self.stop_event = threading.Event()
        self.stop_reason = ""
        self.executor = LaneExecutor(lane_env(index, campaign.workers),
                                      hang_limit_s(campaign.example_timeout_s, campaign.workers), self.stop_event)
        self.current: tuple[Task, float, float] | None = None     # (task, budget, started)
        self.examples = 0
        self.failed: BaseException | None = None

    def stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.stop_event.set()
        self.executor.interrupt()

    def _count(self) -> None:
        self.examples += 1

    def _warm(self) -> None:
        self.executor.warm()

    def _close(self) -> None:
        self.executor.close()

    def run(self) -> None:
        store = Store(self.c.store_path)
        try:
            self._warm()        # worker start-up is campaign overhead, not a task's share
            while not self.stop_event.is_set():
                nxt = self.c.scheduler.next(self.index, store)
                if nxt is None:
                    return
                self._run_task(store, *nxt)
        except Stopped:
            return
        except BaseException as e:  # noqa: BLE001 - a harness bug in a lane must not hang the campaign
            self.failed = e
            self.c.events.put(LaneEvent("error", self.index, self.current[0].subject if self.current else "-",
                                     f"lane {self.index} failed: {type(e).__name__}: {e}"))
        finally:
            self.current = None
            with self.c.scheduler.lock:
                self.c.scheduler.active.discard(self.index)
                self.c.scheduler.busy_until.pop(self.index, None)
            self._close()
            store.close()

    def _run_task(self, store: Store, task: Task, budget: float) -> None:
        subject = self.c.subjects[task.subject]
        work = os.path.join(self.c.dump_root, ".work", str(os.getpid()), f"task-{task.id}-{uuid.uuid4().hex[:6]}")
        os.makedirs(work)
        store.start_task(task.id)
        started = time.monotonic()
        self.current = (task, budget, started)
        self.current_budget = budget
        self.c.events.put(LaneEvent("start", self.index, task.subject, f"shard {task.shard}, {budget:.0f} s"))
        commit = Committer(self, store, task, subject, work)
        rec = Recorder(self.stop_event, commit, task, subject, work, self.c.disabled, on_count=self._count)
        try:
            self._explore(store, task, budget, subject, rec, commit, started)
        finally:
            self.current = None
            shutil.rmtree(work, ignore_errors=True)

    def _explore(self, store: Store, task: Task, budget: float, subject: Subject, rec: "Recorder",
                 commit: "Committer", started: float) -> None:
        try:
            explored = self._exploration(task, budget, subject, rec)
        except Stopped:
            rec.flush()
            self._stopped(store, task, rec.examples, started, rec.first_signature)
            return
        except HarnessError as e:
            rec.flush()
            self._errored(store, task, e, rec.examples, started)
            return
        self._finished(store, task, commit, explored, rec.first_signature, started)

    def _exploration(self, task: Task, budget: float, subject: Subject, rec: "Recorder") -> "Explored":
        """Explore ``task`` here, through this lane's executor (a lane on a Ray actor explores there instead:
        ``harness.ray_lanes``)."""
        self.executor.warm()        # a worker the previous task's subject crashed restarts off this slot
        self.executor.begin(budget)
        # no example database: the store is the campaign's memory, and a resumed task re-runs its seed, so
        # a finding a killed run sighted before shrinking is found again, shrunk and its sighting replaced
        result = explore(subject, budget_s=budget, max_examples=MAX_EXAMPLES, seed=task.seed, out_dir=rec.work,
                         disabled=self.c.disabled, executor=self.executor, on_example=rec,
                         huge=self.c.plans.get(task.subject), database=False)
        rec.flush()
        return Explored.of(result, subject, partial=self.executor.cut_short)

    def _stopped(self, store: Store, task: Task, examples: int, started: float, first_signature: str | None) -> None:
        seconds = time.monotonic() - started
        if self.stop_reason == "cut":
            store.finish_task(task.id, status="done", outcome="cut", seconds=seconds, examples=examples,
                              signature=first_signature)
            self.c.events.put(LaneEvent("done", self.index, task.subject, f"cut at the deadline; {examples} "
                                     f"examples in {seconds:.1f} s", examples=examples))
        else:                 # interrupted: stays 'running', so a resume runs it again
            store.add_task_progress(task.id, seconds=seconds, examples=examples)

    def _errored(self, store: Store, task: Task, e: HarnessError, examples: int, started: float) -> None:
        seconds = time.monotonic() - started
        store.finish_task(task.id, status="error", outcome=None, seconds=seconds, examples=examples, error=str(e))
        self.c.scheduler.finished(task.subject, seconds, close=True)
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        self.c.events.put(LaneEvent("error", self.index, task.subject, f"harness error: {first}"))

    def _finished(self, store: Store, task: Task, commit: "Committer", explored: "Explored",
                  first_signature: str | None, started: float) -> None:
        seconds = time.monotonic() - started
        signatures = [commit.shrunk(found, superseded=first_signature if i == 0 else None,
                                    announce=i > 0 or first_signature != found.record.signature,
                                    partial=explored.partial)
                      for i, found in enumerate(explored.findings)]
        signature = signatures[0] if signatures else None
        store.finish_task(task.id, status="done", outcome=explored.status, seconds=seconds,
                          examples=explored.examples, signature=signature)
        exhausted = explored.status == "pass" and seconds < 0.5 * self.current_budget
        self.c.scheduler.finished(task.subject, seconds, close=bool(explored.findings) or exhausted)
        rate = explored.examples / seconds if seconds > 0 else 0.0
        if explored.status == "pass" and explored.examples == 0:
            verdict = f"no example finished within the {self.current_budget:.0f} s slot"
        elif explored.status == "pass":
            verdict = "pass" + (" (input space exhausted)" if exhausted else "")
            edge = sorted({f.record.failure_class for f in explored.findings})
            verdict += f" (edge only: {', '.join(edge)})" if edge else ""
        else:
            verdict = f"FAIL {explored.failure_class} on {explored.case_text}"
        self.c.events.put(LaneEvent("done", self.index, task.subject,
                                 f"{verdict}; {explored.examples} examples in {seconds:.1f} s ({rate:.2f}/s)",
                                 examples=explored.examples))


def finding_record(subject: Subject, case: Case, verdict: Verdict) -> FindingRecord:
    return FindingRecord(verdict.signature(subject.name), subject.name, verdict.failure_class, verdict.location,
                         verdict.message, case.to_json(), example_cost(case), verdict.details, ref(subject))


@dataclasses.dataclass
class Shrunk:
    """One finding of an exploration as it ended: its record, its dump folder on this machine (None: none was
    written), its tier."""

    record: FindingRecord
    dump: str | None
    tier: str


@dataclasses.dataclass
class Explored:
    """What exploring one task came to, wherever it ran: plain data the coordinator commits."""

    status: str                      # "pass" | "fail"
    examples: int
    failure_class: str | None
    case_text: str                   # the primary finding's case, described
    findings: list[Shrunk]
    partial: bool                    # the slot ran out: Hypothesis may not have finished shrinking

    @classmethod
    def of(cls, result, subject: Subject, *, partial: bool) -> "Explored":
        return cls(result.status, result.examples, result.failure_class,
                   result.case.describe() if result.case is not None else "",
                   [Shrunk(finding_record(subject, f.case, f.verdict), f.dump, f.tier) for f in result.findings],
                   partial)


class Committer:
    """Commits what a task's exploration saw -- its counts and coverage, its first sighting, its shrunk
    findings -- to the campaign's store and dump folder, and tells the coordinator.  Runs in the coordinator's
    process, wherever the exploration ran (a lane's thread here, a Ray actor elsewhere)."""

    def __init__(self, lane: Lane, store: Store, task: Task, subject: Subject, work: str):
        self.lane, self.store, self.task, self.subject, self.work = lane, store, task, subject, work
        self.c = lane.c
        self.source = f"campaign:{self.c.id}:task:{task.id}"

    def stats(self, examples: int, skipped: int, seconds: float, coverage: dict) -> None:
        self.store.add_stats(self.subject.name, examples=examples, skipped=skipped, seconds=seconds,
                             coverage=coverage)

    def first_sight(self, record: FindingRecord, tier: str, write: "Callable[[str], str]") -> None:
        """A task's first failing example, before shrinking: committed at once.  ``write(root)`` writes its dump
        under ``root`` and returns the folder; it runs only where the finding is new."""
        final = dump_dir_for(self.c.dump_root, self.subject.name, record.signature)
        with dump_lock(self.c.dump_root):
            if self.store.finding(record.signature) is None:
                install_dump(write(os.path.join(self.work, "first")), final)
                record.dump = final
            new, count = self.store.record_finding(record, source=self.source)
        self.c.events.put(LaneEvent("finding", self.lane.index, self.subject.name,
                                 _short(f"{record.failure_class}: {record.message}")
                                 + ("" if new else f" (seen {count}x)"),
                                 new=new, signature=record.signature, tier=tier))

    def shrunk(self, found: Shrunk, *, superseded: str | None, announce: bool, partial: bool) -> str:
        """Install one shrunk finding of the task; returns its signature.  It supersedes the first sighting it
        shrank from (``superseded``); ``announce``: tell the coordinator (a finding other than that sighting)."""
        record = found.record
        final = dump_dir_for(self.c.dump_root, self.subject.name, record.signature)
        with dump_lock(self.c.dump_root):
            state = "partial" if partial else "minimal"
            wanted = found.dump is not None and self.store.wants(record.signature, record.case_size, state)
            if wanted:
                install_dump(found.dump, final)
                record.dump = final
            # the shrunk sighting and the withdrawal of the first one commit together: a SIGKILL between
            # two transactions left the first finding superseded and the shrunk one not yet recorded
            # (and a better case replaces the stored one in that transaction too)
            new, _ = self.store.record_finding(record, source=self.source, state=state if wanted else "first_seen",
                                               replaces=superseded, improve=wanted)
        if announce:
            self.c.events.put(LaneEvent("finding", self.lane.index, self.subject.name,
                                     _short(f"{record.failure_class}: {record.message}"), new=new,
                                     signature=record.signature, replaces=superseded, tier=found.tier))
        return record.signature


class Recorder:
    """``on_example`` of one task's exploration, where it runs: counts, coverage (banked in ``sink`` every
    ``FLUSH_S``), the first failure handed to ``sink`` at once, stop checks.  ``sink`` is the task's
    :class:`Committer`, or for a lane on a Ray actor whatever carries these calls to it."""

    def __init__(self, stop: threading.Event, sink, task: Task, subject: Subject, work: str,
                 disabled: frozenset, on_count: "Callable[[], None] | None" = None):
        self.stop, self.sink, self.task, self.subject, self.work = stop, sink, task, subject, work
        self.disabled, self.on_count = disabled, on_count
        self.tally = CoverageTally()
        self.examples = 0
        self.last_flush = time.monotonic()
        self.first_signature: str | None = None

    def __call__(self, case: Case, verdict: Verdict) -> None:
        if self.stop.is_set():
            raise Stopped()
        self.examples += 1
        if self.on_count is not None:
            self.on_count()
        self.tally.observe(case, verdict)
        if verdict.status == "fail" and self.first_signature is None:
            self._first_sight(case, verdict)
        if time.monotonic() - self.last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        now = time.monotonic()
        examples, skipped, coverage = self.tally.take()
        self.sink.stats(examples, skipped, now - self.last_flush, coverage)
        self.last_flush = now

    def _first_sight(self, case: Case, verdict: Verdict) -> None:
        record = finding_record(self.subject, case, verdict)
        self.first_signature = record.signature

        def write(root: str) -> str:
            return write_dump(root, self.subject, ref(self.subject), case, verdict, seed=self.task.seed,
                              hazards=enabled_hazards(self.subject, self.disabled))
        self.sink.first_sight(record, tier_of(case, verdict.failure_class), write)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
