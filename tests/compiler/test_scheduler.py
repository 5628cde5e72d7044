"""Fusion decisions: what becomes one kernel, and why a refused fusion was refused."""
import logging
import re

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler.analysis import analyze
from tritondiff.compiler.backend import capture_graphs
from tritondiff.compiler.lowering import lower_graph
from tritondiff.compiler.scheduler import KernelGroup, Refusal, WhyNoFuse, build_group, describe, schedule
from tritondiff.compiler.templates import fuse_templates
from tritondiff.compiler import workloads
from tests.compiler.util import assert_oracle, check, kernel_sources, seeded_randn


def _schedule(fn, *args, backward=False, which=-1):
    graphs = capture_graphs(fn, *args, backward=backward)
    g = graphs[which]
    lowered = lower_graph(g.gm, g.args, "t")
    return lowered, schedule(lowered, fuse_templates)


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
    with compiler.config.patch(mixed_order_reductions=False):
        _, sched = _schedule(workloads.layer_norm, x, w, b, backward=True)
    groups = sched.groups()
    assert len(groups) == 2
    rows, cols = sorted(groups, key=lambda g: g.rnumel)
    # the backward recomputes mean and rstd (compiler.partition): sum(x - s) and sum(dy * w), then the squares,
    # then sum(dy * w * xhat), then dx
    assert (rows.xnumel, rows.rnumel) == (341, 16) and rows.num_phases == 4
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
    with compiler.config.patch(mixed_order_reductions=False):
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


def test_layer_norm_forward_of_a_half_input_recomputes_its_widening_cast_and_is_one_kernel():
    """x.float() of a half input is one load and a cast: storing it would write and reread twice the bytes its
    consumers read from x.  Since var_mean's corrected two-pass (compiler.lowerings.reductions.variance) it has
    more users than max_inline_users; with the user limit alone it was stored, an extra 168 MB round trip at
    4096 x 10240 (GPU time 0.185 -> 0.305 ms on an H100)."""
    x, w, b, _ = _ln_inputs(341, 64, torch.float16)
    lowered, sched = _schedule(workloads.layer_norm, x, w, b, backward=True, which=0)
    [cast] = [n for n in lowered.computed() if n.get_dtype() == torch.float32 and list(n.get_size()) == [341, 64]
              and analyze(n).widening_load]
    users = sum(cast.name in {r.buffer.name for r in analyze(n).reads} for n in lowered.computed())
    assert users > compiler.config.max_inline_users and cast.name in sched.inlined
    assert len(sched.groups()) == 1


def test_scheduled_dump_names_roles_and_refusals():
    x = torch.randn(9, 41)
    check(lambda x: torch.softmax(x, -1), x)
    text = compiler.dump.last_artifacts().texts["scheduled"]
    assert "3 pass(es)" in text and "[reduction pass 0" in text and "[xr pass 2, stored]" in text
    assert isinstance(KernelGroup, type)


# ------------------------------------------------------------------- scoring and refusals

def _owner(sched):
    return {n: g for g in sched.groups() for n in g.names}


@pytest.mark.parametrize("extra_reader", ["b", "c"])
def test_conflicting_fusions_the_one_saving_more_bytes_wins(extra_reader):
    """a (an output, one value per row) can join b's kernel or c's, not both (their domains differ).

    Either fusion saves the load of a; the consumer that also reads a's input u saves that
    read too, so it must win whatever the graph order.
    """
    def fn(u, v, w):
        a = u * 2
        ub = u[:, None] if extra_reader == "b" else 1.0
        uc = u[:, None] if extra_reader == "c" else 1.0
        return a, (w * a[:, None] * ub).sum(1), (v * a[:, None] * uc).sum(1)

    u, v, w = torch.randn(33), torch.randn(33, 41), torch.randn(33, 9)
    lowered, sched = _schedule(fn, u, v, w)
    owner = _owner(sched)
    a_name, b_name, c_name = (o.name for o in lowered.outputs)
    winner, loser = (b_name, c_name) if extra_reader == "b" else (c_name, b_name)
    assert owner[a_name] is owner[winner] and owner[a_name] is not owner[loser]
    refusals = [r for r in sched.refused if loser in r.a or loser in r.b]
    assert any("different reduction ranges" in r.reason for r in refusals), sched.refused
    check(fn, u, v, w)


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_a_refused_pair_says_why_in_the_schedule_the_log_and_the_dump():
    fn = lambda x: (x.sum(0), x.sum(1))  # noqa: E731
    x = torch.randn(16, 341)
    logger, handler = logging.getLogger("tritondiff.compiler.scheduler"), _Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with compiler.config.patch(mixed_order_reductions=False):
            _, sched = _schedule(fn, x)
            check(fn, x, rtol=1e-4, atol=1e-4)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert len(sched.groups()) == 2
    [refusal] = sched.refused
    assert isinstance(refusal, Refusal)
    assert "reduction of 341 rows over 16" in str(refusal) and "reduction of 16 rows over 341" in str(refusal)
    assert str(refusal).startswith("cannot fuse buf") and "different reduction ranges" in str(refusal)
    assert str(refusal) in handler.messages
    assert f"# {refusal}" in compiler.dump.last_artifacts().texts["scheduled"]


def test_refusals_name_the_group_kinds_for_pointwise_pairs():
    fn = lambda x, y: (x * 2, (x[:8] + y).exp())  # noqa: E731
    _, sched = _schedule(fn, torch.randn(9, 41), torch.randn(8, 41))
    reasons = [str(r) for r in sched.refused]
    assert any("different sizes (369 vs 328 elements)" in r and "pointwise, 369 elements" in r for r in reasons), \
        reasons


# --------------------------------------------------------------------------- mixed order

def _ln_fwd_bwd(fn, x, w, b, dy):
    out = fn(x, w, b)
    return (out,) + torch.autograd.grad(out, (x, w, b), dy)


def _ln_inputs(m, n, dtype=torch.float32, seed=0):
    x, w, b, dy = (seeded_randn(*s, seed=seed + i).to(dtype) for i, s in enumerate(((m, n), (n,), (n,), (m, n))))
    return [t.requires_grad_() for t in (x, w, b)] + [dy]


def test_layer_norm_backward_is_one_mixed_order_kernel():
    x, w, b, _ = _ln_inputs(341, 16)
    _, sched = _schedule(workloads.layer_norm, x, w, b, backward=True)
    [group] = sched.groups()
    assert group.columns is not None and (group.xnumel, group.rnumel) == (341, 16)
    assert (group.columns.xnumel, group.columns.rnumel) == (16, 341)
    assert [p.kind for p in group.columns.placed] == ["reduction", "reduction"]  # dW and dB
    # mean's, the squares' and the deviations' sums (recomputed, compiler.partition), two row sums, dx
    assert [p.kind for p in group.rows().placed] == ["reduction"] * 5 + ["xr"]
    assert compiler.counters["mixed_order_reductions"] == 1
    text = describe(sched)
    assert "mixed-order reduction" in text and text.count("[column reduction pass 0, stored]") == 2


@pytest.mark.parametrize("n", [64, 37])
def test_a_square_layer_norm_backward_pairs_its_row_and_column_sums_as_mixed_order(n):
    """At n x n, dx's row sums and dW / dB's column sums have alike extents: they were fused as siblings, the
    column sums one column a program a row apart in memory (4x eager's time at 4096 x 4096 on the H200).  Told
    apart by how they read x and dy, they are a mixed-order pair, as at any other shape."""
    x, w, b, _ = _ln_inputs(n, n)
    _, sched = _schedule(workloads.layer_norm, x, w, b, backward=True)
    [group] = sched.groups()
    assert group.columns is not None and (group.xnumel, group.rnumel) == (n, n)
    assert [p.kind for p in group.columns.placed] == ["reduction", "reduction"]          # dW and dB
    assert any("square domain" in str(r) and "transposed" in str(r) for r in sched.refused), sched.refused
    x, w, b, dy = _ln_inputs(n, n, seed=3)
    eager = _ln_fwd_bwd(workloads.layer_norm, x, w, b, dy)
    truth = _ln_fwd_bwd(workloads.layer_norm, *(t.detach().double().requires_grad_() for t in (x, w, b)), dy.double())
    assert_oracle(_ln_fwd_bwd(compiler.compile(workloads.layer_norm), x, w, b, dy), eager, truth)


def test_two_row_sums_of_a_square_matrix_still_fuse_as_siblings():
    """Alike extents read alike (two sums along the rows of one square matrix) stay one ordinary kernel."""
    def fn(x):
        return x.sum(1), (x * x).amax(1)
    _, sched = _schedule(fn, torch.randn(48, 48))
    [group] = sched.groups()
    assert group.columns is None and len([p for p in group.placed if p.kind == "reduction"]) == 2


@pytest.mark.parametrize("m, n, dtype", [(341, 16, torch.float32), (9, 41, torch.float32), (4231, 9, torch.float32),
                                         (1, 16, torch.float32), (341, 64, torch.float16),
                                         (41, 33, torch.bfloat16)])
def test_mixed_order_layer_norm_matches_eager(m, n, dtype):
    x, w, b, dy = _ln_inputs(m, n, dtype)
    eager = _ln_fwd_bwd(workloads.layer_norm, x, w, b, dy)
    truth = _ln_fwd_bwd(workloads.layer_norm, *(t.detach().double().requires_grad_() for t in (x, w, b)), dy.double())
    got = _ln_fwd_bwd(compiler.compile(workloads.layer_norm), x, w, b, dy)
    assert_oracle(got, eager, truth)
    if m == 1:  # one row: dW and dB are no reductions at all
        return
    # mean, squares and deviations (recomputed), two row sums (dx), dW, dB
    assert compiler.counters["reduction_strategy.mixed_order"] == 7
    src = compiler.dump.last_artifacts().texts["triton"]
    partial = next(k for k in kernel_sources(src) if "_partial(" in k)
    assert "for xstep in range(" in partial and "tl.sum(" in partial and ", 0)[None, :]" in partial
    row_loads = re.findall(r"tl\.load\((p_arg\d+) \+ idx", partial)
    assert sorted(row_loads) == sorted(set(row_loads)) and len(row_loads) == 2   # x and dy: each loaded once
    # a row padded to a power of two holds its column accumulators' padded lanes at the identity (dead code
    # on a GPU); an exact row needs no mask
    held = re.findall(r"(acc\d+) = tl\.where\(rmask, \1, ", partial)
    assert len(held) == (2 if n & (n - 1) else 0)


def test_a_mixed_group_handed_to_another_strategy_still_gets_the_mixed_kernels():
    """Autotune variants ask the persistent / looped strategies for other blocks of any group."""
    from tritondiff.compiler.codegen.nodes import GroupContext
    from tritondiff.compiler.codegen.reduction import STRATEGIES, kernels
    from tritondiff.compiler.exc import CodegenError
    from tritondiff.compiler.heuristics import ReductionChoice

    x, w, b, _ = _ln_inputs(341, 16)
    lowered, sched = _schedule(workloads.layer_norm, x, w, b, backward=True)
    [group] = sched.groups()
    ctx = GroupContext(group, sched.inlined, sched.stored, lowered.buffers)
    for strategy in ("persistent", "looped"):
        specs = kernels(strategy, "t_k0", ctx, ReductionChoice(strategy, 64, 16))
        assert [s.name for s in specs] == ["t_k0_partial", "t_k0_final"]
        assert specs[0].meta["strategy"] == "mixed_order" and specs[0].meta["xblock"] == 64
        with pytest.raises(CodegenError, match="only the mixed-order strategy emits"):     # not through the registry
            STRATEGIES[strategy].kernels("t_k0", ctx, ReductionChoice(strategy, 64, 16))


def test_mixed_order_past_2_pow_20_elements_is_deterministic():
    x, w, b, dy = _ln_inputs(70_001, 16, seed=3)  # 1,120,016 elements, several programs with a ragged end
    truth = _ln_fwd_bwd(workloads.layer_norm, *(t.detach().double().requires_grad_() for t in (x, w, b)), dy.double())
    compiled = compiler.compile(workloads.layer_norm)
    first = _ln_fwd_bwd(compiled, x, w, b, dy)
    second = _ln_fwd_bwd(compiled, x, w, b, dy)
    for a, a2, t in zip(first, second, truth):
        assert torch.equal(a, a2)  # fixed partial order: bit-identical reruns
        torch.testing.assert_close(a.double(), t, rtol=1e-4, atol=2e-3)
    assert compiler.counters["mixed_order_reductions"] == 1
    plan = compiler.dump.last_artifacts().texts["plan"]
    assert "'strategy': 'mixed_order'" in plan and "'programs': " in plan


def test_mixed_order_max_min_and_nan_propagation():
    x = torch.randn(341, 9)
    x[5, 3] = float("nan")
    fn = lambda x: (x.amax(1), (x * x).sum(1), x.amin(0), x.sum(0), (x > 1).any(0))  # noqa: E731
    check(fn, x, rtol=1e-5, atol=1e-5)
    assert compiler.counters["mixed_order_reductions"] == 1


def test_mixed_order_refusals_keep_the_groups_apart_with_a_reason():
    x = torch.randn(341, 9)
    fn = lambda x: (x.argmax(1), x.argmax(0))  # noqa: E731  (argmax partials do not combine)
    _, sched = _schedule(fn, x)
    assert len(sched.groups()) == 2 and all(g.columns is None for g in sched.groups())
    [why] = [r.reason for r in sched.refused if "not a mixed-order pair" in r.reason]
    assert why.count("(argmax) needs a finished reduction or has no combinable partials") == 2  # both ways round
    check(fn, x)
    # With a sum on one side the argmax takes the row role (its 341-long "rows" are x's columns).  One SM: the
    # 9 rows stay one block (with more, blocks of fewer rows keep partials that outweigh the shared read).
    with compiler.config.patch(sm_count=1):
        _, sched = _schedule(lambda x: (x.sum(1), x.argmax(0)), x)
    [group] = sched.groups()
    assert group.columns is not None and (group.xnumel, group.rnumel) == (9, 341)
    check(lambda x: (x.sum(1), x.argmax(0)), x, rtol=1e-4, atol=1e-4)
    _, sched = _schedule(lambda x: x - x.sum(0) * x.sum(1, keepdim=True), x)
    assert all(g.columns is None for g in sched.groups())
    with compiler.config.patch(mixed_order_max_rnumel=8):
        _, sched = _schedule(lambda x: (x.sum(1), x.sum(0)), x)
    assert any("do not fit one block" in r.reason for r in sched.refused)


def test_mixed_order_is_not_taken_when_the_workspace_costs_more_than_the_shared_read():
    x = torch.randn(64, 9)
    with compiler.config.patch(sm_count=512, xblock=1):  # 64 programs x 9 columns of partials
        _, sched = _schedule(lambda x: (x.sum(1), x.sum(0), x.amax(0)), x)
    assert all(g.columns is None for g in sched.groups())
    assert any("not worth it" in r.reason for r in sched.refused)


# ------------------------------------------------------------------------ small matmuls

def _post_res_bmm(x_streams, layer_output, h_res, h_post):
    """mHC post-res with the 4x4 stream mix written as a bmm (K = 4)."""
    mixed = torch.bmm(h_res, x_streams.float())
    return (mixed + h_post.unsqueeze(-1) * layer_output.float().unsqueeze(1)).to(x_streams.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_small_k_bmm_is_inlined_and_fuses_with_its_neighbours(dtype):
    t, c = 9, 41
    xs, lo = torch.randn(t, 4, c).to(dtype), torch.randn(t, c).to(dtype)
    h, hp = torch.randn(t, 4, 4), torch.randn(t, 4)
    check(_post_res_bmm, xs, lo, h, hp, rtol=2e-2 if dtype == torch.bfloat16 else 1e-5, atol=1e-2 if
          dtype == torch.bfloat16 else 1e-5)
    assert compiler.counters["small_matmul_inlined"] == 1
    assert not compiler.counters.with_prefix("extern.") and not compiler.counters.with_prefix("gemm_template")
    assert compiler.counters["kernels_generated"] == 1  # the mix, the h_post term and the cast: one kernel


@pytest.mark.parametrize("k", [1, 7, 16])
def test_small_k_mm_and_addmm_match_eager(k):
    a, b, bias = torch.randn(33, k), torch.randn(k, 5), torch.randn(5)
    check(lambda a, b: (a @ b).relu(), a, b)
    check(lambda bias, a, b: torch.addmm(bias, a, b, beta=0.5, alpha=2.0), bias, a, b)
    check(lambda bias, a, b: torch.addmm(bias, a, b, beta=0), bias.fill_(float("nan")), a, b)  # beta=0 drops NaN
    assert compiler.counters["small_matmul_inlined"] == 3


def test_matmul_past_the_small_k_threshold_is_not_inlined():
    a, b = torch.randn(9, 17), torch.randn(17, 5)
    check(lambda a, b: a @ b, a, b, rtol=1e-4, atol=1e-4)
    assert compiler.counters["small_matmul_inlined"] == 0
    with compiler.config.patch(matmul_small_k_max=32):
        check(lambda a, b: a @ b, a, b, rtol=1e-4, atol=1e-4)
    assert compiler.counters["small_matmul_inlined"] == 1


# ---- mixed order: column reductions reading the row pass's per-row values

def _mixed_refusals(sched) -> list[str]:
    return [why for _, _, why in sched.refused if "mixed-order pair" in why]


def test_column_sums_may_read_a_row_sum_at_their_own_row_from_registers():
    """(x * x.sum(1)).sum(0): the column step of each row block takes the row sum from the row pass."""
    def fn(x):
        s = x.sum(1, keepdim=True)
        return s, (x * s).sum(0)
    _, sched = _schedule(fn, torch.randn(341, 16))
    [group] = sched.groups()
    assert group.columns is not None
    check(fn, seeded_randn(341, 16, seed=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["another row", "full-domain"])
def test_column_sums_reading_another_row_or_a_full_domain_value_stay_separate(name):
    """A row sum read at the mirrored row, or a full-domain value of the row group (a stored tile), is not
    in the column step's registers: two kernels, with the reason, and the right result."""
    def mirrored(x):
        s = x.sum(1, keepdim=True)
        return s, (x * s.flip(0)).sum(0)

    def full_domain(x):
        y = x * x.sum(1, keepdim=True)                   # five users: stored, not inlined
        return y.amax(1), (y * 2).sum(0), y.amin(1), y.exp(), y.sin()
    fn = mirrored if name == "another row" else full_domain
    _, sched = _schedule(fn, torch.randn(341, 16))
    assert all(g.columns is None for g in sched.groups())
    assert any(name in why for why in _mixed_refusals(sched)), _mixed_refusals(sched)
    check(fn, seeded_randn(341, 16, seed=2), rtol=1e-4, atol=1e-4)
