"""tritondiff.harness.triage: a wrong compiled result is placed in lowering, fusion or codegen.

The bugs are planted with unittest.mock: a lowering of aten.neg that returns its input
(the IR is wrong), and a Triton handler of ops.neg that emits its operand (the IR is right,
the generated kernel wrong).  A correct program gets no stage.
"""
from unittest import mock

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import lowering
from tritondiff.harness import triage
from tritondiff.compiler.codegen.triton_ops import TritonOps
from tritondiff.harness.graph_fuzz import Program, Step, check_program
from tests.compiler.util import seeded_randn
from tests.compiler.conftest import fresh_compiler  # noqa: F401  (autouse: fresh dynamo caches, counters)


def _neg_returns_its_input():
    """A planted lowering bug: aten.neg lowered to its input."""
    return mock.patch.dict(lowering.lowerings, {torch.ops.aten.neg.default: lambda x: x})


def _triton_neg_emits_its_operand():
    """A planted codegen bug: the Triton handler of ops.neg drops the minus sign."""
    return mock.patch.object(TritonOps, "neg", lambda self, x: self._unary("{x}", x))


def program(x):
    return torch.exp(-x) * 2 + x.sum(-1, keepdim=True)


def _triage(fn, *args, **knobs):
    """What tritondiff.harness.subjects.compiler does: compile, run, judge against eager, place a wrong result."""
    before = compiler.counters["graphs_compiled"]
    eager, truth = triage.references(fn, args)
    torch._dynamo.reset()
    with compiler.config.patch(**knobs):
        compiled = compiler.compile(fn, dynamic=False)
        got = compiled(*triage.copies(args))
        return triage.diagnose(got, lambda: compiled(*triage.copies(args)),
                               lambda out: triage.judge(out, eager, truth), triage.compiled_since(before))


def test_a_correct_program_gets_no_stage():
    assert _triage(program, seeded_randn(9, 41, seed=1)) is None
    art = compiler.dump.last_artifacts()
    assert art.stage is None and "triage" not in art.texts
    assert not compiler.counters.with_prefix("mismatch_stage.")


def test_a_wrong_lowering_is_classified_as_lowering():
    with _neg_returns_its_input():
        found = _triage(program, seeded_randn(9, 41, seed=1))
    assert found is not None and found.stage == "lowering"
    assert found.verdicts["triton"].startswith("wrong") and found.verdicts["ir_unfused"].startswith("wrong")
    assert "ir" not in found.verdicts  # the first wrong stage decides
    art = compiler.dump.last_artifacts()
    assert art.stage == "lowering" and "mismatch stage: lowering" in art.texts["triage"]
    assert art.counters["mismatch_stage.lowering"] == 1 and compiler.counters["mismatch_stage.lowering"] == 1
    assert "mismatch stage: lowering" in art.summary()


@pytest.mark.parametrize("strategy", ["persistent", "looped"])
def test_a_wrong_triton_expression_is_classified_as_codegen(strategy):
    with _triton_neg_emits_its_operand():
        found = _triage(program, seeded_randn(9, 41, seed=1), reduction_strategy=strategy)
    assert found is not None and found.stage == "codegen", found and found.describe()
    assert found.verdicts == {"triton": found.verdicts["triton"], "ir_unfused": "right", "ir": "right"}
    assert compiler.dump.last_artifacts().stage == "codegen"


def test_a_wrong_fused_ir_is_classified_as_fusion():
    """The decision itself, with a program whose result depends only on the execution mode."""
    right, wrong = torch.ones(3), torch.zeros(3)

    def run():
        return wrong if compiler.config.execution == "ir" else right

    def judge(out):
        return bool(torch.equal(out, right)), "" if torch.equal(out, right) else "mismatch: zeros"
    found = triage.diagnose(wrong, run, judge)
    assert found.stage == "fusion"
    assert found.verdicts == {"triton": "wrong: mismatch: zeros", "ir_unfused": "right", "ir": "wrong: mismatch: zeros"}


def test_an_ir_run_that_raises_leaves_the_stage_unknown():
    def run():
        raise RuntimeError("evaluator broke")
    found = triage.diagnose(torch.zeros(2), run, lambda out: (False, "wrong"))
    assert found.stage == "unknown" and "evaluator broke" in found.verdicts["ir_unfused"]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "offset", "expanded"])
def test_re_running_keeps_the_layout_and_does_not_recompile(layout):
    base = seeded_randn(41, 12, seed=1)
    x = {"contiguous": base, "transposed": base.t(), "offset": base[3:, 2:],
         "expanded": base[:1].expand(41, 12)}[layout]
    [copy] = triage.copies([x])
    assert (copy.shape, copy.stride(), copy.storage_offset()) == (x.shape, x.stride(), x.storage_offset())
    assert torch.equal(copy, x) and copy.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    with _triton_neg_emits_its_operand():
        assert _triage(program, x).stage == "codegen"
    assert compiler.counters["graphs_compiled"] == 1


def test_the_graph_fuzzer_reports_the_stage():
    p = Program(((5, 9),), (Step("neg", (0,)), Step("sum", (1,), (("dim", 1), ("keepdim", False)))), (2,))
    assert check_program(p, seed=3).stage is None
    with _neg_returns_its_input():
        result = check_program(p, seed=3)
    assert not result.passed and result.stage == "lowering" and "mismatch stage: lowering" in result.message
    with _triton_neg_emits_its_operand():
        result = check_program(p, seed=3, strategy="looped")
    assert not result.passed and result.stage == "codegen"
