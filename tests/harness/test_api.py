"""The subject API: the documented interface works, malformed declarations fail at import, clearly."""
import pytest
import torch
from hypothesis import strategies as st

from tritondiff.harness import constant, subject, tensor
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
