"""tools.owned_poll_stress: on a machine without a GPU it says so and exits 0 (the stress itself needs
concurrent programs on a GPU; the interpreter runs programs one after another)."""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU exit")
def test_without_a_gpu_it_prints_a_notice_and_exits_0():
    done = subprocess.run([sys.executable, "-m", "tools.owned_poll_stress", "1"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0 and "no CUDA device here" in done.stdout, done.stderr[-2000:]
