"""codegen.statements: a kernel's lines typed once when emitted, and the passes over them -- loads hoisted up their
straight-line blocks, loop-invariant loads lifted out of their loops, a mixed-order row loop's next rows loaded a
step ahead -- in the order ``PASSES`` lists."""
import dataclasses
import textwrap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tritondiff import compiler
from tritondiff.compiler.codegen import statements as statements_module
from tritondiff.compiler.codegen.statements import (
    KINDS, PASSES, Statement, Switches, finish, hoist_loads, lift_invariant_loads, parse_lines, prefetch_next_rows,
    render
)
from tests.compiler.util import seeded_randn

def _hoisted(src: str, *, in_loop: bool = True) -> list[str]:
    """``src``'s lines (indent: 4 spaces a level) in the order ``hoist_loads`` writes them; ``in_loop``: as
    the body of a loop (the header is left out of the result)."""
    lines = [((len(line) - len(line.lstrip(" "))) // 4, line.strip()) for line in src.splitlines() if line.strip()]
    if in_loop:
        top = min(indent for indent, _ in lines)
        lines = [(top - 1, "for xstep in range(0, 8, 1):")] + lines
    got = [s.text for s in hoist_loads(parse_lines(lines))]
    return got[1:] if in_loop else got


def test_a_load_rises_above_a_reduction_to_just_below_what_it_needs():
    """Layer norm backward's row: dy loaded, reduced (a barrier in the kernel), then x: x goes up."""
    got = _hoisted("""
        xindex = pid + xstep
        idx2 = rindex + 10240 * xindex
        tmp3 = tl.load(p_dy + idx2, rmask, other=0)
        tmp4 = tmp3.to(tl.float32)
        tmp10 = tl.sum(tmp4, 1)[:, None]
        tmp11 = tl.load(p_x + idx2, rmask, other=0)
        tmp12 = tmp11 * tmp10
    """)
    assert got == ["xindex = pid + xstep", "idx2 = rindex + 10240 * xindex",
                   "tmp3 = tl.load(p_dy + idx2, rmask, other=0)", "tmp11 = tl.load(p_x + idx2, rmask, other=0)",
                   "tmp4 = tmp3.to(tl.float32)",
                   "tmp10 = tl.sum(tmp4, 1)[:, None]", "tmp12 = tmp11 * tmp10"]


def test_an_index_rises_with_its_load_and_loads_keep_their_order():
    got = _hoisted("""
        tmp1 = tl.load(p_a + xindex)
        tmp2 = tmp1 * 2
        tmp3 = tl.sum(tmp2, 1)
        idx4 = xindex * 7
        tmp5 = tl.load(p_b + idx4)
        tmp6 = tl.load(p_c + xindex)
    """)
    assert got == ["tmp1 = tl.load(p_a + xindex)", "idx4 = xindex * 7", "tmp5 = tl.load(p_b + idx4)",
                   "tmp6 = tl.load(p_c + xindex)", "tmp2 = tmp1 * 2", "tmp3 = tl.sum(tmp2, 1)"]


def test_no_load_passes_a_store_a_loop_header_or_a_redefinition():
    src = """
        tmp1 = tl.load(p_a + xindex)
        tl.store(p_a + xindex, tmp1 + 1)
        tmp2 = tl.load(p_a + xindex)
        for roffset in range(0, 64, 16):
            rindex = roffset + rbase
            tmp3 = rindex * 2
            tmp4 = tl.load(p_b + rindex)
        rindex = rbase
        tmp5 = tl.load(p_b + rindex)
    """
    got = _hoisted(src)
    assert got[:4] == ["tmp1 = tl.load(p_a + xindex)", "tl.store(p_a + xindex, tmp1 + 1)",
                       "tmp2 = tl.load(p_a + xindex)", "for roffset in range(0, 64, 16):"]
    # inside the loop: the load needs rindex (defined first in the loop), passes tmp3
    assert got[4:7] == ["rindex = roffset + rbase", "tmp4 = tl.load(p_b + rindex)", "tmp3 = rindex * 2"]
    assert got[7:] == ["rindex = rbase", "tmp5 = tl.load(p_b + rindex)"]     # not above rindex's new value
    assert sorted(got) == sorted(line.strip() for line in src.splitlines() if line.strip())


def test_nothing_moves_at_a_kernel_s_top_level():
    """A persistent reduction's later-pass loads (a weight row) would stay live across every reduction."""
    src = """
        tmp1 = tl.load(p_x + idx0, rmask, other=0)
        tmp2 = tl.sum(tmp1, 1)[:, None]
        tmp3 = tl.load(p_w + rindex, rmask, other=0)
        tmp4 = tmp3 * tmp2
    """
    assert _hoisted(src, in_loop=False) == [line.strip() for line in src.splitlines() if line.strip()]


def test_a_load_rises_through_a_long_block():
    """A 1,500-op pointwise chain is a block of thousands of lines (the order is built once per block)."""
    lines = [(1, "for xstep in range(0, 8, 1):")] + [(2, f"tmp{i} = tmp{i - 1} * 2") for i in range(1, 40_000)]
    lines.append((2, "tmp40000 = tl.load(p_a + xindex)"))
    order = [s.origin for s in hoist_loads(parse_lines(lines))]
    assert order[:2] == [0, 40_000] and sorted(order) == list(range(len(lines)))


def _lifted(src: str) -> list[str]:
    """``src`` (indent: 4 spaces a level) as ``lift_invariant_loads`` writes it, indents kept."""
    src = textwrap.dedent(src)
    lines = [((len(line) - len(line.lstrip(" "))) // 4, line.strip()) for line in src.splitlines() if line.strip()]
    return render(lift_invariant_loads(parse_lines(lines)))


def test_a_row_vector_load_leaves_the_row_loop_and_a_row_load_stays():
    """A mixed-order kernel's weight (rindex alone) is read once, not once per row; x and dy move with the row."""
    got = _lifted("""
        rindex = tl.arange(0, 16)[None, :]
        for xstep in range(0, 32, 1):
            xindex = pid * 32 + xstep
            idx2 = rindex + 16 * xindex
            tmp3 = tl.load(p_arg4 + idx2, rmask, other=0)
            tmp5 = tl.load(p_arg1 + rindex, rmask, other=0)
            tmp7 = tmp3 * tmp5
            tl.store(p_buf18 + idx2, tmp7, rmask)
    """)
    assert got == [
        "rindex = tl.arange(0, 16)[None, :]",
        "tmp5 = tl.load(p_arg1 + rindex, rmask, other=0)",
        "for xstep in range(0, 32, 1):",
        "    xindex = pid * 32 + xstep",
        "    idx2 = rindex + 16 * xindex",
        "    tmp3 = tl.load(p_arg4 + idx2, rmask, other=0)",
        "    tmp7 = tmp3 * tmp5",
        "    tl.store(p_buf18 + idx2, tmp7, rmask)",
    ]


def test_an_invariant_index_leaves_with_its_load_and_nested_loops_are_left_one_by_one():
    got = _lifted("""
        for xstep in range(0, 4, 1):
            for roffset in range(0, 64, 16):
                idx4 = 64 * xbase
                tmp5 = tl.load(p_arg0 + idx4)
                tmp6 = tmp5 + roffset
    """)
    assert got == ["idx4 = 64 * xbase", "tmp5 = tl.load(p_arg0 + idx4)", "for xstep in range(0, 4, 1):",
                   "    for roffset in range(0, 64, 16):", "        tmp6 = tmp5 + roffset"]


@pytest.mark.parametrize("body, why", [
    ("tmp5 = tl.load(p_arg1 + rindex)\n    tl.store(p_arg1 + rindex, tmp5 + 1)", "the loop writes through its pointer"),
    ("tmp5 = tl.load(p_arg1 + rindex)\n    tl.store(p_arg0 + rindex, tmp5 + 1)", "another input may alias it"),
    ("tmp5 = tl.load(p_arg1 + rindex + xstep)", "it reads the loop variable"),
    ("tmp4 = xstep * 2\n    tmp5 = tl.load(p_arg1 + tmp4)", "it reads a name the loop defines"),
    ("tmp5 = tl.load(p_arg1 + rindex)\n    tmp5 = tmp5 * 2", "its name is defined twice in the loop"),
    ("if c:\n        tmp5 = tl.load(p_arg1 + rindex)", "it runs only on some trips"),
    ("tmp6 = tmp5 + 1\n    tl.store(p_buf0 + xstep, tmp6)\n    tmp5 = tl.load(p_arg1 + rindex)",
     "the loop reads the name before the load assigns it (a value carried from the trip before)"),
    ("tmp5 = tl.load(p_arg1 + idx1)\n    idx1 += 8", "an augmented assignment moves its index"),
    ("tmp5 = tl.load(p_arg0 + rindex) + tl.load(p_buf3 + rindex)\n    tl.store(p_buf3 + rindex, tmp5)",
     "its second pointer is written in the loop"),
    ("tmp5 = tl.load(p_arg1 + rindex)\n    tl.store(ptrs, tmp5)", "a store through a pointer variable"),
    ("tl.debug_barrier()\n    tmp5 = tl.load(p_buf7 + rindex)\n    tmp6 = tmp5 + xstep", "a barrier orders the loop"),
    ("tmp5 = tl.load(p_sem + 0, volatile=True)\n    tmp6 = tl.atomic_add(p_other + 0, 1)", "a volatile poll"),
    ("tmp5 = tl.load(p_arg1 + rindex)", "the loop would be left empty"),
])
def test_a_load_that_may_change_or_may_not_run_stays_in_its_loop(body, why):
    src = "for xstep in range(0, 4, 1):\n    " + body + "\n"
    assert _lifted(src) == [line for line in src.splitlines() if line.strip()], why


def test_a_generated_mixed_order_kernel_reads_its_weight_above_the_row_loop_and_stays_right():
    """Layer norm backward as a mixed-order kernel: w is loaded before the row loop (knob on), inside it (off),
    and both kernels give eager's gradients."""
    x = seeded_randn(64, 48, seed=51).requires_grad_()
    w = seeded_randn(48, seed=52).requires_grad_()
    b = seeded_randn(48, seed=53).requires_grad_()
    dy = seeded_randn(64, 48, seed=54)

    def fn(x, w, b):
        return torch.nn.functional.layer_norm(x, (48,), w, b)
    want = torch.autograd.grad(fn(x, w, b), (x, w, b), dy)
    for on in (True, False):
        with compiler.config.patch(lift_invariant_loads=on, reduction_strategy="auto"):
            got = torch.autograd.grad(compiler.compile_fresh(fn)(x, w, b), (x, w, b), dy)
            text = compiler.dump.last_artifacts().texts["triton"]
        partial = text.split("_partial(")[1].split("@triton.jit")[0]
        head, loop = partial.split("for xstep in ")
        assert ("tl.load(p_arg1 + rindex" in head) == on, partial
        # the row's streaming loads are hinted evict_first only while w, read again, is in the loop
        assert ("evict_first" in loop) == (not on) and loop.count("tl.load(") == (2 if on else 3), partial
        for g, r in zip(got, want):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)


def _prefetched(src: str) -> list[str]:
    """``src`` (indent: 4 spaces a level) as ``prefetch_next_rows`` writes it, indents kept."""
    src = textwrap.dedent(src)
    lines = [((len(line) - len(line.lstrip(" "))) // 4, line.strip()) for line in src.splitlines() if line.strip()]
    return render(prefetch_next_rows(parse_lines(lines)))


_ROW_LOOP = """
    w = tl.load(p_arg1 + rindex)
    for xstep in range(0, 8, 2):
        xindex = pid * 8 + xstep + tl.arange(0, 2)[:, None]
        idx2 = rindex + 16 * xindex
        tmp3 = tl.load(p_arg4 + idx2, rmask, other=0)
        tmp4 = tl.load(p_arg0 + idx2, rmask, other=0)
        tmp5 = tl.load(p_arg1 + rindex)
        tmp6 = tl.sum(tmp3 * tmp5, 1)[:, None]
        tmp7 = tmp4 * tmp6
        tl.store(p_buf18 + idx2, tmp7, rmask)
"""


def test_a_row_loop_loads_its_next_rows_while_it_works_on_its_own():
    """The first rows are loaded above the loop; each step takes them and loads the next step's (the last step
    its own again), with its own index lines kept for its stores; a load the same on every step stays."""
    assert _prefetched(_ROW_LOOP) == [
        "w = tl.load(p_arg1 + rindex)",
        "xindex_nx = pid * 8 + 0 + tl.arange(0, 2)[:, None]",
        "idx2_nx = rindex + 16 * xindex_nx",
        "tmp3_nx = tl.load(p_arg4 + idx2_nx, rmask, other=0)",
        "tmp4_nx = tl.load(p_arg0 + idx2_nx, rmask, other=0)",
        "for xstep in range(0, 8, 2):",
        "    tmp3 = tmp3_nx",
        "    tmp4 = tmp4_nx",
        "    xindex_nx = pid * 8 + tl.minimum(xstep + 2, 6) + tl.arange(0, 2)[:, None]",
        "    idx2_nx = rindex + 16 * xindex_nx",
        "    tmp3_nx = tl.load(p_arg4 + idx2_nx, rmask, other=0)",
        "    tmp4_nx = tl.load(p_arg0 + idx2_nx, rmask, other=0)",
        "    xindex = pid * 8 + xstep + tl.arange(0, 2)[:, None]",
        "    idx2 = rindex + 16 * xindex",
        "    tmp5 = tl.load(p_arg1 + rindex)",
        "    tmp6 = tl.sum(tmp3 * tmp5, 1)[:, None]",
        "    tmp7 = tmp4 * tmp6",
        "    tl.store(p_buf18 + idx2, tmp7, rmask)",
    ]


@pytest.mark.parametrize("change, why", [
    (("tl.store(p_buf18 + idx2", "tl.store(p_arg0 + idx2"), "the loop writes an input the next rows may read"),
    (("tl.store(p_buf18 + idx2, tmp7, rmask)", "tl.store(ptrs, tmp7)"), "a store through a pointer variable"),
    (("tmp7 = tmp4 * tmp6", "tl.debug_barrier()\n        tmp7 = tmp4 * tmp6"), "a barrier orders the loop"),
    (("tmp7 = tmp4 * tmp6", "tmp7 = tl.atomic_add(p_buf3 + xindex, tmp6)"), "an atomic"),
    (("tmp7 = tmp4 * tmp6", "if c:\n            tmp7 = tmp4 * tmp6"), "a nested block"),
    (("range(0, 8, 2)", "range(0, 2, 2)"), "one step: no next rows"),
    (("range(0, 8, 2)", "range(0, n, 2)"), "a trip count not known here"),
])
def test_a_row_loop_that_may_not_be_rotated_is_left_as_it_is(change, why):
    src = _ROW_LOOP.replace(*change)
    assert _prefetched(src) == [line for line in textwrap.dedent(src).splitlines() if line.strip()], why


def test_a_row_load_that_the_loop_writes_stays_and_an_indirect_one_comes_ahead_from_the_next_index():
    """x's load stays where the loop stores through its pointer; a load whose index is another load's value
    comes ahead with it, from the next rows' value; dy still comes ahead."""
    got = _prefetched(_ROW_LOOP.replace("tl.store(p_buf18 + idx2", "tl.store(p_buf4 + idx2")
                      .replace("p_arg4 + idx2, rmask", "p_buf4 + idx2, rmask")
                      .replace("tmp5 = tl.load(p_arg1 + rindex)", "tmp5 = tl.load(p_arg1 + tmp4)"))
    body = got[got.index("for xstep in range(0, 8, 2):") + 1:]
    assert body[:2] == ["    tmp4 = tmp4_nx", "    tmp5 = tmp5_nx"]
    assert "    tmp5_nx = tl.load(p_arg1 + tmp4_nx)" in body
    assert "    tmp3 = tl.load(p_buf4 + idx2, rmask, other=0)" in body and not any("tmp3_nx" in line for line in got)


def test_a_load_does_not_pass_a_use_of_a_name_it_defines():
    got = _hoisted("""
        tmp1 = tmp0 + 1
        tmp0 = tl.load(p_a + xindex)
    """)
    assert got == ["tmp1 = tmp0 + 1", "tmp0 = tl.load(p_a + xindex)"]


# ------------------------------------------------------------------------------------------- the statements

@pytest.mark.parametrize("text, kind", [
    ("tmp3 = tl.load(p_arg0 + idx2, rmask, other=0)", "load"),
    ("idx2 = rindex + 256 * xindex", "index"),
    ("tmp4 = tmp3 * tmp3", "compute"),
    ("tmp5 = tl.sum(tmp4, 1)[:, None]", "reduce"),
    ("acc0 += tmp3", "update"),
    ("tl.store(p_buf4 + idx2, tmp3)", "store"),
    ("tl.debug_barrier()", "barrier"),
    ("tmp9 = tl.atomic_add(p_buf1 + idx2, tmp3, sem='relaxed')", "atomic"),
    ("for xstep in range(0, 64, 16):", "loop"),
    ("if tmp9 == 3:", "branch"),
    ("tl.device_assert(tmp3 < 8, 'index out of bounds')", "other"),
])
def test_a_statement_is_typed_once_when_emitted(text, kind):
    s = Statement.parse(2, text, origin=7)
    assert (s.indent, s.origin, s.text, s.kind) == (2, 7, text, kind) and kind in KINDS
    assert s.is_load == (kind == "load") and s.is_index == (kind == "index") and s.is_loop == (kind == "loop")
    assert (s.update == "acc0") == (kind == "update") and s.ordered == (kind in ("barrier", "atomic"))
    assert (s.store_pointer == "p_buf4" and s.writes == {"p_buf4"}) == (kind == "store")
    if kind == "load":
        assert s.targets == ("tmp3",) and s.reads == {"tl", "load", "p_arg0", "idx2", "rmask", "other"}
        assert s.address == "p_arg0 + idx2"
    if kind == "loop":
        assert s.loop_vars == {"xstep"} and s.header and s.expr is None
    assert not {"relaxed", "index", "bounds"} & s.names          # string literals are not names


def test_the_passes_run_in_the_listed_order_each_behind_its_switch():
    assert [name for name, _ in PASSES] == ["lift", "hints", "hoist", "prefetch"]
    assert all(callable(getattr(statements_module, function)) for _, function in PASSES)
    def load(origin, target, address, buffer, reread=False):
        return Statement.load(2, origin, target, address, None, buffer=buffer, loop=0, reread=reread, hinted=True)

    body = [Statement.parse(1, "for xstep in range(0, 8, 1):", 0),
            Statement.parse(2, "idx0 = rbase + 16 * xstep", 1),
            load(2, "tmp0", "p_arg0 + idx0", "x"),
            Statement.parse(2, "tmp1 = tl.sum(tmp0, 1)[:, None]", 3),
            load(4, "tmp2", "p_arg1 + rbase", "w", reread=True),
            load(5, "tmp3", "p_arg2 + idx0", "y"),
            Statement.store(2, 6, "p_buf3", "p_buf3 + idx0", "tmp1 * tmp2 + tmp3", None, buffer="out")]
    assert render(finish(body, Switches(lift=False, hints=False, hoist=False))) == render(body)
    assert render(finish(body, Switches(lift=False, hoist=False)))[4] == \
        "        tmp2 = tl.load(p_arg1 + rbase, eviction_policy='evict_last')"     # read again on every step: kept
    hinted = finish(body, Switches(lift=True, hoist=True))
    assert render(hinted) == [
        "    tmp2 = tl.load(p_arg1 + rbase, eviction_policy='evict_last')",  # lifted: invariant, never written
        "    for xstep in range(0, 8, 1):",
        "        idx0 = rbase + 16 * xstep",
        "        tmp0 = tl.load(p_arg0 + idx0)",     # what was kept left the loop: no streaming read is hinted
        "        tmp3 = tl.load(p_arg2 + idx0)",     # hoisted above the reduction
        "        tmp1 = tl.sum(tmp0, 1)[:, None]",
        "        tl.store(p_buf3 + idx0, tmp1 * tmp2 + tmp3)"]
    assert [s.kind for s in hinted] == ["load", "loop", "index", "load", "load", "reduce", "store"]
    assert all(dataclasses.replace(s, options=()) == body[s.origin].at(s.indent) for s in hinted)   # never retyped


def test_eviction_hints_keep_what_a_later_pass_reads_and_stream_the_rest():
    def load(origin, target, address, buffer, loop, hinted=True):
        return Statement.load(2, origin, target, address, None, buffer=buffer, loop=loop, reread=False,
                              hinted=hinted)

    body = [Statement.parse(1, "for r in range(0, 64, 16):", 0), load(1, "a", "p_arg0 + r", "x", 0),
            load(2, "b", "p_arg1 + r", "y", 0),
            Statement.parse(1, "for r in range(0, 64, 16):", 3), load(4, "c", "p_arg0 + r", "x", 1),
            load(5, "d", "p_arg2 + r", "z", 1, hinted=False)]                  # a last program's read-once load
    out = render(statements_module.eviction_hints(body))
    assert out[1].endswith("eviction_policy='evict_last')")      # x: read again by the second loop
    assert out[2].endswith("eviction_policy='evict_first')")     # y: streamed once
    assert out[4].endswith("eviction_policy='evict_first')")     # x's last read
    assert out[5] == "        d = tl.load(p_arg2 + r)"


_POINTERS = ("p_arg0", "p_arg1", "p_buf2")


@st.composite
def _loop_programs(draw):
    """A loop body of loads, indices, arithmetic, stores and an accumulator update, each name defined once."""
    lines, names, indices = [(1, "for xstep in range(0, 8, 1):")], ["tmpin"], ["rbase"]
    for i in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["load", "index", "compute", "store", "update"]))
        if kind == "load":
            offset = draw(st.sampled_from(indices + names))       # an index, or a value (a gather)
            lines.append((2, f"tmp{i} = tl.load({draw(st.sampled_from(_POINTERS))} + {offset})"))
            names.append(f"tmp{i}")
        elif kind == "index":
            lines.append((2, f"idx{i} = rbase + {draw(st.sampled_from(['xstep', '1']))} * 16"))
            indices.append(f"idx{i}")
        elif kind == "compute":
            lines.append((2, f"tmp{i} = {draw(st.sampled_from(names))} * {draw(st.sampled_from(names))}"))
            names.append(f"tmp{i}")
        elif kind == "store":
            pointer = draw(st.sampled_from(("p_buf2", "p_buf3")))
            lines.append((2, f"tl.store({pointer} + {draw(st.sampled_from(indices))}, {draw(st.sampled_from(names))})"))
        else:
            lines.append((2, f"acc0 += {draw(st.sampled_from(names))}"))
    return parse_lines(lines)


def _conflict(a: Statement, b: Statement) -> bool:
    """Must ``a`` and ``b`` keep their order: one defines what the other reads or defines, or one stores through
    a pointer the other loads from or stores through (two input pointers may alias)."""
    defs_a, defs_b = set(a.targets) | {a.update} - {None}, set(b.targets) | {b.update} - {None}
    if defs_a & (b.names | defs_b) or defs_b & (a.names | defs_a):
        return True
    for s, t in ((a, b), (b, a)):
        if s.writes and (s.writes & t.names or (any(p.startswith("p_arg") for p in t.names)
                                                 and any(p.startswith("p_arg") for p in s.writes))):
            return True
    return False


@given(_loop_programs())
@settings(max_examples=300, deadline=None)
def test_lifting_and_hoisting_move_no_statement_across_one_it_depends_on(program):
    """Whatever the body, the passes write the same statements, every name after its definition, and keep the
    order of each pair that conflicts (``_conflict``); a lifted statement reads nothing the loop defines."""
    out = finish(program, Switches(lift=True, hoist=True))
    assert sorted(s.origin for s in out) == list(range(len(program)))
    header = next(i for i, s in enumerate(out) if s.is_loop)
    loop_defined = {t for s in program[1:] for t in s.targets} | {"xstep", "acc0"}
    for s in out[:header]:
        assert s.indent == 1 and (s.is_load or s.is_index) and not s.reads & loop_defined - {
            t for q in out[:out.index(s)] for t in q.targets}
    position = {s.origin: i for i, s in enumerate(out)}
    body = program[1:]
    for i, a in enumerate(body):
        for b in body[i + 1:]:
            if _conflict(a, b):         # a before b, whether both stay, both leave, or a alone leaves the loop
                assert position[a.origin] < position[b.origin], render(out)


@pytest.mark.parametrize("bounds, stages, rotatable", [((0, 64, 16), None, True), ((0, 64, 16), 3, False),
                                                       ((0, "n", 16), None, False)])
def test_a_loop_header_is_typed_by_its_emitter_as_its_text_would_type_it(bounds, stages, rotatable):
    """``TritonKernel.loop`` types its header (``Statement.for_loop``): a plain ``range`` over integers has the
    ``bounds`` prefetch rotates by; a pipelined loop or one with a symbolic bound has none -- as parsing its text
    says."""
    from tritondiff.compiler.codegen.kernel import TritonKernel
    text = TritonKernel.for_range("xstep", *bounds, stages)
    typed = Statement.for_loop(1, 4, "xstep", *bounds, text)
    parsed = Statement.parse(1, text, 4)
    assert typed.kind == parsed.kind == "loop" and typed.loop_vars == parsed.loop_vars == {"xstep"}
    assert typed.bounds == parsed.bounds == (bounds if rotatable else ())
    assert typed.names == parsed.names and typed.header and typed.is_loop
