"""Attention written out by hand, rewritten into ``scaled_dot_product_attention`` before AOTAutograd.

Model code often spells attention as ``softmax((q @ k.transpose(-2, -1)) * scale [masked]) @ v`` (nanoGPT's
non-flash path, many research codebases).  Compiled op by op, that materialises the (L, S) score matrix
forward and backward; as one ``scaled_dot_product_attention`` call it runs the fused flash or
memory-efficient kernels on a GPU (the op stays whole: ``compiler.decompositions``).  :func:`fuse` rewrites
the dynamo graph, so AOTAutograd then traces the fused op's own backward.

What is matched: a matmul of a ``softmax`` over the last dim (optionally through dropout with p = 0) and
``v``; the softmax's input optionally ``masked_fill(mask, -inf)``, then optionally multiplied or divided by
a Python number, then ``q @ k.transpose(-2, -1)``, every intermediate used only by the next, on rank-4
floating tensors of one dtype.  The scale is passed explicitly (an unscaled product is scale 1, not SDPA's
default 1/sqrt(E)) and the mask as ``attn_mask = ~mask``.

Semantics kept: a row whose every key is masked is NaN in the written-out softmax, and the fused op returns
0 there; the rewrite puts the NaN back (``where(mask.all(-1), nan, y)``), so forward values match.  The
gradients of such a row stay finite where eager's are NaN -- the one difference, on inputs eager itself
cannot differentiate.  ``config.fuse_attention = False`` turns the rewrite off.

When it pays (``pays``): on CUDA the fused op's float32 path is the memory-efficient kernel, which ran
nanoGPT's attention at T = 128 (32 heads, 2 MiB of scores) slower than the written-out form -- cuBLAS
batched GEMMs and one generated softmax -- on the H200; a float32 attention on CUDA is rewritten only once
its scores pass ``COMPOSED_MAX_SCORE_BYTES``, where writing them out costs memory traffic the fused kernel
never spends.  fp16 / bf16 (flash and cuDNN kernels) and the CPU are always rewritten.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Optional

import torch
import torch.fx
import torch.nn.functional as F

_MATMULS = (operator.matmul, torch.matmul)
#: Float32 scores on CUDA up to this many bytes stay written out (module docstring).
COMPOSED_MAX_SCORE_BYTES = 16 << 20
_SOFTMAXES = (F.softmax, torch.softmax)


def _is(node: Any, functions: tuple = (), methods: tuple = ()) -> bool:
    if not isinstance(node, torch.fx.Node):
        return False
    return (node.op == "call_function" and node.target in functions) or \
        (node.op == "call_method" and node.target in methods)


def _arg(node: torch.fx.Node, index: int, name: str, default: Any = None) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _value(node: Any) -> Optional[torch.Tensor]:
    value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _last_dim(dim: Any, rank: int) -> bool:
    return isinstance(dim, int) and dim in (-1, rank - 1)


def _single_use(*nodes: torch.fx.Node) -> bool:
    return all(len(n.users) == 1 for n in nodes)


def pays(device_type: str, dtype: torch.dtype, score_bytes: int) -> bool:
    """Whether the fused op beats the written-out attention whose scores take ``score_bytes``."""
    if device_type != "cuda" or dtype in (torch.float16, torch.bfloat16):
        return True
    return score_bytes > COMPOSED_MAX_SCORE_BYTES


def _match(out: torch.fx.Node) -> Optional[dict]:
    """The pieces of hand-written attention ending in matmul ``out``, or None."""
    if not _is(out, _MATMULS, ("matmul",)) or len(out.args) != 2:
        return None
    probs, v = out.args
    chain = []
    if _is(probs, (F.dropout,), ("dropout",)) and _arg(probs, 1, "p", 0.5) == 0:
        chain.append(probs)
        probs = probs.args[0]
    rank = _value(out).dim() if _value(out) is not None else -1
    if not _is(probs, _SOFTMAXES, ("softmax",)) or not _last_dim(_arg(probs, 1, "dim"), rank) \
            or _arg(probs, 3 if probs.target is F.softmax else 2, "dtype") is not None:
        return None
    chain.append(probs)
    scores, mask, scale = probs.args[0], None, 1.0
    if _is(scores, (torch.masked_fill,), ("masked_fill",)) and len(scores.args) == 3 \
            and scores.args[2] == -math.inf:
        chain.append(scores)
        scores, mask = scores.args[0], scores.args[1]
    if _is(scores, (operator.mul, torch.mul), ("mul",)) and len(scores.args) == 2:
        a, b = scores.args
        number, tensor = (b, a) if isinstance(b, (int, float)) else (a, b)
        if isinstance(number, (int, float)) and not isinstance(number, bool) and isinstance(tensor, torch.fx.Node):
            chain.append(scores)
            scores, scale = tensor, float(number)
    elif _is(scores, (operator.truediv, torch.div), ("div",)) and len(scores.args) == 2 \
            and isinstance(scores.args[1], (int, float)) and not isinstance(scores.args[1], bool) and scores.args[1]:
        chain.append(scores)
        scores, scale = scores.args[0], 1.0 / float(scores.args[1])
    if not _is(scores, _MATMULS, ("matmul",)) or len(scores.args) != 2:
        return None
    chain.append(scores)
    q, kt = scores.args
    if not _is(kt, (torch.transpose,), ("transpose",)) or sorted(kt.args[1:3]) not in ([-2, -1], [2, 3]):
        return None
    chain.append(kt)
    k = kt.args[0]
    values = [_value(x) for x in (q, k, v)]
    if any(x is None for x in values) or {x.dim() for x in values} != {4} or len({x.dtype for x in values}) != 1 \
            or not values[0].is_floating_point() or values[0].shape[-1] != values[1].shape[-1] \
            or values[1].shape[-2] != values[2].shape[-2]:
        return None
    if mask is not None and (_value(mask) is None or _value(mask).dtype != torch.bool):
        return None
    scores_value = _value(scores)
    if scores_value is None or not pays(values[0].device.type, values[0].dtype,
                                        scores_value.numel() * scores_value.element_size()):
        return None
    if not _single_use(*chain):
        return None
    return {"q": q, "k": k, "v": v, "mask": mask, "scale": scale}


def fuse(gm: torch.fx.GraphModule) -> int:
    """Rewrite every hand-written attention in ``gm`` (module docstring); returns how many."""
    graph, fused = gm.graph, 0
    for node in list(graph.nodes):
        found = _match(node)
        if found is None:
            continue
        with graph.inserting_before(node):
            mask = found["mask"]
            keep = graph.call_function(torch.logical_not, (mask,)) if mask is not None else None
            out = graph.call_function(F.scaled_dot_product_attention, (found["q"], found["k"], found["v"]),
                                      {"attn_mask": keep, "scale": found["scale"]})
            if mask is not None:
                dead = graph.call_function(torch.all, (mask,), {"dim": -1, "keepdim": True})
                out = graph.call_function(torch.where, (dead, math.nan, out))
        node.replace_all_uses_with(out)
        fused += 1
    if fused:
        graph.eliminate_dead_code()
        gm.recompile()
    return fused
