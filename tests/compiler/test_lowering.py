import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler import lowering
from tritondiff.compiler.exc import LoweringError, Unsupported
from tritondiff.compiler.ir import ComputedBuffer, ExternKernel, Pointwise, Reduction
from tritondiff.compiler.lowering import SAVED_FROM, lower_graph
from tritondiff.compiler.ops import ops
from tests.compiler.util import check, run_compiled

aten = torch.ops.aten


def _fx(fn, *args):
    return torch.fx.experimental.proxy_tensor.make_fx(fn)(*args)


def test_registry_covers_the_common_ops():
    from tritondiff.compiler import lowerings  # noqa: F401
    for op in (aten.add.Tensor, aten.mul.Tensor, aten.where.self, aten.exp.default, aten.rsqrt.default,
               aten.sigmoid.default, aten.sum.dim_IntList, aten.amax.default, aten.argmax.default, aten.var.correction,
               aten.mean.dim, aten.view.default, aten.permute.default, aten.expand.default, aten.slice.Tensor,
               aten.cat.default, aten.constant_pad_nd.default, aten.full.default, torch.ops.prims.iota.default,
               aten.clamp.default, aten._to_copy.default):
        assert op in lowering.lowerings, op


def test_graph_lowers_to_pointwise_and_reductions():
    x = torch.randn(9, 41)
    g = lower_graph(_fx(lambda x: (x * 2).sum(1), x), [x], "t")
    kinds = [type(n.data).__name__ for n in g.nodes if isinstance(n, ComputedBuffer)]
    assert kinds == ["Pointwise", "Reduction"]
    red = g.nodes[1].data
    assert isinstance(red, Reduction) and red.ranges == (9,) and red.reduction_ranges == (41,)


def test_unlowered_op_becomes_an_extern_and_is_counted():
    a, b = torch.randn(9, 41), torch.randn(41, 5)
    with compiler.config.patch(matmul="extern"):  # mm is an ATen call only when the GEMM template is off
        g = lower_graph(_fx(lambda a, b: (a @ b).relu(), a, b), [a, b], "t")
    externs = [n for n in g.nodes if isinstance(n, ExternKernel)]
    assert len(externs) == 1 and externs[0].target == aten.mm.default
    assert compiler.counters["extern.aten.mm"] == 1
    check(lambda a, b: (a @ b).relu() + 1, a, b)


def test_fallback_ops_knob_forces_an_extern():
    x = torch.randn(41)
    with compiler.config.patch(fallback_ops=frozenset({"aten.exp"})):
        check(lambda x: torch.exp(x) + 1, x)
    assert compiler.counters["extern.aten.exp"] == 1


def test_declined_lowering_falls_back_cleanly():
    x, y = torch.rand(41) + 0.1, torch.rand(41)
    check(lambda x, y: torch.pow(x, y) * 2, x, y)  # tensor exponent: not lowered
    assert compiler.counters["extern.aten.pow.Tensor_Tensor"] == 1


def test_a_lowering_that_gets_the_dtype_wrong_is_caught(monkeypatch):
    def bad_neg(x):
        return Pointwise.create(lambda idx: ops.to_dtype(ops.neg(x.make_loader()(idx)), torch.float64),
                                x.get_size(), torch.float64)
    monkeypatch.setitem(lowering.lowerings, aten.neg.default, bad_neg)
    x = torch.randn(9)
    with pytest.raises(LoweringError, match="float64"):
        run_compiled(lambda x: -x, x)


def test_unsupported_is_internal_to_lowering():
    assert issubclass(Unsupported, LoweringError)


def test_complex_and_unknown_dtypes_fall_back():
    x = torch.randn(9, dtype=torch.complex64)
    check(lambda x: (x * 2).abs(), x)
    assert compiler.counters.with_prefix("extern.")


def test_constants_and_int_arguments():
    w = torch.randn(5)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", w)

        def forward(self, x, n: int):
            return x * self.w + n

    m = M()
    check(m, torch.randn(3, 5), 4)


def test_mutating_a_graph_input_is_functionalized():
    def fn(x):
        x.mul_(2)
        return x + 1
    a, b = torch.randn(41), None
    b = a.clone()
    out = run_compiled(fn, a)
    want = fn(b)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(a, b)  # the input was mutated like eager


def test_only_the_nodes_reading_another_devices_tensor_become_externs(monkeypatch):
    # A CUDA graph whose backward receives attention's CPU philox seed: the seed's users are ATen calls, the rest
    # of the graph still gets kernels (a graph-wide check once sent the whole backward to ATen).
    def f(x, seed):
        return x.sin() * 2, seed + 1, (seed * 3).view(1)

    gm = torch.fx.experimental.proxy_tensor.make_fx(f)(torch.randn(4), torch.tensor(2.0))
    monkeypatch.setattr(lowering._device, "torch_device", lambda: torch.device("cuda"))
    graph = lowering.GraphLowering(gm, [torch.empty(4, device="meta"), torch.tensor(2.0)], "g").run()
    kinds = {n.origin.split("(")[1].rstrip(")"): type(n) for n in graph.nodes}
    assert kinds["sin"] is ComputedBuffer and kinds["mul"] is ComputedBuffer
    assert kinds["add"] is ExternKernel and kinds["mul_1"] is ExternKernel and kinds["view"] is ExternKernel


# ------------------------------------------------------------------ scatter along a short index

_SCATTERS = {
    "one-hot value": lambda x, i: torch.zeros_like(x).scatter(1, i[:, :1], -1.0) * x,
    "src, last of duplicates wins": lambda x, i: x.scatter(1, i, x[:, : i.shape[1]] * 2),
    "add, duplicates sum": lambda x, i: x.scatter_add(1, i, x[:, : i.shape[1]] + 1),
    "index shorter on the other dim": lambda x, i: x.scatter_add(1, i[:3], x[:3, : i.shape[1]] * 3),
    "along dim 0": lambda x, i: x.scatter(0, i.t()[:2] % x.shape[0], 2.5),
}


@pytest.mark.parametrize("case", sorted(_SCATTERS))
def test_scatter_with_a_short_index_is_one_pointwise_kernel(case):
    """scatter / scatter_add with a few index entries per line are generated, not ATen calls, and agree with
    eager (CPU: duplicates applied in index order) -- including duplicates, which this index is full of."""
    fn = _SCATTERS[case]
    x = torch.randn(5, 7)
    i = torch.tensor([[1, 1, 4], [0, 6, 0], [3, 3, 3], [2, 5, 2], [6, 0, 1]])
    check(fn, x, i)
    assert not [k for k in compiler.counters if k.startswith("extern.aten.scatter")], compiler.counters


@pytest.mark.parametrize("execution", ["triton", "ir"])
def test_scatter_add_with_a_long_index_is_a_scatter_and_scatter_is_left_to_aten(execution):
    """Past SCATTER_MAX_HITS entries per line scatter_add runs as atomic adds (duplicates sum, any order);
    scatter, whose duplicates' winner CUDA leaves unspecified, stays an ATen call."""
    from tritondiff.compiler.lowerings.structured import SCATTER_MAX_HITS
    x = torch.randn(4, 3)
    i = torch.randint(0, 4, (SCATTER_MAX_HITS + 1, 3))
    with compiler.config.patch(execution=execution):
        check(lambda x, i: torch.zeros(4, 3).scatter_add(0, i, torch.ones(i.shape) * x[:1]) + x, x, i)
        assert compiler.counters["extern.aten.scatter_add"] == 0
        check(lambda x, i: torch.zeros(4, 3).scatter(0, i, 1.0) + x, x, i)
        assert compiler.counters["extern.aten.scatter.value"] == 1


# ------------------------------------------------------------------ outputs that are views

def test_a_view_of_a_computed_buffer_is_returned_as_a_view_not_copied():
    """A saved transposed view (AOTAutograd's forward returns many) is the buffer's storage with the graph's
    strides; a view no strides can express (a reshape of a transpose) is still copied."""
    def fn(x):
        s = x.sin()
        return s.t(), s[1:, 2:].t(), x.cos().t().reshape(-1)
    x = torch.randn(5, 7)
    graph = lower_graph(_fx(fn, x), [x], "t")
    views = [o.view for o in graph.outputs]
    assert views[0] is not None and views[1] is not None and views[2] is None
    assert graph.outputs[0].name == graph.outputs[1].name               # one buffer behind both
    assert len(graph.computed()) == 3                                  # sin, cos, cos's copy
    got = check(fn, x)
    want = fn(x)
    assert [g.stride() for g in got] == [w.stride() for w in want]
    assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()


def test_a_weights_transpose_saved_for_the_backward_is_a_view_of_the_input_not_a_copy():
    """A partitioned forward saves ``w.t()`` (the backward's mm operand): eager's autograd saves the weight
    itself, so the saved value is the input's storage with the transposed strides -- a copy kernel per weight
    and step otherwise.  The same view as a user output is still a copy (it must not alias the input)."""
    def fn(x, w):
        return (x @ w.t()).relu(), w.t()
    x, w = torch.randn(6, 5), torch.randn(4, 5)
    gm = torch.fx.experimental.proxy_tensor.make_fx(fn)(x, w)
    gm.meta[SAVED_FROM] = 1
    graph = lower_graph(gm, [x, w], "t")
    user, saved = graph.outputs
    assert saved.view is not None and saved.name == graph.inputs[1].name
    assert saved.view.stride == (1, 5) and saved.view.size == (5, 4)
    del gm.meta[SAVED_FROM]
    plain = lower_graph(gm, [x, w], "t")
    assert plain.outputs[1].view is None                       # not saved: the user's output is its own tensor
    with compiler.config.patch(execution="triton"):
        from tritondiff.compiler.pipeline import compile_graph
        gm.meta[SAVED_FROM] = 1
        out = compile_graph(gm, [x, w], "t_saved")([x, w])
    assert out[1].untyped_storage().data_ptr() == w.untyped_storage().data_ptr() and torch.equal(out[1], w.t())


# ------------------------------------------------------------------ products with a zero factor

@pytest.mark.parametrize("execution", ["triton", "ir"])
def test_a_product_with_a_zero_factor_is_zero_whatever_overflows_first(execution):
    """Partial products of 4231 integers overflow float32 in any order, and inf * 0 is NaN: the product of
    finite factors with a zero among them is still +-0 (the float64 truth); a non-finite factor keeps NaN."""
    x = torch.randint(-9, 10, (3, 4231)).float()
    x[:, 100] = 0.0
    rows = torch.stack([x[0], torch.tensor([3.0, float("inf"), 0.0] + [1.0] * 4228)])
    with compiler.config.patch(execution=execution):
        got = run_compiled(lambda t: t.prod(1), torch.cat([x, rows]))
    truth = torch.cat([x, rows]).double().prod(1).float()
    torch.testing.assert_close(got, truth, equal_nan=True)
    assert torch.equal(torch.signbit(got[:3]), torch.signbit(truth[:3]))
