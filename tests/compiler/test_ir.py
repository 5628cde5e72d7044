"""IR nodes: views by index rewriting, checked element by element against torch's own views;
reductions over a few elements unrolled into Pointwise nodes, checked against eager."""
import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import ir
from tritondiff.compiler.eager import evaluate_node, storage_view
from tritondiff.compiler.ir import (
    ComputedBuffer, InputBuffer, Layout, MemoryResolver, Pointwise, Reduction, StridedView, View, use_graph
)
from tritondiff.compiler.lowering import lower_graph
from tritondiff.compiler.lowerings import views
from tritondiff.compiler.ops import ops
from tritondiff.base import device
from tests.compiler.util import run_compiled


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


# ------------------------------------------------------------------- unrolled small reductions

def _lowered_kinds(fn, x) -> list[str]:
    gm = torch.fx.experimental.proxy_tensor.make_fx(fn)(x)
    graph = lower_graph(gm, [x], "t")
    return [type(n.data).__name__ for n in graph.nodes if isinstance(n, ComputedBuffer)]


@pytest.mark.parametrize("shape, dims, limit, unrolled", [
    ((5, 8), 1, 8, True), ((5, 9), 1, 8, False),                  # the default limit, at and past it
    ((3, 2, 4), (1, 2), 8, True), ((3, 3, 3), (1, 2), 8, False),  # the extent is the product of the reduced dims
    ((5, 4), 1, 4, True), ((5, 5), 1, 4, False),
    ((5, 1), 1, 1, True), ((7, 0), 1, 1, True),                   # one element, none (sum's identity)
])
def test_a_reduction_over_at_most_the_limit_lowers_to_a_pointwise(shape, dims, limit, unrolled):
    with compiler.config.patch(unroll_reductions_max_rnumel=limit):
        kinds = _lowered_kinds(lambda x: x.sum(dims), torch.ones(shape))
    assert kinds == (["Pointwise"] if unrolled else ["Reduction"])
    assert compiler.counters["reductions_unrolled"] == int(unrolled)


@pytest.mark.parametrize("knobs", [dict(unroll_reductions=False), dict(reduction_strategy="persistent"),
                                   dict(reduction_strategy="looped")])
def test_the_knob_or_a_forced_strategy_keeps_a_small_reduction(knobs):
    with compiler.config.patch(**knobs):
        assert _lowered_kinds(lambda x: x.amax(1), torch.ones(5, 4)) == ["Reduction"]


def test_max_over_an_empty_axis_is_not_unrolled():
    with use_graph(_Graph()):
        buf = Reduction.create(lambda i, r: ops.constant(1.0, torch.float32), [3], [0], "max", torch.float32)
    assert isinstance(buf.data, Reduction)


def assert_exact(got, want) -> None:
    """Same dtype and shape; equal values, NaN where eager has NaN, and the same sign of zero."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    assert got.tolist() == want.tolist() or (
        torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())), \
        (got.tolist(), want.tolist())
    if got.is_floating_point() and device.is_interpreter():   # see the note below
        assert torch.equal(got.signbit() | got.isnan(), want.signbit() | want.isnan()), (got.tolist(), want.tolist())


# The sign of a max/min over 0.0 and -0.0 differs between torch's own CPU and CUDA kernels (CPU keeps the
# first operand, CUDA orders -0.0 below 0.0): eager on a GPU is no fixed yardstick for it, so the sign of
# zero is compared on the CPU only (the oracle, like assert_close, calls -0.0 and 0.0 equal).


NAN, INF = float("nan"), float("inf")
EDGE_ROWS = [[1, 2, 3, 4], [NAN, 1, 2, 3], [1, NAN, 5, NAN], [INF, -INF, 1, 0], [0.0, -0.0, 0.0, -0.0],
             [-0.0, 0.0, -0.0, 0.0], [-INF, -INF, -INF, -INF], [3, 3, 1, 3], [1, 2, 2, NAN], [-1, -2, -2, -1],
             [2, 0.5, -4, 8], [INF, 1, 2, 3]]
REDUCTIONS = {
    "amax": lambda x: x.amax(1), "amin": lambda x: x.amin(1), "max_dim": lambda x: torch.max(x, 1),
    "min_dim": lambda x: torch.min(x, 1), "argmax": lambda x: x.argmax(1), "argmin": lambda x: x.argmin(1),
    "sum": lambda x: x.sum(1), "prod": lambda x: x.prod(1), "mean": lambda x: x.mean(1),
    "any": lambda x: x.any(1), "all": lambda x: x.all(1), "all_dims": lambda x: x[:2].amax(),
    "columns": lambda x: x[:4].amin(0),
}


def check_unrolled(name: str, x: torch.Tensor) -> None:
    fn = REDUCTIONS[name]
    got, want = run_compiled(fn, x), fn(x)
    assert compiler.counters["reductions_unrolled"] > 0 and not compiler.counters.with_prefix("reduction_strategy.")
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert_exact(g, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_unrolled_reductions_give_eagers_values_at_nan_inf_and_signed_zeros(name, dtype):
    check_unrolled(name, torch.tensor(EDGE_ROWS, dtype=dtype))


def test_a_planted_max_without_nan_propagation_is_caught(monkeypatch):
    real = ir.reduction_combine

    def planted(rtype, acc):
        if rtype == "max":
            return lambda a, b: ops.where(ops.gt(b, a), b, a)  # NaN never wins a comparison
        return real(rtype, acc)
    monkeypatch.setattr(ir, "reduction_combine", planted)
    with pytest.raises(AssertionError):
        check_unrolled("amax", torch.tensor(EDGE_ROWS))


@pytest.mark.parametrize("dtype, big, want", [(torch.float16, 2048.0, 2052.0), (torch.bfloat16, 256.0, 260.0)])
def test_unrolled_half_sums_accumulate_in_float32_and_round_once(dtype, big, want):
    # Past `big` the dtype's spacing is 2: summed in the dtype, big + 1 + 1 + 1 stays big (each +1 ties to
    # even); in float32 it is big + 3, rounded once to big + 4 (the tie goes to the even mantissa).
    x = torch.tensor([[big, 1.0, 1.0, 1.0]], dtype=dtype)
    fn = lambda x: (x.sum(1), x.mean(1), x.sum(1, dtype=torch.float32))  # noqa: E731
    got = run_compiled(fn, x)
    assert compiler.counters["reductions_unrolled"] == 3
    assert [g.dtype for g in got] == [dtype, dtype, torch.float32]
    assert got[0].item() == fn(x)[0].item() == want
    assert got[2].item() == big + 3
    assert_exact(got[1], fn(x)[1])


def test_unrolled_integer_and_bool_reductions_keep_torchs_dtypes():
    i8 = torch.tensor([[100, 100, 100], [-128, 127, -1]], dtype=torch.int8)
    i32 = torch.tensor([[2**20, 2**20, 4], [-3, 5, 7]], dtype=torch.int32)
    flags = torch.tensor([[True, False, True], [False, False, False]])
    u8 = torch.tensor([[0, 0, 7], [0, 0, 0]], dtype=torch.uint8)

    def fn(i8, i32, flags, u8):
        return (i8.sum(1), i32.prod(1), i32.amax(1), i32.argmin(1), flags.sum(1), flags.amax(1), flags.all(1),
                u8.any(1), u8.all(1), i8.sum(1, dtype=torch.int8))
    got, want = run_compiled(fn, i8, i32, flags, u8), fn(i8, i32, flags, u8)
    assert compiler.counters["reductions_unrolled"] == len(want)
    assert got[0].tolist() == [300, -2] and got[1].tolist() == [2**42, -105]  # int64: no int8/int32 overflow
    for g, w in zip(got, want):
        assert_exact(g, w)
