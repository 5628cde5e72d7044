"""compiler.layouts: which compiled loads give an element to several threads; the tagged split's poll does not,
in the layouts Triton gives the generated kernels for Hopper and Ampere (compiled here without a GPU), and the
runtime refuses a kernel whose poll Triton laid out shared."""
import json
import os
import subprocess
import sys
import tempfile

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import layouts
from tritondiff.compiler.backend import capture_graphs
from tritondiff.compiler.exc import KernelCompileError
from tritondiff.compiler.pipeline import compile_graph
from tests.compiler.util import seeded_randn

OWNED = """#blocked = #ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [1, 8], order = [1, 0]}>
#blocked1 = #ttg.blocked<{sizePerThread = [1, 2], threadsPerWarp = [1, 32], warpsPerCTA = [1, 16], order = [1, 0]}>
    %w = tt.load %p, %m, %c {isVolatile = true} : tensor<1x256x!tt.ptr<i64>, #blocked> loc(#loc7)
    %v = tt.load %q, %m2, %c2 {isVolatile = true} : tensor<1x1024x!tt.ptr<i64>, #blocked1> loc(#loc9)
"""
# poll at 16 warps: 1 x 128 words under 4 x 4 warps, so four warps load each word
SHARED = """#blocked1 = #ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [4, 4], order = [1, 0]}>
    %v_18 = tt.load %v_17, %m, %cst_2 {isVolatile = true} : tensor<1x128x!tt.ptr<i64>, #blocked1> loc(#loc77)
"""


LINEAR = """#linear = #ttg.linear<{register = [[0, 1]], lane = [[0, 2], [0, 4], [0, 8], [0, 16], [0, 32]], warp = [[0, 64], [0, 128]], block = []}>
#linear1 = #ttg.linear<{register = [[0, 1]], lane = [[0, 2], [0, 4], [0, 8], [0, 16], [0, 32]], warp = [[0, 64], [0, 0]], block = []}>
    %a = tt.load %p {isVolatile = true} : tensor<1x256x!tt.ptr<i64>, #linear> loc(#loc1)
    %b = tt.load %q {isVolatile = true} : tensor<1x128x!tt.ptr<i64>, #linear1> loc(#loc2)
"""


def test_a_layout_that_wraps_its_tensor_shares_elements():
    assert layouts.blocked_layouts(OWNED) == {"blocked": [1, 256], "blocked1": [1, 1024]}
    assert layouts.shared_volatile_loads(OWNED) == [] and layouts.shared_volatile_loads(OWNED, expected=2) == []
    (problem,) = layouts.shared_volatile_loads(SHARED)
    assert "1x128" in problem and "4x128" in problem and "share" in problem
    assert layouts.shared_volatile_loads("tt.func @k() {}") == ["no volatile load found in the kernel's TTGIR"]
    plain = OWNED.replace("{isVolatile = true} ", "")       # ordinary loads are not this check's business
    assert layouts.shared_volatile_loads(plain) == ["no volatile load found in the kernel's TTGIR"]


def test_layouts_it_cannot_read_and_duplicated_loads_are_reported():
    """A layout neither blocked nor linear (an inline slice), a linear layout with a zero warp basis (two warps
    hold each element), and a count of volatile loads other than the source's (Triton loaded one twice)."""
    assert layouts.linear_layouts(LINEAR) == {"linear": False, "linear1": True}
    (problem,) = layouts.shared_volatile_loads(LINEAR)
    assert "#linear1" in problem and "zero lane or warp basis" in problem
    inline = OWNED.replace("#blocked1> loc(#loc9)", "#ttg.slice<{dim = 0, parent = #blocked}>> loc(#loc9)")
    (problem,) = layouts.shared_volatile_loads(inline)
    assert "not read here" in problem
    odd = OWNED.replace("#blocked1> loc", "#mma> loc")
    assert "not a blocked or linear layout" in layouts.shared_volatile_loads(odd)[0]
    (problem,) = layouts.shared_volatile_loads(OWNED, expected=1)
    assert "2 volatile loads where the source has 1" in problem


_COMPILE = r"""
import importlib.util, json, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
@triton.jit
def probe(x):
    tl.store(x + tl.arange(0, 32), tl.arange(0, 32))
try:
    triton.compile(ASTSource(fn=probe, signature={"x": "*i32"}), target=GPUTarget("cuda", 80, 32))
except Exception as e:
    print("NO CUDA COMPILE:", type(e).__name__, e)
    sys.exit(3)
out = []
for case in json.load(sys.stdin):
    spec = importlib.util.spec_from_file_location(case["module"], case["path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = triton.compile(ASTSource(fn=getattr(module, case["kernel"]), signature=case["signature"]),
                            target=GPUTarget("cuda", case["arch"], 32), options={"num_warps": case["warps"]})
    out.append(kernel.asm["ttgir"])
json.dump(out, sys.stdout)
"""
_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.int64: "i64", torch.int32: "i32", torch.bool: "i1"}


def _ttgir(cases: list[tuple]) -> list[str]:
    """Triton's TTGIR of each (executable, spec, warps, arch), compiled for that CUDA arch in a process without
    the interpreter (its patched language cannot compile)."""
    jobs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (exe, spec, warps, arch) in enumerate(cases):
            path = os.path.join(tmp, f"tagged_{i}.py")
            with open(path, "w") as f:
                f.write(exe.generated.source)
            signature = {a.param: "*" + _TYPES[a.dtype or exe.graph.buffers[a.name].layout.dtype] for a in spec.args}
            jobs.append(dict(module=f"tagged_{i}", path=path, kernel=spec.name, signature=signature, warps=warps,
                             arch=arch))
        script = os.path.join(tmp, "compile_ttgir.py")       # a file: Triton reads a jit function's source
        with open(script, "w") as f:
            f.write(_COMPILE)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        done = subprocess.run([sys.executable, script], input=json.dumps(jobs), capture_output=True,
                              text=True, env=env, timeout=600)
    if done.returncode == 3 and done.stdout.startswith("NO CUDA COMPILE"):   # even a trivial kernel fails
        pytest.skip(f"this Triton cannot compile for CUDA here: {done.stdout.strip()[:300]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _tagged(fn, x, **knobs):
    (g,) = capture_graphs(fn, x)
    with compiler.config.patch(split_last_program_sync="tagged", **knobs):
        exe = compile_graph(g.gm, g.args, "tagged")
    (spec,) = next(iter(exe.generated.kernels.values()))
    assert spec.meta.get("owned_loads"), spec.source
    return exe, spec


def test_the_tagged_polls_give_each_slot_one_thread_in_the_compiled_layout():
    """The generated polls at the GPU's knobs (nrm2 2^20: 256 slots at 8 warps; a longer split padded at 16;
    forced warps; two rows a program), at their own warps and at fewer, for sm_90 and sm_80: no volatile load
    shares an element.  The same kernel launched at more warps than its ``max_warps`` -- what tuning is kept
    from -- does share them, so the check can fail."""
    gpu = dict(looped_rblock=4096, max_reduction_block_numel=4096, split_min_rnumel=32768, programs_per_sm=2,
               split_min_chunk=2048, sm_count=132)
    norm = lambda t: t.square().sum().sqrt()                                  # noqa: E731
    rows = lambda t: (t.sum(1), t.amax(1))                                    # noqa: E731
    big = seeded_randn(1 << 20, seed=1)
    built = [_tagged(norm, big, **gpu), _tagged(norm, big, split_short_tagged_programs_per_sm=1, **gpu),
             _tagged(norm, big, num_warps=16, **gpu),
             _tagged(rows, seeded_randn(5, 1601, seed=2), reduction_strategy="split", rblock=32, split_count=12,
                     xblock=2)]
    cases = [(exe, spec, w, arch) for exe, spec in built for w in (spec.num_warps, max(1, spec.num_warps // 2))
             for arch in (90, 80)]
    planted = [(exe, spec, 2 * spec.meta["max_warps"], 90) for exe, spec in built[:2]]
    got = _ttgir(cases + planted)
    for (exe, spec, w, arch), ir in zip(cases, got[:len(cases)]):
        problems = layouts.shared_volatile_loads(ir, expected=spec.meta["owned_loads"])
        assert problems == [], (spec.name, w, arch, spec.meta["max_warps"], problems)
    for (exe, spec, w, arch), ir in zip(planted, got[len(cases):]):
        assert any("share" in p for p in layouts.shared_volatile_loads(ir)), (w, ir[:2000])


class _Compiled:
    def __init__(self, ttgir, hash="h"):
        self.asm, self.hash = {"ttgir": ttgir}, hash


class _Kernel:
    """A stand-in JIT function whose compiled kernel has the given TTGIR; it counts launches and compiles."""

    def __init__(self, spec, ttgir):
        self.arg_names = [a.param for a in spec.args]
        self.ttgir, self.launches, self.warmups = ttgir, 0, 0

    def warmup(self, *args, grid, **options):
        self.warmups += 1
        return _Compiled(self.ttgir)

    def __getitem__(self, grid):
        def run(*args, **options):
            self.launches += 1
            return _Compiled(self.ttgir)
        return run


def _on_a_gpu(monkeypatch, exe, spec, ttgir):
    """``exe`` launching ``spec`` as on a GPU (a ``kernels.launch.Site`` over a stand-in kernel)."""
    from tritondiff.compiler import runtime
    from tritondiff.kernels import launch
    monkeypatch.setattr(runtime, "_compiled_launches", lambda: True)
    monkeypatch.setattr(runtime, "_layouts_compiled", lambda: True)
    monkeypatch.setattr(launch, "_observed", lambda: False)
    monkeypatch.setattr(launch, "_current_device", lambda: 0)
    monkeypatch.setattr(launch, "relauncher", lambda compiled, n, rest: (lambda grid, device, tensors: None))
    exe.ensure_loaded()
    kernel = _Kernel(spec, ttgir)
    _, options, grid, args = exe._launcher(spec)
    exe._launchers[runtime._launcher_key(spec)] = (launch.Site(kernel, grid, **options), options, grid, args)
    monkeypatch.setattr(exe.semaphores, "get", lambda *a, **k: torch.zeros(1))
    env = {name: torch.zeros(1) for name, workspace in args if workspace is None}
    return kernel, env


def _rows_split():
    return _tagged(lambda t: t.sum(1), seeded_randn(3, 1536, seed=4), reduction_strategy="split", rblock=32,
                   split_count=12)


def test_the_runtime_refuses_a_shared_poll_before_it_ever_runs_and_on_every_later_call(monkeypatch):
    """On a GPU, a kernel with ``owned_loads`` is compiled without running (warmup) and checked before its first
    launch: a shared layout raises a KernelCompileError naming the kernel and the fix (the fence form), the kernel
    never runs, and every later call raises again without compiling."""
    exe, spec = _rows_split()
    kernel, env = _on_a_gpu(monkeypatch, exe, spec, SHARED)
    for _ in range(3):
        with pytest.raises(KernelCompileError, match="split_last_program_sync='fence'") as e:
            exe._launch(spec, env, {})
        assert spec.name in str(e.value) and "1x128" in str(e.value)
    assert (kernel.launches, kernel.warmups) == (0, 1)


def test_the_runtime_checks_an_owned_poll_once_and_then_launches(monkeypatch):
    """An owned layout with the source's count of volatile loads passes: checked once (the warmup), launched every
    call; a later specialisation the launch compiles (another Triton hash) is checked too."""
    exe, spec = _rows_split()
    ttgir = OWNED.replace("#blocked1> loc(#loc9)", "#blocked> loc(#loc9)").replace("1x1024", "1x256")
    kernel, env = _on_a_gpu(monkeypatch, exe, spec, ttgir)
    for _ in range(3):
        exe._launch(spec, env, {})
    assert (kernel.launches, kernel.warmups) == (1, 1)         # later calls take the Site's relauncher
    key = next(iter(exe._owned))
    with pytest.raises(KernelCompileError, match="volatile loads where the source has 2"):
        exe._check_owned(spec, key, _Compiled(ttgir + ttgir.splitlines()[-1], hash="other"))
    with pytest.raises(KernelCompileError):
        exe._launch(spec, env, {})                             # that refusal holds for the launch config


def test_the_fast_path_checks_an_owned_poll_too(monkeypatch):
    """Executable's fast path (a GPU, nothing observing launches) gates the kernel as _launch does."""
    from tritondiff.compiler import runtime
    exe, spec = _rows_split()
    kernel, env = _on_a_gpu(monkeypatch, exe, spec, SHARED)
    monkeypatch.setitem(runtime._FAST_EMPTY, runtime._device.MODE, lambda size, stride, dtype: torch.zeros(size, dtype=dtype))
    x = seeded_randn(3, 1536, seed=4)
    for _ in range(2):
        with pytest.raises(KernelCompileError, match="share"):
            exe([x])
    assert exe._fast and kernel.launches == 0 and kernel.warmups == 1


def test_a_specialisation_compiled_by_a_later_launch_is_checked_too(monkeypatch):
    """A launch that compiles a kernel of its own (another specialisation: Triton's hash differs from the
    warmup's) returns it through ``kernels.launch.Site``, and the runtime checks it: shared, it is refused from
    then on."""
    exe, spec = _rows_split()
    ttgir = OWNED.replace("#blocked1> loc(#loc9)", "#blocked> loc(#loc9)").replace("1x1024", "1x256")
    kernel, env = _on_a_gpu(monkeypatch, exe, spec, ttgir)
    kernel.__class__ = type("_Respecialised", (_Kernel,), {"__getitem__": lambda self, grid: (
        lambda *a, **k: _Compiled(SHARED, hash="another"))})
    with pytest.raises(KernelCompileError, match="1x128"):
        exe._launch(spec, env, {})
    with pytest.raises(KernelCompileError):
        exe._launch(spec, env, {})
