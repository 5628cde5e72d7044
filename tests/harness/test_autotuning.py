"""harness.autotuning: real autotuner trials under the interpreter, watched, forced and re-tuned.

The seed kernel is ``atomic_sum_misadventure`` from seed 001 (the L2-norm notebook): an autotuned
``tl.atomic_add`` of per-block sums of squares into one output with no ``reset_to_zero``.  On an
H100 it returned 1265x the true sum of squares; every benchmark trial adds into the output.
"""
from __future__ import annotations

import pytest
import torch

from tritondiff.base import device
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner

from tritondiff.harness import autotuning
from tritondiff.harness.autotuning import clear_caches, describe, forced_config, live_autotuners, tuning_watch
from tritondiff.harness.exc import UsageError
from tritondiff.harness.launches import record_launches

REPS = 2
SEED_CONFIGS = [triton.Config({"BLOCK_SIZE": b}) for b in (64, 128, 256, 512)]


# Seed 001, verbatim apart from the name: no reset_to_zero, so every trial accumulates.
@triton.autotune(configs=SEED_CONFIGS, key=["n_elements"])
@triton.jit
def atomic_sum_misadventure(x_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    partial = tl.sum(x * x)
    tl.atomic_add(output_ptr, partial)


# The fix: the autotuner zeroes the output before each trial and after choosing.
@triton.autotune(configs=SEED_CONFIGS, key=["n_elements"], reset_to_zero=["output_ptr"])
@triton.jit
def atomic_sum_reset(x_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0)
    tl.atomic_add(output_ptr, tl.sum(x * x))


def _make_inplace_increment(restore: bool):
    @triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"],
                     restore_value=["x_ptr"] if restore else None)
    @triton.jit
    def inplace_increment(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)
    return inplace_increment


increment_restored = _make_inplace_increment(restore=True)
increment_unrestored = _make_inplace_increment(restore=False)


@pytest.fixture(autouse=True, scope="module")
def _cpu_benchmarker():
    autotuning.install_cpu_benchmarker(reps=REPS)


def _sum_of_squares(kernel, x):
    out = torch.zeros(1, device=x.device, dtype=torch.float32)
    kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel())   # the seed's max_blocks grid
    return out.item()


def test_seed_001_accumulates_across_real_trials():
    x = torch.randn(341, device=device.torch_device())
    truth = float((x.double() ** 2).sum())
    clear_caches([atomic_sum_misadventure])
    with tuning_watch() as w:
        tuned = _sum_of_squares(atomic_sum_misadventure, x)
        cached = _sum_of_squares(atomic_sum_misadventure, x)
    stats = w.stats(atomic_sum_misadventure)
    assert w.tuned == [atomic_sum_misadventure] and w.used == [atomic_sum_misadventure]
    if device.is_interpreter():
        # every trial (4 configs x REPS runs) plus the real launch added into the output
        assert tuned == pytest.approx(truth * (len(SEED_CONFIGS) * REPS + 1), rel=1e-4)
    else:
        assert tuned > 2 * truth
    assert stats.trials == [str(c) for c in SEED_CONFIGS]      # one benchmark trial per config
    assert cached == pytest.approx(truth, rel=1e-4)           # the cached call is right: the bug hides
    assert (stats.calls, stats.tuning_calls, stats.cached_calls) == (2, 1, 1)
    assert stats.chosen[0] == stats.chosen[1] == str(atomic_sum_misadventure.best_config)


def test_reset_to_zero_gives_the_truth_on_the_tuning_call():
    x = torch.randn(341, device=device.torch_device())
    truth = float((x.double() ** 2).sum())
    clear_caches([atomic_sum_reset])
    with tuning_watch() as w:
        assert _sum_of_squares(atomic_sum_reset, x) == pytest.approx(truth, rel=1e-4)
    assert w.tuned == [atomic_sum_reset]


@pytest.mark.parametrize("n", [9, 341])
def test_restore_value_for_an_in_place_update(n):
    dev = device.torch_device()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    clear_caches([increment_restored, increment_unrestored])
    x = torch.arange(n, dtype=torch.float32, device=dev)
    increment_restored[grid](x, n)
    assert torch.equal(x, torch.arange(n, dtype=torch.float32, device=dev) + 1)
    y = torch.arange(n, dtype=torch.float32, device=dev)
    increment_unrestored[grid](y, n)
    if device.is_interpreter():
        assert torch.equal(y, torch.arange(n, dtype=torch.float32, device=dev) + 2 * REPS + 1)
    else:
        assert bool((y > torch.arange(n, dtype=torch.float32, device=dev) + 1).all())


def test_forced_config_runs_exactly_that_config_then_restores():
    x = torch.randn(341, device=device.torch_device())
    truth = float((x.double() ** 2).sum())
    tuner = atomic_sum_misadventure
    clear_caches([tuner])
    _sum_of_squares(tuner, x)                                  # tune once: a cached choice exists
    chosen, configs, cache = tuner.best_config, tuner.configs, dict(tuner.cache)
    forced = SEED_CONFIGS[0] if chosen is not SEED_CONFIGS[0] else SEED_CONFIGS[1]
    with tuning_watch() as w, record_launches() as rec:
        with forced_config(tuner, forced) as applied:
            assert applied is forced
            assert _sum_of_squares(tuner, x) == pytest.approx(truth, rel=1e-4)   # no trials ran
        with forced_config(tuner, str(SEED_CONFIGS[3])):       # by its str(), as in launch records
            _sum_of_squares(tuner, x)
        _sum_of_squares(tuner, x)                              # afterwards: the old cached choice
    assert w.tuned == [] and w.stats(tuner).trials == []
    assert [l.constexprs["BLOCK_SIZE"] for l in rec.launches] == \
        [forced.kwargs["BLOCK_SIZE"], 512, chosen.kwargs["BLOCK_SIZE"]]
    assert tuner.configs is configs and tuner.cache == cache


def test_clear_caches_makes_the_next_call_retune():
    x = torch.randn(41, device=device.torch_device())
    tuner = atomic_sum_reset
    _sum_of_squares(tuner, x)
    with tuning_watch() as w:
        _sum_of_squares(tuner, x)
    assert w.tuned == [] and w.stats(tuner).cached_calls == 1
    tuner.cache_results = True                                 # as if the disk cache were on
    clear_caches([tuner])
    assert tuner.cache == {} and tuner.cache_results is False
    with tuning_watch() as w:
        _sum_of_squares(tuner, x)
    assert w.tuned == [tuner] and w.stats(tuner).tuning_calls == 1
    assert w.stats(tuner).trials == [str(c) for c in SEED_CONFIGS]


def test_clear_caches_default_clears_every_live_tuner():
    x = torch.randn(41, device=device.torch_device())
    _sum_of_squares(atomic_sum_reset, x)
    tuners = live_autotuners()
    assert all(isinstance(t, Autotuner) for t in tuners)
    assert {id(t) for t in (atomic_sum_misadventure, atomic_sum_reset, increment_restored)} <= {id(t) for t in tuners}
    clear_caches()
    assert atomic_sum_reset.cache == {}


def test_clear_caches_leaves_a_library_s_own_cache_type_alone():
    """flag-gems' tuner subclasses Triton's Autotuner with its own cache object (no ``clear``): clearing every
    live tuner -- what the autotune hunter does before each example -- must not raise for it (it failed every
    example of every op of the pack as a harness error)."""
    class LibraryCache:
        def __init__(self):
            self.entries = {"key": "config"}

    tuner = _make_inplace_increment(restore=False)
    tuner.cache = LibraryCache()
    tuner.cache_results = True
    try:
        clear_caches()
        assert tuner.cache.entries == {"key": "config"} and tuner.cache_results is False
    finally:
        tuner.cache = {}


def test_live_autotuners_sees_new_and_preexisting_tuners(monkeypatch):
    fresh = _make_inplace_increment(restore=False)               # registered by Autotuner.__init__
    assert any(t is fresh for t in live_autotuners())
    autotuning._seen.discard(fresh)                                # as if made before harness was imported
    monkeypatch.setattr(autotuning, "_scanned", False)
    assert any(t is fresh for t in live_autotuners())              # found by the one-time heap scan


def test_cpu_benchmark_contract():
    calls = []
    fn = lambda: calls.append(1)  # noqa: E731
    values = autotuning.cpu_benchmark(fn, quantiles=(0.5, 0.2, 0.8))
    assert len(calls) == REPS and len(values) == 3 and all(v >= 0 for v in values)
    assert values[1] <= values[0] <= values[2]
    assert isinstance(autotuning.cpu_benchmark(fn, return_mode="median"), float)
    assert len(autotuning.cpu_benchmark(fn, return_mode="all")) == REPS
    with pytest.raises(UsageError, match="return_mode"):
        autotuning.cpu_benchmark(fn, return_mode="p99")
    if device.is_interpreter():
        assert atomic_sum_reset.do_bench is autotuning.cpu_benchmark
        before = Autotuner.__dict__["do_bench"]
        autotuning.install_cpu_benchmarker(reps=REPS)
        assert Autotuner.__dict__["do_bench"] is before     # idempotent


def test_describe_and_usage_errors():
    assert describe(atomic_sum_misadventure) == "atomic_sum_misadventure"
    assert describe(atomic_sum_misadventure.fn) == "atomic_sum_misadventure"
    with pytest.raises(UsageError, match="no config"):
        with forced_config(atomic_sum_misadventure, "BLOCK_SIZE: 3"):
            pass
    with pytest.raises(UsageError, match="triton.Config"):
        with forced_config(atomic_sum_misadventure, {"BLOCK_SIZE": 64}):
            pass
    with pytest.raises(UsageError, match="not a triton.autotune kernel"):
        with forced_config(atomic_sum_misadventure.fn, SEED_CONFIGS[0]):
            pass
    with pytest.raises(UsageError, match="iterable"):
        clear_caches(atomic_sum_misadventure)
    with pytest.raises(UsageError, match="reps"):
        autotuning.install_cpu_benchmarker(reps=0)
