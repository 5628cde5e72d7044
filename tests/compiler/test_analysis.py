"""Read analysis through inlining, and the text rendering of bodies used in dumps."""
import torch

from tritondiff.compiler.analysis import analyze, describe, format_body
from tritondiff.compiler.backend import capture_graphs
from tritondiff.compiler.lowering import lower_graph


def _lowered(fn, *args):
    g = capture_graphs(fn, *args)[0]
    return lower_graph(g.gm, g.args, "t")


def test_reads_follow_inlined_producers_to_their_inputs():
    g = _lowered(lambda x, y: (x * 2 + y).exp(), torch.randn(9, 41), torch.randn(41))
    last = g.computed()[-1]
    direct = {r.buffer.name for r in analyze(last).reads}
    inlined = frozenset(b.name for b in g.computed()[:-1])
    through = {r.buffer.name for r in analyze(last, inlined).reads}
    assert direct == {g.computed()[-2].name}
    assert through == {"arg0", "arg1"}
    y_read = next(r for r in analyze(last, inlined).reads if r.buffer.name == "arg1")
    assert len(y_read.index) == 1  # y is read through its broadcast: one index, the column


def test_op_count_grows_with_inlining():
    g = _lowered(lambda x: x.sin().cos().exp(), torch.randn(41))
    last = g.computed()[-1]
    assert analyze(last).op_count < analyze(last, frozenset(b.name for b in g.computed()[:-1])).op_count


def test_rendering_is_readable():
    g = _lowered(lambda x: x.sum(1) * 2, torch.randn(9, 41))
    red = g.computed()[0]
    assert format_body(red) == "load(arg0, 41*i0 + r0)"
    text = describe(red)
    assert text.startswith(f"{red.name} = Reduction.sum[float32](ranges=[9] rranges=[41]")


def test_a_widening_load_is_one_read_and_casts_only_at_least_one():
    from tritondiff.compiler.analysis import BodyInfo
    read = object()
    info = lambda reads, ops, casts: BodyInfo(reads, ops, (), (), {}, casts)  # noqa: E731
    assert info([read], 2, 1).widening_load and info([read], 3, 2).widening_load      # x.float(), x.half().float()
    assert not info([read], 1, 0).widening_load          # a plain copy (maybe strided): no cast, not exempt
    assert not info([read], 3, 1).widening_load          # a cast and another op
    assert not info([read, read], 3, 1).widening_load    # two reads
