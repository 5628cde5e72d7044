"""codegen.kernel: loop headers, a row's first element taken from its registers, and the bf16 cast forms (the passes
over a kernel's statements: tests/compiler/test_statements.py)."""

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler.codegen.kernel import (
    CSEVar, TritonKernel, cast_source, helper_bf16_casts
)
from tritondiff.base import device
from tests.compiler.util import check, run_compiled, seeded_randn



@pytest.mark.parametrize("stages, want", [(None, "for xstep in range(0, 32, 2):"), (1, "for xstep in range(0, 32, 2):"),
                                          (3, "for xstep in tl.range(0, 32, 2, num_stages=3):")])
def test_for_range_asks_triton_to_pipeline_only_past_one_stage(stages, want):
    assert TritonKernel.for_range("xstep", 0, 32, 2, stages) == want


# ---- a row's first element from its registers (TritonKernel.row_element)

def _row_special_values(dtype: torch.dtype, rows: int = 24, cols: int = 16) -> torch.Tensor:
    """Rows whose first element is each awkward value a bit-exact pick must keep: NaN, +-inf, -0.0, +0.0, a
    subnormal, the largest finite, and ordinary values; the other lanes random."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float64, device="cpu")
    info = torch.finfo(dtype)
    firsts = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, info.tiny / 4, -info.max, info.max, 1e4, -3.5]
    x[:len(firsts), 0] = torch.tensor(firsts, dtype=torch.float64, device="cpu")
    x[len(firsts), :] = -0.0                                     # a row of signed zeros: its mean keeps the sign
    return x.to(dtype).to(device.torch_device())


def _compiled_bits(fn, *args, **knobs):
    from tritondiff import compiler
    from tritondiff.compiler.config import config
    with config.patch(**knobs):
        out = run_compiled(fn, *args)
    return [t.view(torch.int16 if t.element_size() == 2 else torch.int32 if t.element_size() == 4 else torch.int64)
            if t.dtype.is_floating_point else t for t in (out if isinstance(out, tuple) else (out,))], \
        compiler.dump.last_artifacts().texts["triton"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_variance_shift_comes_from_the_row_bit_for_bit(dtype):
    """var_mean's shift (each row's first element) taken from the loaded row gives the same bits as loading
    it again, for NaN, infinities, signed zeros and subnormals in the first lane; and the source shows which."""
    x = _row_special_values(dtype)

    def fn(x):
        var, mean = torch.var_mean(x, 1, correction=0)
        return var, mean, torch.nn.functional.layer_norm(x, (x.shape[1],))
    got, src = _compiled_bits(fn, x, row_elements_from_registers=True)
    want, src_off = _compiled_bits(fn, x, row_elements_from_registers=False)
    assert "rindex == 0" in src and "rindex == 0" not in src_off
    assert src.count("tl.load(") < src_off.count("tl.load("), "the row's first element is still loaded again"
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    tol = 2e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
    check(fn, (seeded_randn(24, 16, seed=3).double() + 100).to(dtype), rtol=tol, atol=tol)   # and eager agrees


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_an_integer_row_s_first_element_comes_from_its_registers(dtype):
    """x - x[:, :1] summed over the row: the first element picked from the row is exact for every integer
    type, the extremes included."""
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, (20, 12), generator=torch.Generator().manual_seed(1), dtype=torch.int64,
                      device="cpu")
    x[:4, 0] = torch.tensor([info.min, info.max, -1 if info.min < 0 else 255, 0], device="cpu")
    x = x.to(dtype).to(device.torch_device())

    def fn(x):
        return (x - x[:, :1]).amax(1)
    got = check(fn, x)
    assert "rindex == 0" in compiler.dump.last_artifacts().texts["triton"]
    assert got.dtype == dtype


def test_no_row_element_from_a_looped_row_or_a_padded_one():
    """Only a whole row in one block gives lane 0: a looped reduction loads the shift, and a row under a
    mask (a padded row, whose lane 0 is the pad) is never a source."""
    x = torch.randn(8, 40)
    from tritondiff.compiler.config import config
    with config.patch(reduction_strategy="looped", rblock=16):
        check(lambda x: torch.var_mean(x, 1), x)
    assert "rindex == 0" not in compiler.dump.last_artifacts().texts["triton"]
    check(lambda x: torch.var_mean(torch.nn.functional.pad(x, (1, 0), value=7.0), 1), x)


# ------------------------------------------------------------------------------------ bf16 casts

@pytest.mark.parametrize("src, dst, helpers, native", [
    (torch.bfloat16, torch.float32, "_td_bf16_to_f32(v)", "v.to(tl.float32)"),
    (torch.float32, torch.bfloat16, "_td_to_bf16(v)", "v.to(tl.bfloat16)"),
    (torch.float16, torch.bfloat16, "_td_to_bf16(v.to(tl.float32))", "v.to(tl.float32).to(tl.bfloat16)"),
    (torch.bfloat16, torch.float16, "_td_bf16_to_f32(v).to(tl.float16)", "v.to(tl.float32).to(tl.float16)"),
    (torch.bfloat16, torch.bool, "(_td_bf16_to_f32(v) != 0)", "(v.to(tl.float32) != 0)"),
    (torch.int32, torch.bfloat16, "_td_to_bf16(v.to(tl.float32))", "v.to(tl.float32).to(tl.bfloat16)"),
])
def test_bf16_casts_are_tritons_own_on_a_gpu_and_the_prelude_helpers_in_the_interpreter(src, dst, helpers, native):
    """config.native_bf16_casts (on for a GPU): one cvt instead of the interpreter-exact integer helpers."""
    v = CSEVar("v", src)
    for on, want in ((False, helpers), (True, native)):
        with compiler.config.patch(native_bf16_casts=on):
            assert cast_source(v, dst) == want


def test_helper_bf16_casts_overrides_native_casts_within_and_only_within():
    v = CSEVar("v", torch.bfloat16)
    with compiler.config.patch(native_bf16_casts=True):
        with helper_bf16_casts():
            assert cast_source(v, torch.float32) == "_td_bf16_to_f32(v)"
            assert cast_source(CSEVar("w", torch.float32), torch.bfloat16) == "_td_to_bf16(w)"
        assert cast_source(v, torch.float32) == "v.to(tl.float32)"


def test_a_bf16_rms_norm_with_native_casts_rounds_as_the_helpers_do_within_the_interpreters_truncation():
    """Native casts in the interpreter truncate fp32 -> bf16 (a GPU rounds to nearest even, as the helpers do):
    two casts to bf16 (the product's and the output's), so the kernels agree to two bf16 ulps; the native one's
    source has no helper call left."""
    x = seeded_randn(5, 300, seed=41).bfloat16()
    w = seeded_randn(300, seed=42).bfloat16()

    def fn(t, w):
        tf = t.float()
        return (tf * torch.rsqrt((tf * tf).mean(-1, keepdim=True) + 1e-6)).to(t.dtype) * w
    outs = {}
    for on in (False, True):
        with compiler.config.patch(native_bf16_casts=on):
            outs[on] = compiler.compile_fresh(fn)(x, w)
        text = compiler.dump.last_artifacts().texts["triton"].split("@triton.jit\ndef g")[-1]
        assert ("_td_" in text) == (not on), text
    assert outs[False].dtype == outs[True].dtype == torch.bfloat16
    torch.testing.assert_close(outs[True].float(), outs[False].float(), rtol=2 ** -6, atol=0)
    torch.testing.assert_close(outs[False], fn(x, w), rtol=2 ** -8, atol=1e-6)
