"""Online softmax (compiler.codegen.online): a looped kernel sums exp(h - max) in the max's pass.

Each case is compiled looped in small chunks, so every lane's running max grows over several steps, and judged by
the harness oracle against the float64 run (as right as eager); the counter and the emitted passes show the
online path ran, and the same programs with ``online_softmax=False`` are the control.
"""
import math
import re

import pytest
import torch

from tritondiff import compiler
from tritondiff.harness import oracle
from tests.compiler.util import kernel_sources, run_compiled

LOOPED = dict(reduction_strategy="looped", rblock=16)


def softmax(x):
    return torch.softmax(x, -1)


def log_softmax(x):
    return torch.log_softmax(x, -1)


def sum_exp(x):
    """The normaliser itself: an all -inf row sums to NaN (exp(-inf - -inf)), whatever the output does with it."""
    return torch.exp(x - x.amax(-1, keepdim=True)).sum(-1)


def _compiled(fn, x, **knobs):
    before = compiler.counters["online_softmax"]
    with compiler.config.patch(**{**LOOPED, **knobs}):
        out = run_compiled(fn, x)
    source = "\n".join(kernel_sources(compiler.dump.last_artifacts().texts["triton"]))
    return out, compiler.counters["online_softmax"] - before, source


def _judge(fn, got, x):
    verdict = oracle.compare(got, fn(x), fn(x.double()))
    assert verdict.passed, verdict


def _rows() -> dict[str, torch.Tensor]:
    torch.manual_seed(7)
    special = torch.randn(6, 100)
    special[0] = -math.inf                      # max -inf: eager's sum is exp(-inf - -inf) = NaN
    special[1, 37] = math.inf                   # +inf: NaN through exp(inf - inf)
    special[2, 80] = math.nan
    special[3, :90] = -math.inf                 # lanes that see only -inf add nothing
    special[4, 50:] = -math.inf
    return {
        "normal": torch.randn(5, 300),
        "growing max": torch.arange(300.0).repeat(3, 1) / 7,        # a new lane max at every step
        "shrinking": torch.arange(300.0, 0, -1).repeat(2, 1),
        "wide range": torch.randn(4, 200) * 60,                     # exp(m_old - m_new) underflows to 0
        "special": special,
        "one element": torch.randn(7, 1),
        "bfloat16": torch.randn(3, 257).bfloat16() * 8,
        "float16": torch.randn(3, 257).half() * 8,
    }


@pytest.mark.parametrize("fn", [softmax, log_softmax, sum_exp])
@pytest.mark.parametrize("case", list(_rows()))
def test_online_softmax_is_as_right_as_eager(fn, case):
    x = _rows()[case]
    got, online, source = _compiled(fn, x)
    _judge(fn, got, x)
    if fn is sum_exp and x.dtype != torch.float32:
        assert online == 0        # a half max (softmax upcasts first): the sum's exp is of a rounded difference
        return
    assert online == 1
    passes = int(re.search(r"(\d+) pass\(es\) \(online softmax: buf\d+ beside buf\d+\)", source).group(1))
    assert source.count("for roffset") == passes


@pytest.mark.parametrize("fn", [softmax, log_softmax, sum_exp])
def test_special_rows_give_eagers_nans_and_zeros(fn):
    x = _rows()["special"]
    got, _, _ = _compiled(fn, x)
    want = fn(x)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert torch.equal(got == 0, want == 0) and torch.equal(torch.isinf(got), torch.isinf(want))


@pytest.mark.parametrize("fn", [softmax, log_softmax])
def test_off_the_sum_keeps_its_own_pass(fn):
    x = _rows()["normal"]
    got, online, source = _compiled(fn, x, online_softmax=False)
    assert online == 0 and source.count("for roffset") == 3
    _judge(fn, got, x)
    assert _compiled(fn, x)[2].count("for roffset") == 2


def test_a_persistent_kernel_is_left_alone():
    x = _rows()["normal"]
    got, online, source = _compiled(softmax, x, reduction_strategy="persistent", rblock=None)
    assert online == 0 and "for roffset" not in source
    _judge(softmax, got, x)


@pytest.mark.parametrize("fn", [
    lambda x: torch.exp(x * 2 - x.amax(-1, keepdim=True)).sum(-1),         # exp of another value than the max's
    lambda x: torch.exp(x - x.amax(-1, keepdim=True)).pow(2).sum(-1),      # not a plain exp
    lambda x: (x - x.amax(-1, keepdim=True)).sum(-1),                      # no exp at all
    lambda x: torch.exp(x - x.amin(-1, keepdim=True)).sum(-1),             # a min, not a max
    lambda x: torch.logsumexp(x, -1),                                      # exp(x - where(|max| = inf, 0, max))
], ids=["other value", "squared", "no exp", "min", "logsumexp"])
def test_other_shapes_keep_their_passes(fn):
    x = _rows()["normal"]
    got, online, _ = _compiled(fn, x)
    assert online == 0
    _judge(fn, got, x)
