"""Index arithmetic: sympy expressions over non-negative integer index symbols.

Loops IR bodies receive their index as a tuple of these expressions; views rewrite the
tuple; buffers linearise it with their strides.  Three consumers read the result: the
Triton printer (``to_source``), the eager evaluator (``evaluate``, torch integer tensors)
and the fusion legality check (``simplify`` then structural equality).

``FloorDiv`` and ``Mod`` are our own functions.  sympy's ``floor(a/b)`` does not simplify the way
index arithmetic needs, and sympy's ``Mod`` factors a common divisor out of its arguments, evaluating
Mod(3*Mod(x, 4), 4) to 3*Mod(x, 4) (wrong for x = 2) on construction and again on every ``xreplace``:
a view of a view could address memory out of bounds.  Both are only ever applied to non-negative values in
unmasked lanes, where C (Triton) and Python semantics agree.
"""
from __future__ import annotations

import functools
import math
from typing import Iterable, Mapping, Optional, Sequence

import sympy
import torch

Expr = sympy.Expr


@functools.lru_cache(maxsize=None)
def index_symbol(name: str) -> sympy.Symbol:
    """The (cached) non-negative integer symbol called ``name``."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


INDIRECT_PREFIX = "ind"


def indirect_symbol(name: str) -> sympy.Symbol:
    """The symbol of a data-dependent index (``ops.indirect_indexing``): non-negative once wrapped, unbounded."""
    return index_symbol(f"{INDIRECT_PREFIX}{name}")


def is_indirect(symbol: sympy.Symbol) -> bool:
    return symbol.name.startswith(INDIRECT_PREFIX)


class FloorDiv(sympy.Function):
    """``floor(base / divisor)`` for integer index expressions, divisor a positive integer."""

    is_integer = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if isinstance(base, FloorDiv) and divisor.is_Integer and base.args[1].is_Integer:
            return FloorDiv(base.args[0], base.args[1] * divisor)
        if divisor.is_Integer:
            d = int(divisor)
            terms = base.args if base.is_Add else (base,)
            pulled, kept = [], []
            for term in terms:
                coeff, rest = term.as_coeff_Mul()
                if coeff.is_Integer and int(coeff) % d == 0:
                    pulled.append(sympy.Integer(int(coeff) // d) * rest)
                else:
                    kept.append(term)
            if pulled:
                return sympy.Add(*pulled) + FloorDiv(sympy.Add(*kept), divisor)
        return None


class Mod(sympy.Function):
    """``base % divisor`` for integer index expressions, divisor a positive integer.

    Evaluates only what is exact for integers: constants, a divisor of 1, terms whose integer coefficient
    is a multiple of the divisor (dropped), and ``Mod(Mod(a, c*d), d) -> Mod(a, d)``.  No common factors
    are pulled out (the sympy rule that is wrong for a Mod inside a Mod)."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1 or base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) % int(divisor))
        if not divisor.is_Integer:
            return None
        d = int(divisor)
        if isinstance(base, Mod) and base.args[1].is_Integer and int(base.args[1]) % d == 0:
            return Mod(base.args[0], divisor)
        terms = base.args if base.is_Add else (base,)
        kept = [t for t in terms if not (t.as_coeff_Mul()[0].is_Integer and int(t.as_coeff_Mul()[0]) % d == 0)]
        if len(kept) < len(terms):
            return Mod(sympy.Add(*kept), divisor)
        return None


def upper_bound(expr: Expr, bounds: Mapping[sympy.Symbol, int]) -> Optional[int]:
    """Largest value ``expr`` takes when each symbol s ranges over [0, bounds[s]); None if unknown."""
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        b = bounds.get(expr)
        return None if b is None else b - 1
    if expr.is_Add:
        total = 0
        for arg in expr.args:
            ub = upper_bound(arg, bounds)
            if ub is None or (lower_bound_nonneg(arg) is False):
                return None
            total += ub
        return total
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) >= 0:
            ub = upper_bound(rest, bounds)
            return None if ub is None else int(coeff) * ub
        return None
    if isinstance(expr, FloorDiv):
        ub = upper_bound(expr.args[0], bounds)
        return None if ub is None else ub // int(expr.args[1])
    if isinstance(expr, Mod):
        d = expr.args[1]
        if d.is_Integer:
            ub = upper_bound(expr.args[0], bounds)
            return int(d) - 1 if ub is None else min(int(d) - 1, ub)
    return None


def lower_bound_nonneg(expr: Expr) -> bool:
    """True when every term of ``expr`` is visibly non-negative."""
    if expr.is_Integer:
        return int(expr) >= 0
    if expr.is_Symbol or isinstance(expr, (FloorDiv, Mod)):
        return True
    if expr.is_Add:
        return all(lower_bound_nonneg(a) for a in expr.args)
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        return coeff.is_Integer and int(coeff) >= 0 and lower_bound_nonneg(rest)
    return False


def simplify(expr: Expr, bounds: Optional[Mapping[sympy.Symbol, int]] = None) -> Expr:
    """Range-aware simplification of an index expression.

    Rules: ``FloorDiv(a, d) -> 0`` and ``Mod(a, d) -> a`` when ``0 <= a < d``;
    ``k*c*FloorDiv(a, c) + k*Mod(a, c) -> k*a`` (re-joining a delinearised index).
    """
    bounds = bounds or {}
    expr = sympy.sympify(expr)
    if expr.is_Atom:
        return expr
    args = [simplify(a, bounds) for a in expr.args]
    if isinstance(expr, FloorDiv):
        base, d = args
        ub = upper_bound(base, bounds)
        if ub is not None and lower_bound_nonneg(base) and ub < int(d):
            return sympy.Integer(0)
        split = _split_low(base, int(d), bounds)
        if split is not None:                      # (m*S + r) // (m*k) == S // k when 0 <= r < m
            high, m, _ = split
            return simplify(FloorDiv(high, int(d) // m), bounds)
        return FloorDiv(base, d)
    if isinstance(expr, Mod):
        base, d = args
        ub = upper_bound(base, bounds)
        if d.is_Integer and ub is not None and lower_bound_nonneg(base) and ub < int(d):
            return base
        split = _split_low(base, int(d), bounds) if d.is_Integer else None
        if split is not None:                      # (m*S + r) % (m*k) == m*(S % k) + r when 0 <= r < m
            high, m, low = split
            return m * simplify(Mod(high, int(d) // m), bounds) + low
        return Mod(base, d)
    rebuilt = expr.func(*args)
    if rebuilt.is_Add:
        rebuilt = _rejoin(rebuilt)
    return rebuilt


def _split_low(base: Expr, d: int, bounds: Mapping[sympy.Symbol, int]) -> Optional[tuple[Expr, int, Expr]]:
    """``base`` as ``m*S + r`` with ``m > 1`` a divisor of ``d``, S integer and ``0 <= r < m``:
    (S, m, r) for the largest such m, or None.  (256*R + C with C < 256, over d = 1024: (R, 256, C).)"""
    if not base.is_Add:
        return None
    terms = [(t, t.as_coeff_Mul()[0]) for t in base.args]
    best = None
    for _, coeff in terms:
        if not coeff.is_Integer or int(coeff) == 0:
            continue
        m = math.gcd(abs(int(coeff)), d)
        if m <= 1 or (best is not None and m <= best[1]):
            continue
        high = [t for t, c in terms if c.is_Integer and int(c) % m == 0]
        low = sympy.Add(*[t for t, c in terms if not (c.is_Integer and int(c) % m == 0)])
        if not high or low == 0 or not lower_bound_nonneg(low):
            continue
        ub = upper_bound(low, bounds)
        if ub is None or ub >= m:
            continue
        best = (sympy.expand(sympy.Add(*high) / m), m, low)
    return best


def _rejoin(expr: Expr) -> Expr:
    """Replace ``k*c*FloorDiv(b, d*c) + k*Mod(FloorDiv(b, d), c)`` by ``k*FloorDiv(b, d)`` (repeatedly).

    With d = 1 this is ``k*c*FloorDiv(b, c) + k*Mod(b, c) -> k*b``: the parts of a delinearised
    index summed back with their strides become the linear index again.
    """
    changed = True
    while changed and expr.is_Add:
        changed = False
        terms = list(expr.args)
        floors = {}
        for i, term in enumerate(terms):
            coeff, rest = term.as_coeff_Mul()
            if isinstance(rest, FloorDiv) and coeff.is_Integer and rest.args[1].is_Integer:
                floors[(rest.args[0], int(rest.args[1]))] = (i, int(coeff))
        for j, term in enumerate(terms):
            coeff, rest = term.as_coeff_Mul()
            if not (isinstance(rest, Mod) and coeff.is_Integer and rest.args[1].is_Integer):
                continue
            inner, c = rest.args[0], int(rest.args[1])
            if isinstance(inner, FloorDiv) and inner.args[1].is_Integer:
                base, d = inner.args[0], int(inner.args[1])
            else:
                base, d = inner, 1
            key = (base, d * c)
            k = int(coeff)
            if key in floors and floors[key][1] == k * c:
                i = floors[key][0]
                rest_terms = [t for n, t in enumerate(terms) if n not in (i, j)]
                expr = sympy.Add(*rest_terms) + k * FloorDiv(base, d)
                changed = True
                break
    return expr


def affine_strides(offset: Expr, syms: Sequence[sympy.Symbol]) -> Optional[tuple]:
    """The coefficient of each of ``syms`` in ``offset`` (0 where absent), or None when ``offset`` is not
    a sum of constants and symbol products (a floor or a modulo: no stride to read off)."""
    coeffs = sympy.sympify(offset).as_coefficients_dict()
    if any(not (k == 1 or k.is_Symbol or (k.is_Mul and all(a.is_Symbol or a.is_Number for a in k.args)))
           for k in coeffs):
        return None
    return tuple(coeffs.get(s, 0) for s in syms)


def walks_across(offset: Expr, syms: Sequence[sympy.Symbol]) -> bool:
    """Does ``offset`` have stride 1 along an outer one of ``syms`` and move along the last one with
    another stride (memory walked across the fast axis)?  One that stays put along the last (a value
    per row, broadcast) does not."""
    strides = affine_strides(offset, syms)
    return strides is not None and strides[-1] not in (0, 1) and 1 in strides[:-1]


def contiguous_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of ``sizes`` (size-1 and size-0 dims get stride 1 in our layouts)."""
    strides = []
    acc = 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def linearize(index: Sequence[Expr], strides: Sequence[int], offset: int = 0) -> Expr:
    """``offset + sum(index[i] * strides[i])``."""
    if len(index) != len(strides):
        raise ValueError(f"index of rank {len(index)} against strides of rank {len(strides)}")
    total = sympy.Integer(offset)
    for i, s in zip(index, strides):
        if s:
            total = total + sympy.sympify(i) * int(s)
    return total


def delinearize(linear: Expr, sizes: Sequence[int]) -> tuple[Expr, ...]:
    """Split a row-major linear index over ``sizes`` into one index per dim."""
    if any(int(s) == 0 for s in sizes):
        return tuple(sympy.Integer(0) for _ in sizes)
    out: list[Expr] = []
    inner = 1
    for k in range(len(sizes) - 1, -1, -1):
        size = int(sizes[k])
        if size == 1:
            out.append(sympy.Integer(0))
            continue
        part = FloorDiv(linear, inner)
        if any(int(s) != 1 for s in sizes[:k]):
            part = Mod(part, size)
        out.append(part)
        inner *= size
    return tuple(reversed(out))


def free_symbols(exprs: Iterable[Expr]) -> set:
    syms: set = set()
    for e in exprs:
        syms |= sympy.sympify(e).free_symbols
    return syms


# ------------------------------------------------------------------------------ printing

def to_source(expr: Expr) -> str:
    """Python / Triton source for an index expression (integer arithmetic only)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return expr.name
    if isinstance(expr, FloorDiv):
        return f"({to_source(expr.args[0])} // {to_source(expr.args[1])})"
    if isinstance(expr, Mod):
        return f"({to_source(expr.args[0])} % {to_source(expr.args[1])})"
    if expr.is_Add:
        terms = sorted(expr.args, key=sympy.default_sort_key)
        parts = [to_source(terms[0])]
        for t in terms[1:]:
            coeff, rest = t.as_coeff_Mul()
            if coeff.is_Number and coeff < 0:
                parts.append(f"- {to_source(-t)}")
            else:
                parts.append(f"+ {to_source(t)}")
        return "(" + " ".join(parts) + ")"
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        if coeff == -1:
            return f"(-{to_source(rest)})"
        factors = [to_source(a) for a in expr.args]
        return "(" + " * ".join(factors) + ")"
    if isinstance(expr, (sympy.Min, sympy.Max)):
        fn = "_td_imin" if isinstance(expr, sympy.Min) else "_td_imax"
        out = to_source(expr.args[0])
        for a in expr.args[1:]:
            out = f"{fn}({out}, {to_source(a)})"
        return out
    raise TypeError(f"cannot print index expression {expr!r} ({type(expr).__name__})")


# ---------------------------------------------------------------------------- evaluation

def evaluate(expr: Expr, env: Mapping[sympy.Symbol, object]):
    """Evaluate ``expr`` with symbols bound to ints or int64 torch tensors (broadcasting)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        try:
            return env[expr]
        except KeyError:
            raise KeyError(f"index symbol {expr} has no value") from None
    args = [evaluate(a, env) for a in expr.args]
    if isinstance(expr, FloorDiv):
        return _floordiv(args[0], args[1])
    if isinstance(expr, Mod):
        return args[0] % args[1]
    if expr.is_Add:
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if expr.is_Mul:
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if isinstance(expr, sympy.Min):
        return functools.reduce(_min, args)
    if isinstance(expr, sympy.Max):
        return functools.reduce(_max, args)
    raise TypeError(f"cannot evaluate index expression {expr!r}")


def _floordiv(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.div(a, b, rounding_mode="floor")
    return a // b


def _min(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.minimum(torch.as_tensor(a), torch.as_tensor(b))
    return min(a, b)


def _max(a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))
    return max(a, b)
