"""Debug artifacts of each compilation: FX graph, IR before / after fusion, Triton source, plan.

Every compilation keeps its artifacts in memory (the last ``config.keep_artifacts``), keyed by
the pipeline step that produced them; with ``config.dump_dir`` set they are also written to
``<dump_dir>/<graph>/<NN>_<step>.txt`` (``.py`` for the Triton module).  A correctness tool that
finds a graph's program wrong adds a ``triage`` step naming the stage at fault (``tritondiff.harness.triage``).

torch's own mechanisms see them too: each step's text goes to torch's logging artifact of that kind
(:data:`TORCH_ARTIFACTS`: ``TORCH_LOGS=output_code`` prints the generated Triton source, ``ir_pre_fusion`` /
``ir_post_fusion`` the IR, ``graph_code`` the ATen graph, ``schedule`` the plan); under
``TORCH_COMPILE_DEBUG=1`` without ``config.dump_dir`` the files go to ``<torch debug dir>/tritondiff/``; and
each compilation's counters are added to ``torch._dynamo.utils.counters["tritondiff"]``.

The harness puts the artifacts of the graphs an example compiled or ran into its failure dump:
it calls ``forget_ran()`` before the example and ``ran_artifacts()`` after it (in the process
that ran it, a worker by default).  A graph that ran from the compiled-graph cache counts too,
so a dump never misses the code that produced a wrong result because it was compiled earlier.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import os
from typing import Optional

from .config import config
from .counters import counters


#: Pipeline step -> the torch logging artifact its text is logged under.
TORCH_ARTIFACTS = {"graph": "graph_code", "lowered": "ir_pre_fusion", "scheduled": "ir_post_fusion",
                   "triton": "output_code", "plan": "schedule"}


def _torch_log(step: str, graph: str, text: str) -> None:
    artifact = TORCH_ARTIFACTS.get(step)
    if artifact is None:
        return
    import torch._logging

    log = torch._logging.getArtifactLogger(__name__, artifact)
    if not log.isEnabledFor(logging.DEBUG):
        return
    if not log.handlers:             # outside torch's logger tree: write through torch's own handlers
        log.handlers = list(logging.getLogger("torch").handlers)
        log.propagate = not log.handlers
    log.debug("tritondiff %s of graph %s:\n%s", step, graph, text)


def _root_dir() -> Optional[str]:
    """Where step files go: ``config.dump_dir``, else torch's debug folder under ``TORCH_COMPILE_DEBUG=1``."""
    if config.dump_dir:
        return config.dump_dir
    if os.environ.get("TORCH_COMPILE_DEBUG", "0") not in ("", "0"):
        import torch._dynamo.config

        return os.path.join(torch._dynamo.config.debug_dir_root, "tritondiff")
    return None


@dataclasses.dataclass
class Artifacts:
    """What one compilation produced, by step name (the keys of ``compiler.pipeline``)."""

    graph: str
    texts: dict[str, str] = dataclasses.field(default_factory=dict)
    paths: dict[str, str] = dataclasses.field(default_factory=dict)
    # What this compilation added to ``compiler.counters`` (finish() minus begin()), not the
    # process-wide totals: a dump of the second graph must not show the first graph's kernels.
    counters: dict[str, int] = dataclasses.field(default_factory=dict)
    error: Optional[str] = None
    directory: Optional[str] = None
    # Where a wrong result of this graph's program comes from, when a correctness tool found
    # one: "lowering" / "fusion" / "codegen" / "unknown" (tritondiff.harness.triage; its "triage" text).
    stage: Optional[str] = None
    counters_at_begin: dict[str, int] = dataclasses.field(default_factory=dict, repr=False)

    def record(self, step: str, text: str) -> None:
        self.texts[step] = text
        _torch_log(step, self.graph, text)
        root = _root_dir()
        if root:
            self.directory = os.path.join(root, self.graph)
            os.makedirs(self.directory, exist_ok=True)
            suffix = ".py" if step == "triton" else ".txt"
            path = os.path.join(self.directory, f"{len(self.texts):02d}_{step}{suffix}")
            with open(path, "w") as f:
                f.write(text)
            self.paths[step] = path

    def finish(self, error: Optional[BaseException] = None) -> None:
        now = counters.snapshot()
        before = self.counters_at_begin
        self.counters = {k: v - before.get(k, 0) for k, v in now.items() if v > before.get(k, 0)}
        from torch._dynamo.utils import counters as torch_counters

        torch_counters["tritondiff"].update(self.counters)     # beside counters["inductor"], where users look
        if error is not None:
            self.error = f"{type(error).__name__}: {error}"
            self.record("error", self.error)

    def summary(self) -> str:
        """A short text for failure reports: which graph, where the files are, its counters."""
        where = self.directory or "(in memory; set compiler.config.dump_dir to write files)"
        lines = [f"compiled graph {self.graph}: {where}", f"counters: {self.counters}"]
        if self.stage:
            lines.append(self.texts.get("triage", f"mismatch stage: {self.stage}"))
        if self.error:
            lines.append(f"error: {self.error}")
        return "\n".join(lines)


_recent: collections.deque = collections.deque(maxlen=64)
# Compilations begun or graphs run since the last forget_ran(), by id, oldest first (the last
# config.keep_artifacts of them).
_ran: "collections.OrderedDict[int, Artifacts]" = collections.OrderedDict()


def begin(graph: str) -> Artifacts:
    artifacts = Artifacts(graph, counters_at_begin=counters.snapshot())
    _recent.append(artifacts)
    while len(_recent) > config.keep_artifacts:
        _recent.popleft()
    note_ran(artifacts)
    return artifacts


def note_ran(artifacts: Optional[Artifacts]) -> None:
    """Record that the graph of ``artifacts`` was compiled or ran (``ran_artifacts()`` returns it)."""
    if artifacts is None or (_ran and next(reversed(_ran)) == id(artifacts)):   # none, or already the latest
        return
    _ran.pop(id(artifacts), None)
    _ran[id(artifacts)] = artifacts
    while len(_ran) > config.keep_artifacts:
        _ran.popitem(last=False)


def forget_ran() -> None:
    """Start a new record of the graphs that run (the harness calls this before each example)."""
    _ran.clear()


def ran_artifacts() -> list[Artifacts]:
    """The artifacts of the graphs compiled or run since ``forget_ran()``, oldest first."""
    return list(_ran.values())


def last_artifacts() -> Optional[Artifacts]:
    """The most recent compilation's artifacts (None before the first compilation)."""
    return _recent[-1] if _recent else None


def recent_artifacts() -> list[Artifacts]:
    """The last ``config.keep_artifacts`` compilations, oldest first."""
    return list(_recent)


def clear() -> None:
    _recent.clear()
    _ran.clear()
