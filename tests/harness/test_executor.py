"""harness.executor: in-process runs turn a device fault (a sticky CUDA error surfacing in the harness's own
steps) into a crash verdict that ends the exploration, as a dead worker does; other errors still raise."""
import pytest
import torch

from tritondiff.harness import executor as executor_module
from tritondiff.harness import explore, subject, tensor
from tritondiff.harness.case import Case, TensorCase
from tritondiff.harness.executor import InProcess, device_fault

STICKY = "CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA` ..."


def _case():
    return Case({"N": 4}, {"x": TensorCase((4,), "float32", "contiguous", 0, "normal", 1, "")}, {})


def test_device_faults_are_told_from_other_errors():
    assert device_fault(RuntimeError(STICKY))
    if hasattr(torch, "AcceleratorError"):
        assert device_fault(torch.AcceleratorError(STICKY))
    assert not device_fault(RuntimeError("shape mismatch"))
    assert not device_fault(ValueError("CUDA error: looks like one, is not a RuntimeError"))
    assert not device_fault(torch.cuda.OutOfMemoryError("CUDA error: out of memory"))


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
