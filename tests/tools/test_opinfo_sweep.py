"""The OpInfo sweep's pre-merge subset, and the sweep's own classification."""
import pytest
import torch

from tritondiff.compiler import lowering
from tools import opinfo_sweep
from tritondiff.compiler.ir import Pointwise
from tests.compiler.conftest import fresh_compiler  # noqa: F401  (autouse: fresh dynamo caches, counters)


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


def test_a_wrong_lowering_shows_up_as_a_lowering_mismatch(monkeypatch):
    def wrong_neg(x):  # returns x instead of -x
        load = x.make_loader()
        return Pointwise.create(lambda idx: load(idx), x.get_size(), x.get_dtype())
    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.neg.default, wrong_neg)
    results = opinfo_sweep.sweep(["neg"], max_samples=1, log=None)
    assert results[0].status == "mismatched"
    sample = results[0].samples[0]
    assert sample.stage == "lowering" and sample.detail.startswith("[lowering] mismatch")
    t = opinfo_sweep.totals(results)
    assert t["stages"] == {"lowering": 1, "fusion": 0, "codegen": 0, "unknown": 0}
    assert "mismatched samples by stage: lowering: 1, fusion: 0, codegen: 0, unknown: 0" in \
        opinfo_sweep.report(results, "test")


def test_a_wrong_triton_expression_shows_up_as_a_codegen_mismatch(monkeypatch):
    from tritondiff.compiler.codegen.triton_ops import TritonOps
    monkeypatch.setattr(TritonOps, "neg", lambda self, x: self._unary("{x}", x))
    results = opinfo_sweep.sweep(["neg", "abs"], max_samples=1, log=None)
    by_name = {r.name: r for r in results}
    assert by_name["neg"].status == "mismatched" and by_name["neg"].samples[0].stage == "codegen"
    assert by_name["abs"].status == "matched" and by_name["abs"].samples[0].stage is None
    assert opinfo_sweep.totals(results)["stages"]["codegen"] == 1


def test_random_ops_are_skipped_and_unknown_names_rejected():
    results = opinfo_sweep.sweep(["bernoulli", "empty_like"], max_samples=1, log=None)
    assert [r.status for r in results] == ["skipped", "skipped"]
    with pytest.raises(SystemExit, match="no_such_op"):
        opinfo_sweep.sweep(["no_such_op"], log=None)
