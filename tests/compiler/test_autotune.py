"""Autotuning: cache key (device name), cache hits, state isolation of trials, corrupt caches."""
import os
import time

import pytest
import torch
import triton
import triton.language as tl

from tritondiff import compiler
from tritondiff.compiler import autotune
from tritondiff.compiler.exc import AutotuneCacheError, AutotuneError
from tritondiff.base import device
from tests.compiler.util import assert_same, seeded_randn


@pytest.fixture
def cache_dir(tmp_path):
    autotune._caches.clear()
    with compiler.config.patch(autotune_cache_dir=str(tmp_path), autotune_persist=True, autotune_cpu_timing=True):
        yield tmp_path
    autotune._caches.clear()


def _candidates(log=None):
    def make(value):
        def run(env):
            if log is not None:
                log.append(value)
            env["out"].fill_(value)
        return autotune.Candidate(f"fill{value}", run)
    return [make(v) for v in (1.0, 2.0, 3.0)]


def _key(env, device="dev"):
    return autotune.TuneKey("k", "src", autotune.tensor_signature(env, ["out"]), ("fill1.0", "fill2.0", "fill3.0"),
                            device)


def test_device_name_is_part_of_the_key(cache_dir, monkeypatch):
    env = {"out": torch.zeros(4)}
    for name in ("FakeGPU-A100", "FakeGPU-H100"):
        monkeypatch.setattr(autotune, "device_name", lambda name=name: name)
        key = autotune.make_key("k", ["src"], env, ["out"], ["fill1.0", "fill2.0", "fill3.0"])
        assert key.device == name
        autotune.choose(key, _candidates(), env, ["out"])
    autotune._caches.clear()  # read back from disk
    devices = sorted(d for _, d, _ in autotune.get_cache().entries())
    assert devices == ["FakeGPU-A100", "FakeGPU-H100"]
    assert _key(env, "a").digest() != _key(env, "b").digest()


def test_compile_options_are_part_of_the_key():
    env = {"out": torch.zeros(4)}
    plain = autotune.make_key("k", ["src"], env, ["out"], ["a", "b"])
    off = autotune.make_key("k", ["src"], env, ["out"], ["a", "b"], {"enable_fp_fusion": False})
    on = autotune.make_key("k", ["src"], env, ["out"], ["a", "b"], {"enable_fp_fusion": True})
    assert off.options == (("enable_fp_fusion", False),)
    assert len({plain.digest(), off.digest(), on.digest()}) == 3


def test_the_template_tuning_key_carries_the_fp_fusion_knob(monkeypatch):
    keys = []
    real = autotune.make_key
    monkeypatch.setattr(autotune, "make_key", lambda *a, **k: keys.append(real(*a, **k)) or keys[-1])
    a, b = seeded_randn(9, 41, seed=1), seeded_randn(41, 24, seed=2)
    for flag in (False, True):
        torch._dynamo.reset()
        with compiler.config.patch(matmul="autotune", autotune_persist=False, fp_fusion=flag):
            assert_same(compiler.compile(lambda a, b: a @ b)(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert [dict(k.options)["enable_fp_fusion"] for k in keys] == [False, True]
    assert keys[0].digest() != keys[1].digest()


def test_cache_hit_skips_benchmarking(cache_dir, monkeypatch):
    calls = []
    real = autotune.benchmark
    monkeypatch.setattr(autotune, "benchmark", lambda fn: calls.append(1) or real(fn))
    env = {"out": torch.zeros(4)}
    first = autotune.choose(_key(env), _candidates(), env, ["out"])
    assert len(calls) == 3
    autotune._caches.clear()  # a new process: only the file remains
    again = autotune.choose(_key(env), _candidates(), env, ["out"])
    assert len(calls) == 3 and again.name == first.name
    assert compiler.counters["autotune.cache_hits"] == 1
    other_shape = {"out": torch.zeros(5)}
    autotune.choose(_key(other_shape), _candidates(), other_shape, ["out"])
    assert len(calls) == 6  # another signature is another key


@pytest.mark.skipif(not device.is_interpreter(), reason="counts trial calls of the CPU timing path (GPU benchmarking repeats each)")
def test_trials_write_clones_and_the_real_call_runs_once(cache_dir):
    log = []
    env = {"out": torch.zeros(4)}
    winner = autotune.run_tuned(_key(env), _candidates(log), env, ["out"])
    # 3 candidates x (warm-up + timed run), the real run, the re-check: only the real run touched env["out"]
    assert len(log) == 3 * 2 + 2
    assert torch.equal(env["out"], torch.full((4,), float(winner.name[4:])))


@triton.jit
def _add_one_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def test_kernel_that_mutates_its_input_is_not_corrupted_by_tuning(cache_dir):
    x = seeded_randn(4231, seed=1)
    before = x.clone()

    def launcher(block):
        def run(env):
            _add_one_inplace[(triton.cdiv(env["x"].numel(), block),)](env["x"], env["x"].numel(), BLOCK=block)
        return autotune.Candidate(f"block{block}", run)
    env = {"x": x}
    key = autotune.make_key("add_one", ["_add_one_inplace"], env, ["x"], ["block1024", "block4096"])
    autotune.run_tuned(key, [launcher(1024), launcher(4096)], env, ["x"])
    assert compiler.counters["autotune.tuned"] == 1
    assert torch.equal(x, before + 1.0)  # once, however many trials ran


def test_recheck_catches_a_candidate_whose_result_depends_on_history(cache_dir):
    state = {"calls": 0}

    def leaky(env):
        state["calls"] += 1
        env["out"].fill_(state["calls"])
    env = {"out": torch.zeros(3)}
    key = autotune.make_key("leaky", ["x"], env, ["out"], ["leaky", "fill"])
    def slow_fill(env):
        time.sleep(0.05)  # loses the timing, so the leaky candidate wins
        env["out"].fill_(1.0)
    fill = autotune.Candidate("fill", slow_fill)
    with pytest.raises(AutotuneError, match="pristine"):
        autotune.run_tuned(key, [autotune.Candidate("leaky", leaky), fill], env, ["out"])


def test_corrupt_cache_file_is_moved_aside_and_rebuilt(cache_dir):
    path = os.path.join(cache_dir, autotune.CACHE_FILE)
    with open(path, "wb") as f:
        f.write(b"this is not an sqlite database" * 100)
    env = {"out": torch.zeros(4)}
    with pytest.warns(RuntimeWarning, match="unreadable"):
        autotune.choose(_key(env), _candidates(), env, ["out"])
    assert os.path.exists(path + ".corrupt")
    assert compiler.counters["autotune.cache_rebuilt"] == 1
    autotune._caches.clear()
    assert len(autotune.get_cache().entries()) == 1


def test_cache_that_cannot_be_rebuilt_raises_a_clear_error(cache_dir):
    path = os.path.join(cache_dir, autotune.CACHE_FILE)
    with open(path, "wb") as f:
        f.write(b"garbage" * 100)
    os.makedirs(os.path.join(path + ".corrupt", "occupied"))  # the file cannot be moved aside
    env = {"out": torch.zeros(4)}
    with pytest.raises(AutotuneCacheError, match="could not be rebuilt") as info:
        autotune.choose(_key(env), _candidates(), env, ["out"])
    assert info.value.path == path and "autotune_cache_dir" in str(info.value)


@pytest.mark.skipif(not device.is_interpreter(), reason="counts trial calls of the CPU timing path (GPU benchmarking repeats each)")
def test_cpu_without_timing_takes_the_first_candidate_without_running(cache_dir):
    log = []
    env = {"out": torch.zeros(4)}
    with compiler.config.patch(autotune_cpu_timing=False):
        winner = autotune.choose(_key(env), _candidates(log), env, ["out"])
    assert winner.name == "fill1.0" and log == [] and compiler.counters["autotune.benchmarks"] == 0


def test_generated_kernels_are_tuned_then_served_from_the_cache(cache_dir):
    x = seeded_randn(41, 4231, seed=2)

    def fn(x):
        return torch.softmax(x * 2, -1), (x + 1).relu()
    want = fn(x)
    with compiler.config.patch(autotune=True):
        assert_same(compiler.compile(fn)(x), want, rtol=1e-5, atol=1e-6)
        tuned = compiler.counters["autotune.tuned"]
        benchmarks = compiler.counters["autotune.benchmarks"]
        assert tuned >= 1 and benchmarks >= 2 * tuned  # softmax and relu share one kernel
        torch._dynamo.reset()
        autotune._caches.clear()
        assert_same(compiler.compile(fn)(x), want, rtol=1e-5, atol=1e-6)
    assert compiler.counters["autotune.tuned"] == tuned and compiler.counters["autotune.benchmarks"] == benchmarks
    assert compiler.counters["autotune.cache_hits"] >= tuned


def test_gemm_autotune_includes_the_aten_candidate(cache_dir):
    x, w, bias = seeded_randn(33, 70, seed=3), seeded_randn(19, 70, seed=4), seeded_randn(19, seed=5)

    def fn(x, w, bias):
        return torch.relu(torch.nn.functional.linear(x, w, bias))
    with compiler.config.patch(matmul="autotune"):
        assert_same(compiler.compile(fn)(x, w, bias), fn(x, w, bias), rtol=1e-4, atol=1e-4)
    timings = [autotune.get_cache()._memory[k]["timings"] for k in autotune.get_cache()._memory]
    assert len(timings) == 1 and "aten" in timings[0] and len(timings[0]) >= 2
    assert all(v is not None for v in timings[0].values())  # every candidate ran
