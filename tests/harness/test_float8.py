"""float8 tensors, in and out: a kernel that dequantises e4m3 / e5m2 inputs passes, its planted bug is found;
every value family draws float8 values the format holds."""
import pytest
import torch
import triton
import triton.language as tl

from tritondiff.harness import subject, tensor
from tritondiff.harness.case import TensorCase
from tritondiff.harness.executor import InProcess
from tritondiff.harness.explore import explore
from tritondiff.harness.tensors import guards_intact, materialize

FP8 = ("float8_e4m3fn", "float8_e5m2")


@triton.jit
def _dequant_kernel(q_ptr, s_ptr, y_ptr, N, sq, ss, BLOCK: tl.constexpr, ODD_HALVED: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    m = c < N
    q = tl.load(q_ptr + r * sq + c, mask=m, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + r * ss)
    if ODD_HALVED:                      # planted: odd columns take half the row's scale
        s = tl.where(c % 2 == 1, s * 0.5, s)
    tl.store(y_ptr + r * N + c, (q * s).to(y_ptr.dtype.element_ty), mask=m)


def _dequant_ref(q, scale):
    return (q.float() * scale[:, None].float()).to(torch.bfloat16)


def _subject(bug: bool):
    @subject(reference=_dequant_ref, name=f"dequant_fp8_{'bug' if bug else 'ok'}",
             inputs={"q": tensor(("M", "N"), dtypes=FP8),
                     "scale": tensor(("M",), dtypes=("float32",), values=("uniform_pos",))},
             dims={"M": (1, 8), "N": (1, 200)})
    def dequant(q, scale):
        M, N = q.shape
        q = q.contiguous()
        y = torch.empty((M, N), dtype=torch.bfloat16, device=q.device)
        _dequant_kernel[(M,)](q, scale, y, N, q.stride(0), scale.stride(0), BLOCK=triton.next_power_of_2(N),
                              ODD_HALVED=bug)
        return y
    return dequant


def test_a_float8_dequantisation_passes_and_its_planted_bug_is_found(tmp_path):
    opts = dict(budget_s=60, max_examples=25, seed=3, out_dir=str(tmp_path))
    assert explore(_subject(False), executor=InProcess(), **opts).status == "pass"
    found = explore(_subject(True), executor=InProcess(), **opts)
    assert found.status == "fail" and found.failure_class == "mismatch"


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("values", ["normal", "uniform_pos", "large_offset", "large", "near_max", "tiny"])
def test_every_value_family_draws_float8_values_the_format_holds(dtype, values):
    t = materialize(TensorCase(shape=(500,), dtype=dtype, layout="strided", layout_param=2, values=values, seed=11,
                               nonfinite=""))
    assert t.dtype == getattr(torch, dtype) and guards_intact(t) is None
    wide = t.float()
    assert bool(torch.isfinite(wide).all()) and float(wide.abs().max()) > 0
    assert len(torch.unique(wide)) > 1, "a family that saturates to one value draws nothing"
