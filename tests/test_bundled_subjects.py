"""Every bundled subject (``tritondiff.harness.subjects.kernels``, ``tritondiff.harness.subjects.compiler``) as one test.

Fuzzed through the ``tritondiff`` fixture at the selected profile: ``ci`` in the
pre-merge gate (``python -m tritondiff.harness.gate``), ``nightly`` for the deep run::

    pytest -n auto --tritondiff-profile nightly tests/test_bundled_subjects.py
"""
import pytest

from tritondiff.base import device  # noqa: F401  (device decision before any kernel module is imported)
from tritondiff.harness.loader import bundled

SUBJECTS = sorted(bundled())


@pytest.mark.parametrize("name", SUBJECTS)
def test_bundled_subject(tritondiff, name):
    result = tritondiff.check(name)
    assert result.status == "pass"
    assert result.examples > 0, f"{name}: no example ran within the {tritondiff.profile.name} budget"
    # every example skipped means the reference rejected every input: the subject checked nothing (the mHC
    # backward subjects did, for weeks, through a keyword-name mismatch in their reference call)
    assert result.skipped < result.examples, f"{name}: all {result.examples} examples skipped (reference raised)"
