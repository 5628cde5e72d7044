"""Call 8's probe of the layer-norm M = N = 1 finding (run from the repo root on a GPU, 2026-11-24):

    TRITONDIFF_DEVICE=cuda PYTHONPATH=. python reports/gpu/2026-11-24-h100-session4/ln_n1_probe.py

Prints dx of kernels.layer_norm's backward with the launches as they were, then with every launch
forced to enable_fp_fusion=False, then the kernels launched.  On the H100: -7.6549e-07, then 0.0
(eager: 0.0), through _layer_norm_fwd_kernel and _layer_norm_bwd_kernel.  kernels/layer_norm.py now
launches without contraction, so on today's code both lines print 0.0.
"""
import importlib

import torch

import kernels
from kernels import launch as L

LN = importlib.import_module("kernels.layer_norm")     # the module (kernels.layer_norm is the function)
real = L.launch


def nofma(kernel, grid, *a, **m):
    m.pop("enable_fp_fusion", None)
    return real(kernel, grid, *a, enable_fp_fusion=False, **m)


torch.manual_seed(0)
x = torch.randn(1, 1, device="cuda", requires_grad=True)
w = torch.randn(1, device="cuda", requires_grad=True)
b = torch.randn(1, device="cuda", requires_grad=True)
dy = torch.randn(1, 1, device="cuda")
print("as launched", torch.autograd.grad(kernels.layer_norm(x, (1,), w, b), (x,), dy)[0].item())
LN._launch.launch = nofma
print("no fma", torch.autograd.grad(kernels.layer_norm(x, (1,), w, b), (x,), dy)[0].item())
names = []


def spy(kernel, grid, *a, **m):
    names.append((getattr(kernel, "__name__", kernel), grid, m))
    return real(kernel, grid, *a, **m)


LN._launch.launch = spy
torch.autograd.grad(kernels.layer_norm(x, (1,), w, b), (x,), dy)
for n in names:
    print(n)
LN._launch.launch = real
