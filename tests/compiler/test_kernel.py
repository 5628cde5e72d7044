"""codegen.kernel: the load hoisting of a kernel's straight-line blocks, and loop headers."""
import pytest

from compiler.codegen.kernel import TritonKernel, hoist_loads


def _hoisted(src: str, *, in_loop: bool = True) -> list[str]:
    """``src``'s lines (indent: 4 spaces a level) in the order ``hoist_loads`` writes them; ``in_loop``: as
    the body of a loop (the header is left out of the result)."""
    lines = [((len(line) - len(line.lstrip(" "))) // 4, line.strip()) for line in src.splitlines() if line.strip()]
    if in_loop:
        top = min(indent for indent, _ in lines)
        lines = [(top - 1, "for xstep in range(0, 8, 1):")] + lines
    got = [lines[i][1] for i in hoist_loads(lines)]
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
    assert got == ["xindex = pid + xstep", "idx2 = rindex + 10240 * xindex", "tmp3 = tl.load(p_dy + idx2, rmask, other=0)",
                   "tmp11 = tl.load(p_x + idx2, rmask, other=0)", "tmp4 = tmp3.to(tl.float32)",
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
    order = hoist_loads(lines)
    assert order[:2] == [0, 40_000] and sorted(order) == list(range(len(lines)))


def test_a_load_does_not_pass_a_use_of_a_name_it_defines():
    got = _hoisted("""
        tmp1 = tmp0 + 1
        tmp0 = tl.load(p_a + xindex)
    """)
    assert got == ["tmp1 = tmp0 + 1", "tmp0 = tl.load(p_a + xindex)"]


@pytest.mark.parametrize("stages, want", [(None, "for xstep in range(0, 32, 2):"), (1, "for xstep in range(0, 32, 2):"),
                                          (3, "for xstep in tl.range(0, 32, 2, num_stages=3):")])
def test_for_range_asks_triton_to_pipeline_only_past_one_stage(stages, want):
    assert TritonKernel.for_range("xstep", 0, 32, 2, stages) == want
