import sympy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tritondiff.compiler import indexing
from tritondiff.compiler.indexing import FloorDiv, Mod, index_symbol

x, y = index_symbol("x"), index_symbol("y")


def test_floordiv_pulls_out_multiples_and_nests():
    assert FloorDiv(16 * x + y, 16) == x + FloorDiv(y, 16)
    assert FloorDiv(FloorDiv(x, 4), 8) == FloorDiv(x, 32)
    assert FloorDiv(x, 1) == x
    assert FloorDiv(sympy.Integer(17), 4) == 4


def test_simplify_uses_bounds():
    assert indexing.simplify(FloorDiv(y, 16), {y: 16}) == 0
    assert indexing.simplify(Mod(y, 16), {y: 16}) == y
    assert indexing.simplify(Mod(y, 16), {y: 17}) == Mod(y, 16)


def test_simplify_divides_a_multiple_plus_a_smaller_remainder():
    # (256*x + y) // 1024 == x // 4 and % 1024 == 256*(x % 4) + y, because 0 <= y < 256
    assert indexing.simplify(FloorDiv(256 * x + y, 1024), {x: 100, y: 256}) == FloorDiv(x, 4)
    assert indexing.simplify(Mod(256 * x + y, 1024), {x: 100, y: 256}) == 256 * Mod(x, 4) + y
    # y may reach 256: nothing to split
    assert indexing.simplify(FloorDiv(256 * x + y, 1024), {x: 100, y: 257}) == FloorDiv(256 * x + y, 1024)


@settings(deadline=None)   # a loaded machine (pytest -n 16 on the GPU host) is slow, not wrong
@given(m=st.integers(2, 40), k=st.integers(1, 12), off=st.integers(0, 3), slack=st.integers(-2, 2),
       rows=st.integers(1, 50))
def test_simplified_floordiv_and_mod_evaluate_the_same(m, k, off, slack, rows):
    """Every (x, y) in the bounds: the rewritten index equals the original.  The remainder y + off
    reaches m + slack: just below, at and just past the bound of the rule."""
    low = max(1, m + slack - off + 1)
    bounds = {x: rows, y: low}
    xs, ys = torch.meshgrid(torch.arange(rows), torch.arange(low), indexing="ij")
    env = {x: xs.flatten(), y: ys.flatten()}
    for expr in (FloorDiv(m * x + y + off, m * k), Mod(m * x + y + off, m * k)):
        want = torch.as_tensor(indexing.evaluate(expr, env))
        got = torch.as_tensor(indexing.evaluate(indexing.simplify(expr, bounds), env))
        assert torch.equal(got.expand_as(want), want), (expr, indexing.simplify(expr, bounds))


@settings(deadline=None)
@given(m=st.integers(2, 16), k=st.integers(1, 8), c=st.integers(1, 5), q=st.integers(2, 8), low=st.integers(1, 20))
def test_simplify_is_exact_when_a_mod_sits_inside_the_split(m, k, c, q, low):
    """(m*c*Mod(x, q) + y) // and % (m*k): sympy evaluates Mod(c*Mod(x, q), k) wrongly (Mod(3*Mod(x, 4), 4)
    -> 3*Mod(x, 4)), so the rules must never build such a Mod."""
    bounds = {x: 64, y: low}
    xs, ys = torch.meshgrid(torch.arange(64), torch.arange(low), indexing="ij")
    env = {x: xs.flatten(), y: ys.flatten()}
    base = m * c * Mod(x, q) + y
    for expr in (FloorDiv(base, m * k), Mod(base, m * k)):
        want = torch.as_tensor(indexing.evaluate(expr, env))
        got = torch.as_tensor(indexing.evaluate(indexing.simplify(expr, bounds), env))
        assert torch.equal(got.expand_as(want), want), (expr, indexing.simplify(expr, bounds))


def test_review_finding_mod_of_a_mod_no_longer_reads_out_of_bounds():
    """Review finding: the split rule turned Mod(12*Mod(x, 4) + y, 16) into
    4*Mod(3*Mod(x, 4), 4) + y, which sympy evaluates to 12*Mod(x, 4) + y: a transposed reshape read past
    its 48-element input (an illegal address on a GPU)."""
    from tritondiff import compiler
    expr = Mod(12 * Mod(x, 4) + y, 16)
    xs = torch.arange(64)
    for yv in range(4):
        got = indexing.evaluate(indexing.simplify(expr, {x: 64, y: 4}), {x: xs, y: yv})
        assert torch.equal(torch.as_tensor(got), (12 * (xs % 4) + yv) % 16)
    fn = lambda t: (t + 1).reshape(4, 12)[:, :4].t().reshape(16) * 2  # noqa: E731
    t = torch.arange(48.).reshape(3, 16)
    torch._dynamo.reset()
    torch.testing.assert_close(compiler.compile(fn)(t), fn(t), rtol=0, atol=0)


def test_simplify_rejoins_a_delinearised_index():
    i0, i1 = indexing.delinearize(x, (5, 16))
    assert indexing.simplify(16 * i0 + i1, {x: 80}) == x
    a, b, c = indexing.delinearize(x, (3, 4, 5))
    assert indexing.simplify(20 * a + 5 * b + c, {x: 60}) == x


def test_delinearize_matches_unravel():
    sizes = (3, 1, 4, 5)
    parts = indexing.delinearize(x, sizes)
    flat = torch.arange(60)
    got = [torch.as_tensor(indexing.evaluate(p, {x: flat})).expand(60) for p in parts]
    want = torch.unravel_index(flat, sizes)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_linearize_and_contiguous_strides():
    assert indexing.contiguous_strides((3, 4, 5)) == (20, 5, 1)
    assert indexing.linearize((x, y), (7, 1), offset=3) == 7 * x + y + 3


def test_to_source_prints_python_integer_arithmetic():
    src = indexing.to_source(FloorDiv(x, 16) * 3 + Mod(x, 16) - 2)
    values = {"x": 37}
    assert eval(src, {}, values) == (37 // 16) * 3 + 37 % 16 - 2


def test_upper_bound():
    assert indexing.upper_bound(3 * x + y, {x: 4, y: 3}) == 11
    assert indexing.upper_bound(Mod(x, 8), {}) == 7
    assert indexing.upper_bound(x - y, {x: 4, y: 3}) is None


def test_mod_stays_exact_when_a_mod_is_substituted_into_a_mod():
    """sympy's Mod evaluated Mod(12*Mod(y, 4), 16) to 4*Mod(3*Mod(y, 4)**2, 4) (0 for y = 2, not 8), on
    construction and on xreplace -- how a view of a view composes its index.  Ours keeps it exact."""
    composed = Mod(x, 16).xreplace({x: 12 * Mod(y, 4)})
    ys = torch.arange(64)
    assert torch.equal(torch.as_tensor(indexing.evaluate(composed, {y: ys})), (12 * (ys % 4)) % 16)
    assert Mod(16 * x + 5, 4) == 1 and Mod(Mod(x, 8), 4) == Mod(x, 4) and Mod(x, 1) == 0
