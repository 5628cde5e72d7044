"""harness.executor: in-process runs turn a device fault (a sticky CUDA error surfacing in the harness's own
steps) into a crash verdict that ends the exploration, as a dead worker does; other errors still raise.  A
fault of the reference (eager PyTorch's own kernel) is never the candidate's finding."""
import pytest
import torch

from tritondiff.harness import executor as executor_module
from tritondiff.harness import explore, subject, tensor
from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.exc import ReferenceFault
from tritondiff.harness.executor import InProcess, Isolated
from tritondiff.harness.loader import load_file, ref, subjects_in

STICKY = "CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA` ..."


def _case():
    return Case({"N": 4}, {"x": TensorCase((4,), "float32", "contiguous", 0, "normal", 1, "")}, {})


def test_a_device_fault_in_process_is_a_crash_verdict_and_other_errors_raise(monkeypatch):
    def faulted(*args, **kwargs):
        raise RuntimeError(STICKY)

    monkeypatch.setattr(executor_module, "execute", faulted)
    verdict = InProcess().run({}, _case(), frozenset())
    assert (verdict.status, verdict.failure_class, verdict.location) == ("fail", "crash", "device_fault")
    assert "illegal memory access" in verdict.message and "run isolated" in verdict.message

    def broken(*args, **kwargs):
        raise KeyError("a harness bug")

    monkeypatch.setattr(executor_module, "execute", broken)
    with pytest.raises(KeyError):
        InProcess().run({}, _case(), frozenset())


class _FaultsAfter(InProcess):
    """In process, until the context is lost after a few examples: every later call sees the sticky error."""

    def __init__(self, good: int):
        self.good = good

    def run(self, subject_ref, case, hazards, timeout_s=None):
        self.good -= 1
        if self.good < 0:
            real = executor_module.execute
            try:
                executor_module.execute = lambda *a, **k: (_ for _ in ()).throw(RuntimeError(STICKY))
                return super().run(subject_ref, case, hazards, timeout_s)
            finally:
                executor_module.execute = real
        return super().run(subject_ref, case, hazards, timeout_s)


def test_an_exploration_that_loses_the_device_ends_with_one_crash_finding(tmp_path):
    subj = subject(reference=lambda x: x * 2, inputs={"x": tensor(("N",), dtypes=("float32",))},
                   dims={"N": (1, 64)}, name="executor_test.doubles")(lambda x: x * 2)
    res = explore(subj, budget_s=60, max_examples=50, seed=2, database=False, out_dir=str(tmp_path),
                  executor=_FaultsAfter(good=5))
    assert (res.status, res.failure_class) == ("fail", "crash") and "device faulted" in res.message
    assert len(res.findings) == 1


REFERENCE_FAULTS = """
import torch
from tritondiff import subject, tensor


def _reference(x):
    if x.shape[0] % 2:      # eager's kernel faults on odd sizes, as memory-efficient attention does on a sliced storage
        raise RuntimeError("CUDA error: misaligned address\\nCompile with TORCH_USE_CUDA_DSA")
    return x * 2


@subject(reference=_reference, inputs={"x": tensor(("N",), dtypes=("float32",))}, dims={"N": (1, 64)})
def doubles(x):
    return x * 2
"""


def _reference_faults_subject(tmp_path):
    path = tmp_path / "reference_faults.py"
    path.write_text(REFERENCE_FAULTS)
    (subj,) = subjects_in(load_file(str(path)))
    return subj


def test_a_reference_fault_in_process_stops_the_run_without_blaming_the_candidate(tmp_path):
    subj = _reference_faults_subject(tmp_path)
    odd = Case({"N": 3}, {"x": TensorCase((3,), "float32", "contiguous", 0, "normal", 1, "")}, {})
    with pytest.raises(ReferenceFault, match="eager PyTorch's own kernel failed on this input, not the candidate"):
        InProcess().run(ref(subj), odd, frozenset())


def test_a_reference_fault_in_a_worker_skips_the_example_and_replaces_the_worker(tmp_path):
    subj = _reference_faults_subject(tmp_path)
    executor = Isolated(timeout_s=120)
    try:
        odd = Case({"N": 3}, {"x": TensorCase((3,), "float32", "contiguous", 0, "normal", 1, "")}, {})
        verdict = executor.run(ref(subj), odd, frozenset())
        assert verdict.status == "skip" and "misaligned address" in verdict.message
        assert executor.worker.pid is None                      # the faulted context is not reused
        even = Case({"N": 4}, {"x": TensorCase((4,), "float32", "contiguous", 0, "normal", 1, "")}, {})
        assert executor.run(ref(subj), even, frozenset()).status == "pass"
    finally:
        executor.close()
