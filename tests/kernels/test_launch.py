"""kernels.launch: the compiled-launcher fast path takes the JIT path once per specialisation, then calls the
cached compiled kernel with the arguments in signature order; anything that observes launches keeps the JIT path.
Relaunches go through torch's static CUDA launcher where static_plan allows.  (The GPU path itself runs in the
GPU nightly; on CPU, stand-in kernels and a recorder for the static launcher check caching, plans and arguments.)"""
import sys
from types import SimpleNamespace
from unittest import mock

import pytest
import torch

from tritondiff.base import device
from tritondiff.kernels import launch as L
from tritondiff.kernels.config import config


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
    from tritondiff.base import device
    if device.is_interpreter():
        assert L._observed()                                          # the interpreter always takes the JIT path
    monkeypatch.setattr(device, "is_interpreter", lambda: False)
    assert not L._observed()                                          # a GPU, nothing watching: the fast path
    with config.patch(fast_launch=False):
        assert L._observed()
    import tritondiff.harness.launches as launches
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


# ---------------------------------------------------------------- torch's static launcher (static_plan / relauncher)

class _Bin:
    """A stand-in triton CompiledKernel: its source's signature, its metadata, its runner."""

    def __init__(self, names, signature, constants=(), **metadata):
        self.src = SimpleNamespace(fn=SimpleNamespace(arg_names=names), signature=signature,
                                   constants={c: None for c in constants})
        md = dict(num_warps=4, shared=1024, num_ctas=1, launch_cooperative_grid=False, launch_pdl=False,
                  global_scratch_size=0, profile_scratch_size=0)
        md.update(metadata)
        self.metadata = SimpleNamespace(**md)
        self.function = 0xF00
        self.runs = []

    def _init_handles(self):
        pass

    def __getitem__(self, grid):
        return lambda *args: self.runs.append((grid, args))


_NAMES = ["x_ptr", "n", "scale", "BLOCK"]
_SIG = {"x_ptr": "*fp32", "n": "i32", "scale": "fp32", "BLOCK": "constexpr"}


@pytest.fixture
def static_launcher(monkeypatch):
    """torch._C's static launcher replaced by a recorder (present on CPU builds too, but it launches CUDA)."""
    calls = []
    def launch_kernel(function, gx, gy, gz, warps, shared, codes, args, stream):
        if len(codes) != len(args):                    # as the real one checks
            raise RuntimeError("Mismatch between number of argument types and provided arguments")
        calls.append((function, gx, gy, gz, warps, shared, codes, args, stream))

    monkeypatch.setattr(torch._C, "_StaticCudaLauncher", SimpleNamespace(_launch_kernel=launch_kernel), raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 7000 + device, raising=False)
    monkeypatch.setattr(torch.version, "hip", None)
    return calls


def test_static_plan_types_every_passed_parameter_and_appends_the_scratch_pointers(static_launcher):
    assert L.static_plan(_Bin(_NAMES, _SIG), 3) == ("OifOO", None, 2)
    # triton < 3.5 knew no profile scratch: one pointer fewer
    old = _Bin(_NAMES, _SIG)
    del old.metadata.profile_scratch_size
    assert L.static_plan(old, 3) == ("OifO", None, 1)
    # n == 1 was folded into the binary (a constexpr in the signature, or a constant by index): not passed
    assert L.static_plan(_Bin(_NAMES, {**_SIG, "n": "constexpr"}), 3) == ("OfOO", (0, 2), 2)
    assert L.static_plan(_Bin(_NAMES, _SIG, constants=[(1,)]), 3) == ("OfOO", (0, 2), 2)
    wide = {**_SIG, "n": "i64", "scale": "fp64", "x_ptr": "*bf16"}
    assert L.static_plan(_Bin(_NAMES, wide), 3) == ("OldOO", None, 2)


_PTX = """.visible .entry _k(
\t.param .u64 .ptr .global .align 1 _k_param_0,
\t.param .u32 _k_param_1,
\t.param .f32 _k_param_2,%s
\t.param .u64 .ptr .global .align 1 _k_param_3,
\t.param .u64 .ptr .global .align 1 _k_param_4
)
.reqntid 128
{
\tld.param.b64 \t%%rd7, [_k_param_0];
}"""


def test_static_plan_checks_its_parameter_count_against_the_binarys_ptx(static_launcher):
    b = _Bin(_NAMES, _SIG)
    b.asm = {"ptx": _PTX % ""}
    assert L.static_plan(b, 3) == ("OifOO", None, 2)
    b.asm = {"ptx": _PTX % "\n\t.param .u64 _k_param_extra,"}   # a Triton that passes one more
    assert L.static_plan(b, 3) == "the binary takes 6 parameters, the plan passes 5"


@pytest.mark.parametrize("change, why", [
    (dict(signature={**_SIG, "scale": "fp16"}), "scale has type fp16"),
    (dict(signature={**_SIG, "BLOCK": "i32"}), "BLOCK (i32) is passed as a constexpr"),
    (dict(signature={**_SIG, "x_ptr": ("*fp32", "*fp32")}), "x_ptr has type"),
    (dict(global_scratch_size=256), "global_scratch_size=256"),
    (dict(profile_scratch_size=64), "profile_scratch_size=64"),
    (dict(num_ctas=2), "num_ctas=2"),
    (dict(launch_cooperative_grid=True), "launch_cooperative_grid"),
    (dict(launch_pdl=True), "launch_pdl"),
    (dict(tensordesc_meta=[{}]), "tensor-descriptor"),
    (dict(instrumentation_mode="gsan"), "instrumented"),
])
def test_static_plan_refuses_what_the_static_launcher_cannot_express(static_launcher, change, why):
    signature = change.pop("signature", _SIG)
    plan = L.static_plan(_Bin(_NAMES, signature, **change), 3)
    assert isinstance(plan, str) and why in plan


def test_static_plan_refuses_without_the_launcher_on_rocm_or_when_switched_off(static_launcher, monkeypatch):
    b = _Bin(_NAMES, _SIG)
    with config.patch(static_launch=False):
        assert "static_launch is off" in L.static_plan(b, 3)
    assert "not a Triton CompiledKernel" in L.static_plan(object(), 3)
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert "ROCm" in L.static_plan(b, 3)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.delattr(torch._C, "_StaticCudaLauncher")
    assert "no torch._C._StaticCudaLauncher" in L.static_plan(b, 3)


def test_the_static_relauncher_passes_function_grid_warps_shared_types_args_and_stream(static_launcher):
    b, x = _Bin(_NAMES, _SIG), torch.zeros(4)
    fire = L.relauncher(b, 3, [128])
    assert fire.via == "static"
    fire((5, 2, 1), 1, (x, 9, 0.5))
    assert static_launcher == [(0xF00, 5, 2, 1, 4, 1024, "OifOO", (x, 9, 0.5, None, None), 7001)]
    folded = L.relauncher(_Bin(_NAMES, {**_SIG, "n": "constexpr"}), 3, [128])
    folded((1, 1, 1), 0, (x, 1, 0.5))
    assert static_launcher[-1][6:] == ("OfOO", (x, 0.5, None, None), 7000)
    assert b.runs == []


def test_grids_of_2_31_programs_and_refused_kernels_take_tritons_launcher(static_launcher):
    b, x = _Bin(_NAMES, _SIG), torch.zeros(4)
    fire = L.relauncher(b, 3, [128])
    fire((2 ** 16, 2 ** 15, 1), 0, (x, 9, 0.5))                   # 2^31 programs: its C code's int overflows
    assert static_launcher == [] and b.runs == [((2 ** 16, 2 ** 15, 1), (x, 9, 0.5, 128))]
    refused = _Bin(_NAMES, _SIG, global_scratch_size=8)
    fire = L.relauncher(refused, 3, [128])
    assert fire.via == "triton" and "global_scratch_size" in fire.why
    fire((3, 1, 1), 0, (x, 9, 0.5))
    assert static_launcher == [] and refused.runs == [((3, 1, 1), (x, 9, 0.5, 128))]


# ---------------------------------------------------------------- the real launchers, on a GPU

if not device.is_interpreter():
    import triton
    import triton.language as tl

    @triton.jit
    def _axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    @triton.jit
    def _add(x_ptr, y_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < N
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@pytest.mark.skipif(device.is_interpreter(), reason="needs a GPU: launches compiled kernels")
@pytest.mark.parametrize("static", [True, False])
@pytest.mark.parametrize("n", [1, 1000, 4096])
def test_relaunches_on_a_gpu_match_the_jit_launch(static, n, monkeypatch):
    monkeypatch.setattr(L, "_compiled", {})
    with config.patch(static_launch=static):
        results = []
        for seed in range(3):                          # the first call takes the JIT path, the others relaunch
            g = torch.Generator(device="cuda").manual_seed(seed)
            x, y = (torch.randn(n, device="cuda", generator=g) for _ in range(2))
            out, want = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
            L.launch(_axpy, (L.cdiv(n, 256),), x, y, out, n, 0.75, BLOCK=256, num_warps=4)
            _axpy[(L.cdiv(n, 256),)](x, y, want, n, 0.75, BLOCK=256, num_warps=4)   # the JIT path, bit for bit
            results.append((out, want))                # (not 0.75 * x + y: the kernel contracts it to an FMA)
        torch.cuda.synchronize()
    for out, want in results:
        torch.testing.assert_close(out, want, rtol=0, atol=0)
    (fire,) = L._compiled.values()
    assert fire.via == ("static" if static else "triton"), getattr(fire, "why", "")


@pytest.mark.skipif(device.is_interpreter(), reason="needs a GPU: launches compiled kernels")
@pytest.mark.parametrize("static", [True, False])
def test_a_site_relaunches_on_a_gpu_aligned_or_not(static):
    n = 3000
    with config.patch(static_launch=static):
        site = L.Site(_add, (L.cdiv(n, 512),), N=n, BLOCK=512, num_warps=4)
        results = []
        for offset in (0, 0, 0, 1, 1, 0):           # offset 1: a pointer off 16 bytes, its own specialisation
            x, y = (torch.randn(n + 1, device="cuda")[offset:offset + n] for _ in range(2))
            out = torch.full_like(x, float("nan"))
            site(x, y, out)
            results.append((out, x + y))
        torch.cuda.synchronize()
    for out, want in results:
        torch.testing.assert_close(out, want, rtol=0, atol=0)
    assert len(site._compiled) == 2
    assert {f.via for f in site._compiled.values()} == {"static" if static else "triton"}


def test_u64_and_i64_integers_are_different_specialisations(unobserved):
    # Triton types an int >= 2^63 as u64: relaunching that binary with 2^62 would pack it as unsigned
    k = _Kernel()
    for n in (2 ** 63, 2 ** 62, 2 ** 63 + 32, 2 ** 62 + 32):
        L.launch(k, (1,), torch.zeros(4), n, 1.0, BLOCK=16, FLAG=True, num_warps=1)
    assert [c[0] for c in k.calls] == ["jit", "jit", "compiled", "compiled"]
