"""Shared fixtures.  tritondiff.base.device is imported first: it decides CUDA vs the Triton interpreter
before any test module defines a Triton kernel."""
import os

# One finding per exploration unless a test asks for more: a test of a planted bug asserts the first
# finding, and the search after it would spend the test's whole budget (tests of keep-going set it).
os.environ.setdefault("TRITONDIFF_MAX_FINDINGS", "1")
# The compiler's graph cache (compiler.graph_cache) in a directory of this test process and the worker processes
# it starts, not the user's: a run starts cold, and within it a graph traced twice is revived the second time.
if "TRITONDIFF_GRAPH_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile
    os.environ["TRITONDIFF_GRAPH_CACHE_DIR"] = tempfile.mkdtemp(prefix="tritondiff-test-graphs-")
    atexit.register(shutil.rmtree, os.environ["TRITONDIFF_GRAPH_CACHE_DIR"], True)

from tritondiff.base import device  # noqa: F401,E402
import signal
import zlib

import pytest
import torch

# A shell without job control starts background commands with SIGINT ignored, and that disposition is
# inherited by every process below (Python then installs no KeyboardInterrupt handler).  The Ctrl-C tests
# (a campaign's clean stop, a worker call interrupted) need SIGINT delivered, so pytest restores it:
# `.ci/run &` from a script otherwise fails them while the same run in the foreground passes.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from tritondiff.harness.executor import InProcess


@pytest.fixture(autouse=True)
def _torch_seed_per_test(request):
    """Seed torch's global generator from the test's node id: a test that draws without a generator of its own
    gets the same values whatever ran before it in its process (an xdist worker's order changes from run to
    run), so a draw that fails fails every time and can be looked at."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    yield


@pytest.fixture
def in_process():
    """An executor that runs examples in the test process (fast; no crash isolation)."""
    ex = InProcess()
    yield ex
    ex.close()
