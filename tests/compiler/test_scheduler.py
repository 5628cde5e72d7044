"""Fusion decisions: what becomes one kernel, and why a refused fusion was refused."""
import pytest
import torch

import compiler
from compiler.backend import capture_graphs
from compiler.lowering import lower_graph
from compiler.scheduler import KernelGroup, WhyNoFuse, build_group, schedule
from compiler import workloads
from tests.compiler.util import check


def _schedule(fn, *args, backward=False, which=-1):
    graphs = capture_graphs(fn, *args, backward=backward)
    g = graphs[which]
    lowered = lower_graph(g.gm, g.args, "t")
    return lowered, schedule(lowered)


def test_softmax_is_one_kernel_with_three_passes():
    _, sched = _schedule(torch.softmax, torch.randn(9, 41), -1)
    groups = sched.groups()
    assert len(groups) == 1
    g = groups[0]
    assert g.has_reduction and g.num_phases == 3
    assert [p.kind for p in g.placed] == ["reduction", "reduction", "xr"]
    assert len(sched.inlined) == 2  # x - max and exp(x - max) are recomputed, never stored
    assert compiler.counters["fused_nodes"] >= 2


def test_layer_norm_backward_fuses_rows_and_sibling_column_sums():
    x = torch.randn(341, 16, requires_grad=True)
    w, b = torch.randn(16, requires_grad=True), torch.randn(16, requires_grad=True)
    _, sched = _schedule(workloads.layer_norm, x, w, b, backward=True)
    groups = sched.groups()
    assert len(groups) == 2
    rows, cols = sorted(groups, key=lambda g: g.rnumel)
    assert (rows.xnumel, rows.rnumel) == (341, 16) and rows.num_phases == 2
    assert (cols.xnumel, cols.rnumel) == (16, 341)
    assert [p.kind for p in cols.placed] == ["reduction", "reduction"]  # dW and dB in one pass
    assert cols.split_ok()
    assert all(p.name in sched.stored for p in cols.placed)


def test_reading_a_reduction_at_another_element_is_refused_with_a_reason():
    fn = lambda x: x.sum(1).view(3, 3).t().reshape(-1) * 2  # noqa: E731
    _, sched = _schedule(fn, torch.randn(9, 41))
    reasons = [why for _, _, why in sched.refused]
    assert any("another element" in r for r in reasons), reasons
    check(fn, torch.randn(9, 41))


def test_per_row_node_cannot_take_one_column_of_a_full_domain_value():
    def fn(x):
        s = x.sum(1)
        y = x * 2
        return y, y[:, 0] + s
    _, sched = _schedule(fn, torch.randn(9, 41))
    owner = {n: g.name for g in sched.groups() for n in g.names}
    y = next(p.name for g in sched.groups() for p in g.placed if p.node.buf.data.ranges == (9, 41))
    z = next(p.name for g in sched.groups() for p in g.placed if p.kind == "x" and p.node.buf.data.ranges == (9,))
    assert owner[y] != owner[z]
    assert any(f"reads {y} at another element" in why for _, _, why in sched.refused)
    check(fn, torch.randn(9, 41))


def test_fusion_through_an_extern_would_cycle_and_is_refused():
    def fn(x, w):
        s1 = x.sum(1, keepdim=True)
        e = torch.mm(x * s1, w)
        return (e + x).sum(1)
    x, w = torch.randn(9, 41), torch.randn(41, 41)
    _, sched = _schedule(fn, x, w)
    assert any("cycle" in why for _, _, why in sched.refused)
    check(fn, x, w, rtol=1e-4, atol=1e-4)


def test_forced_split_keeps_dependent_reductions_apart():
    with compiler.config.patch(reduction_strategy="split"):
        _, sched = _schedule(torch.softmax, torch.randn(9, 41), -1)
        assert len(sched.groups()) >= 2
        assert any("split" in why for _, _, why in sched.refused)
        check(torch.softmax, torch.randn(9, 41), -1)


def test_build_group_refuses_mismatched_domains():
    _, sched = _schedule(lambda x: (x.sum(0), x.sum(1)), torch.randn(9, 41))
    a, b = sched.groups()
    result = build_group([p.node for p in a.placed + b.placed])
    assert isinstance(result, WhyNoFuse) and not result
    assert "domain" in result.reason or "reduces" in result.reason


@pytest.mark.parametrize("knobs", [{"fusion": False}, {"inline_pointwise": False}, {"max_inline_users": 1}])
def test_fusion_knobs_change_kernels_not_results(knobs):
    x = torch.randn(41, 9)
    fn = lambda x: torch.softmax(x * 2 + 1, -1) * x.sigmoid()  # noqa: E731
    base = _schedule(fn, x)[1]
    with compiler.config.patch(**knobs):
        other = _schedule(fn, x)[1]
        check(fn, x, rtol=1e-5, atol=1e-6)
    assert len(other.groups()) > len(base.groups()) or len(other.inlined) < len(base.inlined)


def test_scheduled_dump_names_roles_and_refusals():
    x = torch.randn(9, 41)
    check(lambda x: torch.softmax(x, -1), x)
    text = compiler.dump.last_artifacts().texts["scheduled"]
    assert "3 pass(es)" in text and "[reduction pass 0" in text and "[xr pass 2, stored]" in text
    assert isinstance(KernelGroup, type)
