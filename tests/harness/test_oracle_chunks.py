"""harness.oracle_chunks: a huge output judged chunk by chunk gives the whole-tensor comparison's verdict, report
for report -- drawn outputs with planted errors of every kind the oracle names, compared both ways."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from tritondiff.harness import explore, oracle_chunks, subject, tensor
from tritondiff.harness.oracle import compare

FIELDS = ("failure_class", "mismatches", "first_indices", "location", "where", "tail_excused", "max_abs",
          "max_rel", "max_ulp", "eager_max_abs", "shape", "dtype", "numel")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
PLANTS = ("none", "one", "block", "tail", "nan", "inf", "zeros", "noisy", "row", "col")


def _case(shape, dtype, plant, seed, offset):
    g = torch.Generator().manual_seed(seed)
    truth = torch.randn(shape, generator=g, dtype=torch.float64) * 3 + offset
    eager = (truth + torch.randn(shape, generator=g, dtype=torch.float64) * 1e-3).to(dtype)
    cand = (truth + torch.randn(shape, generator=g, dtype=torch.float64) * 1e-3).to(dtype)
    flat = cand.view(-1)
    n = flat.numel()
    if plant == "one":
        flat[int(torch.randint(n, (1,), generator=g))] += 50
    elif plant == "block":
        flat[n // 3: n // 3 + max(1, n // 10)] -= 7
    elif plant == "tail":
        flat[n - max(1, n % 16 or 3):] = 0.5
    elif plant == "nan":
        flat[n // 2] = math.nan
    elif plant == "inf":
        flat[0] = math.inf
    elif plant == "zeros":
        cand.zero_()
    elif plant == "noisy":
        cand = (truth + torch.randn(shape, generator=g, dtype=torch.float64) * 3e-3).to(dtype)
    elif plant == "row" and cand.dim() >= 2:
        cand[-1] += 9
    elif plant == "col" and cand.dim() >= 2:
        cand[..., 0] -= 9
    return cand, eager, truth


def _both(cand, eager, truth, chunk, monkeypatch):
    whole = compare(cand, eager, truth, large=oracle_chunks.compare_large)      # below CHUNKED_FROM: whole
    monkeypatch.setattr(oracle_chunks, "CHUNKED_FROM", 0)
    monkeypatch.setattr(oracle_chunks, "CHUNK_ELEMENTS", chunk)
    try:
        chunked = compare(cand, eager, truth, large=oracle_chunks.compare_large)
    finally:
        monkeypatch.undo()
    return whole, chunked


def _same(whole, chunked):
    assert whole.passed == chunked.passed and whole.failure_class == chunked.failure_class
    for w, c in zip(whole.outputs, chunked.outputs):
        for f in FIELDS:
            assert getattr(w, f) == getattr(c, f), (f, getattr(w, f), getattr(c, f))
        assert c.message.startswith(w.message), (w.message, c.message)    # plus where the first sits vs 2^31


@settings(max_examples=150, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=0, max_size=3).map(tuple),
       dtype=st.sampled_from(sorted(DTYPES)), plant=st.sampled_from(PLANTS), seed=st.integers(0, 2 ** 16),
       offset=st.sampled_from([0.0, 100.0]), chunk=st.integers(1, 300))
def test_chunked_and_whole_comparisons_agree(shape, dtype, plant, seed, offset, chunk):
    cand, eager, truth = _case(shape, DTYPES[dtype], plant, seed, offset)
    with pytest.MonkeyPatch.context() as mp:
        _same(*_both(cand, eager, truth, chunk, mp))


@pytest.mark.parametrize("plant", PLANTS)
def test_short_rows_grouped_across_chunk_boundaries(plant, monkeypatch):
    """Rows of 5 share an RMS level in groups of 7 rows; chunks are whole groups, the last one taking the
    remainder -- at 103 rows, and chunk sizes that are not multiples of the group."""
    cand, eager, truth = _case((103, 5), torch.float32, plant, 3, 0.0)
    for chunk in (1, 34, 36, 70, 400):
        _same(*_both(cand, eager, truth, chunk, monkeypatch))


def test_chunks_are_whole_row_groups():
    assert oracle_chunks.chunks((100, 5), 20) == [(a * 5, b * 5) for a, b in
                                                   [(0, 7), (7, 14), (14, 21), (21, 28), (28, 35), (35, 42),
                                                    (42, 49), (49, 56), (56, 63), (63, 70), (70, 77), (77, 84),
                                                    (84, 91), (91, 100)]]
    assert oracle_chunks.chunks((10, 64), 200) == [(0, 192), (192, 384), (384, 576), (576, 640)]
    assert oracle_chunks.chunks((1000,), 300) == [(0, 300), (300, 600), (600, 900), (900, 1000)]
    assert oracle_chunks.chunks((), 5) == [(0, 1)]
    assert oracle_chunks.chunks((0, 4), 5) == []


def test_a_mismatch_says_where_it_sits_against_2_31():
    assert oracle_chunks.past_2_31(2 ** 31 + 5, (2 ** 21 + 1, 1024)) == \
        "the first at [2097152, 5], flat offset 2,147,483,653 (past 2^31 = 2,147,483,648)"
    assert "below 2^31" in oracle_chunks.past_2_31(7, (4, 4))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_the_gpu_the_chunks_stay_there(monkeypatch):
    cand, eager, truth = _case((300, 77), torch.float32, "row", 5, 0.0)
    whole = compare(cand, eager, truth)
    monkeypatch.setattr(oracle_chunks, "CHUNKED_FROM", 0)
    monkeypatch.setattr(oracle_chunks, "CHUNK_ELEMENTS", 1000)
    chunked = compare(cand.cuda(), eager.cuda(), truth.cuda(), large=oracle_chunks.compare_large)
    _same(whole, chunked)


ROWS = {"x": tensor(("M", "N"), dtypes=("float32",), values=("normal",), nonfinite=False, layouts=("contiguous",))}


def _row_scale(x):
    return x * 2


@subject(reference=_row_scale, inputs=ROWS, dims={"M": (1, 40), "N": (1, 40)}, name="oracle_chunks_test.wraps")
def wraps_past_a_row(x):
    """A row-wise kernel whose rows from 5 on read the wrong row (as int32 offsets wrap past 2^31, scaled
    down): found through the chunked comparison, its message saying where the first bad element sits."""
    out = x * 2
    if x.shape[0] > 5:
        out[5:] = (x[: x.shape[0] - 5] * 2)
    return out


@subject(reference=_row_scale, inputs=ROWS, dims={"M": (1, 40), "N": (1, 40)}, name="oracle_chunks_test.right")
def right_twin(x):
    return x * 2


def test_a_subject_judged_in_chunks_is_found_and_its_twin_passes(monkeypatch, tmp_path, in_process):
    monkeypatch.setattr(oracle_chunks, "CHUNKED_FROM", 0)
    monkeypatch.setattr(oracle_chunks, "CHUNK_ELEMENTS", 16)
    found = explore(wraps_past_a_row, out_dir=str(tmp_path / "a"), database=False, executor=in_process, seed=3,
                    max_examples=80, budget_s=120)
    assert found.status == "fail" and found.failure_class == "mismatch"
    assert found.case.dims["M"] == 6 and "flat offset" in found.message and "below 2^31" in found.message
    twin = explore(right_twin, out_dir=str(tmp_path / "b"), database=False, executor=in_process, seed=3,
                   max_examples=40, budget_s=120)
    assert twin.status == "pass", twin.message
