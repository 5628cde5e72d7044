"""kernels.launch: the compiled-launcher fast path takes the JIT path once per specialisation, then calls the
cached compiled kernel with the arguments in signature order; anything that observes launches keeps the JIT path.
(The GPU path itself runs in the GPU nightly; here stand-in kernels check the caching and the arguments.)"""
import sys
from unittest import mock

import pytest
import torch

from kernels import launch as L
from kernels.config import config


class _Compiled:
    def __init__(self, calls):
        self.calls = calls

    def __getitem__(self, grid):
        return lambda *args: self.calls.append(("compiled", grid, args))


class _Kernel:
    """A stand-in @triton.jit function: kernel[grid](*args, **meta) returns a compiled kernel."""

    arg_names = ["x_ptr", "n", "scale", "BLOCK", "FLAG"]

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        def run(*args, **meta):
            self.calls.append(("jit", grid, args, meta))
            return _Compiled(self.calls)
        return run


@pytest.fixture
def unobserved(monkeypatch):
    monkeypatch.setattr(L, "_observed", lambda: False)
    monkeypatch.setattr(L.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(L, "_compiled", {})


def test_jit_once_per_specialisation_then_the_compiled_launcher_in_signature_order(unobserved):
    k, x = _Kernel(), torch.zeros(64)
    L.launch(k, (4,), x, 4096, 0.5, BLOCK=1024, FLAG=True, num_warps=4)
    L.launch(k, (8,), x, 4096, 0.25, BLOCK=1024, FLAG=True, num_warps=4)
    assert [c[0] for c in k.calls] == ["jit", "compiled"]
    assert k.calls[1] == ("compiled", (8, 1, 1), (x, 4096, 0.25, 1024, True))   # constexprs appended by name


@pytest.mark.parametrize("change", [
    dict(n=4097),                       # no longer a multiple of 16
    dict(n=1),                          # equal to 1: Triton folds it
    dict(n=2 ** 31),                    # a 64-bit integer
    dict(x=torch.zeros(64)[1:]),        # a pointer not 16-byte aligned
    dict(x=torch.zeros(64, dtype=torch.float16)),
    dict(BLOCK=512), dict(FLAG=False), dict(num_warps=8)])
def test_a_different_specialisation_takes_the_jit_path(unobserved, change):
    k = _Kernel()
    base = dict(x=torch.zeros(64), n=4096, BLOCK=1024, FLAG=True, num_warps=4)

    def call(**kw):
        a = {**base, **kw}
        L.launch(k, (4,), a["x"], a["n"], 1.0, BLOCK=a["BLOCK"], FLAG=a["FLAG"], num_warps=a["num_warps"])

    call()
    call(**change)
    assert [c[0] for c in k.calls] == ["jit", "jit"]


def test_arguments_it_cannot_key_on_or_left_to_defaults_take_the_jit_path(unobserved):
    k = _Kernel()
    for _ in range(2):
        L.launch(k, (1,), torch.zeros(4), 4, 1.0, BLOCK=16, num_warps=1)           # FLAG left to its default
        L.launch(k, (1,), torch.zeros(4), "n", 1.0, BLOCK=16, FLAG=True, num_warps=1)  # a string argument
    assert [c[0] for c in k.calls] == ["jit"] * 4


def test_observers_keep_the_jit_path(monkeypatch):
    from harness import device
    if device.is_interpreter():
        assert L._observed()                                          # the interpreter always takes the JIT path
    monkeypatch.setattr(device, "is_interpreter", lambda: False)
    assert not L._observed()                                          # a GPU, nothing watching: the fast path
    with config.patch(fast_launch=False):
        assert L._observed()
    import harness.launches as launches
    with launches.record_launches():
        assert L._observed()
    import triton
    if getattr(triton, "knobs", None) is not None:
        hook = triton.knobs.runtime.launch_enter_hook
        if hasattr(hook, "add"):                 # triton >= 3.7: a chain of hooks, empty unless one is added
            fn = lambda *a: None                 # noqa: E731
            hook.add(fn)
            try:
                assert L._observed()
            finally:
                hook.remove(fn)
        else:
            with mock.patch.object(triton.knobs.runtime, "launch_enter_hook", lambda *a: None):
                assert L._observed()
        assert not L._observed()


def test_a_kernel_like_object_without_arg_names_launches_as_it_asks(unobserved):
    # e.g. a test double standing in for a @triton.jit function (tests/kernels/test_layer_norm.py's _Launches):
    # seen on an H100, where the fast path is live, as an AttributeError
    calls = []

    class Double:
        def __getitem__(self, grid):
            return lambda *a, **k: calls.append((grid, a, k))

    x = torch.zeros(4)
    for _ in range(2):
        L.launch(Double(), (3,), x, 4, BLOCK=16, num_warps=1)
    assert len(calls) == 2
    for grid, args, meta in calls:
        assert grid == (3,) and args[0] is x and args[1:] == (4,) and meta == {"BLOCK": 16, "num_warps": 1}


def test_an_unhashable_constexpr_takes_the_jit_path(unobserved):
    k = _Kernel()
    for _ in range(2):
        L.launch(k, (1,), torch.zeros(4), 4, 1.0, BLOCK=[16], FLAG=True, num_warps=1)
    assert [c[0] for c in k.calls] == ["jit", "jit"]


class _TensorKernel(_Kernel):
    arg_names = ["x_ptr", "y_ptr", "BLOCK"]


def test_a_site_jits_once_per_alignment_then_calls_the_compiled_launcher(unobserved):
    k = _TensorKernel()
    site = L.Site(k, (4,), BLOCK=1024, num_warps=4)
    x, y = torch.zeros(64), torch.zeros(64)
    site(x, y)
    site(x, y)
    assert [c[0] for c in k.calls] == ["jit", "compiled"]
    assert k.calls[0] == ("jit", (4,), (x, y), {"BLOCK": 1024, "num_warps": 4})
    assert k.calls[1] == ("compiled", (4, 1, 1), (x, y, 1024))               # the constexpr appended by name
    site(x[1:], y)                                                          # misaligned: its own specialisation
    site(x[1:], y)
    assert [c[0] for c in k.calls] == ["jit", "compiled", "jit", "compiled"]


def test_a_site_with_a_defaulted_constexpr_or_observed_launches_keeps_the_jit_path(unobserved, monkeypatch):
    k = _TensorKernel()
    site = L.Site(k, (2, 3), num_warps=4)                                   # BLOCK left to its default
    x = torch.zeros(8)
    for _ in range(3):
        site(x, x)
    assert [c[0] for c in k.calls] == ["jit"] * 3
    k2 = _TensorKernel()
    observed = L.Site(k2, (1,), BLOCK=8)
    monkeypatch.setattr(L, "_observed", lambda: True)
    for _ in range(2):
        observed(x, x)
    assert [c[0] for c in k2.calls] == ["jit", "jit"]
