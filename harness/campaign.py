"""The fuzz campaign: many subjects, one wall-clock budget, parallel lanes, a findings store, resume.

How a campaign runs
-------------------
``run_campaign`` turns the targets into subjects and plans *tasks*, one per
(subject, shard); a shard is a Hypothesis seed derived from the campaign seed,
so a task explores the same sequence of examples whenever it is re-run.  With
fewer subjects than lanes, each subject gets several shards.

``workers`` lanes pull tasks (:mod:`harness.lanes`).  A lane is a thread of this
process that drives Hypothesis (:func:`harness.explore.explore`) and owns one
isolated executor: a long-lived worker *process* (pinned to one GPU on CUDA) in
which every example runs.  So ``W`` lanes are ``W`` processes executing kernels in parallel, and a
segfault or a hang costs one example of one lane, never the campaign.

Budget: the campaign's total wall time, counted from the moment the first
lane's worker is warm (process start-up and imports are not fuzzing time; they
take seconds).  A lane starting a task gets the fair share of the lane-seconds
left (``_Scheduler.next``); when the planned tasks are done and time is left,
idle lanes explore new shards of the subjects that have not failed yet.  Each
task is a time slot (``lanes.LaneExecutor``); an example that started in time may
finish after it, and past ``deadline + grace`` the remaining lanes are cut.

Findings: the first failing example of a task is committed to the store (and
dumped) at once, before shrinking; when shrinking ends the shrunk case replaces
it (or, if it shrank to another signature, the first sighting is withdrawn).
Every write is one committed SQLite transaction, so SIGKILL at any moment loses
nothing already committed.

Resume: the campaign row records options, seed, budget and time spent (a
heartbeat every second); tasks record their status.  ``resume=True`` takes the
latest unfinished campaign, puts its unfinished tasks back in the queue (same
seeds: they find again what they had found, and shrink it) and spends
what is left of the budget.  Ctrl-C stops the lanes, banks their progress and
leaves the campaign resumable.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import os
import queue
import secrets
import shutil
import sys
import threading
import time
import zlib
from collections import Counter, deque
from typing import Callable, Sequence, TextIO

from tritondiff.base import device
from . import baseline
from . import huge as huge_shapes
from .api import HAZARDS, Subject, runnable_here
from .config import config
from .display import Display, clock
from .exc import UsageError
from .lanes import Lane, LaneEvent, hang_limit_s, lanes_per_gpu
from . import packs
from .loader import bundled, load_file, ref, resolve, subjects_in
from .store import Store, Task

DEFAULT_BUDGET_S = 600.0
MIN_TASK_S = 1.0               # no task gets less (the first example always runs anyway)
MIN_EXTRA_S = 3.0              # an idle lane starts an extra shard only with this much time left
HEARTBEAT_S = 1.0              # how often the campaign banks the time spent


# ---------------------------------------------------------------------------------------------- targets

def _names_a_file(path: str, pool: Callable[[], dict[str, Subject]]) -> bool:
    """Is the target ``path`` a subject file?  A folder never is; a ``.py`` name or one with a folder in it is.
    A bare name is a file only where a regular file of that name is here and no bundled subject matches it:
    a campaign writes each finding's dump into a folder named after its subject (``compiler.nrm2/``), and
    running the next campaign from that folder must still find the subject."""
    if os.path.isdir(path):
        return False
    if path.endswith(".py") or os.path.sep in path:
        return True
    return os.path.isfile(path) and not any(fnmatch.fnmatchcase(n, path) for n in pool())


def resolve_targets(targets: Sequence[str]) -> list[Subject]:
    """Subjects named by ``targets``: subject files (``file.py`` or ``file.py::name``), bundled subject
    names or globs (``nrm2*``); nothing means every bundled subject."""
    if isinstance(targets, str):
        raise UsageError(f"targets must be a list of strings, got the string {targets!r}")
    pool: dict[str, Subject] | None = None
    out: list[Subject] = []
    for target in targets:
        if not isinstance(target, str) or not target.strip():
            raise UsageError(f"target {target!r} is not a subject file, name or glob")
        path, _, name = target.partition("::")
        if os.path.isdir(path):        # a dump folder, typed as the shell completes it (compiler.nrm2/): its name
            target = path = os.path.basename(os.path.normpath(path))
        if _names_a_file(path, lambda: bundled() if pool is None else pool):
            found = subjects_in(load_file(path))
            if not found:
                raise UsageError(f"{path}: no @subject functions found")
            if name:
                found = [s for s in found if fnmatch.fnmatchcase(s.name, name)]
                if not found:
                    raise UsageError(f"{path}: no subject matches {name!r}")
        else:
            pool = bundled() if pool is None else pool
            pool = {**pool, **packs.subjects_for(target)}
            found = [s for n, s in pool.items() if fnmatch.fnmatchcase(n, target)]
            if not found:
                raise UsageError(f"unknown target {target!r}: not a subject file and no bundled subject matches "
                                 f"it ({_known_names(target, pool)})")
        out.extend(found)
    if not targets:
        out = list(bundled().values())
        if not out:
            raise UsageError("no bundled subjects yet (tritondiff.harness.subjects.kernels / tritondiff.harness.subjects.compiler define none); "
                             "name a subject file: tritondiff fuzz path/to/subjects.py")
    unique: dict[str, Subject] = {}
    for s in out:
        other = unique.setdefault(s.name, s)
        if other is not s and (other.module, other.file) != (s.module, s.file):
            raise UsageError(f"two different subjects are named {s.name!r} ({other.file or other.module} and "
                             f"{s.file or s.module}); findings are keyed by name, so rename one")
    return list(unique.values())


def runnable(subjects: Sequence[Subject], say: Callable[[str], None]) -> list[Subject]:
    """The ``subjects`` that can run here; ``say`` gets a line for each one skipped (a GPU-only subject under
    the interpreter).  None left: UsageError with the reasons."""
    out, skipped = [], []
    for subj in subjects:
        why = runnable_here(subj)
        if why is None:
            out.append(subj)
        else:
            skipped.append(subj.name)
            say(f"skip  {subj.name}: {why}")
    if subjects and not out:
        raise UsageError(f"no target can run here: {len(skipped)} GPU-only subject(s) and Triton's interpreter "
                         "runs the kernels (no GPU, or TRITON_INTERPRET=1); run them on a CUDA machine")
    return out


def name_groups(names) -> dict[str, list[str]]:
    """Subject names grouped by their first dotted part (``kernels.nrm2`` under ``kernels.*``), sorted;
    names without a dot (subjects of a file) under ``(no prefix)``."""
    groups: dict[str, list[str]] = {}
    for name in sorted(names):
        head, dot, _ = name.partition(".")
        groups.setdefault(f"{head}.*" if dot else "(no prefix)", []).append(name)
    return groups


def format_name_groups(names, *, width: int = 100) -> str:
    """One paragraph per prefix group: ``kernels.* (13): layer_norm, layer_norm_backward, ...``."""
    import textwrap

    out = []
    for group, members in name_groups(names).items():
        cut = len(group) - 1 if group.endswith(".*") else 0          # "kernels.nrm2" -> "nrm2"
        body = ", ".join(m[cut:] for m in members)
        out.append(textwrap.fill(f"{group} ({len(members)}): {body}", width=width, subsequent_indent="    ",
                                 break_on_hyphens=False))
    return "\n".join(out)


def _known_names(target: str, pool: dict) -> str:
    """One line about the bundled names, for an unknown target: the groups with their sizes, near matches."""
    import difflib

    if not pool:
        return "there are no bundled subjects yet"
    groups = ", ".join(f"{g} ({len(m)})" for g, m in name_groups(pool).items())
    near = [n for n in sorted(pool) if n.endswith("." + target)]
    near += [n for n in difflib.get_close_matches(target, list(pool), n=3, cutoff=0.6) if n not in near]
    hint = f"; did you mean {' or '.join(near[:3])}?" if near else ";"
    return f"bundled: {groups}{hint} tritondiff fuzz --list names them all"


def default_workers() -> int:
    """One lane per GPU on CUDA, one per CPU core in the interpreter."""
    if device.MODE == "cuda":
        import torch

        return max(1, torch.cuda.device_count())
    return max(1, os.cpu_count() or 1)


def task_seed(campaign_seed: int, subject: str, shard: int) -> int:
    """The Hypothesis seed of one shard: stable across runs and resumes."""
    return zlib.crc32(f"{campaign_seed}:{subject}:{shard}".encode())


# ---------------------------------------------------------------------------------------------- stale work

def _clean_stale_work(root: str) -> None:
    """Remove work directories left by campaign processes that no longer exist."""
    work = os.path.join(root, ".work")
    if not os.path.isdir(work):
        return
    for entry in os.listdir(work):
        if entry.isdigit() and not _alive(int(entry)):
            shutil.rmtree(os.path.join(work, entry), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------------------------------------- scheduling

class _Scheduler:
    """Hands tasks to lanes with a fair share of the remaining time; invents extra shards when idle."""

    def __init__(self, campaign: "_Campaign", pending: list[Task], remaining_s: float, lanes: int):
        self.c = campaign
        self.lock = threading.Lock()
        self.pending = deque(pending)
        self.remaining_s = remaining_s
        self.started: float | None = None      # the campaign clock starts when the first lane is warm
        self.deadline = math.inf
        self.active = set(range(lanes))
        self.busy_until: dict[int, float] = {}
        self.closed: set[str] = set()       # subjects that failed, errored or exhausted their space
        self.shards: Counter = Counter()
        self.seconds: Counter = Counter()
        for t in campaign.store.tasks(campaign.id):
            self.shards[t.subject] = max(self.shards[t.subject], t.shard + 1)
            self.seconds[t.subject] += t.seconds
            if t.outcome == "fail" or t.status == "error":
                self.closed.add(t.subject)

    def next(self, lane: int, store: Store) -> tuple[Task, float] | None:
        with self.lock:
            self.busy_until.pop(lane, None)
            now = time.monotonic()
            if self.started is None:
                self.started, self.deadline = now, now + self.remaining_s
            remaining = self.deadline - now
            if self.c.stopping.is_set() or remaining < MIN_TASK_S or not self._ensure_pending(store, remaining):
                self.active.discard(lane)
                return None
            task = self.pending.popleft()
            idle_others = len(self.active - set(self.busy_until) - {lane})
            free = remaining * (1 + idle_others) + sum(max(0.0, self.deadline - max(now, end))
                                                      for end in self.busy_until.values())
            budget = min(remaining, max(MIN_TASK_S, free / (len(self.pending) + 1)))
            self.busy_until[lane] = now + budget
            return task, budget

    def _ensure_pending(self, store: Store, remaining: float) -> bool:
        while self.pending and self.pending[0].subject in self.closed:
            # another shard of this subject failed: it would only find that finding again
            skipped = self.pending.popleft()
            store.finish_task(skipped.id, status="done", outcome="skipped", seconds=0.0, examples=0)
        if self.pending:
            return True
        if remaining < MIN_EXTRA_S:
            return False
        open_subjects = [n for n in self.c.subjects if n not in self.closed]
        if not open_subjects:
            return False
        name = min(open_subjects, key=lambda n: (self.seconds[n], n))
        shard = self.shards[name]
        self.shards[name] += 1
        seed = task_seed(self.c.seed, name, shard)
        subj = self.c.subjects[name]
        task_id = store.add_task(self.c.id, subject=name, subject_ref=ref(subj), shard=shard, seed=seed)
        self.pending.append(Task(task_id, self.c.id, name, ref(subj), shard, seed, "pending", None, 0.0, 0, None,
                                 None))
        return True

    def requeue(self, task: Task) -> None:
        """Put back a task whose lane lost its explorer (a Ray actor, its node) before it finished."""
        with self.lock:
            self.pending.appendleft(task)

    def finished(self, subject: str, seconds: float, *, close: bool) -> None:
        with self.lock:
            self.seconds[subject] += seconds
            if close:
                self.closed.add(subject)


# ---------------------------------------------------------------------------------------------- display

# ---------------------------------------------------------------------------------------------- campaign

@dataclasses.dataclass
class CampaignResult:
    """What one run of a campaign did (a resumed campaign reports the resumed run)."""

    campaign_id: int
    status: str                       # done | interrupted
    store: str
    seconds: float                    # wall time of this run
    spent_s: float                    # campaign total, over every run
    budget_s: float
    examples: int
    findings: list[dict]              # seen in this run: signature, class, subject, new, message
    errors: list[str]
    seed: int
    workers: int = 1                  # lanes of this run
    strict: bool = False              # edge findings fail the run too (harness.tiers)
    earlier: list[dict] = dataclasses.field(default_factory=list)   # failing findings of earlier runs

    @property
    def examples_per_s(self) -> float:
        """Examples per second of wall time (all lanes together)."""
        return self.examples / self.seconds if self.seconds > 0 else 0.0

    @property
    def exit_code(self) -> int:
        if self.status == "interrupted":
            return 130
        now = {f["signature"] for f in self.findings}
        found = self.findings + [f for f in self.earlier if f["signature"] not in now]
        failing = [f for f in found if (f.get("tier", "wrong") == "wrong" or self.strict)
                   and baseline.reason(f["signature"]) is None]
        return 1 if failing or self.errors else 0


class _Campaign:
    def __init__(self, store: Store, campaign_id: int, subjects: dict[str, Subject], *, options: dict,
                 seed: int, workers: int, remaining_s: float, spent_s: float, budget_s: float, display: Display,
                 ray: float | None = None):
        self.store = store
        self.store_path = store.path
        self.id = campaign_id
        self.subjects = subjects
        self.seed = seed
        self.workers = workers
        self.dump_root = options["dump_root"]
        self.disabled = frozenset(options.get("disabled", ()))
        self.example_timeout_s = options.get("example_timeout_s")
        self.huge = bool(options.get("huge"))   # harness.huge: inputs past 2^31 elements (CUDA)
        self.plans: dict = {}                    # huge mode: subject name -> harness.huge.HugePlan
        self.spent_before = spent_s
        self.budget_s = budget_s
        self.remaining_s = remaining_s
        self.grace_s = max(5.0, 0.05 * budget_s)
        self.display = display
        self.events: queue.Queue[LaneEvent] = queue.Queue()
        self.stopping = threading.Event()
        self.findings: dict[str, dict] = {}
        self.errors: list[str] = []
        self.explored: Counter = Counter()       # examples per subject in this run
        self.ran: set[str] = set()               # subjects that got a task in this run
        self.ray = ray                           # lanes on a Ray cluster (harness.ray_lanes): GPU share an actor
        _clean_stale_work(self.dump_root)

    def run(self) -> str:
        self.seconds, self.examples = 0.0, 0
        if self.remaining_s < MIN_TASK_S:             # resumed with the budget already spent
            self.store.heartbeat(self.id, self.spent_before, "done")
            return "done"
        pending = [t for t in self.store.tasks(self.id) if t.status == "pending"]
        self.scheduler = sched = _Scheduler(self, pending, self.remaining_s, self.workers)
        if self.huge:                            # subjects without a plan (any more) get no task
            sched.closed.update(n for n in self.subjects if n not in self.plans)
        if self.ray is None:
            lanes = [Lane(self, i) for i in range(self.workers)]
        else:
            from .ray_lanes import RayLane
            lanes = [RayLane(self, i, self.ray) for i in range(self.workers)]
        status = "done"
        last_beat = 0.0
        try:
            for lane in lanes:
                lane.start()
            while any(lane.is_alive() for lane in lanes):
                self._drain(timeout=0.25)
                now = time.monotonic()
                elapsed = now - sched.started if sched.started is not None else 0.0
                if now - last_beat >= HEARTBEAT_S:
                    self.store.heartbeat(self.id, self.spent_before + elapsed)
                    last_beat = now
                if now > sched.deadline + self.grace_s:
                    for lane in lanes:
                        if lane.is_alive() and lane.current is not None and not lane.stop_event.is_set():
                            self.display.line(f"cut   L{lane.index} {lane.current[0].subject}: still running "
                                              f"{self.grace_s:.0f} s past the deadline")
                            lane.stop("cut")
                self.display.status(self._status_text(lanes, elapsed) if sched.started is not None
                                    else f"starting {len(lanes)} lane worker(s)...")
        except KeyboardInterrupt:
            status = "interrupted"
            self.display.line("interrupted: stopping lanes (the store stays consistent; resume with --resume)")
            self._stop(lanes, "interrupt")
        finally:
            self.display.close()
        self._drain(timeout=0)
        if any(lane.failed is not None for lane in lanes):
            status = "interrupted"       # its task stays 'running': a resume re-runs it
        self.seconds = time.monotonic() - sched.started if sched.started is not None else 0.0
        self.examples = sum(lane.examples for lane in lanes)
        self.store.heartbeat(self.id, self.spent_before + self.seconds, status)
        return status

    def _stop(self, lanes: list[Lane], reason: str) -> None:
        self.stopping.set()
        for lane in lanes:
            lane.stop(reason)
        for lane in lanes:
            lane.join(timeout=30)

    def _drain(self, timeout: float) -> None:
        while True:
            try:
                ev = self.events.get(timeout=timeout) if timeout else self.events.get_nowait()
            except queue.Empty:
                return
            timeout = 0
            if ev.kind == "start":
                self.ran.add(ev.subject)
                self.display.line(f"start L{ev.lane} {ev.subject} ({ev.text})")
            elif ev.kind == "finding":
                replaced = self.findings.pop(ev.replaces, {}) if ev.replaces else {}
                ev.new = ev.new or replaced.get("new", False)
                self.findings[ev.signature] = {"signature": ev.signature, "subject": ev.subject,
                                               "new": ev.new or self.findings.get(ev.signature, {}).get("new", False),
                                               "message": ev.text, "tier": ev.tier or "wrong"}
                self.display.line(f"{'NEW  ' if ev.new else 'seen '} L{ev.lane} {ev.subject} {ev.text}")
            elif ev.kind == "done":
                self.explored[ev.subject] += ev.examples
                self.display.line(f"done  L{ev.lane} {ev.subject} {ev.text}")
            elif ev.kind == "lost":
                self.display.line(f"lost  L{ev.lane} {ev.subject} {ev.text}")
            else:
                self.errors.append(f"{ev.subject}: {ev.text}")
                self.display.line(f"ERROR L{ev.lane} {ev.subject} {ev.text}")

    def _status_text(self, lanes: list[Lane], elapsed: float) -> str:
        examples = sum(lane.examples for lane in lanes)
        rate = examples / elapsed if elapsed > 0 else 0.0
        new = sum(1 for f in self.findings.values() if f["new"])
        busy = []
        for lane in lanes:
            cur = lane.current
            if cur is not None:
                busy.append(f"L{lane.index} {cur[0].subject}#{cur[0].shard}")
        spent = self.spent_before + elapsed
        return (f"[{clock(spent)}/{clock(self.budget_s)}] {examples} examples ({rate:.2f}/s) | findings: "
                f"{new} new, {len(self.findings) - new} seen | " + (", ".join(busy) or "idle"))


def _check_args(budget_s, workers, seed, example_timeout_s, disabled) -> None:
    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    for name, value in (("budget_s", budget_s), ("example_timeout_s", example_timeout_s)):
        if value is not None and not (number(value) and value > 0):
            raise UsageError(f"{name}={value!r}: give a positive number of seconds")
    if workers is not None and not (isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1):
        raise UsageError(f"workers={workers!r}: give a positive integer")
    if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool)):
        raise UsageError(f"seed={seed!r}: give an integer")
    bad = sorted(set(disabled) - set(HAZARDS)) if not isinstance(disabled, str) else [disabled]
    if bad:
        raise UsageError(f"disabled={disabled!r}: unknown hazard(s) {bad}; known: {', '.join(HAZARDS)}")


def run_campaign(targets: Sequence[str] = (), *, budget_s: float | None = None, workers: int | None = None,
                 seed: int | None = None, store: str | None = None, resume: bool = False,
                 disabled: frozenset = frozenset(), example_timeout_s: float | None = None,
                 dump_dir: str | None = None, report_dir: str | None = None, out: TextIO | None = None,
                 live: bool | None = None, huge: bool = False, ray: str | None = None) -> CampaignResult:
    """Fuzz ``targets`` (see :func:`resolve_targets`) for ``budget_s`` seconds of wall time in total.

    ``workers`` lanes run in parallel (default: :func:`default_workers`);
    findings, statistics and campaign state go to the SQLite ``store``
    (default ``<out_dir>/findings.db``); dumps go to one folder beside it
    (:func:`campaign_folder`) unless ``dump_dir`` says otherwise.  ``resume=True`` continues the store's latest
    unfinished campaign (``targets`` and ``seed``, when given, must be its own;
    ``budget_s`` is its new *total* budget, what earlier runs spent counting
    against it).  ``report_dir`` writes the report when the run ends.
    Progress goes to ``out`` (default stdout), as a live line when it is a
    terminal (``live`` overrides).  ``huge=True`` (CUDA only)
    draws each target's largest input just past 2^31 elements (:mod:`harness.huge`);
    targets that cannot (no size dim, or not enough memory) are skipped with the reason.
    ``ray``: run the lanes as actors on the Ray cluster at that address (``auto``, ``local``; see
    :mod:`harness.ray_lanes`); ``workers`` then defaults to the cluster's GPUs (its CPUs off CUDA).
    """
    _check_args(budget_s, workers, seed, example_timeout_s, disabled)
    if ray is not None and (not isinstance(ray, str) or not ray.strip()):
        raise UsageError(f"ray={ray!r}: give a Ray cluster address, 'auto' or 'local'")
    if ray is not None and huge:
        raise UsageError("--huge sizes its inputs by this machine's GPU memory; run it without --ray")
    if resume and (disabled or example_timeout_s is not None or dump_dir is not None or huge):
        raise UsageError("resume continues the stored campaign with its own options; leave disabled, "
                         "example_timeout_s, dump_dir and huge out")
    if huge:
        huge_shapes.check_lanes(workers)
    ray_share, ray_owned = None, False
    if ray is not None:
        from . import ray_lanes
        cuda = device.MODE == "cuda"
        ray_owned = ray_lanes.connect(ray)
        workers = workers or ray_lanes.cluster_lanes(cuda)
        ray_share = ray_lanes.gpus_per_actor(workers, cuda)
    workers = workers or default_workers()
    store_path = store or os.path.join(config.out_dir, "findings.db")
    display = Display(out or sys.stdout, live)
    db = Store(store_path)
    try:
        if resume:
            campaign, subjects = _resume(db, targets, seed, budget_s, workers)
        else:
            resolved = runnable(resolve_targets(list(targets)), display.line)
            plans = huge_shapes.plans_for(resolved, display.line) if huge else None
            campaign, subjects = _new(db, targets, resolved, seed, budget_s or DEFAULT_BUDGET_S, workers, disabled,
                                      example_timeout_s, dump_dir, plans)
        remaining = campaign.budget_s - campaign.spent_s
        if resume:
            display.line(f"resuming {campaign.id}: {len(subjects)} subject(s), {workers} lane(s), "
                         f"seed {campaign.seed}; "
                         f"total budget {clock(campaign.budget_s)}, {clock(campaign.spent_s)} spent by earlier "
                         f"runs, {clock(remaining)} left for this one; store {db.path}")
        else:
            display.line(f"campaign {campaign.id}: {len(subjects)} subject(s), {workers} lane(s), "
                         f"seed {campaign.seed}, "
                         f"{clock(remaining)} of {clock(campaign.budget_s)} left; store {db.path}")
        shared = lanes_per_gpu(workers) if ray is None else round(1 / ray_share) if ray_share else 1
        if ray is not None:
            display.line(f"lanes: {workers} Ray actor(s) on the cluster at {ray}" + (
                f", {ray_share:g} GPU each" if ray_share else ", one CPU each"))
        if shared > 1:
            limit = hang_limit_s(campaign.options.get("example_timeout_s"), workers)
            display.line(f"{shared} lanes share each GPU (their kernels run in turn): an example's hang limit is "
                         f"{limit:.0f} s, {shared} x the single-lane one")
        runner = _Campaign(db, campaign.id, subjects, options=campaign.options, seed=campaign.seed, workers=workers,
                           remaining_s=max(0.0, remaining), spent_s=campaign.spent_s, budget_s=campaign.budget_s,
                           display=display, ray=ray_share if ray is not None else None)
        if runner.huge:
            runner.plans = plans if not resume else huge_shapes.plans_for(subjects.values(), display.line,
                                                                          strict=False)
        status = runner.run()
        starved = sorted(n for n in subjects if runner.explored[n] == 0 and n in runner.ran)
        if starved:
            display.line(f"warning: {len(starved)} subject(s) finished no example in this run "
                         f"({', '.join(starved[:8])}{', ...' if len(starved) > 8 else ''}); give the campaign "
                         "more budget or fewer targets")
        result = CampaignResult(campaign.id, status, db.path, runner.seconds, runner.spent_before + runner.seconds,
                                campaign.budget_s, runner.examples, list(runner.findings.values()), runner.errors,
                                campaign.seed, workers, strict=config.strict,
                                earlier=_campaign_failures(db, campaign.id))
        _summary(display, result, db)
    finally:
        db.close()
        if ray_owned:
            import ray as ray_module
            ray_module.shutdown()
    if report_dir is not None:
        from .report import write_report

        paths = write_report(store_path, report_dir)
        display.line("report: " + ", ".join(paths.values()))
    return result


def _campaign_failures(db: Store, campaign_id: int) -> list[dict]:
    """The findings of every run of the campaign so far (its failed tasks), with their tiers: a resumed
    campaign's verdict is the campaign's, not only the last run's."""
    from .case import Case
    from .tiers import tier_of

    out: dict[str, dict] = {}
    for task in db.tasks(campaign_id):
        if task.outcome != "fail" or not task.signature or task.signature in out:
            continue
        row = db.finding(task.signature)
        if row is None:
            continue
        try:
            tier = tier_of(Case.from_json(json.loads(row["case_json"])), row["failure_class"])
        except (ValueError, KeyError, TypeError):
            tier = "wrong"
        out[task.signature] = {"signature": task.signature, "subject": row["subject"], "new": False,
                               "message": row["message"], "tier": tier}
    return list(out.values())


def campaign_folder(store_path: str) -> str:
    """Where a campaign's dumps go by default: one folder beside its store, named after it
    (``tritondiff-out/findings.db`` -> ``tritondiff-out/findings-dumps/``), never the store's folder itself
    (``--store /tmp/x.db`` must not scatter subject folders over /tmp)."""
    return os.path.splitext(os.path.abspath(store_path))[0] + "-dumps"


def _new(db: Store, targets, resolved, seed, budget_s, workers, disabled, example_timeout_s, dump_dir, plans):
    subjects = {s.name: s for s in resolved if plans is None or s.name in plans}
    seed = secrets.randbits(31) if seed is None else seed
    if plans is not None and example_timeout_s is None:
        example_timeout_s = max(config.example_timeout_s, huge_shapes.EXAMPLE_TIMEOUT_S)
    options = {"targets": list(targets), "disabled": sorted(disabled), "example_timeout_s": example_timeout_s,
               "dump_root": os.path.abspath(dump_dir or campaign_folder(db.path)), "huge": plans is not None}
    campaign_id = db.create_campaign(options=options, seed=seed, budget_s=budget_s, workers=workers)
    shards = max(1, math.ceil(workers / len(subjects)))
    for shard in range(shards):               # shard 0 of every subject first, so lanes start on different ones
        for name, subj in subjects.items():
            db.add_task(campaign_id, subject=name, subject_ref=ref(subj), shard=shard,
                        seed=task_seed(seed, name, shard))
    return db.campaign(campaign_id), subjects


def _resume(db: Store, targets, seed, budget_s, workers):
    campaign = db.latest_unfinished()
    if campaign is None:
        raise UsageError(f"{db.path}: no unfinished campaign to resume; start one without --resume")
    if seed is not None and seed != campaign.seed:
        raise UsageError(f"--resume continues campaign {campaign.id} with its seed {campaign.seed}; "
                         f"leave --seed out (got {seed})")
    if campaign.options.get("huge"):
        huge_shapes.check_lanes(workers)
    if (campaign.pid != os.getpid() and _alive(campaign.pid) and time.time() - campaign.updated < 30
            and campaign.status == "running"):
        raise UsageError(f"{db.path}: campaign {campaign.id} is still running (pid {campaign.pid}); "
                         "stop it before resuming")
    subjects: dict[str, Subject] = {}
    for task in db.tasks(campaign.id):
        if task.subject not in subjects:
            subjects[task.subject] = resolve(task.subject_ref)
    if targets:                                  # the command line repeated: fine when it names the same subjects
        named = {s.name for s in resolve_targets(list(targets))}
        if named != set(subjects):
            extra, missing = sorted(named - set(subjects)), sorted(set(subjects) - named)
            raise UsageError(f"--resume continues campaign {campaign.id} with its own targets; these differ "
                             f"(not in it: {', '.join(extra) or '-'}; in it but not named: "
                             f"{', '.join(missing) or '-'}); "
                             "leave the targets out, or start a new campaign without --resume")
    return db.claim_campaign(campaign.id, budget_s=budget_s, workers=workers), subjects


def _summary(display: Display, result: CampaignResult, db: Store) -> None:
    new = [f for f in result.findings if f["new"]]
    display.line(f"campaign {result.campaign_id} {result.status}: {result.examples} examples in "
                 f"{result.seconds:.1f} s wall ({result.examples_per_s:.2f} examples/s over {result.workers} "
                 f"worker(s)); "
                 f"{clock(result.spent_s)} of {clock(result.budget_s)} spent; findings: {len(new)} new, "
                 f"{len(result.findings) - len(new)} seen again")
    for f in result.findings:
        row = db.finding(f["signature"])
        if row is None:
            continue
        display.line(f"  {'NEW ' if f['new'] else 'seen'}  {row['failure_class']:<14} {row['subject']}  "
                     f"(count {row['count']})  dump: {row['dump'] or '-'}")
    seen = {f["signature"] for f in result.findings}
    for f in result.earlier:
        row = db.finding(f["signature"])
        if f["signature"] not in seen and row is not None:
            display.line(f"  earlier {row['failure_class']:<12} {row['subject']}  (found by an earlier run of "
                         f"this campaign)  dump: {row['dump'] or '-'}")
    for err in result.errors:
        display.line(f"  ERROR {err}")
    if result.status == "interrupted":
        display.line(f"resume with: tritondiff fuzz --resume --store {result.store}")
