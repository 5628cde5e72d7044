"""The pipeline's steps, their dumps, and the IR checks between them."""
import inspect
import os

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import lowering, pipeline
from tritondiff.compiler.exc import VerificationError
from tritondiff.compiler.ir import Pointwise
from tritondiff.compiler.ops import ops
from tests.compiler.util import check, run_compiled

STEPS = ["graph", "lowered", "scheduled", "triton", "plan", "compiling"]


def test_pipeline_reads_as_one_function_of_named_steps():
    src = inspect.getsource(pipeline.compile_graph)
    for step in STEPS[1:]:
        assert f'run("{step}"' in src
    assert src.count("# ") >= 5  # one comment per step


def test_last_artifacts_hold_every_step_and_the_counters():
    x = torch.randn(9, 41)
    before = dict(pipeline.STEP_SECONDS)
    check(lambda x: x.softmax(-1), x)
    art = compiler.dump.last_artifacts()
    assert list(art.texts) == STEPS
    assert all(pipeline.STEP_SECONDS[s] > before.get(s, 0.0) for s in STEPS[1:])     # each step's time kept
    assert not any(k.startswith("pipeline") for k in art.counters)                  # apart from the counts
    assert "aten.amax" in art.texts["graph"] and "@triton.jit" in art.texts["triton"]
    assert art.counters["reduction_strategy.persistent"] == 2  # softmax's max and sum, one kernel
    assert "compiled graph" in art.summary()


def test_dump_dir_gets_one_file_per_step(tmp_path):
    with compiler.config.patch(dump_dir=str(tmp_path)):
        check(lambda x: x * 2, torch.randn(9))
    art = compiler.dump.last_artifacts()
    files = sorted(os.listdir(art.directory))
    assert files == ["01_graph.txt", "02_lowered.txt", "03_scheduled.txt", "04_triton.py", "05_plan.txt", "06_compiling.txt"]
    with open(os.path.join(art.directory, "04_triton.py")) as f:
        assert f.read() == art.texts["triton"]


def test_verify_ir_passes_on_correct_graphs():
    x, w = torch.randn(9, 41), torch.randn(41)
    with compiler.config.patch(verify_ir=True):
        check(lambda x, w: (torch.nn.functional.rms_norm(x, (41,), w), torch.cat([x, x[:2]]).amax(0)), x, w)


def test_verify_ir_catches_an_out_of_bounds_lowering(monkeypatch):
    def shifted_neg(x):  # reads one element past the end
        load = x.make_loader()
        return Pointwise.create(lambda idx: ops.neg(load((idx[0] + 1,))), x.get_size(), x.get_dtype())
    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.neg.default, shifted_neg)
    with compiler.config.patch(verify_ir=True):
        with pytest.raises(VerificationError, match="reaches") as info:
            run_compiled(lambda x: -x, torch.randn(9))
    assert info.value.step == "eager"
    assert compiler.dump.last_artifacts().error.startswith("VerificationError")


def test_ran_artifacts_name_the_graphs_an_example_ran_even_from_the_cache():
    fn = compiler.compile(lambda x: x.cos() * 3, dynamic=False)
    x = torch.randn(17)
    fn(x)                                          # compiles
    compiled = compiler.dump.last_artifacts()
    compiler.dump.forget_ran()
    assert compiler.dump.ran_artifacts() == []
    torch.testing.assert_close(fn(x), x.cos() * 3)  # runs the cached graph: no new compilation
    assert compiler.dump.last_artifacts() is compiled
    assert compiler.dump.ran_artifacts() == [compiled]
