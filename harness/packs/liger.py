"""``wild.liger.*``: liger-kernel's public ops against the eager PyTorch each one documents it computes.

One subject per op, forward; ``<op>_backward`` subjects return the forward's value and every gradient, through
autograd, against the same PyTorch code differentiated by torch.  The references are the modules liger's
docstrings name (Llama's RMSNorm, ``F.layer_norm``, Hugging Face's rotary embedding and MLPs, torch's losses)
written out here; the library is imported, never copied.

Sizes are the ones a user of each op has: rows of a hidden size up to liger's fused-row limit (65,536 columns
per program: ``liger_kernel.ops.utils.calculate_settings`` refuses wider rows, a documented limit, not a
finding), vocabularies past 2^17 for the losses, which loop over a row.  Backward subjects that liger runs
``in_place`` (its default: the gradient of the input is written over ``grad_output``) declare ``dy`` mutated --
the documented contract -- so that a mutation of anything else is still found.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import liger_kernel.transformers.functional as lf

# Absolute imports, and Hypothesis only when present: a finding's standalone.py loads this file with
# torch, triton and liger-kernel alone (tritondiff's stand-ins; the drawn values come from inputs.pt).
from tritondiff.harness import dim, subject, tensor

try:
    from hypothesis import strategies as _st

    def one_of(*values):
        return _st.sampled_from(values)
except ImportError:
    def one_of(*values):
        return values[0]

LOW = ("float32", "bfloat16", "float16")
ROW = {"T": (1, 4096), "H": (1, 65536)}          # rows x a hidden size up to liger's fused-row limit
NO_NONFINITE = dict(nonfinite=False)
MAX_BYTES = 64 << 20                              # an example's inputs: model-sized rows, a few of them


def _acc(t):
    """``t`` widened to float32 where it is fp16 / bf16 (what liger and torch accumulate in); float32 and the
    truth run's float64 kept, so that the arbiter stays float64."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def _grads(fn, tensors, dy):
    """``fn(*tensors)`` and the gradients of ``(out * dy).sum()`` for the floating ``tensors`` (None-free)."""
    leaves = [t.detach().requires_grad_(True) if t is not None and t.is_floating_point() else t for t in tensors]
    out = fn(*leaves)
    outs = out if isinstance(out, tuple) else (out,)
    floats = [o for o in outs if o.is_floating_point() and o.requires_grad]
    dys = dy if isinstance(dy, tuple) else (dy,)
    wrt = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    grads = torch.autograd.grad(floats, wrt, [d.to(o.dtype).expand_as(o) for o, d in zip(floats, dys)],
                                allow_unused=True)
    return tuple(o.detach() for o in outs) + tuple(g if g is not None else torch.zeros_like(t)
                                                   for g, t in zip(grads, wrt))


# ------------------------------------------------------------------------------- norms

def llama_rms_norm(x, w, eps, offset=0.0):
    """Hugging Face's LlamaRMSNorm (liger's casting_mode="llama"): the statistic in float32, the weight
    multiplied after the cast back to the input's dtype."""
    xf = _acc(x)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (offset + w) * y.to(x.dtype)


_RMS_INPUTS = {"x": tensor(("T", "H"), dtypes=LOW), "w": tensor(("H",), dtype_like="x"),
               "eps": one_of(1e-6, 1e-5)}


@subject(name="wild.liger.rms_norm", reference=llama_rms_norm, inputs=_RMS_INPUTS, dims=ROW,
         max_example_bytes=MAX_BYTES)
def rms_norm(x, w, eps):
    return lf.liger_rms_norm(x, w, eps)


@subject(name="wild.liger.rms_norm_backward",
         reference=lambda x, w, eps, dy: _grads(lambda a, b: llama_rms_norm(a, b, eps), (x, w), dy),
         inputs={**_RMS_INPUTS, "dy": tensor(("T", "H"), dtype_like="x")}, dims=ROW, mutates=("dy",),
         max_example_bytes=MAX_BYTES)
def rms_norm_backward(x, w, eps, dy):
    return _grads(lambda a, b: lf.liger_rms_norm(a, b, eps), (x, w), dy)


def fused_add_rms_norm_reference(x, r, w, eps):
    """``residual = x + r`` and the Llama RMSNorm of it: (normed, residual)."""
    s = x + r
    return llama_rms_norm(s, w, eps), s


_ADD_RMS_INPUTS = {"x": tensor(("T", "H"), dtypes=LOW), "r": tensor(("T", "H"), dtype_like="x"),
                   "w": tensor(("H",), dtype_like="x"), "eps": one_of(1e-6, 1e-5)}


@subject(name="wild.liger.fused_add_rms_norm", reference=fused_add_rms_norm_reference, inputs=_ADD_RMS_INPUTS,
         dims=ROW, max_example_bytes=MAX_BYTES)
def fused_add_rms_norm(x, r, w, eps):
    return lf.liger_fused_add_rms_norm(x, r, w, eps, in_place=False)


_LN_INPUTS = {"x": tensor(("T", "H"), dtypes=LOW), "w": tensor(("H",), dtype_like="x"),
              "b": tensor(("H",), dtype_like="x"), "eps": one_of(1e-6, 1e-5)}


@subject(name="wild.liger.layer_norm", reference=lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps),
         inputs=_LN_INPUTS, dims=ROW, max_example_bytes=MAX_BYTES)
def layer_norm(x, w, b, eps):
    return lf.liger_layer_norm(x, w, b, eps)


@subject(name="wild.liger.layer_norm_backward",
         reference=lambda x, w, b, eps, dy: _grads(lambda *t: F.layer_norm(t[0], (t[0].shape[-1],), t[1], t[2], eps),
                                                   (x, w, b), dy),
         inputs={**_LN_INPUTS, "dy": tensor(("T", "H"), dtype_like="x")}, dims=ROW, max_example_bytes=MAX_BYTES)
def layer_norm_backward(x, w, b, eps, dy):
    return _grads(lambda *t: lf.liger_layer_norm(*t, eps), (x, w, b), dy)


@subject(name="wild.liger.group_norm",
         reference=lambda x, w, b, groups, eps: F.group_norm(x, groups, w, b, eps),
         inputs={"x": tensor(("N", "C", "L"), dtypes=LOW), "w": tensor(("C",), dtype_like="x"),
                 "b": tensor(("C",), dtype_like="x"), "groups": dim("G"), "eps": one_of(1e-6, 1e-5)},
         dims={"N": (1, 16), "C": (1, 256), "L": (1, 4096), "G": (1, 64)}, where=lambda C, G: C % G == 0,
         max_example_bytes=MAX_BYTES)
def group_norm(x, w, b, groups, eps):
    return lf.liger_group_norm(x, w, b, x.shape[1], groups, eps)


def poly_norm_reference(x, w, b, eps):
    """PolyNorm as liger documents it: ``w0 norm(x^3) + w1 norm(x^2) + w2 norm(x) + b``,
    ``norm(u) = u / sqrt(mean(u^2) + eps)`` over the last dim."""
    def norm(u):
        return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + eps)
    return w[0] * norm(x ** 3) + w[1] * norm(x ** 2) + w[2] * norm(x) + b


@subject(name="wild.liger.poly_norm", reference=poly_norm_reference,
         inputs={"x": tensor(("T", "H"), dtypes=("float32", "bfloat16")), "w": tensor((3,), dtype_like="x"),
                 "b": tensor((), dtype_like="x"), "eps": one_of(1e-6, 1e-5)},
         dims=ROW, max_example_bytes=MAX_BYTES)
def poly_norm(x, w, b, eps):
    return lf.liger_poly_norm(x, w, b, eps, in_place=False)


@subject(name="wild.liger.dyt", reference=lambda x, alpha, gamma, beta: gamma * torch.tanh(alpha * x) + beta,
         inputs={"x": tensor(("T", "H"), dtypes=LOW), "alpha": tensor((1,), dtype_like="x"),
                 "gamma": tensor(("H",), dtype_like="x"), "beta": tensor(("H",), dtype_like="x")},
         dims=ROW, max_example_bytes=MAX_BYTES,
         gpu_only="liger's DyT launcher reads torch.cuda.get_device_properties (the SM count)")
def dyt(x, alpha, gamma, beta):
    return lf.liger_dyt(x, alpha, gamma, beta)


def modulated_rms_norm_reference(x, w, scale, shift, eps):
    """``(1 + scale) * RMSNorm(x) + shift`` (Llama's RMSNorm with its weight); ``scale`` / ``shift`` broadcast
    per token or shared as liger documents."""
    return (1 + scale) * llama_rms_norm(x, w, eps) + shift


@subject(name="wild.liger.modulated_rms_norm", reference=modulated_rms_norm_reference,
         inputs={"x": tensor(("T", "H"), dtypes=LOW), "w": tensor(("H",), dtype_like="x"),
                 "scale": tensor(("S", "H"), dtype_like="x"), "shift": tensor(("S", "H"), dtype_like="x"),
                 "eps": one_of(1e-6, 1e-5)},
         dims={**ROW, "S": (1, 4096)}, where=lambda S, T: S in (1, T), max_example_bytes=MAX_BYTES)
def modulated_rms_norm(x, w, scale, shift, eps):
    return lf.liger_modulated_rms_norm(x, w, scale, shift, eps, in_place=False)


# ------------------------------------------------------------------------- activations and MLPs

_GATE_INPUTS = {"a": tensor(("T", "H"), dtypes=LOW), "b": tensor(("T", "H"), dtype_like="a")}


@subject(name="wild.liger.swiglu", reference=lambda a, b: F.silu(a) * b, inputs=_GATE_INPUTS, dims=ROW,
         max_example_bytes=MAX_BYTES)
def swiglu(a, b):
    return lf.liger_swiglu(a, b)


@subject(name="wild.liger.swiglu_backward",
         reference=lambda a, b, dy: _grads(lambda x, y: F.silu(x) * y, (a, b), dy),
         inputs={**_GATE_INPUTS, "dy": tensor(("T", "H"), dtype_like="a")}, dims=ROW, mutates=("dy",),
         max_example_bytes=MAX_BYTES)
def swiglu_backward(a, b, dy):
    return _grads(lf.liger_swiglu, (a, b), dy)


@subject(name="wild.liger.geglu", reference=lambda a, b: F.gelu(a, approximate="tanh") * b, inputs=_GATE_INPUTS,
         dims=ROW, max_example_bytes=MAX_BYTES)
def geglu(a, b):
    return lf.liger_geglu(a, b)


@subject(name="wild.liger.geglu_backward",
         reference=lambda a, b, dy: _grads(lambda x, y: F.gelu(x, approximate="tanh") * y, (a, b), dy),
         inputs={**_GATE_INPUTS, "dy": tensor(("T", "H"), dtype_like="a")}, dims=ROW, mutates=("dy",),
         max_example_bytes=MAX_BYTES)
def geglu_backward(a, b, dy):
    return _grads(lf.liger_geglu, (a, b), dy)


class _MLPConfig:
    """The fields liger's MLP modules read from a Hugging Face config."""

    def __init__(self, hidden: int, inner: int, act: str):
        self.hidden_size, self.intermediate_size, self.hidden_act = hidden, inner, act


def _mlp(cls_name: str, x, gate, up, down, act: str):
    """liger's ``cls_name`` MLP module holding the given projection weights, applied to ``x``."""
    import liger_kernel.transformers as lt
    module = getattr(lt, cls_name)(_MLPConfig(x.shape[-1], gate.shape[0], act)).to(device=x.device, dtype=x.dtype)
    with torch.no_grad():
        for linear, w in ((module.gate_proj, gate), (module.up_proj, up), (module.down_proj, down)):
            linear.weight.copy_(w)
    return module(x)


def _mlp_reference(act):
    def reference(x, gate, up, down):
        return (act(x @ gate.t()) * (x @ up.t())) @ down.t()
    return reference


_MLP_INPUTS = {"x": tensor(("T", "C"), dtypes=LOW), "gate": tensor(("F", "C"), dtype_like="x"),
               "up": tensor(("F", "C"), dtype_like="x"), "down": tensor(("C", "F"), dtype_like="x")}
_MLP_DIMS = {"T": (1, 512), "C": (1, 1024), "F": (1, 2816)}


@subject(name="wild.liger.swiglu_mlp", reference=_mlp_reference(F.silu), inputs=_MLP_INPUTS, dims=_MLP_DIMS,
         max_example_bytes=MAX_BYTES)
def swiglu_mlp(x, gate, up, down):
    """LigerSwiGLUMLP: Hugging Face's Llama MLP, ``down(silu(gate(x)) * up(x))``."""
    return _mlp("LigerSwiGLUMLP", x, gate, up, down, "silu")


@subject(name="wild.liger.geglu_mlp", reference=_mlp_reference(lambda t: F.gelu(t, approximate="tanh")),
         inputs=_MLP_INPUTS, dims=_MLP_DIMS, max_example_bytes=MAX_BYTES)
def geglu_mlp(x, gate, up, down):
    """LigerGEGLUMLP: Gemma's MLP, ``down(gelu_tanh(gate(x)) * up(x))``."""
    return _mlp("LigerGEGLUMLP", x, gate, up, down, "gelu_pytorch_tanh")


@subject(name="wild.liger.relu_squared", reference=lambda x: torch.relu(x) ** 2,
         inputs={"x": tensor(("T", "H"), dtypes=LOW)}, dims=ROW, max_example_bytes=MAX_BYTES)
def relu_squared(x):
    return lf.liger_relu_squared(x)


@subject(name="wild.liger.softmax", reference=lambda x: torch.softmax(x, -1),
         inputs={"x": tensor(("T", "H"), dtypes=LOW, values=("normal", "large_offset", "large", "tiny", "zeros",
                                                             "masked"))},
         dims=ROW, max_example_bytes=MAX_BYTES)
def softmax(x):
    return lf.liger_softmax(x)


@subject(name="wild.liger.softmax_backward",
         reference=lambda x, dy: _grads(lambda t: torch.softmax(t, -1), (x,), dy),
         inputs={"x": tensor(("T", "H"), dtypes=LOW), "dy": tensor(("T", "H"), dtype_like="x")}, dims=ROW,
         max_example_bytes=MAX_BYTES)
def softmax_backward(x, dy):
    return _grads(lf.liger_softmax, (x,), dy)


def sparsemax_reference(x, dim=-1):
    """Sparsemax (Martins & Astudillo, 2016): the Euclidean projection of each row onto the simplex."""
    z = x.transpose(dim, -1)
    zs, _ = torch.sort(z, dim=-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, device=x.device, dtype=x.dtype)
    cumulative = zs.cumsum(-1)
    support = (1 + k * zs) > cumulative
    k_z = support.sum(-1, keepdim=True).clamp(min=1)
    tau = (cumulative.gather(-1, k_z - 1) - 1) / k_z.to(x.dtype)
    return torch.clamp(z - tau, min=0).transpose(dim, -1)


@subject(name="wild.liger.sparsemax", reference=sparsemax_reference,
         inputs={"x": tensor(("T", "H"), dtypes=("float32", "bfloat16"), **NO_NONFINITE)},
         dims={"T": (1, 1024), "H": (1, 8192)}, max_example_bytes=MAX_BYTES)
def sparsemax(x):
    return lf.liger_sparsemax(x)


def rope_reference(q, k, cos, sin):
    """Hugging Face's apply_rotary_pos_emb (rotate_half), cos / sin of shape (B, T, D) unsqueezed at dim 1."""
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * c + rotate_half(q) * s, k * c + rotate_half(k) * s


@subject(name="wild.liger.rope", reference=rope_reference,
         inputs={"q": tensor(("B", "H", "T", "D"), dtypes=LOW), "k": tensor(("B", "KV", "T", "D"), dtype_like="q"),
                 "cos": tensor(("B", "T", "D"), dtype_like="q"), "sin": tensor(("B", "T", "D"), dtype_like="q")},
         dims={"B": (1, 4), "H": (1, 32), "KV": (1, 8), "T": (1, 2048), "D": (2, 256)},
         where=lambda D, H, KV: D % 2 == 0 and H % KV == 0, max_example_bytes=MAX_BYTES)
def rope(q, k, cos, sin):
    return lf.liger_rope(q, k, cos, sin)


# ------------------------------------------------------------------------------------ losses

_LOGITS = tensor(("N", "V"), dtypes=LOW, values=("normal", "large_offset", "large", "tiny", "masked"))
_LOSS_DIMS = {"N": (1, 1024), "V": (1, 1 << 17)}


@subject(name="wild.liger.cross_entropy",
         reference=lambda logits, target, smoothing: F.cross_entropy(_acc(logits), target,
                                                                     label_smoothing=smoothing).to(logits.dtype),
         inputs={"logits": _LOGITS, "target": tensor(("N",), dtypes=("int64",), low=0, high="V"),
                 "smoothing": one_of(0.0, 0.1)},
         dims=_LOSS_DIMS, max_example_bytes=MAX_BYTES)
def cross_entropy(logits, target, smoothing):
    return lf.liger_cross_entropy(logits, target, label_smoothing=smoothing)


@subject(name="wild.liger.cross_entropy_backward",
         reference=lambda logits, target, dy: _grads(lambda t: F.cross_entropy(_acc(t), target).to(t.dtype),
                                                     (logits,), dy),
         inputs={"logits": _LOGITS, "target": tensor(("N",), dtypes=("int64",), low=0, high="V"),
                 "dy": tensor((), dtype_like="logits")},
         dims=_LOSS_DIMS, mutates=("logits",), max_example_bytes=MAX_BYTES)
def cross_entropy_backward(logits, target, dy):
    """Liger documents that its cross entropy writes the gradient over the logits (its memory saving):
    ``logits`` is declared mutated, so that values and every other input are still checked."""
    return _grads(lambda t: lf.liger_cross_entropy(t, target), (logits,), dy)


@subject(name="wild.liger.fused_linear_cross_entropy",
         reference=lambda x, w, target: _acc(F.cross_entropy(_acc(x @ w.t()), target)),
         inputs={"x": tensor(("N", "C"), dtypes=LOW), "w": tensor(("V", "C"), dtype_like="x"),
                 "target": tensor(("N",), dtypes=("int64",), low=0, high="V")},
         dims={"N": (1, 512), "C": (1, 1024), "V": (1, 32768)}, max_example_bytes=MAX_BYTES)
def fused_linear_cross_entropy(x, w, target):
    return lf.liger_fused_linear_cross_entropy(x, w, target).float()


def kl_div_reference(log_q, p):
    """``F.kl_div(log_q, p, reduction="batchmean")``, liger's default module reduction, as float32: liger's
    losses come back in float32 for fp16 / bf16 inputs (torch's in the inputs' dtype; reports/wild.md), and
    the subjects compare values, the dtype difference being known."""
    return _acc(F.kl_div(log_q, p, reduction="batchmean"))


@subject(name="wild.liger.kl_div", reference=kl_div_reference,
         inputs={"log_q": tensor(("N", "V"), dtypes=LOW, high=0.0), "p": tensor(("N", "V"), dtype_like="log_q",
                                                                                 low=0.0, high=1.0)},
         dims=_LOSS_DIMS, max_example_bytes=MAX_BYTES)
def kl_div(log_q, p):
    return lf.liger_kl_div(log_q, p, reduction="batchmean").float()


def jsd_reference(log_q, log_p, beta):
    """Liger's generalized JSD, summed over the vocabulary and averaged over rows: forward KL(P || Q) at
    beta = 0, reverse KL at beta = 1, ``beta KL(P || M) + (1 - beta) KL(Q || M)`` with
    ``M = beta P + (1 - beta) Q`` otherwise (``log_q``: the student's log-probabilities)."""
    p, q = log_p.exp(), log_q.exp()
    if beta == 0.0:
        loss = _p_log_ratio(p, log_p, log_q)
    elif beta == 1.0:
        loss = _p_log_ratio(q, log_q, log_p)
    else:
        log_m = torch.log(beta * p + (1 - beta) * q)
        loss = beta * _p_log_ratio(p, log_p, log_m) + (1 - beta) * _p_log_ratio(q, log_q, log_m)
    return _acc(loss.sum() / log_q.shape[0])


def _p_log_ratio(p, log_p, log_other):
    """``p (log p - log other)``, 0 where ``p`` is 0 (the limit, 0 log 0 = 0): written out, a probability that
    underflows to 0 against a ``log other`` of -inf gave 0 * inf = NaN, a NaN the math does not have."""
    return torch.where(p > 0, p * (log_p - log_other), torch.zeros_like(p))


def _log_probs(t):
    return torch.log_softmax(_acc(t), -1).to(t.dtype)


@subject(name="wild.liger.jsd",
         reference=lambda x, y, beta: jsd_reference(_log_probs(x), _log_probs(y), beta),
         inputs={"x": tensor(("N", "V"), dtypes=("float32", "bfloat16"), **NO_NONFINITE),
                 "y": tensor(("N", "V"), dtype_like="x", **NO_NONFINITE),
                 "beta": one_of(0.0, 0.1, 0.5, 1.0)},
         dims=_LOSS_DIMS, max_example_bytes=MAX_BYTES)
def jsd(x, y, beta):
    return lf.liger_jsd(_log_probs(x), _log_probs(y), beta=beta).float()


@subject(name="wild.liger.tvd",
         reference=lambda x, y: (0.5 * (x.softmax(-1) - y.softmax(-1)).abs()).sum() / x.numel(),  # float32 only
         inputs={"x": tensor(("N", "V"), dtypes=("float32",), **NO_NONFINITE),
                 "y": tensor(("N", "V"), dtype_like="x", **NO_NONFINITE)},
         dims=_LOSS_DIMS, max_example_bytes=MAX_BYTES)
def tvd(x, y):
    return lf.liger_tvd(x.softmax(-1), y.softmax(-1), reduction="mean")


@subject(name="wild.liger.fused_linear_jsd",
         reference=lambda xs, ws, xt, wt, beta: jsd_reference(_log_probs(xs @ ws.t()), _log_probs(xt @ wt.t()), beta),
         inputs={"xs": tensor(("N", "C"), dtypes=("float32", "bfloat16"), **NO_NONFINITE),
                 "ws": tensor(("V", "C"), dtype_like="xs", **NO_NONFINITE),
                 "xt": tensor(("N", "C"), dtype_like="xs", **NO_NONFINITE),
                 "wt": tensor(("V", "C"), dtype_like="xs", **NO_NONFINITE),
                 "beta": one_of(0.0, 0.5, 1.0)},
         dims={"N": (1, 256), "C": (1, 512), "V": (1, 8192)}, max_example_bytes=MAX_BYTES)
def fused_linear_jsd(xs, ws, xt, wt, beta):
    return lf.liger_fused_linear_jsd(xs, ws, xt, wt, jsd_beta=beta).float()
