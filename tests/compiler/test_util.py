"""The test helpers themselves: they must be able to fail."""
from unittest import mock

import pytest
import torch

from tritondiff import compiler
from tests.compiler import util


def test_check_fails_when_dynamo_runs_the_function_eagerly():
    x = torch.randn(9)
    with mock.patch.object(compiler, "compile", lambda fn, **kwargs: fn):  # "compiled" = eager
        with pytest.raises(AssertionError, match="reached the compiler, 0 did"):
            util.check(lambda x: x * 2, x)
    util.check(lambda x: x * 2, x)  # the real compiler: one graph, passes


def test_reaches_compiler_counts_graphs():
    x = torch.randn(9, requires_grad=True)
    with pytest.raises(AssertionError, match="2 graph"):
        with util.reaches_compiler(2):
            util.run_compiled(lambda x: x.exp(), x.detach())  # inference: one graph only
    torch._dynamo.reset()
    with util.reaches_compiler(2):
        compiler.compile(lambda x: x.exp())(x).sum().backward()  # forward and backward


def test_a_missing_golden_file_fails_unless_accepting(tmp_path, monkeypatch):
    monkeypatch.setattr(util, "GOLDEN_DIR", str(tmp_path))
    monkeypatch.delenv("EXPECTTEST_ACCEPT", raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(AssertionError, match="is missing; run this test with EXPECTTEST_ACCEPT=1"):
        util.assert_golden("new.py", "x = 1\n")
    assert not (tmp_path / "new.py").exists()
    monkeypatch.setenv("EXPECTTEST_ACCEPT", "1")
    util.assert_golden("new.py", "x = 1\n")
    assert (tmp_path / "new.py").read_text() == "x = 1\n"
    monkeypatch.delenv("EXPECTTEST_ACCEPT")
    util.assert_golden("new.py", "x = 1\n")
    with pytest.raises(AssertionError, match="differs"):
        util.assert_golden("new.py", "x = 2\n")
