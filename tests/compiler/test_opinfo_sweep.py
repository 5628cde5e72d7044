"""The OpInfo sweep's pre-merge subset, and the sweep's own classification."""
import pytest
import torch

from compiler import lowering, opinfo_sweep
from compiler.ir import Pointwise


CHUNKS = [opinfo_sweep.PREMERGE_OPS[i:i + 6] for i in range(0, len(opinfo_sweep.PREMERGE_OPS), 6)]


@pytest.mark.parametrize("ops", CHUNKS, ids=[c[0] for c in CHUNKS])
def test_premerge_subset_has_no_failures_and_no_mismatches(ops):
    results = opinfo_sweep.sweep(ops, max_samples=2, log=None)
    bad = [(r.name, s.status, s.detail) for r in results for s in r.samples
           if s.status in ("mismatched", "failed to compile")]
    assert not bad, bad
    assert all(r.status == "matched" for r in results), [(r.name, r.status) for r in results]


def test_fallbacks_are_classified_and_reported():
    results = opinfo_sweep.sweep(["nn.functional.conv2d", "abs"], max_samples=1, log=None)
    status = {r.name: r.status for r in results}
    assert status == {"nn.functional.conv2d": "fell back", "abs": "matched"}
    text = opinfo_sweep.report(results, "test")
    assert "| ops | 1 | 1 | 0 | 0 | 0 |" in text
    assert "convolution" in text  # the extern that ran is named


def test_a_wrong_lowering_shows_up_as_a_mismatch(monkeypatch):
    def wrong_neg(x):  # returns x instead of -x
        load = x.make_loader()
        return Pointwise.create(lambda idx: load(idx), x.get_size(), x.get_dtype())
    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.neg.default, wrong_neg)
    results = opinfo_sweep.sweep(["neg"], max_samples=1, log=None)
    assert results[0].status == "mismatched"
    assert "mismatch" in results[0].samples[0].detail


def test_random_ops_are_skipped_and_unknown_names_rejected():
    results = opinfo_sweep.sweep(["bernoulli", "empty_like"], max_samples=1, log=None)
    assert [r.status for r in results] == ["skipped", "skipped"]
    with pytest.raises(SystemExit, match="no_such_op"):
        opinfo_sweep.sweep(["no_such_op"], log=None)
