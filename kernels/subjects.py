"""The bundled subjects of the hand-written kernels: every entry point, diffed against eager PyTorch.

These are what ``tritondiff fuzz`` runs by default (with the compiler's), and
what the pre-merge gate fuzzes at the ``ci`` profile.  Reductions reach past
1,048,576 rows.
"""
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

import kernels
from harness import subject, tensor

FLOATS = ("float32", "float16", "bfloat16")


# ----------------------------------------------------------------------------- nrm2

@subject(name="kernels.nrm2", reference=lambda x: torch.linalg.vector_norm(x),
         inputs={"x": tensor(("N",), dtypes=FLOATS)}, dims={"N": (0, 3_000_000)})
def nrm2_1d(x):
    return kernels.nrm2(x)


@subject(name="kernels.nrm2_2d", reference=lambda x: torch.linalg.vector_norm(x),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS)}, dims={"M": (0, 1_500_000), "N": (0, 4096)})
def nrm2_2d(x):
    return kernels.nrm2(x)


def _nrm2_grad(x, g, norm):
    x = x.detach().requires_grad_(True)
    norm(x).backward(g)
    return x.grad


@subject(name="kernels.nrm2_backward",
         reference=lambda x, g: _nrm2_grad(x, g, torch.linalg.vector_norm),
         inputs={"x": tensor(("N",), dtypes=FLOATS, nonfinite=False), "g": tensor((), dtype_like="x")},
         dims={"N": (0, 1_500_000)})
def nrm2_backward(x, g):
    return _nrm2_grad(x, g, kernels.nrm2)


# ----------------------------------------------------------------------------- layer norm

_LN_INPUTS = {"x": tensor(("M", "N"), dtypes=FLOATS), "weight": tensor(("N",), dtype_like="x"),
              "bias": tensor(("N",), dtype_like="x"), "eps": st.sampled_from([1e-5, 1e-6, 1e-3])}
_LN_DIMS = {"M": (0, 1_500_000), "N": (1, 65_536)}


@subject(name="kernels.layer_norm",
         reference=lambda x, weight, bias, eps: F.layer_norm(x, (x.shape[-1],), weight, bias, eps),
         inputs=_LN_INPUTS, dims=_LN_DIMS)
def layer_norm_forward(x, weight, bias, eps):
    return kernels.layer_norm(x, (x.shape[-1],), weight, bias, eps)


@subject(name="kernels.layer_norm_no_affine",
         reference=lambda x: F.layer_norm(x, (x.shape[-1],)),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS)}, dims=_LN_DIMS)
def layer_norm_no_affine(x):
    return kernels.layer_norm(x, (x.shape[-1],))


def _ln_grads(x, weight, bias, dy, layer_norm):
    x, weight, bias = (t.detach().requires_grad_(True) for t in (x, weight, bias))
    layer_norm(x, (x.shape[-1],), weight, bias, 1e-5).backward(dy)
    return x.grad, weight.grad, bias.grad


@subject(name="kernels.layer_norm_backward",
         reference=lambda x, weight, bias, dy: _ln_grads(x, weight, bias, dy, F.layer_norm),
         inputs={"x": tensor(("M", "N"), dtypes=FLOATS, nonfinite=False),
                 "weight": tensor(("N",), dtype_like="x", nonfinite=False),
                 "bias": tensor(("N",), dtype_like="x", nonfinite=False),
                 "dy": tensor(("M", "N"), dtype_like="x", nonfinite=False)},
         dims={"M": (0, 1_500_000), "N": (1, 16_384)})
def layer_norm_backward(x, weight, bias, dy):
    """dx, dweight, dbias through autograd; dweight/dbias reduce over all M rows."""
    return _ln_grads(x, weight, bias, dy, kernels.layer_norm)
