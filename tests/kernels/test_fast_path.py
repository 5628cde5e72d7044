"""kernels.fast_path: in plain eager mode the wrappers skip their custom op, with bitwise the op's results;
everywhere else (tracing, modes, subclasses, the knob off) the op is called."""
import sys
from unittest import mock

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tritondiff import kernels
from tritondiff.base import device
from tritondiff.kernels import fast_path
from tritondiff.kernels.config import config
from tritondiff.kernels.exc import UnsupportedInput

DEV = device.torch_device()
LN = sys.modules["tritondiff.kernels.layer_norm"]
NRM2 = sys.modules["tritondiff.kernels.nrm2"]


def _ln_inputs(m=37, n=41, dtype=torch.float32, affine=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g).to(dtype).to(DEV).requires_grad_()
    w = torch.randn(n, generator=g).to(dtype).to(DEV).requires_grad_() if affine else None
    b = torch.randn(n, generator=g).to(dtype).to(DEV).requires_grad_() if affine else None
    dy = torch.randn(m, n, generator=g).to(dtype).to(DEV)
    return x, w, b, dy


def _ln_grads(x, w, b, dy):
    leaves = [t for t in (x, w, b) if t is not None]
    y = kernels.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
    return (y,) + torch.autograd.grad(y, leaves, dy)


def _nrm2_grads(x, g):
    out = kernels.nrm2(x)
    return out, torch.autograd.grad(out, x, g)[0]


class _Counting(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_fast_path_is_bitwise_the_op(dtype, affine):
    inputs = _ln_inputs(dtype=dtype, affine=affine)
    with mock.patch.object(LN, "_layer_norm_op", side_effect=AssertionError("the op was called")):
        fast = _ln_grads(*inputs)
    with config.patch(eager_fast_path=False):
        op = _ln_grads(*inputs)
    assert len(fast) == len(op)
    for a, b in zip(fast, op):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)


def test_layer_norm_fast_path_without_grad_launches_the_forward_only():
    x, w, b, _ = _ln_inputs()
    with torch.no_grad(), mock.patch.object(LN, "_LayerNormFunction") as fn:
        y = kernels.layer_norm(x, (x.shape[-1],), w, b)
    fn.apply.assert_not_called()
    assert not y.requires_grad
    with config.patch(eager_fast_path=False):
        assert torch.equal(y, kernels.layer_norm(x.detach(), (x.shape[-1],), w.detach(), b.detach()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_nrm2_fast_path_is_bitwise_the_op(dtype):
    x = torch.randn(3, 1001, generator=torch.Generator().manual_seed(1)).to(dtype).to(DEV)
    x = x.t().requires_grad_()                          # a permuted layout, read without a copy
    g = torch.tensor(1.5, dtype=dtype, device=DEV)
    with mock.patch.object(NRM2, "_nrm2_op", side_effect=AssertionError("the op was called")):
        fast = _nrm2_grads(x, g)
    with config.patch(eager_fast_path=False):
        op = _nrm2_grads(x, g)
    for a, b in zip(fast, op):
        assert a.dtype == b.dtype and torch.equal(a, b)


def test_the_op_is_used_under_a_dispatch_mode_and_with_the_knob_off():
    x, w, b, _ = _ln_inputs()
    with _Counting() as mode:
        kernels.layer_norm(x, (x.shape[-1],), w, b)
        kernels.nrm2(x)
        assert not fast_path.plain_eager(x)
    assert any("tritondiff.layer_norm" in o for o in mode.ops), mode.ops
    assert any("tritondiff.nrm2" in o for o in mode.ops), mode.ops
    assert fast_path.plain_eager(x)
    with config.patch(eager_fast_path=False):
        assert not fast_path.plain_eager(x)
    assert fast_path.plain_eager(x, None, torch.nn.Parameter(torch.ones(2)))


def test_subclass_arguments_take_the_op():
    class Tagged(torch.Tensor):
        pass

    t = torch.ones(4).as_subclass(Tagged)
    assert not fast_path.plain_eager(t)
    assert not fast_path.plain_eager(torch.ones(2), t)


def test_needs_grad_follows_grad_mode_and_requires_grad():
    a, b = torch.ones(2), torch.ones(2, requires_grad=True)
    assert not fast_path.needs_grad(a, None)
    assert fast_path.needs_grad(a, b)
    with torch.no_grad():
        assert not fast_path.needs_grad(b)


def test_bad_input_raises_the_same_error_on_both_paths():
    x = torch.randn(4, 6, device=DEV)
    for knob in (True, False):
        with config.patch(eager_fast_path=knob):
            with pytest.raises(UnsupportedInput, match=r"normalized_shape=\(5,\) does not match"):
                kernels.layer_norm(x, (5,))
            with pytest.raises(UnsupportedInput, match="weight has shape"):
                kernels.layer_norm(x, (6,), torch.ones(5, device=DEV))
            with pytest.raises(UnsupportedInput, match="dtype torch.int64"):
                kernels.nrm2(torch.ones(3, dtype=torch.int64, device=DEV))


def test_compiled_call_traces_the_op_not_the_fast_path():
    x, w, b, _ = _ln_inputs(m=8, n=16)
    xd, wd, bd = x.detach(), w.detach(), b.detach()

    def f(x, w, b):
        return kernels.layer_norm(x, (16,), w, b) + kernels.nrm2(x)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(xd, wd, bd), f(xd, wd, bd))


def test_a_second_derivative_through_the_fast_path_raises_as_the_op_does():
    x, w, b, dy = _ln_inputs(m=6, n=8)
    y = kernels.layer_norm(x, (8,), w, b)
    (gx,) = torch.autograd.grad(y, x, dy, create_graph=True)
    with pytest.raises(RuntimeError):                 # once_differentiable: no silently missing second term
        torch.autograd.grad(gx.sum(), x)


def test_torch_jit_tracing_takes_the_op():
    x = torch.randn(3, 8, device=DEV)
    seen = []

    def f(t):
        seen.append(fast_path.plain_eager(t))
        return t * 2

    torch.jit.trace(f, (x,), check_trace=False)
    assert seen == [False]
    assert fast_path.plain_eager(x)
