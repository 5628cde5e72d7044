"""The package root: the public names resolve lazily, and ``check`` passes a correct kernel and raises
``SubjectFailed`` (carrying the result and its dump) on a planted bug."""
import os
import subprocess
import sys

import pytest

import tritondiff
from tests.harness import planted
from tritondiff.harness.executor import InProcess


def test_every_public_name_resolves():
    for name in tritondiff.__all__:
        assert getattr(tritondiff, name) is not None, name
    assert issubclass(tritondiff.HarnessError, tritondiff.TritondiffError)
    assert issubclass(tritondiff.ConfigError, tritondiff.UsageError)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tritondiff.nope


def test_importing_the_root_imports_nothing_heavy():
    out = subprocess.run([sys.executable, "-c", "import sys, tritondiff; "
                          "print(sorted(m for m in ('torch', 'triton', 'hypothesis') if m in sys.modules))"],
                         capture_output=True, text=True, timeout=120, check=True,
                         env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}).stdout
    assert out.strip() == "[]"


def test_check_returns_a_pass_and_raises_on_a_finding(tmp_path):
    opts = dict(budget_s=60, max_examples=15, seed=3, out_dir=str(tmp_path), executor=InProcess())
    assert tritondiff.check(planted.correct_sum, **opts).status == "pass"
    with pytest.raises(tritondiff.SubjectFailed) as e:
        tritondiff.check(planted.pow2_only_sum, **{**opts, "executor": InProcess()})
    assert e.value.result.status == "fail" and os.path.isdir(e.value.result.dump)
    assert "pow2_only_sum" in str(e.value) and "dump:" in str(e.value)


def test_check_refuses_what_is_not_a_subject():
    with pytest.raises(tritondiff.UsageError, match="no subject named 'no.such.subject'"):
        tritondiff.check("no.such.subject")
    with pytest.raises(tritondiff.UsageError, match="declare the kernel's entry point with @subject"):
        tritondiff.check(len)
