"""harness.dump: what a failure dump holds, above all when the example ran in a worker process."""
import json
import os
import sys

import pytest

from tritondiff.harness import explore
from tritondiff.harness.config import config
from tritondiff.harness.counters import Counters, counters
from tritondiff.harness.executor import Isolated
from tritondiff.harness.runner import ARTIFACT_TEXT_MAX_CHARS, ARTIFACTS_MAX_CHARS, compiler_artifacts

from . import planted_hazards as ph


@pytest.fixture(scope="module")
def isolated():
    ex = Isolated(timeout_s=120)
    yield ex
    ex.close()


def _read(dump, name):
    with open(os.path.join(dump, name)) as f:
        return json.load(f)


def test_isolated_failure_dump_holds_the_worker_s_counters(tmp_path, isolated):
    counters.clear()      # this process has run nothing since: every count below was taken in the worker
    with config.patch(max_example_bytes=1 << 16):
        res = explore(ph.accumulates_into_empty, seed=7, out_dir=str(tmp_path), database=False, executor=isolated,
                      budget_s=60, max_examples=6)
    assert res.status == "fail"
    run = _read(res.dump, "counters.json")
    assert run["harness.examples"] >= res.examples >= 1
    assert run["harness.kernels_launched"] >= run["harness.examples"]   # every example launches the kernel
    assert run["harness.failures"] >= 1 and run["harness.findings"] == 1
    example = _read(res.dump, "summary.json")["example_counters"]      # the dumped example's own counts
    assert example["harness.examples"] == 1 and example["harness.kernels_launched"] >= 1


def test_isolated_failure_dump_of_a_compiled_subject_holds_compiler_counters_and_artifacts(tmp_path, isolated):
    local = sys.modules.get("tritondiff.compiler.counters")            # other tests may have compiled in this process
    graphs_here = local.counters["graphs_compiled"] if local is not None else 0
    res = explore(ph.compiled_against_wrong_reference, seed=3, out_dir=str(tmp_path), database=False,
                  executor=isolated, budget_s=120, max_examples=3)
    assert res.status == "fail" and res.failure_class == "mismatch", res.line()
    run = _read(res.dump, "counters.json")
    assert run["compiler.graphs_compiled"] > graphs_here
    assert run["compiler.kernels_generated"] >= 1
    example = _read(res.dump, "summary.json")["example_counters"]
    assert example["compiler.graphs_compiled"] >= 1
    folders = sorted(os.listdir(os.path.join(res.dump, "compiler")))
    assert folders, "no compiler artifacts in the dump"
    files = os.listdir(os.path.join(res.dump, "compiler", folders[-1]))
    source = [f for f in files if f.endswith("_triton.py")]
    assert source and any(f.endswith("_graph.txt") for f in files) and "counters.json" in files
    with open(os.path.join(res.dump, "compiler", folders[-1], source[0])) as f:
        text = f.read()
    assert "@triton.jit" in text and "sin" in text


def test_counters_merge_taken_elsewhere_and_delta_sees_only_new_counts():
    c = Counters()
    c["examples"] += 2
    before = c.snapshot()
    c["examples"] += 1
    c["kernels_launched"] += 4
    delta = c.delta(before)
    assert delta == {"harness.examples": 1, "harness.kernels_launched": 4}
    parent = Counters()
    parent["findings"] += 1
    parent.merge({**delta, "compiler.graphs_compiled": 2})
    parent.merge({"compiler.graphs_compiled": 1})
    snap = parent.snapshot()
    assert snap["harness.examples"] == 1 and snap["harness.findings"] == 1
    assert snap["compiler.graphs_compiled"] == 3 + (sys.modules["tritondiff.compiler.counters"].counters["graphs_compiled"]
                                                    if "tritondiff.compiler.counters" in sys.modules else 0)


class _FakeArtifacts:
    def __init__(self, graph, size):
        self.graph, self.texts, self.counters, self.error = graph, {"triton": "x" * size}, {"n": 1}, None


def test_compiler_artifacts_are_bounded(monkeypatch):
    class FakeDump:
        @staticmethod
        def ran_artifacts():
            return [_FakeArtifacts(f"g{i}", ARTIFACT_TEXT_MAX_CHARS * 2) for i in range(40)]

    monkeypatch.setitem(sys.modules, "tritondiff.compiler.dump", FakeDump)
    arts = compiler_artifacts()
    assert 0 < len(arts) < 40
    assert arts[-1]["graph"] == "g39"                        # the newest graphs are the ones kept
    assert all(len(a["texts"]["triton"]) < ARTIFACT_TEXT_MAX_CHARS + 100 for a in arts)
    assert sum(len(a["texts"]["triton"]) for a in arts) <= ARTIFACTS_MAX_CHARS
    assert "more characters cut" in arts[0]["texts"]["triton"]
