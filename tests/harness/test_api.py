"""The subject API: the documented interface works, malformed declarations fail at import, clearly."""
import pytest
import torch
from hypothesis import strategies as st

from tritondiff.harness import check, constant, dim, subject, tensor
from tritondiff.harness.api import registry
from tritondiff.harness.exc import InvalidSubject


def test_documented_interface():
    @subject(reference=lambda x: torch.linalg.vector_norm(x),
             inputs={"x": tensor(("N",), dtypes=("float32", "float16"))},
             dims={"N": (0, 3_000_000)})
    def my_nrm2(x):
        return torch.linalg.vector_norm(x)

    assert my_nrm2.name == "my_nrm2" and registry()["my_nrm2"] is my_nrm2
    assert my_nrm2.dims == {"N": (0, 3_000_000)}
    assert float(my_nrm2(torch.ones(4))) == 2.0          # still callable


def test_name_tolerances_constants_and_strategies():
    @subject(reference=lambda x, eps, scale: x * scale + eps, name="custom.name", multiplier=4, rtol=1e-3,
             inputs={"x": tensor((3, "N")), "eps": st.floats(0, 1), "scale": 2.0, }, dims={"N": 5})
    def f(x, eps, scale):
        return x * scale + eps

    assert f.name == "custom.name"
    assert f.tolerance.multiplier == 4 and f.tolerance.rtol == 1e-3
    assert f.inputs["scale"] == constant(2.0)
    assert f.dims == {"N": (5, 5)}


@pytest.mark.parametrize("kwargs, argument", [
    (dict(reference=1, inputs={"x": tensor(("N",))}, dims={"N": 3}), "reference"),
    (dict(reference=lambda x: x, inputs={}, dims={}), "inputs"),
    (dict(reference=lambda x: x, inputs={"x": tensor(("M",))}, dims={"N": 3}), "dims"),
    (dict(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": (5, 2)}), "dims"),
    (dict(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": (-1, 2)}), "dims"),
    (dict(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 3}, mutates=("y",)), "mutates"),
    (dict(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 3}, disable=("nope",)), "disable"),
    (dict(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 3}, multiplier=0.5), "multiplier"),
    (dict(reference=lambda y: y, inputs={"x": tensor(("N",))}, dims={"N": 3}), "reference"),
])
def test_malformed_subjects_name_the_argument(kwargs, argument):
    with pytest.raises(InvalidSubject) as info:
        subject(**kwargs)(lambda x: x)
    assert info.value.argument == argument
    assert str(info.value)


def test_tensor_spec_validation():
    with pytest.raises(InvalidSubject, match="dtypes"):
        tensor(("N",), dtypes=("float33",))
    with pytest.raises(InvalidSubject, match="layouts"):
        tensor(("N",), layouts=("diagonal",))
    with pytest.raises(InvalidSubject, match="tuple of dim names"):
        tensor("N")
    with pytest.raises(InvalidSubject, match="low must not exceed high"):
        tensor(("N",), low=2, high=1)


def test_subject_signature_must_accept_inputs():
    with pytest.raises(InvalidSubject, match="no parameter"):
        subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 3})(lambda y: y)


def test_integer_inputs_are_drawn_within_their_bounds_and_a_dim_can_bound_them(tmp_path, in_process):
    """Token or position ids: ``high="V"`` draws indices into a dim of size V, so the reference (an indexing)
    never rejects an example, and numeric bounds are inclusive."""
    from tritondiff.harness.case import TensorCase
    from tritondiff.harness.explore import explore
    from tritondiff.harness.tensors import materialize

    seen = []

    @subject(reference=lambda ids, table: table[ids],
             inputs={"ids": tensor(("N",), dtypes=("int64", "int32"), low=0, high="V"), "table": tensor(("V", "D"))},
             dims={"N": (1, 50), "V": (1, 40), "D": (1, 4)}, name="api_test.gather")
    def gather(ids, table):
        seen.append((int(ids.min()), int(ids.max()), table.shape[0]))
        return table[ids]

    res = explore(gather, budget_s=60, max_examples=40, seed=2, out_dir=str(tmp_path), executor=in_process)
    assert res.status == "pass" and res.skipped == 0 and len(seen) >= 20
    assert all(0 <= lo and hi < v for lo, hi, v in seen) and any(hi == v - 1 > 0 for lo, hi, v in seen)
    for dtype in ("int8", "int32", "int64"):
        values = materialize(TensorCase((5000,), dtype, "contiguous", 0, "normal", 9, "", 3, 7), guard=0)
        assert sorted(values.unique().tolist()) == [3, 4, 5, 6, 7]


def test_bounds_must_be_numbers_or_declared_dims():
    with pytest.raises(InvalidSubject, match="give a number or a dim name"):
        tensor(("N",), low=[0])
    with pytest.raises(InvalidSubject, match="uses dim 'V', which dims= does not define"):
        @subject(reference=lambda x: x, inputs={"x": tensor(("N",), dtypes=("int32",), high="V")}, dims={"N": 4})
        def ids(x):
            return x


def test_where_relates_dims_and_every_drawn_example_satisfies_it(tmp_path, in_process):
    """Grouped-query attention's shapes: heads divisible by KV heads, an even head size, one dim twice another."""
    from tritondiff.harness.explore import explore

    seen = []

    @subject(reference=lambda q: q * 2, inputs={"q": tensor(("H", "D", "S"))},
             dims={"H": (1, 16), "KV": (1, 8), "D": (1, 16), "S": (1, 32)},
             where=[lambda H, KV: H % KV == 0, lambda D: D % 2 == 0, lambda S, D: S == 2 * D],
             name="api_test.gqa_shapes")
    def gqa(q):
        seen.append(q.shape)
        return q * 2

    res = explore(gqa, budget_s=60, max_examples=30, seed=4, out_dir=str(tmp_path), executor=in_process)
    assert res.status == "pass" and len(seen) >= 4          # (filtering: a strict equality keeps few draws)
    assert all(d % 2 == 0 and s == 2 * d for h, d, s in seen)


def test_where_is_validated_and_an_impossible_one_is_one_usage_error(tmp_path, in_process):
    from tritondiff.harness.exc import UsageError
    from tritondiff.harness.explore import explore

    with pytest.raises(InvalidSubject, match="where= predicate takes 'K', which dims= does not define"):
        subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 4}, where=lambda K: K > 1)
    with pytest.raises(InvalidSubject, match="where= takes a predicate"):
        subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 4}, where="N > 1")

    @subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": (1, 8)}, where=lambda N: N > 100,
             name="api_test.impossible")
    def never(x):
        return x

    with pytest.raises(UsageError, match="api_test.impossible: no drawn dims satisfied its where= predicates"):
        explore(never, budget_s=60, seed=1, out_dir=str(tmp_path), executor=in_process)


def test_a_dim_input_receives_the_drawn_dim_and_where_relates_it(tmp_path):
    seen = []

    @subject(reference=lambda x, heads: x.view(x.shape[0], heads, -1).sum(-1),
             inputs={"x": tensor(("B", "C")), "heads": dim("H")}, dims={"B": (1, 3), "C": (1, 12), "H": (1, 4)},
             where=lambda C, H: C % H == 0)
    def per_head_sum(x, heads):
        seen.append((x.shape[1], heads))
        return x.view(x.shape[0], heads, -1).sum(-1)

    from tritondiff.harness.executor import InProcess
    result = check(per_head_sum, budget_s=20, max_examples=15, seed=0, out_dir=str(tmp_path), database=False,
                   executor=InProcess())
    assert result.status == "pass" and seen
    assert all(c % h == 0 for c, h in seen) and len({h for _, h in seen}) > 1


def test_a_dim_input_must_name_a_declared_dim():
    with pytest.raises(InvalidSubject, match="give the name of a dim"):
        dim("")
    with pytest.raises(InvalidSubject, match="dim\\('H'\\), which dims= does not define"):
        subject(reference=lambda x, heads: x, inputs={"x": tensor(("N",)), "heads": dim("H")},
                dims={"N": (1, 4)})


@pytest.mark.parametrize("argument", ["upcast", "edge"])
def test_described_input_hooks_must_be_callable(argument):
    with pytest.raises(InvalidSubject, match=f"{argument}=3 must map") as info:
        subject(reference=lambda call: call, inputs={"call": st.just([1])}, **{argument: 3})
    assert info.value.argument == argument
