"""Convolutions: ATen calls (cuDNN on CUDA) whose activations the compiler lays out channels-last.

cuDNN's fast convolutions run on NHWC data; handed NCHW tensors, a call may transpose around itself (a UNet
block's forward and backward launched 31 library kernels on an H200 to Inductor's 13, whose code lays conv
activations out channels-last).  Optionally, a convolution's input (and its backward's incoming gradient)
that the graph computes is written channels-last by the kernel that computes it, and the call's 4-D outputs
are planned channels-last, as ATen returns them for such inputs (should a call return another layout, the
runtime copies its result into the planned one).  Graph inputs and ATen outputs keep their strides, and
every user-visible graph output gets the strides the traced graph gives it (``lowering.GraphLowering._output``
copies where they differ; values saved for the backward keep theirs, ``lowering.SAVED_FROM``), so only
layouts inside the graph change.

``config.conv_channels_last``: "auto" (on where the kernels run on CUDA), "on", "off" (the default: on an H200
the ResNet and UNet blocks took more GPU time with it, which kernels lost not yet broken down;
reports/performance-log.md).
"""
from __future__ import annotations

from typing import Any

import torch

from ..config import config
from ..counters import counters
from ..exc import Unsupported
from ..ir import ComputedBuffer, ExternOutput, IRNode, Layout, current_graph, realize
from .registry import register_lowering

aten = torch.ops.aten


def channels_last_strides(size: tuple[int, ...]) -> tuple[int, ...]:
    """NHWC strides of an (N, C, H, W) tensor, as ``torch.channels_last`` gives them."""
    n, c, h, w = size
    return (h * w * c, 1, w * c, c)


def _wanted(x: Any) -> bool:
    if config.conv_channels_last == "off" or not isinstance(x, IRNode) or len(x.get_size()) != 4:
        return False
    if x.get_dtype() not in (torch.float32, torch.float16, torch.bfloat16):
        return False
    return config.conv_channels_last == "on" or current_graph().device_type == "cuda"


def _channels_last(x: IRNode) -> IRNode:
    """``x`` realized; written channels-last when the graph computes it and its layout is still free."""
    x = realize(x)
    if isinstance(x, ComputedBuffer) and not x.fixed_layout:
        size = tuple(x.get_size())
        if channels_last_strides(size) != x.layout.stride:
            x.set_output_layout(Layout(size, channels_last_strides(size), x.get_dtype()))
            counters["conv.channels_last_inputs"] += 1
    return x


def _outputs_channels_last(structure: Any) -> Any:
    """Plan the call's 4-D outputs channels-last (lowered before any reader of them, so every reader sees it)."""
    for out in structure if isinstance(structure, (tuple, list)) else (structure,):
        if isinstance(out, ExternOutput) and len(out.layout.size) == 4:
            out.layout = Layout(out.layout.size, channels_last_strides(out.layout.size), out.layout.dtype)
    return structure


@register_lowering(aten.convolution.default)
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    if not _wanted(x):
        raise Unsupported("convolution activations keep the traced layout (config.conv_channels_last)")
    args = (_channels_last(x), weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return _outputs_channels_last(current_graph().extern(aten.convolution.default, args, {}, None))


@register_lowering(aten.convolution_backward.default)
def convolution_backward(grad_output, x, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
                         groups, output_mask):
    if not _wanted(grad_output):
        raise Unsupported("convolution gradients keep the traced layout (config.conv_channels_last)")
    args = (_channels_last(grad_output), x, weight, bias_sizes, stride, padding, dilation, transposed,
            output_padding, groups, output_mask)
    return _outputs_channels_last(current_graph().extern(aten.convolution_backward.default, args, {}, None))
