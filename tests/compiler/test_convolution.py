"""compiler.lowerings.convolution: convolutions stay ATen calls; their activations move channels-last inside a
graph, never in what the graph returns to the user."""
import pytest
import torch
import torch.nn.functional as F

from tritondiff import compiler
from tritondiff.base import device
from tritondiff.compiler.ir import ExternOutput
from tritondiff.compiler.lowering import SAVED_FROM, lower_graph
from tritondiff.compiler.lowerings.convolution import channels_last_strides
from tests.compiler.util import assert_same, run_compiled


def _block(x, w1, w2, gamma, beta):
    """A ResNet-style block: a convolution of a computed activation, batch norm in training mode, a residual."""
    h = F.conv2d(F.relu(x * 1.5), w1, padding=1)
    h = F.batch_norm(h, None, None, gamma, beta, training=True)
    return F.relu(F.conv2d(F.silu(h), w2, padding=1) + x)


def _inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    dev = device.torch_device()

    def make(*shape):
        return torch.randn(*shape, generator=g).to(dev, dtype).requires_grad_()
    return make(2, 5, 7, 6), make(5, 5, 3, 3) * 0.3, make(5, 5, 3, 3) * 0.3, make(5), make(5)


def _leaves(args):
    return [a.detach().requires_grad_() for a in args]


def _fwd_bwd(fn, args):
    out = fn(*args)
    grads = torch.autograd.grad(out, args, torch.ones_like(out))
    return out, grads


@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_conv_block_is_right_and_returns_eager_strides_either_way(mode):
    args = _inputs()
    want_out, want_grads = _fwd_bwd(_block, _leaves(args))
    before = compiler.counters["conv.channels_last_inputs"]
    with compiler.config.patch(conv_channels_last=mode):
        torch._dynamo.reset()
        got_out, got_grads = _fwd_bwd(compiler.compile(_block), _leaves(args))
    moved = compiler.counters["conv.channels_last_inputs"] - before
    assert (moved > 0) == (mode == "on"), moved       # relu(x * 1.5) and the backward's incoming gradients
    assert_same((got_out, got_grads), (want_out, want_grads), rtol=1e-4, atol=1e-4)
    for got, want in zip((got_out, *got_grads), (want_out, *want_grads)):
        assert got.stride() == want.stride(), (got.shape, got.stride(), want.stride())


def test_a_convolutions_output_returned_to_the_user_gets_the_traced_strides_and_a_saved_one_keeps_its_own():
    """The graph returns the convolution's output twice: as a user output (the traced graph's NCHW strides: a
    copy) and as a value saved for the backward (only the compiled backward reads it: no copy)."""
    x, w = torch.randn(2, 3, 5, 5), torch.randn(4, 3, 3, 3)
    gm = torch.fx.experimental.proxy_tensor.make_fx(lambda x, w: (F.conv2d(x.relu(), w),) * 2)(x, w)
    gm.meta[SAVED_FROM] = 1
    with compiler.config.patch(conv_channels_last="on"):
        g = lower_graph(gm, [x, w], "t")
    conv_out = next(b for b in g.buffers.values() if isinstance(b, ExternOutput))
    assert conv_out.layout.stride == channels_last_strides((2, 4, 3, 3))
    user, saved = g.outputs
    assert saved.name == conv_out.name
    assert user.name != conv_out.name and g.buffers[user.name].layout.stride == (36, 9, 3, 1)


def test_off_and_non_4d_convolutions_keep_the_traced_layout():
    x, w = torch.randn(2, 3, 9), torch.randn(4, 3, 3)
    gm = torch.fx.experimental.proxy_tensor.make_fx(lambda x, w: F.conv1d(x.relu(), w))(x, w)
    with compiler.config.patch(conv_channels_last="on"):
        g = lower_graph(gm, [x, w], "t")
    conv_out = next(b for b in g.buffers.values() if isinstance(b, ExternOutput))
    assert conv_out.layout.stride == (28, 7, 1)


def test_auto_moves_layouts_only_where_the_kernels_run_on_cuda():
    x, w = torch.randn(1, 2, 4, 4), torch.randn(2, 2, 1, 1)
    before = compiler.counters["conv.channels_last_inputs"]
    with compiler.config.patch(conv_channels_last="auto"):
        run_compiled(lambda x, w: F.conv2d(x.relu(), w), x.to(device.torch_device()), w.to(device.torch_device()))
    moved = compiler.counters["conv.channels_last_inputs"] - before
    assert (moved > 0) == (device.torch_device().type == "cuda")


def test_the_default_keeps_the_traced_layout():
    assert compiler.config.conv_channels_last == "off"          # measured slower on an H200 (config.py)


def test_a_bad_setting_names_the_knob():
    with pytest.raises(Exception, match="conv_channels_last"):
        with compiler.config.patch(conv_channels_last="sometimes"):
            pass
