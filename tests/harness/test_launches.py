"""harness.launches: every kernel launch captured with grid, constexprs, args and autotune context."""
from __future__ import annotations

import inspect
import json

import pytest
import torch

from tritondiff.base import device
import triton
import triton.language as tl

from tritondiff.harness import autotuning, launches
from tritondiff.base.exc import GridLimitExceeded
from tritondiff.harness.launches import record_launches, write_sources
from triton.runtime.jit import JITFunction


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _fill_kernel(out_ptr, bias_ptr, n, value, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr = 32):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.zeros((BLOCK,), tl.float32) + value
    if HAS_BIAS:
        v += tl.load(bias_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, v, mask=mask)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def _copy_heuristic(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


_CONFIGS = [triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64}, num_warps=2)]


@triton.autotune(configs=_CONFIGS, key=["n"])
@triton.jit
def _tuned_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.fixture(autouse=True, scope="module")
def _cpu_benchmarker():
    autotuning.install_cpu_benchmarker(reps=2)


def test_plain_launch_is_described():
    dev = device.torch_device()
    big = torch.randn(400, device=dev)
    x = big[5:346]                                   # a view with a storage offset
    y = torch.randn(341, device=dev)
    out = torch.empty(341, device=dev)
    with record_launches() as rec:
        _add_kernel[(triton.cdiv(341, 64),)](x, y, out, 341, BLOCK=64)
    assert torch.allclose(out, x + y)
    (launch,) = rec.launches
    assert launch.kernel == "_add_kernel"
    assert launch.qualname == f"{__name__}._add_kernel"
    assert launch.source == inspect.getsource(_add_kernel.fn)
    assert launch.grid == (6,)
    assert launch.constexprs == {"BLOCK": 64}
    assert launch.autotune_config is None and launch.tuning_trial is False
    names = [a["name"] for a in launch.args]
    assert names == ["x_ptr", "y_ptr", "out_ptr", "n"]
    assert launch.args[0] == {"name": "x_ptr", "kind": "tensor", "shape": [341], "stride": [1],
                              "dtype": "torch.float32", "storage_offset": 5, "numel": 341, "device": str(x.device)}
    assert launch.args[3] == {"name": "n", "kind": "scalar", "value": 341, "type": "int"}


def test_callable_grid_defaults_none_and_options():
    dev = device.torch_device()
    out = torch.empty(41, device=dev)
    strided = torch.zeros(41, 2, device=dev)[:, 0]
    # (reads only constexprs from meta: triton 3.6's interpreter hands runtime ints to grid
    # callables as 1-element tensors that cdiv cannot index)
    grid = lambda meta: (triton.cdiv(41, meta["BLOCK"]),)  # noqa: E731
    with record_launches() as rec:
        _fill_kernel[grid](out, None, 41, 1.5, HAS_BIAS=False, num_warps=2)
        _fill_kernel[grid](out, strided, 41, 1.5, HAS_BIAS=False)
    assert torch.equal(out, torch.full((41,), 1.5, device=dev))
    first, second = rec.launches
    assert first.grid == (2,)                        # cdiv(41, default BLOCK=32)
    assert first.constexprs == {"HAS_BIAS": False, "BLOCK": 32, "num_warps": 2}
    assert first.args[1] == {"name": "bias_ptr", "kind": "none"}
    assert first.args[3] == {"name": "value", "kind": "scalar", "value": 1.5, "type": "float"}
    assert second.args[1]["stride"] == [2] and second.args[1]["shape"] == [41]


def test_nothing_recorded_outside_a_recorder_and_nesting():
    dev = device.torch_device()
    x = torch.randn(9, device=dev)
    out = torch.empty(9, device=dev)
    with record_launches() as outer:
        _add_kernel[(1,)](x, x, out, 9, BLOCK=16)
        with record_launches() as inner:
            _copy_heuristic[(1,)](x, out, 9)
        _add_kernel[(1,)](x, x, out, 9, BLOCK=16)
    _add_kernel[(1,)](x, x, out, 9, BLOCK=16)        # after exit: not recorded
    assert [l.kernel for l in outer.launches] == ["_add_kernel", "_copy_heuristic", "_add_kernel"]
    assert [l.kernel for l in inner.launches] == ["_copy_heuristic"]
    assert inner.launches[0].constexprs == {"BLOCK": 16}   # applied by triton.heuristics
    assert torch.equal(out, x + x)
    assert launches._recorders == []


def test_autotuned_trials_and_real_launch_are_told_apart():
    dev = device.torch_device()
    autotuning.clear_caches([_tuned_copy])
    x = torch.randn(341, device=dev)
    out = torch.empty(341, device=dev)
    grid = lambda meta: (triton.cdiv(341, meta["BLOCK"]),)  # noqa: E731
    with record_launches() as rec:
        _tuned_copy[grid](x, out, 341)
        _tuned_copy[grid](x, out, 341)               # cached choice: no trials
    assert torch.equal(out, x)
    trials = [l for l in rec.launches if l.tuning_trial]
    real = rec.real_launches
    assert len(real) == 2 and rec.trial_count == len(trials)
    config_strs = {str(c) for c in _CONFIGS}
    assert {l.autotune_config for l in trials} == config_strs   # every config was benchmarked
    if device.is_interpreter():
        assert len(trials) == len(_CONFIGS) * 2              # reps=2 per config
    assert real[0].autotune_config == real[1].autotune_config == str(_tuned_copy.best_config)
    chosen_block = _tuned_copy.best_config.kwargs["BLOCK"]
    assert real[0].constexprs["BLOCK"] == chosen_block and real[0].grid == (triton.cdiv(341, chosen_block),)
    for launch in trials:
        block = int(launch.autotune_config.split("BLOCK: ")[1].split(",")[0])
        assert launch.constexprs["BLOCK"] == block


def test_keep_trials_false_counts_but_drops_trials():
    dev = device.torch_device()
    autotuning.clear_caches([_tuned_copy])
    x = torch.randn(41, device=dev)
    out = torch.empty(41, device=dev)
    with record_launches(keep_trials=False) as rec:
        _tuned_copy[lambda meta: (triton.cdiv(41, meta["BLOCK"]),)](x, out, 41)
    assert len(rec.launches) == 1 and not rec.launches[0].tuning_trial
    assert rec.trial_count >= len(_CONFIGS)


def test_failing_launch_is_still_recorded():
    dev = device.torch_device()
    x = torch.randn(9, device=dev)
    with record_launches() as rec:
        with pytest.raises(Exception):
            _add_kernel[(1,)](x, x, x, 9, 16, BLOCK=16)  # one argument too many
    assert [l.kernel for l in rec.launches] == ["_add_kernel"]


def test_write_sources(tmp_path):
    dev = device.torch_device()
    x = torch.randn(9, device=dev)
    out = torch.empty(9, device=dev)
    with record_launches() as rec:
        _add_kernel[(1,)](x, x, out, 9, BLOCK=16)
        _add_kernel[(1,)](x, x, out, 9, BLOCK=16)
        _fill_kernel[(1,)](out, x, 9, float("nan"), HAS_BIAS=True)
    paths = write_sources(rec.launches, tmp_path / "dump")
    names = sorted(p.split("/")[-1] for p in paths)
    assert names == ["_add_kernel.py", "_fill_kernel.py", "launches.json"]
    assert (tmp_path / "dump" / "_add_kernel.py").read_text() == inspect.getsource(_add_kernel.fn)
    entries = json.loads((tmp_path / "dump" / "launches.json").read_text())
    assert [e["source_file"] for e in entries] == ["_add_kernel.py", "_add_kernel.py", "_fill_kernel.py"]
    assert entries[2]["args"][3]["value"] == "nan" and "source" not in entries[0]
    assert entries[0]["grid"] == [1] and entries[0]["constexprs"] == {"BLOCK": 16}
    json.dumps([l.to_json() for l in rec.launches])     # every record is JSON-serialisable
    # the JSON form a verdict carries back from a worker writes the same files (what a dump holds)
    again = write_sources([l.to_json() for l in rec.launches], tmp_path / "from_json")
    assert sorted(p.split("/")[-1] for p in again) == names
    assert json.loads((tmp_path / "from_json" / "launches.json").read_text()) == entries


def test_write_sources_keeps_same_named_kernels_apart(tmp_path):
    one = {"kernel": "k", "qualname": "a.k", "source": "def k():\n    pass", "grid": [2]}
    other = {"kernel": "k", "qualname": "b.k", "source": "def k():\n    return 1\n", "grid": [3]}
    bare = {"kernel": "opaque", "qualname": "c.opaque", "grid": [1]}            # no source captured
    write_sources([one, other, one, bare], tmp_path)
    assert (tmp_path / "k.py").read_text() == "def k():\n    pass\n"
    assert (tmp_path / "k__2.py").read_text() == "def k():\n    return 1\n"
    entries = json.loads((tmp_path / "launches.json").read_text())
    assert [e["source_file"] for e in entries] == ["k.py", "k__2.py", "k.py", None]
    assert [e["grid"] for e in entries] == [[2], [3], [2], [1]] and all("source" not in e for e in entries)


def test_install_is_idempotent():
    launches.install()
    before = JITFunction.__dict__["run"]
    launches.install()
    launches._installed = False                        # force the patch path again
    launches.install()
    assert JITFunction.__dict__["run"] is before
    chain, fn = 0, before
    while fn is not None:
        chain += getattr(fn, "__tritondiff_tag__", None) == "tritondiff.launches"
        fn = getattr(fn, "__wrapped__", None)
    assert chain == 1


@triton.jit
def _rows_on_axis1(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(1)                          # one program per row along axis 1: CUDA caps it at 65,535
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + row * N + offs, tl.load(x_ptr + row * N + offs, mask=offs < N), mask=offs < N)


@pytest.mark.parametrize("callable_grid", [False, True])
def test_a_grid_past_cuda_s_axis_limit_is_refused_before_it_runs(callable_grid):
    x = torch.randn(65_536, 2, device=device.torch_device())
    out = torch.empty_like(x)
    grid = (lambda meta: (1, 65_536)) if callable_grid else (1, 65_536)
    with record_launches() as rec, pytest.raises(Exception) as e:
        _rows_on_axis1[grid](x, out, 2, BLOCK=2)
    err = e.value if isinstance(e.value, GridLimitExceeded) else e.value.__cause__ or e.value.__context__
    assert isinstance(err, GridLimitExceeded), repr(e.value)
    assert (err.axis, err.limit, err.grid) == (1, 65_535, (1, 65_536))
    assert "65,536 programs along axis 1, CUDA allows at most 65,535" in str(err)
    assert [la.grid for la in rec.launches] == [(1, 65_536)]                   # recorded, then refused
    with record_launches():
        _rows_on_axis1[(1, 3)](x, out, 2, BLOCK=2)                             # within the limit: runs
    assert torch.equal(out[:3], x[:3])


def test_check_grid_limits_per_axis():
    launches.check_grid("k", (2 ** 31 - 1, 65_535, 65_535))
    launches.check_grid("k", ("?", 1))                                         # unresolved entries pass
    for grid, axis in (((2 ** 31, 1, 1), 0), ((1, 1, 65_536), 2)):
        with pytest.raises(GridLimitExceeded) as e:
            launches.check_grid("k", grid)
        assert e.value.axis == axis


def test_trials_are_told_apart_after_the_tuners_bench_was_replaced_and_restored(monkeypatch):
    """A recorder first created while ``Autotuner._bench`` is replaced (a test's monkeypatch) wraps the
    replacement; once it is restored, the next recorder wraps the original again, so tuning trials are
    never counted as real launches."""
    from triton.runtime.autotuner import Autotuner

    original = Autotuner.__dict__["_bench"]
    while getattr(original, "__wrapped__", None) is not None:      # the method as triton defines it
        original = original.__wrapped__
    with monkeypatch.context() as m:
        m.setattr(Autotuner, "_bench", original)                      # as if no recorder had been made yet
        with m.context() as inner:
            inner.setattr(Autotuner, "_bench", lambda self, *a, **k: original(self, *a, **k))
            with record_launches():
                pass                                                  # wraps the replacement
        with record_launches() as rec:                                # the replacement is gone: wraps again
            autotuning.clear_caches([_tuned_copy])
            x = torch.randn(341, device=device.torch_device())
            _tuned_copy[lambda meta: (triton.cdiv(341, meta["BLOCK"]),)](x, torch.empty_like(x), 341)
        assert len(rec.real_launches) == 1 and rec.trial_count >= len(_CONFIGS)
