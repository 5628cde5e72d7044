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
from typing import TYPE_CHECKING, Iterator

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
    if device.MODE == "cuda":
        # CUDA's own variable: lanes split the GPUs this process may use, one each.
        ids = _visible_gpus()
        return {"CUDA_VISIBLE_DEVICES": ids[index % len(ids)]} if ids else {}
    return {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // workers))}


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
    kind: str            # start | finding | done | error
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

    def run(self) -> None:
        store = Store(self.c.store_path)
        try:
            self.executor.warm()        # worker start-up is campaign overhead, not a task's share
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
            self.executor.close()
            store.close()

    def _run_task(self, store: Store, task: Task, budget: float) -> None:
        subject = self.c.subjects[task.subject]
        work = os.path.join(self.c.dump_root, ".work", str(os.getpid()), f"task-{task.id}-{uuid.uuid4().hex[:6]}")
        os.makedirs(work)
        store.start_task(task.id)
        started = time.monotonic()
        self.current = (task, budget, started)
        self.c.events.put(LaneEvent("start", self.index, task.subject, f"shard {task.shard}, {budget:.0f} s"))
        rec = Recorder(self, store, task, subject, work)
        try:
            self._explore(store, task, budget, subject, rec, started)
        finally:
            self.current = None
            shutil.rmtree(work, ignore_errors=True)

    def _explore(self, store: Store, task: Task, budget: float, subject: Subject, rec: "Recorder",
                 started: float) -> None:
        try:
            self.executor.warm()        # a worker the previous task's subject crashed restarts off this slot
            self.executor.begin(budget)
            # no example database: the store is the campaign's memory, and a resumed task re-runs its seed, so
            # a finding a killed run sighted before shrinking is found again, shrunk and its sighting replaced
            result = explore(subject, budget_s=budget, max_examples=MAX_EXAMPLES, seed=task.seed, out_dir=rec.work,
                             disabled=self.c.disabled, executor=self.executor, on_example=rec,
                             huge=self.c.plans.get(task.subject), database=False)
        except Stopped:
            rec.flush()
            seconds = time.monotonic() - started
            if self.stop_reason == "cut":
                store.finish_task(task.id, status="done", outcome="cut", seconds=seconds, examples=rec.examples,
                                  signature=rec.first.signature if rec.first else None)
                self.c.events.put(LaneEvent("done", self.index, task.subject, f"cut at the deadline; {rec.examples} "
                                         f"examples in {seconds:.1f} s", examples=rec.examples))
            else:                 # interrupted: stays 'running', so a resume runs it again
                store.add_task_progress(task.id, seconds=seconds, examples=rec.examples)
            return
        except HarnessError as e:
            rec.flush()
            seconds = time.monotonic() - started
            store.finish_task(task.id, status="error", outcome=None, seconds=seconds, examples=rec.examples,
                              error=str(e))
            self.c.scheduler.finished(task.subject, seconds, close=True)
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            self.c.events.put(LaneEvent("error", self.index, task.subject, f"harness error: {first}"))
            return
        rec.flush()
        seconds = time.monotonic() - started
        signatures = [rec.finalize(found, first=i == 0) for i, found in enumerate(result.findings)]
        signature = signatures[0] if signatures else None
        store.finish_task(task.id, status="done", outcome=result.status, seconds=seconds, examples=result.examples,
                          signature=signature)
        exhausted = result.status == "pass" and seconds < 0.5 * budget
        self.c.scheduler.finished(task.subject, seconds, close=bool(result.findings) or exhausted)
        rate = result.examples / seconds if seconds > 0 else 0.0
        if result.status == "pass" and result.examples == 0:
            verdict = f"no example finished within the {budget:.0f} s slot"
        elif result.status == "pass":
            verdict = "pass" + (" (input space exhausted)" if exhausted else "")
            edge = sorted({f.failure_class for f in result.findings})
            verdict += f" (edge only: {', '.join(edge)})" if edge else ""
        else:
            verdict = f"FAIL {result.failure_class} on {result.case.describe()}"
        self.c.events.put(LaneEvent("done", self.index, task.subject,
                                 f"{verdict}; {result.examples} examples in {seconds:.1f} s ({rate:.2f}/s)",
                                 examples=result.examples))


class Recorder:
    """``on_example`` of one task: counts, coverage, the first failure committed at once, stop checks."""

    def __init__(self, lane: Lane, store: Store, task: Task, subject: Subject, work: str):
        self.lane, self.store, self.task, self.subject, self.work = lane, store, task, subject, work
        self.c = lane.c
        self.source = f"campaign:{self.c.id}:task:{task.id}"
        self.tally = CoverageTally()
        self.examples = 0
        self.last_flush = time.monotonic()
        self.first: FindingRecord | None = None

    def __call__(self, case: Case, verdict: Verdict) -> None:
        if self.lane.stop_event.is_set():
            raise Stopped()
        self.examples += 1
        self.lane.examples += 1
        self.tally.observe(case, verdict)
        if verdict.status == "fail" and self.first is None:
            self._first_sight(case, verdict)
        if time.monotonic() - self.last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        now = time.monotonic()
        examples, skipped, coverage = self.tally.take()
        self.store.add_stats(self.subject.name, examples=examples, skipped=skipped, seconds=now - self.last_flush,
                             coverage=coverage)
        self.last_flush = now

    def _record(self, case: Case, verdict: Verdict) -> FindingRecord:
        return FindingRecord(verdict.signature(self.subject.name), self.subject.name, verdict.failure_class,
                             verdict.location, verdict.message, case.to_json(), example_cost(case),
                             verdict.details, ref(self.subject))

    def _first_sight(self, case: Case, verdict: Verdict) -> None:
        record = self._record(case, verdict)
        final = dump_dir_for(self.c.dump_root, self.subject.name, record.signature)
        with dump_lock(self.c.dump_root):
            if self.store.finding(record.signature) is None:
                tmp_root = os.path.join(self.work, "first")
                src = write_dump(tmp_root, self.subject, ref(self.subject), case, verdict, seed=self.task.seed,
                                 hazards=enabled_hazards(self.subject, self.c.disabled))
                install_dump(src, final)
                record.dump = final
            new, count = self.store.record_finding(record, source=self.source)
        self.first = record
        self.c.events.put(LaneEvent("finding", self.lane.index, self.subject.name,
                                 _short(f"{record.failure_class}: {record.message}")
                                 + ("" if new else f" (seen {count}x)"),
                                 new=new, signature=record.signature, tier=tier_of(case, verdict.failure_class)))

    def finalize(self, result, *, first: bool = True) -> str:
        """Install the shrunk case of one finding of the task; returns its signature.  The task's first
        finding supersedes the first sighting it shrank from (``first``); the others stand beside it."""
        record = self._record(result.case, result.verdict)
        superseded = self.first.signature if first and self.first is not None else None
        final = dump_dir_for(self.c.dump_root, self.subject.name, record.signature)
        with dump_lock(self.c.dump_root):
            # the slot ran out (an example answered "budget"): Hypothesis may not have finished shrinking
            state = "partial" if self.lane.executor.cut_short else "minimal"
            wanted = result.dump is not None and self.store.wants(record.signature, record.case_size, state)
            if wanted:
                install_dump(result.dump, final)
                record.dump = final
            # the shrunk sighting and the withdrawal of the first one commit together: a SIGKILL between
            # two transactions left the first finding superseded and the shrunk one not yet recorded
            # (and a better case replaces the stored one in that transaction too)
            new, _ = self.store.record_finding(record, source=self.source, state=state if wanted else "first_seen",
                                               replaces=superseded, improve=wanted)
        if not first or self.first is None or self.first.signature != record.signature:
            self.c.events.put(LaneEvent("finding", self.lane.index, self.subject.name,
                                     _short(f"{record.failure_class}: {record.message}"), new=new,
                                     signature=record.signature, replaces=superseded, tier=result.tier))
        return record.signature


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
