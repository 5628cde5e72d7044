"""The Triton interpretation of ``ops`` (and the prelude helpers) against torch semantics.

Each test compiles one function with many outputs, so one compilation covers many ops;
inputs include negatives, zeros, halves, NaN and infinities where the op's semantics
differ between C, Python and IEEE defaults.
"""
import math

import pytest
import torch

from tritondiff import compiler
from tritondiff.base import device
from tests.compiler.util import assert_oracle, assert_same, run_compiled, seeded_randn


def _floats(n=341, seed=0):
    x = seeded_randn(n, seed=seed) * 3
    special = torch.tensor([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-7, -1e-7, 3e-4, 80.0, -90.0,
                            float("nan"), float("inf"), -float("inf")])
    return torch.cat([x, special])


def test_math_functions():
    x = _floats()

    def fn(x):
        return (torch.exp(x), torch.expm1(x), torch.log(x.abs()), torch.log1p(x.abs()), torch.log2(x.abs()),
                torch.tanh(x), torch.sigmoid(x), torch.erf(x), torch.sqrt(x.abs()), torch.rsqrt(x.abs() + 1),
                torch.sin(x), torch.cos(x), torch.sinh(x), torch.cosh(x / 10), torch.exp2(x), torch.log10(x.abs()),
                torch.reciprocal(x), torch.tan(x / 4))
    got = run_compiled(fn, x)
    if device.is_interpreter():  # numpy's libm underneath: within a few ulp of torch
        assert_same(got, fn(x), rtol=2e-6, atol=1e-6)
    assert_oracle(got, fn(x), fn(x.double()))  # on a GPU, tl.exp / tl.log are hardware approximations


def test_tanh_expm1_log1p_are_accurate_near_zero():
    x = torch.tensor([1e-8, -3e-7, 1e-5, -2e-4, 0.01, -0.3, 0.49, 0.51], dtype=torch.float32)
    got = run_compiled(lambda x: (torch.tanh(x), torch.expm1(x), torch.log1p(x)), x)
    for g, w in zip(got, (torch.tanh(x), torch.expm1(x), torch.log1p(x))):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=0)  # relative, even at 1e-8 (no cancellation)


def test_rounding():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, 1e20, -3.7, 3.7, 8388609.0,
                      float("nan"), float("inf"), -0.0])
    fn = lambda x: (torch.round(x), torch.floor(x), torch.ceil(x), torch.trunc(x), torch.sign(x))  # noqa: E731
    assert_same(run_compiled(fn, x), fn(x), rtol=0, atol=0)


def test_integer_division_and_modulo_follow_python_semantics():
    a = torch.tensor([-7, 7, -7, 7, 0, -1, 9, -9, 123456789], dtype=torch.int32)
    b = torch.tensor([2, -2, -2, 2, 3, 5, 3, 3, -1000], dtype=torch.int32)

    def fn(a, b):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                torch.remainder(a, b), torch.fmod(a, b), a // 4, a % 3)
    assert_same(run_compiled(fn, a, b), fn(a, b), rtol=0, atol=0)


def test_float_division_and_modulo():
    a = torch.tensor([-7.5, 7.5, -7.5, 7.5, 0.0, -1.0, 5.0, 1e10, 3.0, 1.0])
    b = torch.tensor([2.0, -2.0, -2.0, 2.0, 3.0, 5.0, 0.0, 3.0, 0.1, -0.0])

    def fn(a, b):
        return (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                torch.remainder(a, b), torch.fmod(a, b), a / b)
    assert_same(run_compiled(fn, a, b), fn(a, b), rtol=1e-6, atol=0)
    # float fmod / remainder stay with ATen (Triton's float % is inexact on GPUs); integer ones are lowered
    assert compiler.counters["extern.aten.fmod.Tensor"] == 1
    assert compiler.counters["extern.aten.remainder.Tensor"] == 1
    ints = lambda a: (torch.remainder(a, 3), torch.fmod(a, -3))  # noqa: E731
    k = torch.tensor([-7, 7, 0, 1, -1, 2**30], dtype=torch.int32)
    assert_same(run_compiled(ints, k), ints(k), rtol=0, atol=0)
    assert not any(name.startswith("extern.aten.remainder.Scalar") for name in compiler.counters)


def test_max_min_propagate_nan_and_clamp():
    a = torch.tensor([1.0, float("nan"), 3.0, -1.0, float("nan"), 0.0])
    b = torch.tensor([2.0, 1.0, float("nan"), -2.0, float("nan"), -0.0])

    def fn(a, b):
        return torch.maximum(a, b), torch.minimum(a, b), torch.relu(a), a.clamp(-0.5, 2.0), torch.clamp(a, min=b)
    assert_same(run_compiled(fn, a, b), fn(a, b), rtol=0, atol=0)


def test_max_min_relu_keep_the_first_operand_on_a_signed_zero_tie():
    a = torch.tensor([0.0, -0.0, -0.0, 0.0])
    b = torch.tensor([-0.0, 0.0, -0.0, 0.0])

    def fn(a, b):
        return torch.maximum(a, b), torch.minimum(a, b), torch.relu(a), a.clamp(min=0.0)
    if not device.is_interpreter():
        pytest.skip("torch's CUDA maximum/minimum order -0.0 below 0.0 (its CPU kernels keep the first operand): "
                    "eager is no fixed yardstick for the sign of a zero tie on a GPU")
    for got, want in zip(run_compiled(fn, a, b), fn(a, b)):  # assert_close calls -0.0 and 0.0 equal
        assert got.signbit().tolist() == want.signbit().tolist() == a.signbit().tolist()


def test_bf16_negative_zero_casts_to_false():
    x = torch.tensor([-0.0, 0.0, 1.0, -1e-40, float("nan")]).bfloat16()
    fn = lambda x: (x.bool(), x.to(torch.int32), x.any(), x[:2].any())  # noqa: E731
    assert_same(run_compiled(fn, x), fn(x), rtol=0, atol=0)
    assert fn(x)[0].tolist() == [False, False, True, True, True]


def test_comparisons_logic_and_bitwise():
    a = torch.randint(-50, 50, (341,), dtype=torch.int64)
    b = torch.randint(-50, 50, (341,), dtype=torch.int64)

    def fn(a, b):
        return (a == b, a < b, a >= b, (a > 0) & (b > 0), (a > 0) | (b < 0), (a > 0) ^ (b > 0), ~(a > 3),
                a & b, a | b, a ^ b, ~a, torch.abs(a), -a, a * b - 3, torch.logical_not(a), torch.sign(a))
    assert_same(run_compiled(fn, a, b), fn(a, b), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.uint8, torch.bool,
                                   torch.float64])
def test_casts(dtype):
    x = torch.cat([torch.randn(300) * 200, torch.tensor([0.5, 1.5, -2.5, 1.00390625, 1.01171875, 0.0, -0.7])])
    if not dtype.is_floating_point:
        x = x.clamp(-100, 100) if dtype != torch.uint8 else x.abs().clamp(0, 200)
    fn = lambda x: (x.to(dtype), x.to(dtype).to(torch.float32) * 2, (x * 3).to(dtype))  # noqa: E731
    assert_same(run_compiled(fn, x), fn(x), rtol=0, atol=0)


def test_bf16_arithmetic_rounds_like_eager():
    x = torch.randn(4231)
    fn = lambda x: ((x.bfloat16() * 3).tanh(), (x.half() + 1).exp())  # noqa: E731
    got = run_compiled(fn, x)
    if device.is_interpreter():  # bit-identical: same libm, and bf16 rounds to nearest even like eager
        assert_same(got, fn(x), rtol=0, atol=0)
    assert_oracle(got, fn(x), tuple(t.double() for t in fn(x.double())))


def test_where_masked_fill_and_scalars():
    x = torch.randn(41, 9)
    fn = lambda x: (torch.where(x > 0, x, 0.5), x.masked_fill(x < -1, float("-inf")),  # noqa: E731
                    torch.where(x > 1, 2, x.int()), torch.full_like(x, 7.25), x + True, x * 2 ** 40)
    assert_same(run_compiled(fn, x), fn(x), rtol=0, atol=0)


def test_pow_scalar_exponents_and_fallback():
    x = torch.rand(341) + 0.5
    fn = lambda x: (x ** 2, x ** 3, x ** 0.5, x ** -0.5, x ** -2, x ** 0, x ** 1.7)  # noqa: E731
    assert_same(run_compiled(fn, x), fn(x), rtol=2e-6, atol=0)
    assert compiler.counters["extern.aten.pow.Tensor_Scalar"] == 1  # only x ** 1.7 fell back


def test_isnan_isinf_isfinite():
    x = _floats(41)
    fn = lambda x: (x.isnan(), x.isinf(), x.isfinite(), torch.nan_to_num(x, 0.0, 1.0, -1.0))  # noqa: E731
    assert_same(run_compiled(fn, x), fn(x), rtol=0, atol=0)


def test_arange_and_iota():
    fn = lambda x: (x + torch.arange(41, device=x.device), torch.arange(3, 90, 7.5, device=x.device),  # noqa: E731
                    torch.arange(41, 0, -3, device=x.device) * x[:14])
    x = torch.randn(41)
    assert_same(run_compiled(fn, x), fn(x), rtol=1e-6, atol=1e-6)
    assert math.isfinite(float(run_compiled(fn, x)[1].sum()))
