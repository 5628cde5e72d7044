"""Compile Triton kernels for sm_90 without a GPU and count what the machine code holds (session 16).

Triton's wheel ships ptxas and cuobjdump, so a kernel's cubin, registers, stack and SASS opcodes can be read
on a CPU-only machine (here Triton 3.9 with ptxas 12.9; the GPU runs used Triton 3.6).  Two studies:

``split``: the split partials the compiler generates for four graphs, with the GPU's heuristics, at 16 and
32 warps -- registers per thread decide whether two 32-warp programs fit an SM (at most 32).

``ln``: layer norm 4096 x 10240 fp16's mixed-order backward partial as generated on the H100 (call 1's
dump), the same with its padded column lanes held at the identity (8917324), and session 9's fastest
hand-written shape (``kernels.benchmarks.mixed_order_probe``, whole padded row): registers and opcode counts.

    PYTHONPATH=. TRITON_DEFAULT_FP_FUSION=0 python reports/gpu/2026-11-25-h100-session16/scripts/sass_offline.py {split,ln}

The sources are generated in a child process (the compiler and the probe import ``harness``, which puts Triton
in interpreter mode on a machine without a GPU); this process imports Triton alone and compiles for sm_90.
"""
from __future__ import annotations

import collections
import importlib.util
import os
import re
import subprocess
import sys
import tarfile
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
GPU_KNOBS = dict(persistent_max_rnumel=8192, looped_rblock=4096, max_reduction_block_numel=4096, programs_per_sm=2,
                 split_min_chunk=2048, split_min_rnumel=32768, sm_count=132, outer_reduction_xblock=32)


def compile_sm90(path: str, name: str, warps: int, types: dict | None = None, consts: dict | None = None) -> str:
    """The cubin path of kernel ``name`` in file ``path`` for sm_90 at ``warps`` warps.  Pointers default to
    fp32 (fp16 where ``types`` says), every non-constexpr argument 16-byte aligned as Triton's launcher
    specialises them."""
    spec = importlib.util.spec_from_file_location(f"k_{name}_{warps}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, name)
    consts = consts or {}
    sig = {a: (types or {}).get(a, "*i64" if a.endswith("_idx") else "*fp32") for a in fn.arg_names}
    sig.update({c: "constexpr" for c in consts})
    attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if sig[a] != "constexpr"}
    src = ASTSource(fn, sig, {(fn.arg_names.index(c),): v for c, v in consts.items()}, attrs=attrs)
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    out = os.path.join(tempfile.mkdtemp(), f"{name}.cubin")
    with open(out, "wb") as f:
        f.write(kernel.asm["cubin"])
    return out


def resources(cubin: str) -> str:
    text = subprocess.run([os.path.join(BIN, "cuobjdump"), "--dump-resource-usage", cubin], capture_output=True,
                          text=True, check=True).stdout
    return re.search(r"REG:\d+ STACK:\d+", text).group(0)


def opcodes(cubin: str) -> collections.Counter:
    sass = subprocess.run([os.path.join(BIN, "cuobjdump"), "--dump-sass", cubin], capture_output=True, text=True,
                          check=True).stdout
    return collections.Counter(m.split(".")[0] for m in re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", sass,
                                                                re.M))


_GENERATE_SPLITS = """
import json, sys, torch, compiler
from compiler.backend import capture_graphs
from compiler.pipeline import compile_graph
out, knobs = sys.argv[1], json.loads(sys.argv[2])
x = torch.randn(2 ** 24)
graphs = {"nrm2": lambda t: (t * t).sum().sqrt(), "argmax": lambda t: t.argmax(),
          "sum_amax_amin_sumsq": lambda t: (t.sum(), t.amax(), t.amin(), (t * t).sum())}
made = {}
for label, fn in graphs.items():
    (g,) = capture_graphs(fn, x)
    with compiler.config.patch(**knobs):
        exe = compile_graph(g.gm, g.args, label)
    (p,) = [s for specs in exe.generated.kernels.values() for s in specs if s.name.endswith("_partial")]
    open(f"{out}/{label}.py", "w").write(exe.generated.source)
    made[label] = [p.name, p.meta["chunk"], p.num_warps]
print(json.dumps(made))
"""


def _child(code: str, *args: str) -> str:
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                          env=env).stdout


def split() -> None:
    import json
    work = tempfile.mkdtemp()
    made = json.loads(_child(_GENERATE_SPLITS, work, json.dumps(GPU_KNOBS)).splitlines()[-1])
    for label, (name, chunk, warps) in made.items():
        path = os.path.join(work, f"{label}.py")
        regs = {w: resources(compile_sm90(path, name, w)) for w in (16, 32)}
        print(f"{label}: partial of {chunk} elements per program, generated at {warps} warps; "
              f"sm_90 at 16 warps {regs[16]}, at 32 warps {regs[32]}")


def ln() -> None:
    work = tempfile.mkdtemp()
    with tarfile.open(os.path.join(HERE, "..", "call1-ln4096-source.tgz")) as tar:
        tar.extractall(work)
    generated = os.path.join(work, "lndump", "g1_backward_0", "04_triton.py")
    text = open(generated).read()
    held = re.sub(r"^(\s+)(acc(\d) = acc\3 \+ tmp\d+)$", r"\1\2\n\1acc\3 = tl.where(rmask, acc\3, 0.0)", text,
                  flags=re.M)
    masked = os.path.join(work, "masked.py")
    with open(masked, "w") as f:
        f.write(held)
    hand = os.path.join(work, "hand.py")
    with open(hand, "w") as f:
        f.write(_child("from kernels.benchmarks.mixed_order_probe import source; print(source(10240, 16384, True))"))
    fp16 = {a: "*fp16" for a in ("p_arg4", "p_arg1", "p_arg0", "p_buf18", "X", "DY", "W", "DX")}
    cases = [("generated (call 1)", generated, "g1_backward_0_k0_partial", {}),
             ("generated, padded lanes held at 0", masked, "g1_backward_0_k0_partial", {}),
             ("hand-written whole row (session 9)", hand, "partial", {"ROWS": 32, "N": 10240, "CH": 16384})]
    types = dict(fp16, M="i32")
    for label, path, name, consts in cases:
        cubin = compile_sm90(path, name, 8, types, consts)
        ops = opcodes(cubin)
        print(f"{label}: {resources(cubin)}; " + ", ".join(f"{op} {ops[op]}" for op in
                                                           ("FADD", "FMUL", "FSEL", "LDG", "STG", "BAR", "SHFL")))


if __name__ == "__main__":
    import datetime
    ptxas = subprocess.run([os.path.join(BIN, "ptxas"), "--version"], capture_output=True, text=True).stdout
    print(f"# {sys.argv[1]}: triton {triton.__version__}, ptxas {re.search(r'V[0-9.]+', ptxas).group(0)}, sm_90, "
          f"{datetime.date.today()}")
    {"split": split, "ln": ln}[sys.argv[1]]()
