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

import compiler
from compiler import layouts
from compiler.backend import capture_graphs
from compiler.exc import KernelCompileError
from compiler.pipeline import compile_graph
from tests.compiler.util import seeded_randn

OWNED = """#blocked = #ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [1, 8], order = [1, 0]}>
#blocked1 = #ttg.blocked<{sizePerThread = [1, 2], threadsPerWarp = [1, 32], warpsPerCTA = [1, 16], order = [1, 0]}>
    %w = tt.load %p, %m, %c {isVolatile = true} : tensor<1x256x!tt.ptr<i64>, #blocked> loc(#loc7)
    %v = tt.load %q, %m2, %c2 {isVolatile = true} : tensor<1x1024x!tt.ptr<i64>, #blocked1> loc(#loc9)
"""
# session 24's poll at 16 warps: 1 x 128 words under 4 x 4 warps, so four warps load each word
SHARED = """#blocked1 = #ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [4, 4], order = [1, 0]}>
    %v_18 = tt.load %v_17, %m, %cst_2 {isVolatile = true} : tensor<1x128x!tt.ptr<i64>, #blocked1> loc(#loc77)
"""


def test_a_layout_that_wraps_its_tensor_shares_elements():
    assert layouts.blocked_layouts(OWNED) == {"blocked": [1, 256], "blocked1": [1, 1024]}
    assert layouts.shared_volatile_loads(OWNED) == []
    (problem,) = layouts.shared_volatile_loads(SHARED)
    assert "1x128" in problem and "4x128" in problem and "share" in problem
    odd = OWNED.replace("#blocked1>", "#linear>")
    assert "not a blocked layout" in layouts.shared_volatile_loads(odd)[0]
    assert layouts.shared_volatile_loads("tt.func @k() {}") == ["no volatile load found in the kernel's TTGIR"]
    plain = OWNED.replace("{isVolatile = true} ", "")       # ordinary loads are not this check's business
    assert layouts.shared_volatile_loads(plain) == ["no volatile load found in the kernel's TTGIR"]


_COMPILE = r"""
import importlib.util, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
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
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        done = subprocess.run([sys.executable, "-c", _COMPILE], input=json.dumps(jobs), capture_output=True,
                              text=True, env=env, timeout=600)
    if done.returncode:
        if "GPUTarget" in done.stderr or "ptxas" in done.stderr.lower() or "backend" in done.stderr.lower():
            pytest.skip(f"this Triton cannot compile for CUDA without a GPU: {done.stderr.strip()[-300:]}")
        raise AssertionError(done.stderr[-3000:])
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
        assert layouts.shared_volatile_loads(ir) == [], (spec.name, w, arch, spec.meta["max_warps"])
    for (exe, spec, w, arch), ir in zip(planted, got[len(cases):]):
        assert any("share" in p for p in layouts.shared_volatile_loads(ir)), (w, ir[:2000])


class _Compiled:
    def __init__(self, ttgir):
        self.asm = {"ttgir": ttgir}


def test_the_runtime_refuses_a_poll_whose_compiled_layout_shares_slots():
    """Executable._check_owned, run on each compiled launch of a kernel with ``owned_loads``: a shared layout
    raises a KernelCompileError that names the kernel and the fix (the fence form); an owned one passes and is
    not parsed again; the interpreter's launch (no compiled kernel) is not checked."""
    exe, spec = _tagged(lambda t: t.sum(1), seeded_randn(3, 1536, seed=4), reduction_strategy="split", rblock=32,
                        split_count=12)
    owned = _Compiled(OWNED)
    exe._check_owned(spec, owned)
    exe._check_owned(spec, None)
    assert id(owned) in exe._owned_checked
    with pytest.raises(KernelCompileError, match="split_last_program_sync='fence'") as e:
        exe._check_owned(spec, _Compiled(SHARED))
    assert spec.name in str(e.value) and "1x128" in str(e.value)
