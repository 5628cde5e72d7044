"""Shared fixtures.  harness.device is imported first: it decides CUDA vs the Triton interpreter
before any test module defines a Triton kernel."""
from harness import device  # noqa: F401
import pytest

from harness.executor import InProcess


@pytest.fixture
def in_process():
    """An executor that runs examples in the test process (fast; no crash isolation)."""
    ex = InProcess()
    yield ex
    ex.close()
