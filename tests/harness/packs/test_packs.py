"""harness.packs: which targets reach a pack, a missing library as one usage line, GPU-only subjects skipped
under the interpreter with their reason."""
import pytest
import torch

from tritondiff.base import device
from tritondiff.harness import packs, subject, tensor
from tritondiff.harness.api import runnable_here
from tritondiff.harness.campaign import resolve_targets, runnable
from tritondiff.harness.exc import UsageError


def test_a_target_reaches_a_pack_only_by_naming_its_prefix():
    names = lambda t: [p.prefix for p in packs.reached_by(t)]  # noqa: E731
    assert names("wild.*") == ["wild.liger", "wild.gems"] and names("wild.liger.*") == ["wild.liger"]
    assert names("wild.gems.rms_norm") == ["wild.gems"] and names("wild.lig*") == ["wild.liger"]
    assert names("*") == [] and names("kernels.*") == [] and names("wild.ligerx") == []


def test_a_pack_whose_library_does_not_import_is_one_usage_error_naming_the_extra(monkeypatch):
    fake = packs.Pack("wild.nothing", "tritondiff.harness.packs.no_such_pack", "no-such-lib")
    monkeypatch.setattr(packs, "PACKS", (fake,))
    with pytest.raises(UsageError, match=r"wild.nothing.\* needs no-such-lib.*pip install 'tritondiff\[wild\]'"):
        resolve_targets(["wild.nothing.*"])


def test_gpu_only_subjects_are_skipped_with_their_reason_under_the_interpreter():
    @subject(reference=lambda x: x + 1, inputs={"x": tensor(("N",))}, dims={"N": (1, 4)},
             name="packs_test.gpu_only", gpu_only="reads the device's SM count")
    def gpu_only(x):
        return x + 1

    @subject(reference=lambda x: x + 1, inputs={"x": tensor(("N",))}, dims={"N": (1, 4)}, name="packs_test.any")
    def anywhere(x):
        return x + 1

    lines = []
    kept = runnable([gpu_only, anywhere], lines.append)
    if device.is_interpreter():
        assert kept == [anywhere] and runnable_here(gpu_only) == "GPU only: reads the device's SM count"
        assert lines == ["skip  packs_test.gpu_only: GPU only: reads the device's SM count"]
        with pytest.raises(UsageError, match="no target can run here"):
            runnable([gpu_only], lines.append)
        from tritondiff.harness.explore import explore
        with pytest.raises(UsageError, match="GPU only: reads the device's SM count"):
            explore(gpu_only, max_examples=1)
    else:
        assert kept == [gpu_only, anywhere] and not lines


def test_gpu_only_must_give_a_reason():
    from tritondiff.harness.exc import InvalidSubject
    with pytest.raises(InvalidSubject, match="gpu_only"):
        subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 2}, gpu_only="")
