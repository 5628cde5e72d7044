"""Session 23, call 3: why compiler.graph_fuzz_backward says "dynamo ran the subject eagerly" on a GPU (every
example of call 1, none under the interpreter), and why the planted cast fold passed there.

    TRITONDIFF_DEVICE=cuda PYTHONPATH=. python reports/gpu/2026-11-28-session23/scripts/debug_fuzz_backward.py
"""
import traceback

import torch
import torch._dynamo.utils

import compiler
import compiler.subjects as cs
from compiler.counters import counters
from compiler.fuzz import Program, Step

prog = Program(((1,),), (Step("exp", (0,)),), (1,))
x = torch.randn(cs.FUZZ_NUMEL, device="cuda")
for knobs in ([], [("lean_runtime", False)]):
    torch._dynamo.utils.counters.clear()
    before = counters["graphs_compiled"]
    try:
        out = cs.graph_fuzz_backward(prog.to_json(), x, knobs)
        print("knobs", knobs, "ok", [o.shape for o in out])
    except Exception as e:
        print("knobs", knobs, "FAILED", type(e).__name__, e)
    print("  graphs_compiled", before, "->", counters["graphs_compiled"])
    print("  dynamo counters", {k: dict(v) for k, v in torch._dynamo.utils.counters.items() if v})

parsed = prog
xs = cs.program_inputs(parsed, x)
fn = lambda *xs: parsed(*xs)
try:
    ex = torch._dynamo.explain(fn)(*[t.detach().requires_grad_() for t in xs])
    print("explain:", ex.graph_count, "graphs", ex.graph_break_count, "breaks", [str(b.reason)[:300] for b in ex.break_reasons])
except Exception:
    traceback.print_exc()

# the planted cast fold
from unittest import mock
from compiler.codegen.triton_ops import TritonOps
real = TritonOps.to_dtype


def planted(self, v, dtype):
    if v.dtype == torch.float32 and dtype in (torch.float16, torch.bfloat16):
        return self._var(v.name, dtype)
    return real(self, v, dtype)


trip = Program(((41,),), (Step("cast", (0,), (("dtype", "float16"),)), Step("to_float", (1,))), (2,))
with mock.patch.object(TritonOps, "to_dtype", planted):
    got = cs.graph_fuzz(trip.to_json(), x)
want = trip(*cs.program_inputs(trip, x))
print("planted fold: max diff vs eager", float((got[0] - want[0]).abs().max()))
art = compiler.dump.last_artifacts()
text = art.texts.get("triton", "")
print("----", art.graph, "kernels")
print(text[text.find("def g"):][:3000])
