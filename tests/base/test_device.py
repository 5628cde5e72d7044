"""tritondiff.base.device: a sticky CUDA error is told from other errors (an out-of-memory frees up)."""
import torch

from tritondiff.base.device import device_fault

STICKY = "CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA` ..."


def test_device_faults_are_told_from_other_errors():
    assert device_fault(RuntimeError(STICKY))
    if hasattr(torch, "AcceleratorError"):
        assert device_fault(torch.AcceleratorError(STICKY))
    assert not device_fault(RuntimeError("shape mismatch"))
    assert not device_fault(ValueError("CUDA error: looks like one, is not a RuntimeError"))
    assert not device_fault(torch.cuda.OutOfMemoryError("CUDA error: out of memory"))


# ---------------------------------------------------------------------------------------------- import order

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import pytest  # noqa: E402

from tritondiff.base import device  # noqa: E402

KERNEL_FILE = '''
import torch
import triton
import triton.language as tl

from tritondiff import subject, tensor      # after triton, as a kernel file is often written


@triton.jit
def _rowmax_minus_sum(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"))     # padding never the max
    y = x.max(0) - tl.sum(tl.where(cols < N, x, 0.0), 0)     # a tensor member function and a tl function
    tl.store(y_ptr + row, y)


def rowmax_minus_sum(x):
    x = x.contiguous()
    y = torch.empty(x.shape[0], dtype=x.dtype)
    _rowmax_minus_sum[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


@subject(reference=lambda x: x.max(-1).values - x.sum(-1),
         inputs={"x": tensor(("M", "N"), dtypes=("float32",), nonfinite=False)}, dims={"M": (1, 8), "N": (1, 64)})
def checked(x):
    return rowmax_minus_sum(x)
'''

TEST_FILE = '''
import torch

from kernel_first import rowmax_minus_sum


def test_the_kernel_runs_in_the_interpreter():
    x = torch.randn(3, 50)
    torch.testing.assert_close(rowmax_minus_sum(x), x.max(-1).values - x.sum(-1))
'''

COMPILE = '''
import torch

f = torch.compile(lambda x: (x * 2).softmax(-1).sum(-1), backend="tritondiff")
x = torch.randn(4, 33)
torch.testing.assert_close(f(x), (x * 2).softmax(-1).sum(-1))
print("compiled and ran")
'''

no_gpu = pytest.mark.skipif(not device._no_gpu_device_nodes(), reason="the import order matters where no GPU is")


def _run(args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITONDIFF_DEVICE")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@no_gpu
def test_kernels_decorated_before_tritondiff_is_imported_run_in_the_interpreter(tmp_path):
    (tmp_path / "kernel_first.py").write_text(textwrap.dedent(KERNEL_FILE))
    (tmp_path / "test_kernel_first.py").write_text(textwrap.dedent(TEST_FILE))
    res = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_kernel_first.py"], tmp_path)
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout + res.stderr
    res = _run(["-m", "tritondiff.harness", "check", "kernel_first.py", "--budget", "5", "--seed", "1"], tmp_path)
    assert res.returncode == 0 and "pass  checked" in res.stdout, res.stdout + res.stderr


@no_gpu
def test_torch_compile_with_the_backend_runs_although_torch_imported_triton_first(tmp_path):
    (tmp_path / "compile_first.py").write_text(textwrap.dedent(COMPILE))
    res = _run(["compile_first.py"], tmp_path)
    assert res.returncode == 0 and "compiled and ran" in res.stdout, res.stdout + res.stderr
