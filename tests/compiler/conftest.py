"""Fixtures for compiler tests: every test starts with fresh dynamo caches and counters."""
import pytest
import torch

from tritondiff import compiler
from tritondiff.base import device


@pytest.fixture(autouse=True)
def fresh_compiler():
    """Fresh dynamo caches, counters and compilation artifacts (a failure dump holds only this
    test's graphs); tensors default to the kernel device (CUDA on a GPU)."""
    torch._dynamo.reset()
    compiler.counters.clear()
    compiler.dump.clear()
    with torch.device(device.torch_device()):
        yield
    torch._dynamo.reset()
