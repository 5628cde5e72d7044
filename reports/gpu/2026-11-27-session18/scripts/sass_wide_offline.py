"""Registers and stack of the wide suite's reduction kernels, compiled for sm_90 without a GPU (session 18).

The wide persistent rule (``heuristics.persistent_wide``) puts a row of 32768 in one program at 32 warps,
where a thread may keep at most 64 registers (an SM's 65,536 over 1024 threads); the rule's budget is 32 held
values a thread.  The reread rule (``heuristics.looped_warps``) runs layer norm's dx loop at 16 warps.  This
generates every reduction kernel of the wide suite's rows with the GPU's knob values (in a child process: the
compiler imports ``harness``, which puts Triton in interpreter mode here) and compiles each for sm_90 at its
generated warps with the ptxas Triton's wheel carries, through session 16's ``sass_offline.compile_sm90``.
STACK above 0 means registers spilled.

    PYTHONPATH=. TRITON_DEFAULT_FP_FUSION=0 python reports/gpu/2026-11-27-session18/scripts/sass_wide_offline.py
"""
from __future__ import annotations

import datetime
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

import triton

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "sass_offline", os.path.join(HERE, "..", "..", "2026-11-25-h100-session16", "scripts", "sass_offline.py"))
sass_offline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass_offline)

GPU_KNOBS = dict(sass_offline.GPU_KNOBS, persistent_wide_max_rnumel=32768)
TRITON_TYPES = {"torch.float32": "*fp32", "torch.float16": "*fp16", "torch.bfloat16": "*bf16", "torch.int64": "*i64"}

_GENERATE = """
import json, sys, torch, compiler
from compiler import workloads
from compiler.backend import capture_graphs
from compiler.pipeline import compile_graph
out, knobs = sys.argv[1], json.loads(sys.argv[2])
m, n = 64, 32768      # rows change only the row masks' constants, not a program's registers
h = lambda *s: torch.randn(*s, dtype=torch.float16, requires_grad=True)
cases = {"softmax": (workloads.softmax, (torch.randn(m, n),), False),
         "log_softmax": (lambda t: torch.log_softmax(t, -1), (torch.randn(m, n),), False),
         "rms_norm": (workloads.rms_norm, (torch.randn(m, n), torch.randn(n)), False),
         "layer_norm": (workloads.layer_norm, (h(m, n), h(n), h(n)), True)}
made = []
for label, (fn, args, bwd) in cases.items():
    for i, g in enumerate(capture_graphs(fn, *args, backward=bwd)):
        with compiler.config.patch(**knobs):
            exe = compile_graph(g.gm, g.args, f"{label}{i}")
        dtypes = {b.name: str(b.get_dtype()) for b in list(exe.graph.inputs) + list(exe.graph.nodes)
                  if b is not None and hasattr(b, "get_dtype")}
        path = f"{out}/{label}{i}.py"
        open(path, "w").write(exe.generated.source)
        for specs in exe.generated.kernels.values():
            for s in specs:
                if s.meta.get("kind") != "reduction":
                    continue
                types = {a.param: str(a.dtype) if a.dtype else dtypes.get(a.name, "torch.float32") for a in s.args}
                made.append([label, path, s.name, s.num_warps, s.meta.get("strategy"), s.meta.get("rblock"), types])
print(json.dumps(made))
"""


def main() -> None:
    ptxas = subprocess.run([os.path.join(sass_offline.BIN, "ptxas"), "--version"], capture_output=True, text=True).stdout
    print(f"# wide kernels: triton {triton.__version__}, ptxas {re.search(r'V[0-9.]+', ptxas).group(0)}, sm_90, "
          f"{datetime.date.today()}")
    work = tempfile.mkdtemp()
    made = json.loads(sass_offline._child(_GENERATE, work, json.dumps(GPU_KNOBS)).splitlines()[-1])
    for label, path, name, warps, strategy, rblock, types in made:
        cubin = sass_offline.compile_sm90(path, name, warps, {k: TRITON_TYPES[v] for k, v in types.items()})
        print(f"{label} {name}: {strategy}, RBLOCK {rblock}, {warps} warps: {sass_offline.resources(cubin)}")


if __name__ == "__main__":
    main()
