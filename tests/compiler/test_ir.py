"""Views by index rewriting, checked element by element against torch's own views."""
import pytest
import torch

from compiler.eager import evaluate_node, storage_view
from compiler.ir import ComputedBuffer, InputBuffer, Layout, MemoryResolver, Pointwise, StridedView, View, use_graph
from compiler.lowerings import views


class _Graph:
    def __init__(self):
        self.n = 0

    def register_computed(self, data):
        self.n += 1
        return ComputedBuffer(f"buf{self.n}", Layout.contiguous(data.ranges, data.dtype), data, "test")


def _input(t: torch.Tensor) -> InputBuffer:
    return InputBuffer("arg0", Layout(tuple(t.shape), tuple(t.stride()), t.dtype), 0)


def materialize(node, t: torch.Tensor) -> torch.Tensor:
    """Evaluate ``node`` (built over input ``t``) with the eager evaluator."""
    with use_graph(_Graph()):
        buf = Pointwise.create(node.make_loader(), node.get_size(), node.get_dtype())
    storages = {"arg0": storage_view(t, Layout(tuple(t.shape), tuple(t.stride()), t.dtype))}
    return evaluate_node(buf, storages, MemoryResolver())


X = torch.arange(3 * 4 * 5, dtype=torch.float32).reshape(3, 4, 5)

CASES = [
    ("permute", lambda x: views.permute(x, [2, 0, 1]), lambda t: t.permute(2, 0, 1)),
    ("transpose", lambda x: views.transpose(x, 0, -1), lambda t: t.transpose(0, -1)),
    ("expand", lambda x: views.expand(views.unsqueeze(x, 1), [3, 2, 4, 5]), lambda t: t.unsqueeze(1).expand(3, 2, 4, 5)),
    ("squeeze", lambda x: views.squeeze(views.unsqueeze(x, 0), [0]), lambda t: t.unsqueeze(0).squeeze(0)),
    ("slice_step", lambda x: views.slice_(x, 2, 1, 5, 2), lambda t: t[:, :, 1:5:2]),
    ("slice_negative", lambda x: views.slice_(x, 1, -3, -1), lambda t: t[:, -3:-1]),
    ("slice_clamped", lambda x: views.slice_(x, 0, 1, 2**62), lambda t: t[1:]),
    ("select", lambda x: views.select(x, 1, -1), lambda t: t.select(1, -1)),
    ("reshape_merge", lambda x: views.view(x, [12, 5]), lambda t: t.reshape(12, 5)),
    ("reshape_split", lambda x: views.view(x, [3, 2, 2, 5]), lambda t: t.reshape(3, 2, 2, 5)),
    ("reshape_mixed", lambda x: views.view(x, [6, 10]), lambda t: t.reshape(6, 10)),
    ("reshape_flat", lambda x: views.view(x, [-1]), lambda t: t.reshape(-1)),
    ("reshape_unit_dims", lambda x: views.view(x, [1, 3, 1, 20, 1]), lambda t: t.reshape(1, 3, 1, 20, 1)),
    ("reshape_of_permute", lambda x: views.view(views.permute(x, [2, 1, 0]), [10, 6]),
     lambda t: t.permute(2, 1, 0).reshape(10, 6)),
    ("diagonal", lambda x: views.diagonal(x, 1, 1, 2), lambda t: t.diagonal(1, 1, 2)),
    ("unfold", lambda x: views.unfold(x, 2, 2, 1), lambda t: t.unfold(2, 2, 1)),
    ("as_strided", lambda x: views.as_strided(x, [4, 3], [2, 7], 5), lambda t: t.as_strided((4, 3), (2, 7), 5)),
]


@pytest.mark.parametrize("name, build, reference", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_view_matches_torch(name, build, reference, layout):
    t = X if layout == "contiguous" else X.transpose(0, 2).contiguous().transpose(0, 2)
    with use_graph(_Graph()):
        node = build(_input(t))
    got = materialize(node, t)
    want = reference(t)
    assert got.shape == want.shape
    assert torch.equal(got, want), name


def test_strided_view_replays_the_layout():
    t = X
    with use_graph(_Graph()):
        v = views.slice_(views.permute(_input(t), [1, 0, 2]), 2, 1, 5, 2)
    strided = v.as_strided_view()
    assert isinstance(strided, StridedView)
    want = t.permute(1, 0, 2)[:, :, 1:5:2]
    assert strided.layout.size == tuple(want.shape)
    assert strided.layout.stride == tuple(want.stride())
    assert strided.layout.offset == want.storage_offset()


def test_non_strided_reshape_has_no_strided_form():
    with use_graph(_Graph()):
        v = views.view(views.permute(_input(X), [2, 1, 0]), [10, 6])
    assert isinstance(v, View) and v.as_strided_view() is None


def test_layout_storage_span():
    assert Layout((3, 4), (4, 1), torch.float32).storage_span == 12
    assert Layout((3, 4), (0, 1), torch.float32, offset=2).storage_span == 6
    assert Layout((0, 4), (4, 1), torch.float32).storage_span == 0
