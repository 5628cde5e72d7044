"""Running compiled graphs: the three execution modes, buffers, extern calls, output layouts."""
import os
import re
import weakref
from unittest import mock

import pytest
import torch

from tritondiff import compiler
from tritondiff.base import device
from tritondiff.compiler.exc import CompilerError, KernelCompileError
from tritondiff.compiler import runtime
from tritondiff.compiler.runtime import load_module
from tests.compiler.util import assert_same, check, run_compiled


def mixed(x, w):
    h = torch.softmax(x @ w, -1)
    return h.t().reshape(-1, 3) * 2, (h * x[:, :5]).sum(0), x.amax(1).argmax()


@pytest.mark.parametrize("mode", ["triton", "ir", "ir_unfused"])
def test_execution_modes_agree_with_eager(mode):
    x, w = torch.randn(9, 41), torch.randn(41, 5)
    with compiler.config.patch(execution=mode):
        check(mixed, x, w, rtol=1e-5, atol=1e-6)


def test_mode_is_read_at_call_time():
    x, w = torch.randn(9, 41), torch.randn(41, 5)
    torch._dynamo.reset()
    fn = compiler.compile(mixed)
    a = fn(x, w)
    with compiler.config.patch(execution="ir_unfused"):
        b = fn(x, w)
    assert compiler.counters["graphs_compiled"] == 1
    assert_same(a, b, rtol=1e-6, atol=1e-6)


def test_outputs_keep_the_strides_eager_gives_them():
    x = torch.randn(9, 41)
    for fn in (lambda x: x.t() * 2, lambda x: x.t().contiguous() + 1, lambda x: x[:, ::2].exp()):
        got = run_compiled(fn, x)
        want = fn(x)
        assert got.stride() == want.stride()
        assert_same(got, want)


def test_extern_result_with_unexpected_strides_is_copied_to_the_planned_layout():
    from tritondiff.compiler.ir import ExternKernel, ExternOutput, Layout
    from tritondiff.compiler.runtime import Executable
    kernel = ExternKernel("e", torch.ops.aten.mm.default, ((), {}), [], [], None, "test")
    out = ExternOutput("e_out0", Layout((3, 4), (4, 1), torch.float32), kernel)
    env = {}
    transposed = torch.randn(4, 3).t()
    Executable._bind_extern(None, kernel, out, transposed, env)
    assert env["e_out0"].stride() == (4, 1) and torch.equal(env["e_out0"], transposed)
    with pytest.raises(CompilerError, match="expected"):
        Executable._bind_extern(None, kernel, out, torch.randn(5, 5), env)


def test_zero_size_and_zero_dim_tensors():
    check(lambda x: (x * 2, x.sum(0), x.sum()), torch.randn(0, 5))
    check(lambda x: (x * 2 + 1, x.exp()), torch.tensor(3.0))


def test_inputs_with_offsets_and_odd_strides():
    base = torch.randn(20, 30)
    x = base[3:12, 5:27:3]
    assert x.storage_offset() > 0
    check(lambda x: (x * 2).sum(1) + x[:, 0], x)
    check(lambda x: x.expand(4, 9, 8) * 2, x[:, :8])


def test_generated_modules_are_content_addressed(tmp_path):
    with compiler.config.patch(cache_dir=str(tmp_path)):
        a, path_a = load_module("X = 1\n", "m")
        b, path_b = load_module("X = 1\n", "m")
        assert a is b and path_a == path_b and os.path.exists(path_a)
        with pytest.raises(KernelCompileError, match="does not import") as info:
            load_module("def broken(:\n", "m")
        assert info.value.path.endswith(".py")


def test_plan_frees_intermediates():
    x = torch.randn(9, 41)
    check(lambda x: (x.sum(1, keepdim=True) * x).t().contiguous().sum(1), x)
    plan = compiler.dump.last_artifacts().texts["plan"]
    assert "launch" in plan


def _kernel_class():
    """The class whose ``run`` every ``kernel[grid](...)`` launch goes through on this device."""
    if device.is_interpreter():
        from triton.runtime.interpreter import InterpretedFunction
        return InterpretedFunction
    from triton.runtime.jit import JITFunction
    return JITFunction


@pytest.mark.parametrize("fp_fusion", [False, True])
def test_fp_fusion_knob_reaches_every_launch_generated_and_gemm_template(fp_fusion):
    cls = _kernel_class()
    real, seen = cls.run, []

    def spy(self, *args, **kwargs):
        seen.append((self.__name__ if hasattr(self, "__name__") else self.fn.__name__,
                     kwargs.get("enable_fp_fusion", "not passed")))
        return real(self, *args, **kwargs)
    x, w = torch.randn(9, 41), torch.randn(41, 24)
    with mock.patch.object(cls, "run", spy), compiler.config.patch(fp_fusion=fp_fusion):
        check(lambda x, w: (torch.softmax(x, -1), torch.relu(x @ w)), x, w, rtol=1e-4, atol=1e-4)
    assert compiler.counters["gemm_template.mm"] == 1  # the template's launch is among those seen
    names = [n for n, _ in seen]
    assert any("gemm" in n or "mm" in n for n in names) and len(seen) >= 2, names
    assert {flag for _, flag in seen} == {fp_fusion}, seen


def test_fp_fusion_is_off_by_default_and_part_of_the_compile_cache_key():
    assert compiler.config.fp_fusion is False
    key = compiler.config.cache_key()
    with compiler.config.patch(fp_fusion=True):
        assert compiler.config.cache_key() != key


def test_autotune_variants_of_one_kernel_launch_with_their_own_warps_and_stages(monkeypatch):
    """Variants share the kernel's name; a launcher cache keyed by name alone gave every trial the first one's
    options, so autotuning on a GPU timed one config under many names."""
    import dataclasses

    from tritondiff.compiler import runtime
    from tritondiff.compiler.backend import capture_graphs
    from tritondiff.compiler.pipeline import compile_graph
    (g,) = capture_graphs(lambda x: torch.softmax(x, -1), torch.randn(9, 41))
    exe = compile_graph(g.gm, g.args, "variants")
    exe.ensure_loaded()
    (spec,) = [s for specs in exe.generated.kernels.values() for s in specs]
    launched, made = [], []

    class StubSite:                                  # a stand-in kernels.launch.Site: records each launch
        def __init__(self, fn, grid, **options):
            self.options = options
            made.append(options)

        def __call__(self, *tensors):
            launched.append((self.options["num_warps"], self.options["num_stages"]))
    monkeypatch.setattr(runtime._device, "is_interpreter", lambda: False)
    monkeypatch.setattr(runtime._launch, "Site", StubSite)
    exe._launchers.clear()
    env = {a.name: torch.empty(1) for a in spec.args if not a.workspace}
    variants = [dataclasses.replace(spec, num_warps=w, meta={**spec.meta, "num_stages": st})
                for w, st in ((2, 1), (8, 1), (8, 3))]
    for v in variants + variants:
        exe._launch(v, env, {})
    assert launched == [(2, 1), (8, 1), (8, 3)] * 2
    assert len(made) == 3                                                  # worked out once per config


def test_buffers_stay_visible_to_the_harness_poisoning_and_zero_fill():
    """The fast C++ allocation skips the dispatcher: while the harness poisons fresh memory (NaN) or runs its
    zero-fill control, buffers must come from torch.empty_strided, or a half-written output goes unseen."""
    from tritondiff.compiler.ir import Layout
    from tritondiff.harness.hunters.poison import ZeroFill, poisoned_allocations
    layout = Layout((64,), (1,), torch.float32)
    with poisoned_allocations():
        assert torch.isnan(runtime._alloc(layout)).all()
    with ZeroFill():
        assert (runtime._alloc(layout) == 0).all()
    out = runtime._alloc(layout)                          # nothing watching: any contents, the right layout
    assert out.shape == (64,) and out.stride() == (1,) and out.dtype == torch.float32


def test_a_kernel_that_skips_part_of_its_output_is_seen_under_poisoning(monkeypatch):
    """End to end: a compiled graph whose kernel writes only the first half of its output (planted by
    halving every launch grid) gives NaN in the rest under poisoned allocations."""
    from tritondiff.harness.hunters.poison import poisoned_allocations
    import dataclasses
    real = runtime.Executable._launcher

    def half_grid(self, spec):   # before the launcher is built: a GPU's static launcher keeps its own grid
        return real(self, dataclasses.replace(spec, grid=(spec.grid[0] // 2,) + tuple(spec.grid[1:])))
    monkeypatch.setattr(runtime.Executable, "_launcher", half_grid)

    def f(x):
        return x * 2 + 1
    x = torch.randn(4096, device=device.torch_device())
    with compiler.config.patch(pointwise_block=1024), poisoned_allocations():
        out = compiler.compile_fresh(f)(x)
    assert torch.isnan(out[2048:]).all() and torch.equal(out[:2048], f(x)[:2048])


# ---------------------------------------------------------------- the GPU's flat launch loop (Executable._make_fast)

@pytest.fixture
def gpu_like(monkeypatch):
    """The fast path on this machine: the runtime believes it is on a GPU with nothing watching launches,
    and every ``Site`` it builds relaunches through the interpreter, recording (kernel grid, device)."""
    if not device.is_interpreter():
        pytest.skip("drives the GPU path with interpreter launches: CPU only")
    relaunched = []

    class InterpretedSite:
        def __init__(self, fn, grid, **options):
            self.fn, self.grid = fn, grid

        def __call__(self, *tensors):
            self.fn[self.grid](*tensors)

        def relaunch(self, dev, tensors):
            assert isinstance(tensors, tuple)                 # the static launcher appends a tuple to them
            relaunched.append((self.fn.__name__, dev))
            self.fn[self.grid](*tensors)
    monkeypatch.setattr(runtime, "_compiled_launches", lambda: True)
    monkeypatch.setattr(runtime._launch, "Site", InterpretedSite)
    monkeypatch.setattr(runtime._launch, "_observed", lambda: False)
    monkeypatch.setattr(runtime._launch, "_current_device", lambda: 7)
    return relaunched


def _layer_norm_fwd_bwd(x, w, b, dy):
    y = torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return torch.autograd.grad(y, (x, w, b), dy)


@pytest.mark.parametrize("case", ["split_reduction", "layer_norm_fwd_bwd", "gemm_template_and_extern"])
def test_the_fast_launch_loop_computes_what_the_plan_does(gpu_like, case):
    """Every kind of step goes through the loop: stored buffers, a split reduction's workspace (allocated and
    freed per group), mixed-order and looped kernels, a GEMM template and an extern call (run as the plan
    runs them), frees after last use.  Results must equal eager's; the launches went through ``relaunch``
    with the device asked once per call."""
    torch.manual_seed(0)
    if case == "split_reduction":
        x = torch.randn(300_000)
        fn, args = compiler.compile_fresh(lambda t: (t * t).sum().sqrt()), (x,)
        want = [(x * x).sum().sqrt()]
    elif case == "layer_norm_fwd_bwd":
        x = torch.randn(512, 48, requires_grad=True)
        w, b = torch.randn(48, requires_grad=True), torch.randn(48, requires_grad=True)
        fn, args = compiler.compile_fresh(_layer_norm_fwd_bwd), (x, w, b, torch.randn(512, 48))
        want = _layer_norm_fwd_bwd(*args)
    else:
        def f(a, m):
            return torch.relu(a @ m) + 1, torch.linalg.inv(m[:32] + 32 * torch.eye(32))
        fn, args = compiler.compile_fresh(f), (torch.randn(64, 40), torch.randn(40, 32))
        want = f(*args)
    fn(*args)                          # compiles (torch.compile's first call runs with a dispatch mode on)
    del gpu_like[:]
    got = fn(*args)
    for g, e in zip(got if isinstance(got, (tuple, list)) else [got], want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    assert gpu_like and {dev for _, dev in gpu_like} == {7}


@pytest.mark.parametrize("last_program_final, sync, live_at_second", [(False, "tagged", 3), (True, "fence", 3),
                                                                      (True, "tagged", 2)])
def test_the_fast_loop_frees_after_last_use_and_asks_the_device_once_per_call(gpu_like, monkeypatch,
                                                                             last_program_final, sync,
                                                                             live_at_second):
    """sum(t * sum(t * t)), both split: the first sum's partials die before the second sum launches, and the
    device is asked once per call, not per launch (the arrival counters of a split that finishes in its last
    program included).  Tagged partials live in the kept slots, not in a buffer allocated per call."""
    asked, live = [], []
    allocated: list[weakref.ref] = []
    monkeypatch.setattr(runtime._launch, "_current_device", lambda: asked.append(1) or 7)
    empty = runtime._FAST_EMPTY[runtime._device.MODE]

    def watched_empty(*args):
        t = empty(*args)
        allocated.append(weakref.ref(t))
        return t
    monkeypatch.setitem(runtime._FAST_EMPTY, runtime._device.MODE, watched_empty)
    relaunch = runtime._launch.Site.relaunch

    def counting(site, dev, tensors):
        live.append((site.fn.__name__, sum(r() is not None for r in allocated)))
        relaunch(site, dev, tensors)
    monkeypatch.setattr(runtime._launch.Site, "relaunch", counting)
    x = torch.randn(300_000)

    def f(t):
        return (t * (t * t).sum()).sum()
    with compiler.config.patch(reduction_strategy="split", split_last_program_final=last_program_final,
                               split_last_program_sync=sync):
        fn = compiler.compile_fresh(f)
        fn(x)
        del asked[:], live[:], allocated[:]
        torch.testing.assert_close(fn(x), f(x), rtol=1e-4, atol=1e-2)
    kernels = ["partial"] if last_program_final else ["partial", "final"]
    assert len(asked) == 1 and [n.rsplit("_", 1)[1] for n, _ in live] == kernels * 2, live
    # at the second partial: the first sum, the second partials (unless tagged) and output, not the first partials
    assert live[len(kernels)][1] == live_at_second, live


def test_the_fast_loop_steps_aside_while_launches_or_allocations_are_watched(gpu_like, monkeypatch):
    """A harness launch recorder or its NaN poisoning needs every launch through JITFunction.run and every
    buffer through the dispatcher: then the plan runs, not the loop."""
    from tritondiff.harness.hunters.poison import poisoned_allocations
    f = compiler.compile_fresh(lambda t: t * 2 + 1)
    x = torch.randn(1000)
    f(x)
    torch.testing.assert_close(f(x), x * 2 + 1)
    fast = len(gpu_like)
    assert fast > 0
    with poisoned_allocations():
        torch.testing.assert_close(f(x), x * 2 + 1)
    monkeypatch.setattr(runtime._launch, "_observed", lambda: True)
    torch.testing.assert_close(f(x), x * 2 + 1)
    assert len(gpu_like) == fast                       # neither call went through relaunch


def test_a_failing_launch_in_the_fast_loop_names_its_kernel(gpu_like, monkeypatch):
    def broken(self, dev, tensors):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    f = compiler.compile_fresh(lambda t: t * 2 + 1)
    f(torch.randn(1000))
    monkeypatch.setattr(runtime._launch.Site, "relaunch", broken)
    with pytest.raises(KernelCompileError, match=r"kernel g\d+_\w+ failed: RuntimeError: CUDA error"):
        f(torch.randn(1000))


@pytest.mark.parametrize("winner", ["last", "aten"])
def test_tuned_steps_join_the_fast_loop_with_their_winner(gpu_like, monkeypatch, tmp_path, winner):
    """Once tuning chose, a tuned group or template runs its winner's kernels inside the loop (the loop is
    worked out again); an ATen winner stays a step run as the plan runs it.  Results stay eager's."""
    from tritondiff.compiler import autotune
    from tritondiff.compiler.codegen import variants
    monkeypatch.setattr(variants, "_gpu_candidates", lambda: True)      # the GPU's candidate sets
    def pick(cands):     # "last": not the heuristic, so the loop must run the winner's own kernels
        named = [c for c in cands if c.name == "aten"] if winner == "aten" else []
        return named[0] if named else [c for c in cands if c.name != "aten"][-1]
    monkeypatch.setattr(autotune, "choose", lambda key, cands, env, mutated: pick(cands))

    def f(a, m):
        return torch.relu(a @ m) + 1, torch.softmax(a, -1)
    args = (torch.randn(64, 40), torch.randn(40, 32))
    with compiler.config.patch(autotune=True, autotune_cache_dir=str(tmp_path)):
        fn = compiler.compile_fresh(f)
        fn(*args)                                     # compiles and tunes (slow path: a dispatch mode is on)
        del gpu_like[:]
        got = fn(*args)
    for g, e in zip(got, f(*args)):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    kernels = [name for name, _ in gpu_like]
    assert any(re.search(r"_k\d+_v\d+$", n) for n in kernels), kernels              # the softmax group's winner
    assert any(re.search(r"_gemm\d+_c\d+$", n) for n in kernels) == (winner == "last"), kernels  # the template's
