"""A campaign's lanes on a Ray cluster: every lane's exploration runs in a Ray actor, on any node.

``tritondiff fuzz --ray ADDRESS`` (or ``auto``, or ``local``: a one-machine cluster started here) keeps the
coordinator as it is -- the scheduler, the SQLite store (its single writer), the dump folder and the display
stay in the driver's process -- and moves only the exploring.  A :class:`RayLane` is one lane's thread in the
driver: it takes tasks from the scheduler as a local :class:`~harness.lanes.Lane` does, has its actor explore
each, and commits what the actor streams back -- counts and coverage every ``FLUSH_S``, the first failing
example with its dump at once, the shrunk findings with theirs at the end -- through the same
:class:`~harness.lanes.Committer`.  So a finding is committed as it is found, whichever node found it, and
nothing new is needed on the workers but tritondiff itself.

The actor (:class:`LaneActor`) owns a :class:`~harness.lanes.LaneExecutor`: a long-lived worker process on
its node in which every example runs, so a crash, hang or segfault costs that worker, not the actor.  An actor
asks for one GPU (a share of one, where there are more lanes than GPUs) on CUDA, one CPU otherwise.  If the
actor or its node dies, the lane puts its task back in the queue, starts a new actor (Ray places it on a live
node) and goes on.  A killed driver takes its actors with it; what it committed stays, and ``--resume``
re-runs the tasks it left running.

Ray is an optional extra (``pip install tritondiff[ray]``).  Subject files are loaded on the workers from the
path the driver resolved: give the cluster that path (a shared file system, or Ray's ``runtime_env``).
"""
from __future__ import annotations

import io
import math
import os
import queue
import shutil
import socket
import tarfile
import threading
import time
from typing import TYPE_CHECKING, Any, Iterator

from .config import config
from .exc import HarnessError, UsageError
from .lanes import MAX_EXAMPLES, Committer, Explored, Lane, LaneEvent, LaneExecutor, Recorder, Shrunk, Stopped, lane_env
from .store import FindingRecord, Store, Task

if TYPE_CHECKING:
    from .campaign import _Campaign

#: Seconds a new actor may wait for a node to take it (and start its worker) before the lane tries again.
PLACE_TIMEOUT_S = 120.0
#: Environment variables a driver passes to its actors (the device and the harness's and Triton's settings).
FORWARDED_ENV = ("TRITON_", "TRITONDIFF_", "HYPOTHESIS_", "PYTHONPATH")


def require_ray() -> Any:
    """The ``ray`` module, or a UsageError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray, an optional extra: pip install 'tritondiff[ray]'") from None
    return ray


def connect(address: str) -> bool:
    """Join the Ray cluster at ``address`` (``auto``: the one this machine belongs to; ``local``: start one
    here), forwarding the device and harness settings to its workers.  Returns whether this call initialised
    Ray (and so should shut it down)."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    _reachable(address)
    env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV)}
    try:
        ray.init(address=None if address == "local" else address, runtime_env={"env_vars": env},
                 log_to_driver=False, logging_level="ERROR")
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UsageError(f"--ray {address}: cannot join a Ray cluster there ({str(e).splitlines()[0]}); give the "
                         "head's address (host:port, or ray://host:10001), 'auto' on a cluster node, or 'local'"
                         ) from None
    return True


#: Seconds a driver waits for a TCP connection to the cluster address it was given.
CONNECT_TIMEOUT_S = 10.0


def _reachable(address: str) -> None:
    """Raise a UsageError unless something listens at ``address`` (``host:port`` or ``ray://host:port``):
    Ray itself retries an address nobody answers at for minutes."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UsageError(f"--ray {address}: not an address; give host:port (the head's GCS, 6379 by default), "
                         "ray://host:10001, 'auto' on a cluster node, or 'local'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise UsageError(f"--ray {address}: nothing answers there ({e.strerror or e}); is `ray start --head` "
                         "running on that host, and is the port open?") from None


def cluster_lanes(cuda: bool) -> int:
    """Lanes a campaign on the cluster gets by default: one per GPU on CUDA, one per CPU otherwise."""
    ray = require_ray()
    resources = ray.cluster_resources()
    return max(1, int(resources.get("GPU", 0) if cuda else resources.get("CPU", 1)))


# ---------------------------------------------------------------------------------------------- dumps in transit

def pack(folder: str | None) -> bytes | None:
    """A dump folder as bytes (a tar), to ship from an actor's node to the driver."""
    if folder is None:
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(folder, arcname="dump")
    return buf.getvalue()


def unpack(data: bytes, root: str) -> str:
    """Write a :func:`pack`\\ ed dump under ``root``; returns its folder."""
    os.makedirs(root, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(root, filter="data")
    return os.path.join(root, "dump")


# ---------------------------------------------------------------------------------------------- the actor

class _QueueSink:
    """A Recorder's sink on the actor: each call becomes a message for the driver's Committer (a first
    sighting's dump is written here, where its case ran, and shipped)."""

    def __init__(self, out: "queue.Queue[tuple]", work: str):
        self.out, self.work = out, work

    def stats(self, examples: int, skipped: int, seconds: float, coverage: dict) -> None:
        self.out.put(("stats", examples, skipped, seconds, coverage))

    def first_sight(self, record: FindingRecord, tier: str, write) -> None:
        self.out.put(("first", record, tier, pack(write(os.path.join(self.work, "first")))))


class LaneActor:
    """One lane's explorer on a Ray worker node (made a Ray actor by :func:`_actor_class`)."""

    def __init__(self, index: int, workers: int, hang_s: float, disabled: frozenset):
        self.index, self.disabled = index, disabled
        self.stop_event = threading.Event()
        self.executor = LaneExecutor(lane_env(index, workers), hang_s, self.stop_event)

    def warm(self) -> str:
        """Start the worker process; returns the node's address (for the display)."""
        import ray

        self.executor.warm()
        return ray.util.get_node_ip_address()

    def explore(self, task: Task, budget: float, plan: Any) -> Iterator[tuple]:
        """Explore ``task`` for ``budget`` seconds: yields ("stats", ...) and ("first", record, tier, dump) as
        they happen, then one of ("done", Explored with packed dumps), ("stopped", examples, first signature),
        ("error", message, examples)."""
        import tempfile

        from .explore import explore
        from .loader import resolve

        self.stop_event.clear()
        out: "queue.Queue[tuple]" = queue.Queue()
        work = tempfile.mkdtemp(prefix=f"tritondiff-lane{self.index}-")
        sink = _QueueSink(out, work)
        subject = resolve(task.subject_ref)
        rec = Recorder(self.stop_event, sink, task, subject, work, self.disabled)

        def run() -> None:
            try:
                self.executor.warm()
                self.executor.begin(budget)
                result = explore(subject, budget_s=budget, max_examples=MAX_EXAMPLES, seed=task.seed, out_dir=work,
                                 disabled=self.disabled, executor=self.executor, on_example=rec, huge=plan,
                                 database=False)
                rec.flush()
                explored = Explored.of(result, subject, partial=self.executor.cut_short)
                for found in explored.findings:
                    found.dump = pack(found.dump)
                out.put(("done", explored))
            except Stopped:
                rec.flush()
                out.put(("stopped", rec.examples, rec.first_signature))
            except HarnessError as e:
                rec.flush()
                out.put(("error", str(e), rec.examples))
            except BaseException as e:  # noqa: BLE001 - reported to the driver as the lane's failure
                out.put(("failed", f"{type(e).__name__}: {e}"))
            finally:
                out.put(None)

        thread = threading.Thread(target=run, name=f"tritondiff-ray-lane-{self.index}", daemon=True)
        thread.start()
        try:
            while (msg := out.get()) is not None:
                yield msg
        finally:
            thread.join()
            shutil.rmtree(work, ignore_errors=True)

    def stop(self) -> None:
        self.stop_event.set()
        self.executor.interrupt()

    def close(self) -> None:
        self.executor.close()


_ACTOR = None


def _actor_class() -> Any:
    global _ACTOR
    if _ACTOR is None:
        ray = require_ray()
        # two calls at once: explore's stream, and stop while it runs
        _ACTOR = ray.remote(max_concurrency=2, max_restarts=0)(LaneActor)
    return _ACTOR


# ---------------------------------------------------------------------------------------------- the driver's side

class RayLane(Lane):
    """One lane in the driver: a local lane's scheduling and commits, its exploring done by a Ray actor."""

    def __init__(self, campaign: "_Campaign", index: int, gpus_per_actor: float):
        super().__init__(campaign, index)
        self.gpus = gpus_per_actor
        self.actor: Any = None
        self.node = "?"

    def _start_actor(self) -> None:
        """A new actor for this lane, its worker process started; raises GetTimeoutError where no node took it
        within ``PLACE_TIMEOUT_S`` (the actor is then given up)."""
        import ray

        options = {"num_gpus": self.gpus, "num_cpus": 0} if self.gpus else {"num_cpus": 1}
        # an example's hang limit: the single-lane one times the lanes sharing the actor's GPU
        hang_s = (self.c.example_timeout_s or config.example_timeout_s) * (round(1 / self.gpus) if self.gpus else 1)
        actor = _actor_class().options(**options).remote(self.index, self.c.workers, hang_s, self.c.disabled)
        try:
            self.node = ray.get(actor.warm.remote(), timeout=PLACE_TIMEOUT_S)
        except BaseException:
            ray.kill(actor)
            raise
        self.actor = actor

    def _warm(self) -> None:
        import ray

        try:
            self._start_actor()
        except ray.exceptions.GetTimeoutError:
            what = "GPU" if self.gpus else "CPU"
            raise HarnessError(f"no node of the Ray cluster took lane {self.index}'s actor (one {what} "
                               f"{'share ' if self.gpus and self.gpus < 1 else ''}each) within "
                               f"{PLACE_TIMEOUT_S:.0f} s: ask for fewer --workers than the cluster has {what}s "
                               "free") from None

    def _close(self) -> None:
        if self.actor is not None:
            import ray

            try:
                ray.get(self.actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead actor has nothing to close
                pass
            ray.kill(self.actor)
            self.actor = None

    def stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.stop_event.set()
        if self.actor is not None:
            self.actor.stop.remote()

    def _explore(self, store: Store, task: Task, budget: float, subject, rec: Recorder, commit: Committer,
                 started: float) -> None:
        import ray

        examples, first_signature = 0, None
        try:
            stream = self.actor.explore.options(num_returns="streaming").remote(task, budget,
                                                                                 self.c.plans.get(task.subject))
            for ref in stream:
                msg = ray.get(ref)
                kind = msg[0]
                if kind == "stats":
                    examples += msg[1]
                    self.examples += msg[1]
                    commit.stats(*msg[1:])
                elif kind == "first":
                    _, record, tier, data = msg
                    first_signature = record.signature
                    commit.first_sight(record, tier, lambda root, data=data: unpack(data, root))
                elif kind == "done":
                    explored: Explored = msg[1]
                    explored.findings = [Shrunk(f.record, None if f.dump is None else
                                                unpack(f.dump, os.path.join(rec.work, f"shrunk-{i}")), f.tier)
                                         for i, f in enumerate(explored.findings)]
                    self._finished(store, task, commit, explored, first_signature, started)
                    return
                elif kind == "stopped":
                    self._stopped(store, task, msg[1], started, msg[2])
                    return
                elif kind == "error":
                    self._errored(store, task, HarnessError(msg[1]), msg[2], started)
                    return
                else:
                    raise HarnessError(f"lane {self.index}'s actor failed: {msg[1]}")
            raise HarnessError(f"lane {self.index}'s actor ended a task without saying how")
        except ray.exceptions.RayError as e:
            if self.stop_event.is_set():
                raise Stopped() from None
            self._lost(store, task, examples, started, e)

    def _lost(self, store: Store, task: Task, examples: int, started: float, error: Exception) -> None:
        """The actor (its process or its node) died mid-task: the task goes back in the queue, a new actor
        takes the lane's place (on a live node)."""
        import ray

        store.add_task_progress(task.id, seconds=time.monotonic() - started, examples=examples)
        self.c.scheduler.requeue(task)
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        self.c.events.put(LaneEvent("lost", self.index, task.subject,
                                    f"its actor on {self.node} died ({first[:160]}); the task is queued again"))
        self.actor = None
        while not self.stop_event.is_set() and time.monotonic() < self.c.scheduler.deadline:
            try:
                self._start_actor()
                return
            except ray.exceptions.RayError as e:     # no node can take it yet: try again while there is time
                self.c.events.put(LaneEvent("lost", self.index, task.subject,
                                            f"no new actor yet ({type(e).__name__}); trying again"))
                self.stop_event.wait(2.0)
        raise Stopped()            # the campaign ends (or stops) before a node could take this lane again


def gpus_per_actor(workers: int, cuda: bool) -> float:
    """The GPU share each of ``workers`` actors asks for: 1, or 1 / (lanes per GPU) where lanes outnumber the
    cluster's GPUs; 0 off CUDA."""
    if not cuda:
        return 0.0
    gpus = int(require_ray().cluster_resources().get("GPU", 0))
    if gpus < 1:
        raise UsageError("--ray on CUDA: the Ray cluster has no GPUs; start its nodes with GPUs, or run the "
                         "campaign on the CPU (TRITON_INTERPRET=1)")
    return 1.0 / math.ceil(workers / gpus)
