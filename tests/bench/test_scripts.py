"""The benchmarks run from the repo root: the GPU ones say they need a GPU and exit 0 on a machine
without one; the hunters' overhead benchmark runs anywhere and writes its table."""
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env={**os.environ, "TRITONDIFF_DEVICE": "cpu"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU exit")
@pytest.mark.parametrize("module", ["bench.norms", "bench.mhc", "bench.breakdown", "bench.mhc_gridsearch",
                                    "bench.autograd_host", "bench.compile_time"])
def test_a_gpu_benchmark_says_it_needs_a_gpu_and_exits_0(module):
    done = _run(module)
    assert done.returncode == 0 and "no CUDA device here" in done.stdout, done.stdout + done.stderr[-2000:]


@pytest.mark.slow  # over 30 s on 2 cores: nightly tier
def test_the_overhead_benchmark_measures_every_setting(tmp_path):
    out = tmp_path / "overhead.md"
    done = _run("bench.harness_overhead", "--examples", "2", "--repeats", "1", "--subject", "two_kernel_nrm2",
                "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    text = out.read_text()
    from tritondiff.harness.hunters import HUNTERS
    assert "all hunters (default)" in text and "none (plain diff)" in text
    assert all(f"all but {name}" in text and hunter.summary in text for name, hunter in HUNTERS.items())


@pytest.mark.parametrize("module", sorted(
    f"{folder}.{name[:-3]}" for folder in ("bench", "tools") for name in os.listdir(os.path.join(ROOT, folder))
    if name.endswith(".py") and not name.startswith("_")))
def test_every_script_prints_its_help(module):
    done = _run(module, "--help", timeout=120)
    if "usage:" not in done.stdout and done.returncode == 0:
        pytest.skip(f"{module} takes no options")
    assert done.returncode == 0 and "usage:" in done.stdout, done.stdout + done.stderr[-2000:]
