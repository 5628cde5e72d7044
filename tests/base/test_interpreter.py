"""base.interpreter: bf16 arithmetic in Triton's interpreter computes on values (the interpreter alone
applies numpy to the raw 16-bit patterns), so a kernel that computes in bf16 is judged on what it
computes -- a correct one passes and a wrong one still fails."""
import pytest
import torch
import triton
import triton.language as tl

from tritondiff.base import device
from tritondiff.harness import subject, tensor
from tritondiff.harness.executor import InProcess
from tritondiff.harness.explore import explore

pytestmark = pytest.mark.skipif(not device.is_interpreter(), reason="corrects Triton's interpreter")


@triton.jit
def _axpx_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, OFF_BY_ONE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = x * 1.5 + x                                   # computed in bf16 for bf16 inputs, no upcast
    if OFF_BY_ONE:
        y = tl.where(offs == n - 1, x, y)             # planted: the last element is not computed
    tl.store(y_ptr + offs, y, mask=offs < n)


def _axpx(x, off_by_one=False):
    x = x.contiguous()
    y = torch.empty_like(x)
    _axpx_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256, OFF_BY_ONE=off_by_one)
    return y


@triton.jit
def _dot_max_kernel(a_ptr, b_ptr, c_ptr, m_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b))
    tl.store(m_ptr + r, tl.max(a, axis=1))            # comparisons of negative bf16 values


def test_bf16_arithmetic_dot_and_comparisons_compute_on_values():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=g).bfloat16()
    assert torch.equal(_axpx(x), x * 1.5 + x)         # torch's CPU bf16 also rounds after each op
    a, b = (torch.randn(16, 16, generator=g).bfloat16() - 2 for _ in range(2))
    c, m = torch.empty(16, 16), torch.empty(16, dtype=torch.bfloat16)
    _dot_max_kernel[(1,)](a, b, c, m, B=16)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-4)
    assert torch.equal(m, a.max(dim=1).values)


def _subject(off_by_one: bool):
    @subject(reference=lambda x: x * 1.5 + x, inputs={"x": tensor(("N",), dtypes=("bfloat16",))},
             dims={"N": (1, 5000)}, name=f"interpreter_test.axpx_{off_by_one}")
    def axpx(x):
        return _axpx(x, off_by_one)
    return axpx


def test_a_kernel_computing_in_bf16_passes_and_its_planted_bug_is_found(tmp_path):
    opts = dict(budget_s=60, max_examples=25, seed=5, out_dir=str(tmp_path))
    assert explore(_subject(False), executor=InProcess(), **opts).status == "pass"
    found = explore(_subject(True), executor=InProcess(), **opts)
    assert found.status == "fail" and found.failure_class == "mismatch"
