"""harness.rounding: the reference's rounding noise excuses what a legitimate float32 implementation does
(intermediates rounded at their own magnitude, flushed subnormals, another order's overflow) and nothing
a bug does."""
import math

import torch
import torch.nn.functional as F

from tritondiff.harness import rounding
from tritondiff.harness.oracle import compare, flatten


def _judge(reference, candidate, **inputs):
    """compare() of ``candidate`` (float32 tensors in) against ``reference``, without and with the noise."""
    low = {k: v.float() if v.is_floating_point() else v for k, v in inputs.items()}
    high = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
    eager, truth = reference(**low), reference(**high)
    out = candidate(**low)
    noise = rounding.measure(reference, high, flatten(truth), [torch.float32], flatten)
    return compare(out, eager, truth), compare(out, eager, truth, noise=noise), noise


def _ln(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def _ln_one_pass_mean(x, w, b, mean_bias=0.0):
    """The textbook kernel's arithmetic: the mean summed in float32 at the values' magnitude."""
    mean = x.sum(-1, keepdim=True) / x.shape[-1] + mean_bias
    xc = x - mean
    return xc * torch.rsqrt((xc * xc).mean(-1, keepdim=True) + 1e-5) * w + b


def test_a_mean_rounded_at_a_large_offset_is_excused_and_a_wrong_mean_is_not():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(64, 9, generator=g, dtype=torch.float64) + 1000
    w, b = (torch.randn(9, generator=g, dtype=torch.float64) for _ in range(2))
    plain, judged, _ = _judge(_ln, _ln_one_pass_mean, x=x, w=w, b=b)
    assert not plain.passed and judged.passed, plain.message              # eager happened to be 5x closer
    bug = lambda x, w, b: _ln_one_pass_mean(x, w, b, mean_bias=0.01)      # a mean off by 1e-5 relative
    assert not _judge(_ln, bug, x=x, w=w, b=b)[1].passed


def _ce(logits, labels):
    return F.cross_entropy(logits, labels, reduction="none")


def test_a_fused_cross_entropy_forming_lse_at_the_logits_magnitude_is_excused():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(16, 2, generator=g, dtype=torch.float64) + 1e4      # logits of 1e4: ordinary values
    labels = torch.randint(0, 2, (16,), generator=g)

    def fused(logits, labels):          # lse = m + log(sum exp(x - m)), then lse - x[label]
        m = logits.max(-1).values
        lse = m + torch.log(torch.exp(logits - m[:, None]).sum(-1))
        return lse - logits.gather(1, labels[:, None])[:, 0]

    plain, judged, _ = _judge(_ce, fused, logits=logits, labels=labels)
    assert not plain.passed and judged.passed, plain.message
    off = lambda logits, labels: fused(logits, labels) + 0.02          # a loss a few % off is still wrong
    assert not _judge(_ce, off, logits=logits, labels=labels)[1].passed


def test_exact_ops_carry_no_noise_and_a_sum_carries_noise_of_its_terms_magnitude():
    x = torch.tensor([1e8, -1e8, 1.0, 0.5], dtype=torch.float64)
    exact = rounding.measure(lambda x: torch.where(x > 0, x.abs(), -x).clamp(-1e9, 1e9), {"x": x},
                             [torch.where(x > 0, x.abs(), -x)], [torch.float32], flatten)
    assert float(exact.levels[0].max()) == 0.0
    total = rounding.measure(lambda x: x.sum(), {"x": x}, [x.sum()], [torch.float32], flatten)
    level = float(total.levels[0])
    assert 2e8 * 2.0 ** -24 <= level <= 4 * 2e8 * 2.0 ** -24           # the terms' size, not the sum's 1.5


def test_a_flushed_subnormal_result_passes():
    x = torch.full((8,), 3e-39, dtype=torch.float64)
    out = torch.zeros(8)                                                 # a device that flushes subnormals
    assert compare(out, (x.float() * 1.0), x * 1.0).passed


def test_an_order_that_overflows_where_eager_does_not_is_excused_but_a_wrong_inf_is_not():
    big = torch.finfo(torch.float32).max * 0.6
    x = torch.tensor([[big], [-big], [big]], dtype=torch.float64)        # column sum: finite in eager's order
    colsum = lambda x: x.sum(0)
    truth = colsum(x)
    noise = rounding.measure(colsum, {"x": x}, [truth], [torch.float32], flatten)
    overflowed = torch.tensor([math.inf], dtype=torch.float32)           # (big + big) - big, left to right
    eager = colsum(x.float())
    assert torch.isfinite(eager).all() and not compare(overflowed, eager, truth).passed
    assert compare(overflowed, eager, truth, noise=noise).passed
    small = torch.ones(3, 1, dtype=torch.float64)                        # far from the threshold: no excuse
    small_noise = rounding.measure(colsum, {"x": small}, [colsum(small)], [torch.float32], flatten)
    assert not compare(overflowed, colsum(small.float()), colsum(small), noise=small_noise).passed


def test_masked_inputs_do_not_make_the_noise_excuse_a_nan():
    x = torch.randn(4, 70, dtype=torch.float64)
    x[:, :64] = -math.inf
    softmax = lambda x: torch.softmax(x, -1)
    truth = softmax(x)
    noise = rounding.measure(softmax, {"x": x}, [truth], [torch.float32], flatten)
    assert not noise.may_overflow[0].any()
    nan_row = softmax(x.float())
    nan_row[0] = math.nan
    assert compare(nan_row, softmax(x.float()), truth, noise=noise).failure_class == "nonfinite"


def test_too_large_or_refusing_references_give_no_noise():
    x = torch.ones(4, dtype=torch.float64)
    assert rounding.measure(lambda x: x.sum(), {"x": torch.ones(rounding.MAX_ELEMENTS + 1, dtype=torch.float64)},
                            [None], [torch.float32], flatten) is None

    def refuses(x):
        raise ValueError("no")
    assert rounding.measure(refuses, {"x": x}, [x], [torch.float32], flatten) is None


def test_a_half_precision_partial_sum_gets_no_overflow_excuse():
    """A sum of squares past float16's max is finite in float32: a kernel that keeps it in float16 and
    overflows is not excused (that is the bug of a partial buffer allocated like the input)."""
    x = torch.full((300,), 20.0, dtype=torch.float64)
    norm = lambda x: torch.linalg.vector_norm(x)
    noise = rounding.measure(norm, {"x": x}, [norm(x)], [torch.float16], flatten)
    assert not noise.may_overflow[0].any()
    overflowed = torch.tensor(math.inf, dtype=torch.float16)
    assert compare(overflowed, norm(x.half()), norm(x), noise=noise).failure_class == "nonfinite"


def _quantize(x):
    """Row-wise int8 quantization as eager writes it: a float32 division, then round half to even."""
    xf = x.float()
    scale = xf.abs().amax(-1, keepdim=True) / 127.0
    return torch.round(xf / scale).clamp(-127, 127).to(torch.int8)


def test_an_integer_a_few_ulps_from_a_rounding_boundary_may_come_out_either_way():
    below_tie = torch.tensor(2.5)
    for _ in range(6):
        below_tie = torch.nextafter(below_tie, torch.tensor(0.0))
    below_tie = float(below_tie)                                      # 6 float32 ulps below the tie
    x = torch.tensor([[127.0, below_tie, 2.3, -40.7]], dtype=torch.float64)    # scale 1: r is x itself
    truth = _quantize(x)
    noise = rounding.measure(_quantize, {"x": x}, flatten(truth), [torch.float32], flatten)
    assert truth.tolist() == [[127, 2, 2, -41]]
    # a kernel whose division is 10 ulps high (approximate arithmetic): the element 6 ulps below the tie
    # rounds up; no element far from a boundary moves
    approximate = torch.round(x.float() * (1 + 2.0 ** -20)).clamp(-127, 127).to(torch.int8)
    assert approximate.tolist() == [[127, 3, 2, -41]]
    assert compare(approximate, truth, truth, noise=noise).passed
    for wrong in ([[127, 4, 2, -41]], [[127, 2, 3, -41]], [[127, 2, 2, -40]]):   # past a boundary's reach
        assert not compare(torch.tensor(wrong, dtype=torch.int8), truth, truth, noise=noise).passed


def _chain(x, w):
    """A product stored in x's dtype, then summed: eager stores the product in bfloat16 before the sum."""
    return ((x * w) * 3.0).sum(-1)


def test_a_value_eager_stores_in_bfloat16_is_rounded_there_but_its_sum_is_not():
    g = torch.Generator().manual_seed(3)
    x, w = (torch.randn(4, 256, generator=g, dtype=torch.float64) for _ in range(2))
    native = {"x": x.bfloat16(), "w": w.bfloat16()}
    high = {"x": x.bfloat16().double(), "w": w.bfloat16().double()}
    stored = rounding.stored_dtypes(_chain, native, high)
    assert stored == [torch.bfloat16, torch.bfloat16, torch.bfloat16]          # mul, mul, sum: all stored low
    truth = [_chain(**high)]
    plain = rounding.measure(_chain, high, truth, [torch.bfloat16], flatten)
    stores = rounding.measure(_chain, high, truth, [torch.bfloat16], flatten, native=native)
    terms = (high["x"] * high["w"] * 3.0).abs()
    # the products' bfloat16 stores reach the sum: their noise, and never a bfloat16 accumulation's
    # sqrt(256) roundoffs of the terms -- a partial sum kept in bfloat16 stays a finding
    assert float(stores.levels[0].max()) > 4 * float(plain.levels[0].max())
    assert (stores.levels[0] < 16 * 2.0 ** -8 * terms.sum(-1)).all()
    # a float64 run meeting other ops than the native one gives no stored dtypes: the plain probes
    assert rounding.stored_dtypes(_chain, native, high) is not None
    assert rounding.stored_dtypes(lambda x, w: _chain(x, w) if x.dtype == torch.float64 else x.sum(-1),
                                  native, high) is None


def test_a_cast_to_bfloat16_after_a_float32_computation_is_a_store():
    def upcast_then_round(x):
        return (x.float() * 1.5).to(x.dtype) + 1.0 if x.dtype != torch.float64 else x * 1.5 + 1.0
    x = torch.randn(8, dtype=torch.float64)
    stored = rounding.stored_dtypes(upcast_then_round, {"x": x.bfloat16()}, {"x": x.bfloat16().double()})
    assert stored == [torch.bfloat16, torch.bfloat16]       # the float32 product is cast to bfloat16: stored low


def test_an_output_that_cancels_to_zero_does_not_make_the_reference_unfaithful():
    # d/db of a normalisation's input shift is an analytic zero: float64 leaves ~1e-17 of the values it cancelled
    x = torch.randn(4, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    b = torch.zeros(6, dtype=torch.float64)

    def grads(x, b):
        x, b = x.clone().requires_grad_(), b.clone().requires_grad_()
        y = F.layer_norm(x + b.sum(), (6,))
        return torch.autograd.grad((y * torch.arange(6.0, dtype=y.dtype)).sum(), (x, b))

    truth = [t.detach() for t in grads(x, b)]
    assert float(truth[1].abs().max()) < 1e-12                  # the cancelling output
    assert rounding._faithful(grads, {"x": x, "b": b}, truth, flatten)


def _jsd(student_logp, teacher_logp, beta=0.1):
    """Liger's generalised Jensen-Shannon divergence of log-probabilities, batchmean; the mixture formed with
    Python-float coefficients."""
    p, q = teacher_logp.exp(), student_logp.exp()
    log_m = torch.log(beta * p + (1 - beta) * q)
    return (beta * p * (teacher_logp - log_m) + (1 - beta) * q * (student_logp - log_m)).sum() / p.shape[0]


def test_a_constant_rounded_to_float32_is_excused_where_the_result_cancels_and_a_wrong_constant_is_not():
    """Student == teacher: the divergence is 0, but a kernel holds beta and 1 - beta as float32 constants, and
    fp32(0.1) + fp32(0.9) = 1 - 2^-25.6: where p = 1 the mixture's log is -2.2e-8, not 0, in every such
    element alike -- a bias, not noise, of about one ulp of the terms' sum.  Eager lands on 0 (its float32
    mixture rounds back to 1)."""
    g = torch.Generator().manual_seed(0)
    ints = -torch.randint(1, 9, (12, 2332), generator=g).double()
    logp = torch.where(torch.rand(12, 2332, generator=g) < 0.5, torch.zeros_like(ints), ints)

    def kernel(student_logp, teacher_logp, coef=(0.1, 0.9)):
        b, c = (float(torch.tensor(v, dtype=torch.float32)) for v in coef)      # the constants as float32
        x, y = student_logp.double(), teacher_logp.double()                      # products kept exact (FMA)
        p, q = y.exp(), x.exp()
        log_m = torch.log(b * p + c * q)
        return ((b * p * (y - log_m) + c * q * (x - log_m)).sum() / p.shape[0]).float()

    plain, judged, _ = _judge(_jsd, kernel, student_logp=logp, teacher_logp=logp.clone())
    assert not plain.passed and judged.passed, (plain.message, judged.message)
    wrong = lambda student_logp, teacher_logp: kernel(student_logp, teacher_logp, coef=(0.1, 0.9001))
    assert not _judge(_jsd, wrong, student_logp=logp, teacher_logp=logp.clone())[1].passed


def test_a_nan_from_partials_overflowing_both_ways_is_excused_past_the_range_and_the_other_infinity_is_not():
    """Products max, max, -max, -max, max, max: the float64 sum 2 max is finite but past float32's range (it
    rounds to +inf, eager's sequential order gives +inf); summed pairwise, inf + -inf is NaN -- another order
    of the same sum.  A -inf there is a sign error no order of these products reaches."""
    big = torch.finfo(torch.float32).max
    a = torch.ones(1, 6, dtype=torch.float64)
    b = torch.tensor([[big], [big], [-big], [-big], [big], [big]], dtype=torch.float64)
    pairwise = lambda a, b: torch.full((1, 1), float("nan"))
    plain, judged, noise = _judge(lambda a, b: a @ b, pairwise, a=a, b=b)
    assert bool(noise.may_overflow[0].all())
    assert not plain.passed and judged.passed, (plain.message, judged.message)
    wrong = lambda a, b: torch.full((1, 1), float("-inf"))
    assert not _judge(lambda a, b: a @ b, wrong, a=a, b=b)[1].passed


def test_a_gpus_approximate_logarithm_near_one_is_allowed_and_a_real_error_is_not():
    """Cross entropy over one class: the loss is exactly 0 and eager lands on it, since log_softmax subtracts a
    value from itself.  A kernel forms lse = m + log(sum(exp(x - m))) with a GPU's lg2.approx, whose error near
    1 is absolute (~2^-22.6): a few 2^-23 off (an H200 gave 3 * 2^-23), which a correctly rounded log would not
    be.  That is rounding, allowed; 1e-4 is not."""
    logits = (64 + torch.randn(1, 1, dtype=torch.float64)).expand(6, 1)
    labels = torch.zeros(6, dtype=torch.int64)

    def ce(logits, labels):
        return F.cross_entropy(30 * torch.tanh(logits / 30), labels, reduction="none")

    truth = [ce(logits, labels)]
    eager = ce(logits.float(), labels)
    assert float(truth[0].abs().max()) == 0.0 and float(eager.abs().max()) == 0.0
    noise = rounding.measure(ce, {"logits": logits, "labels": labels}, truth, [torch.float32], flatten)
    assert noise is not None and float(noise.levels[0].min()) >= 2.0 ** -22
    gpu = torch.full((6,), 3 * 2.0 ** -23)
    assert compare(gpu, eager, truth[0], noise=noise).passed
    assert not compare(torch.full((6,), 1e-4), eager, truth[0], noise=noise).passed


def test_an_exponential_moves_with_its_arguments_size():
    """exp(x) on a GPU is ex2(x log2 e): the product's rounding, relative to |x|, is carried into the result."""
    x = torch.tensor([0.5, 40.0, -40.0], dtype=torch.float64)
    noise = rounding.measure(torch.exp, {"input": x}, [torch.exp(x)], [torch.float32], flatten)
    rel = noise.levels[0] / torch.exp(x)
    assert float(rel[1]) > 10 * float(rel[0]) and float(rel[1]) < 200 * rounding.UNIT_ROUNDOFF_DEFAULT
