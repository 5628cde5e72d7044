"""Autotune candidates of generated kernels (compiler.codegen.variants)."""
import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import autotune
from tritondiff.compiler.codegen import variants
from tritondiff.compiler.codegen.variants import MAX_REDUCTION_CANDIDATES, reduction_candidates
from tritondiff.compiler.heuristics import ReductionChoice
from tests.compiler.util import assert_same, seeded_randn

GPU = dict(persistent_max_rnumel=8192, looped_rblock=4096, max_reduction_block_numel=4096)   # the GPU defaults


def _names(choice, xnumel, rnumel, gpu=True):
    return [c.name for c in reduction_candidates(choice, xnumel, rnumel, gpu=gpu)]


def test_a_looped_row_that_fits_one_block_is_also_tried_persistent():
    """Layer norm 4096 x 10240's backward: looped over 4096-element chunks by the heuristic; one row per
    program held whole (16384) ran its dx kernel in 86 us against 93."""
    with compiler.config.patch(**GPU):
        choice = ReductionChoice("looped", 1, 4096)
        cands = reduction_candidates(choice, 4096, 10240, gpu=True)
    names = [c.name for c in cands]
    assert "persistent_x1_r16384" in names and "persistent_x1_r16384_w2x" in names
    assert {"looped_x1_r4096_w0.5x", "looped_x1_r4096_w2x", "looped_x1_r4096_s2"} <= set(names)
    pipelined = next(c for c in cands if c.name == "looped_x1_r4096_s2")     # the loop pipelined: a source change
    assert pipelined.choice.stages == 2 and pipelined.warp_factor == 1
    assert {c.choice.stages for c in cands if c.choice.strategy == "persistent"} == {None}
    assert "looped_x1_r4096" not in names                      # the heuristic runs as the first candidate
    assert len(set(names)) == len(names) <= MAX_REDUCTION_CANDIDATES
    with compiler.config.patch(**GPU):                          # past twice the persistent limit: no such try
        assert not [n for n in _names(choice, 64, 40_000) if n.startswith("persistent")]


def test_a_long_persistent_row_is_also_tried_looped_and_blocks_stay_in_budget():
    with compiler.config.patch(**GPU):
        names = _names(ReductionChoice("persistent", 1, 8192), 8192, 8192)
        assert "looped_x1_r2048" in names and not any("_s" in n for n in names)   # no stages: no loop to pipeline
        short = reduction_candidates(ReductionChoice("persistent", 256, 16), 1_152_000, 16, gpu=True)
    assert not [c for c in short if c.choice.strategy == "looped"]               # 16 elements: nothing to loop
    assert all(c.choice.xblock * c.choice.rblock <= 4096 for c in short)         # x512 would pass the budget
    assert {c.warp_factor for c in short} == {0.5, 1, 2}


def test_split_candidates_keep_the_split_and_the_interpreter_tries_two_shapes():
    choice = ReductionChoice("split", 1, 4096, 8)
    with compiler.config.patch(**GPU):
        cands = reduction_candidates(choice, 1, 2 ** 28, gpu=True)
    assert {c.choice.strategy for c in cands} == {"split"} and {c.choice.splits for c in cands} == {8}
    cpu = reduction_candidates(choice, 1, 2 ** 28, gpu=False)      # the caller keeps the first two it generates
    assert len(cpu) >= 2 and {c.warp_factor for c in cpu} == {1} and {c.choice.stages for c in cpu} == {None}


def test_warps_candidates_scale_the_generated_warps_within_triton_s_limit():
    """A streaming split partial is generated at 32 warps, past max_num_warps (16): its factor-1 candidate
    keeps them, x0.5 halves them, x2 stays at Triton's 32.  Other kernels keep max_num_warps as their ceiling."""
    with compiler.config.patch(max_num_warps=16):
        assert [variants._scaled_warps(32, f) for f in (1, 0.5, 2)] == [32, 16, 32]
        assert [variants._scaled_warps(8, f) for f in (1, 0.5, 2, 4)] == [8, 4, 16, 16]
        assert variants._scaled_warps(1, 0.5) == 1


def test_review_findings_a_forced_strategy_stays_and_tiny_blocks_still_get_warps_candidates():
    """Review findings: tuning tried persistent kernels under reduction_strategy="looped" (a
    subject forcing a path then ran another); a persistent reduction with RBLOCK < 16 got no candidate."""
    with compiler.config.patch(**GPU, reduction_strategy="looped"):
        names = _names(ReductionChoice("looped", 1, 4096), 4096, 10240)
    assert names and all(n.startswith("looped") for n in names)
    with compiler.config.patch(**GPU):
        names = _names(ReductionChoice("persistent", 256, 8), 100_000, 8)
    assert {"persistent_x256_r8_w0.5x", "persistent_x256_r8_w2x"} <= set(names)


def test_every_gpu_candidate_of_a_row_reduction_compiles_runs_and_is_timed(tmp_path, monkeypatch):
    """The GPU candidate set, generated and timed under the interpreter: each one runs (a timing, not None,
    in the cache), and the tuned graph's result is eager's."""
    monkeypatch.setattr(variants, "_gpu_candidates", lambda: True)
    autotune._caches.clear()
    x = seeded_randn(3, 20_000, seed=4)

    def fn(x):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],))
    with compiler.config.patch(autotune=True, autotune_cpu_timing=True, autotune_cache_dir=str(tmp_path),
                               persistent_max_rnumel=16384, looped_rblock=4096, max_reduction_block_numel=4096):
        got = compiler.compile_fresh(fn)(x)
        (entry,) = autotune.get_cache()._memory.values()
    autotune._caches.clear()
    assert_same(got, fn(x), rtol=1e-4, atol=1e-4)
    timings = entry["timings"]
    assert "persistent_x1_r32768" in timings and "looped_x1_r4096_w2x" in timings and len(timings) >= 6
    assert "looped_x1_r4096_s2" in timings                      # the pipelined loop (tl.range) runs too
    assert all(v is not None for v in timings.values()), timings


def test_a_mixed_order_group_is_tuned_over_its_warps(tmp_path, monkeypatch):
    """Layer norm 4096 x 10240's mixed-order backward: 141 us with its heuristic 16 warps, 134 with 8.  Its candidates keep the blocks (whole rows) and halve / double every kernel's warps."""
    monkeypatch.setattr(variants, "_gpu_candidates", lambda: True)
    autotune._caches.clear()
    x, dy = seeded_randn(40, 24, seed=5).requires_grad_(), seeded_randn(40, 24, seed=6)
    w, b = seeded_randn(24, seed=7).requires_grad_(), seeded_randn(24, seed=8).requires_grad_()

    def fn(x, w, b, dy):
        y = torch.nn.functional.layer_norm(x, (24,), w, b)
        return torch.autograd.grad(y, (x, w, b), dy)
    with compiler.config.patch(autotune=True, autotune_cpu_timing=True, autotune_cache_dir=str(tmp_path)):
        got = compiler.compile_fresh(fn)(x, w, b, dy)
        entries = list(autotune.get_cache()._memory.values())
    autotune._caches.clear()
    assert compiler.counters["reduction_strategy.mixed_order"] >= 1
    for g, e in zip(got, fn(x, w, b, dy)):
        assert_same(g, e, rtol=1e-4, atol=1e-4)
    mixed = [e["timings"] for e in entries if any(n.startswith("mixed_order_w") for n in e["timings"])]
    assert mixed and all(v is not None for t in mixed for v in t.values())
    assert {n for t in mixed for n in t} >= {"heuristic", "mixed_order_w0.5x"}


def test_review_finding_a_looped_alternative_to_a_persistent_choice_takes_the_configured_loop_stages():
    """Review finding: under loop_stages=2 the looped candidate of a persistent choice inherited
    the persistent kernel's None (no loop) and ran unpipelined."""
    with compiler.config.patch(**GPU, loop_stages=2):
        cands = reduction_candidates(ReductionChoice("persistent", 1, 4096), 4096, 4000, gpu=True)
    looped = [c for c in cands if c.choice.strategy == "looped"]
    assert looped and {c.choice.stages for c in looped} == {2}
    assert {c.choice.stages for c in cands if c.choice.strategy == "persistent"} == {None}


def test_candidates_of_the_heuristic_s_blocks_keep_the_warps_it_chose():
    """A wide persistent row is chosen at 32 warps (heuristics.persistent_wide), past what its block alone
    would take (16): its warps candidate is that 32 halved -- doubled it is 32 again, the heuristic itself, so
    no candidate (review finding) -- and no factor-1 copy at 16 stands beside it under the heuristic's own
    name; a candidate of other blocks takes its block's warps."""
    wide = ReductionChoice("persistent", 1, 32768, warps=32)
    with compiler.config.patch(**GPU):
        cands = reduction_candidates(wide, 4096, 32768, gpu=True)
    same = [c for c in cands if (c.choice.strategy, c.choice.xblock, c.choice.rblock) == ("persistent", 1, 32768)]
    assert {(c.choice.warps, c.warp_factor) for c in same} == {(32, 0.5)}
    assert all(c.choice.warps is None for c in cands if c not in same) and len(cands) > len(same)


def test_a_tagged_split_is_tuned_within_its_poll_s_warps_and_no_candidate_repeats_another(tmp_path, monkeypatch):
    """A tagged split's poll gives each slot one thread only up to ``max_warps``: its twice-the-warps candidate,
    clamped there, would launch what the heuristic launches, so it is not tried; half the warps is."""
    monkeypatch.setattr(variants, "_gpu_candidates", lambda: True)
    autotune._caches.clear()
    x = seeded_randn(512, seed=9)

    def fn(x):
        return (x * x).sum().sqrt()
    with compiler.config.patch(autotune=True, autotune_cpu_timing=True, autotune_cache_dir=str(tmp_path),
                               reduction_strategy="split", rblock=64, split_count=8, split_last_program_sync="tagged"):
        got = compiler.compile_fresh(fn)(x)
        entries = list(autotune.get_cache()._memory.values())
    autotune._caches.clear()
    assert_same(got, fn(x), rtol=1e-5, atol=1e-5)
    (timings,) = [e["timings"] for e in entries if "heuristic" in e["timings"]]
    assert "split_x1_r64_w0.5x" in timings and "split_x1_r64_w2x" not in timings, sorted(timings)
    assert all(v is not None for v in timings.values())
