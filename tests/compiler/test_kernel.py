"""codegen.kernel: the load hoisting of a kernel's straight-line blocks, loop-invariant loads lifted out of their
loops, loop headers, a row's first element taken from its registers, and the bf16 cast forms."""
import textwrap

import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler.codegen.kernel import (
    CSEVar, TritonKernel, cast_source, helper_bf16_casts, hoist_loads, lift_invariant_loads, prefetch_next_rows
)
from tritondiff.base import device
from tests.compiler.util import check, run_compiled, seeded_randn


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


def _lifted(src: str) -> list[str]:
    """``src`` (indent: 4 spaces a level) as ``lift_invariant_loads`` writes it, indents kept."""
    src = textwrap.dedent(src)
    lines = [((len(line) - len(line.lstrip(" "))) // 4, line.strip()) for line in src.splitlines() if line.strip()]
    return ["    " * indent + text for _, (indent, text) in lift_invariant_loads(lines)]


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
    return ["    " * indent + text for indent, text in prefetch_next_rows(lines)]


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
    assert body[:2] == ["    tmp4 = tmp4_nx", "    tmp5 = tmp5_nx"] and "    tmp5_nx = tl.load(p_arg1 + tmp4_nx)" in body
    assert "    tmp3 = tl.load(p_buf4 + idx2, rmask, other=0)" in body and not any("tmp3_nx" in line for line in got)


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


# ---- a row's first element from its registers (TritonKernel.row_element)

def _row_special_values(dtype: torch.dtype, rows: int = 24, cols: int = 16) -> torch.Tensor:
    """Rows whose first element is each awkward value a bit-exact pick must keep: NaN, +-inf, -0.0, +0.0, a
    subnormal, the largest finite, and ordinary values; the other lanes random."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float64, device="cpu")
    info = torch.finfo(dtype)
    firsts = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, info.tiny / 4, -info.max, info.max, 1e4, -3.5]
    x[:len(firsts), 0] = torch.tensor(firsts, dtype=torch.float64, device="cpu")
    x[len(firsts), :] = -0.0                                     # a row of signed zeros: its mean keeps the sign
    return x.to(dtype).to(device.torch_device())


def _compiled_bits(fn, *args, **knobs):
    from tritondiff import compiler
    from tritondiff.compiler.config import config
    with config.patch(**knobs):
        out = run_compiled(fn, *args)
    return [t.view(torch.int16 if t.element_size() == 2 else torch.int32 if t.element_size() == 4 else torch.int64)
            if t.dtype.is_floating_point else t for t in (out if isinstance(out, tuple) else (out,))], \
        compiler.dump.last_artifacts().texts["triton"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_the_variance_shift_comes_from_the_row_bit_for_bit(dtype):
    """var_mean's shift (each row's first element) taken from the loaded row gives the same bits as loading
    it again, for NaN, infinities, signed zeros and subnormals in the first lane; and the source shows which."""
    x = _row_special_values(dtype)

    def fn(x):
        var, mean = torch.var_mean(x, 1, correction=0)
        return var, mean, torch.nn.functional.layer_norm(x, (x.shape[1],))
    got, src = _compiled_bits(fn, x, row_elements_from_registers=True)
    want, src_off = _compiled_bits(fn, x, row_elements_from_registers=False)
    assert "rindex == 0" in src and "rindex == 0" not in src_off
    assert src.count("tl.load(") < src_off.count("tl.load("), "the row's first element is still loaded again"
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    tol = 2e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4
    check(fn, (seeded_randn(24, 16, seed=3).double() + 100).to(dtype), rtol=tol, atol=tol)   # and eager agrees


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_an_integer_row_s_first_element_comes_from_its_registers(dtype):
    """x - x[:, :1] summed over the row: the first element picked from the row is exact for every integer
    type, the extremes included."""
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, (20, 12), generator=torch.Generator().manual_seed(1), dtype=torch.int64,
                      device="cpu")
    x[:4, 0] = torch.tensor([info.min, info.max, -1 if info.min < 0 else 255, 0], device="cpu")
    x = x.to(dtype).to(device.torch_device())

    def fn(x):
        return (x - x[:, :1]).amax(1)
    got = check(fn, x)
    assert "rindex == 0" in compiler.dump.last_artifacts().texts["triton"]
    assert got.dtype == dtype


def test_no_row_element_from_a_looped_row_or_a_padded_one():
    """Only a whole row in one block gives lane 0: a looped reduction loads the shift, and a row under a
    mask (a padded row, whose lane 0 is the pad) is never a source."""
    x = torch.randn(8, 40)
    from tritondiff.compiler.config import config
    with config.patch(reduction_strategy="looped", rblock=16):
        check(lambda x: torch.var_mean(x, 1), x)
    assert "rindex == 0" not in compiler.dump.last_artifacts().texts["triton"]
    check(lambda x: torch.var_mean(torch.nn.functional.pad(x, (1, 0), value=7.0), 1), x)


# ------------------------------------------------------------------------------------ bf16 casts

@pytest.mark.parametrize("src, dst, helpers, native", [
    (torch.bfloat16, torch.float32, "_td_bf16_to_f32(v)", "v.to(tl.float32)"),
    (torch.float32, torch.bfloat16, "_td_to_bf16(v)", "v.to(tl.bfloat16)"),
    (torch.float16, torch.bfloat16, "_td_to_bf16(v.to(tl.float32))", "v.to(tl.float32).to(tl.bfloat16)"),
    (torch.bfloat16, torch.float16, "_td_bf16_to_f32(v).to(tl.float16)", "v.to(tl.float32).to(tl.float16)"),
    (torch.bfloat16, torch.bool, "(_td_bf16_to_f32(v) != 0)", "(v.to(tl.float32) != 0)"),
    (torch.int32, torch.bfloat16, "_td_to_bf16(v.to(tl.float32))", "v.to(tl.float32).to(tl.bfloat16)"),
])
def test_bf16_casts_are_tritons_own_on_a_gpu_and_the_prelude_helpers_in_the_interpreter(src, dst, helpers, native):
    """config.native_bf16_casts (on for a GPU): one cvt instead of the interpreter-exact integer helpers."""
    v = CSEVar("v", src)
    for on, want in ((False, helpers), (True, native)):
        with compiler.config.patch(native_bf16_casts=on):
            assert cast_source(v, dst) == want


def test_helper_bf16_casts_overrides_native_casts_within_and_only_within():
    v = CSEVar("v", torch.bfloat16)
    with compiler.config.patch(native_bf16_casts=True):
        with helper_bf16_casts():
            assert cast_source(v, torch.float32) == "_td_bf16_to_f32(v)"
            assert cast_source(CSEVar("w", torch.float32), torch.bfloat16) == "_td_to_bf16(w)"
        assert cast_source(v, torch.float32) == "v.to(tl.float32)"


def test_a_bf16_rms_norm_with_native_casts_rounds_as_the_helpers_do_within_the_interpreters_truncation():
    """Native casts in the interpreter truncate fp32 -> bf16 (a GPU rounds to nearest even, as the helpers do):
    two casts to bf16 (the product's and the output's), so the kernels agree to two bf16 ulps; the native one's
    source has no helper call left."""
    x = seeded_randn(5, 300, seed=41).bfloat16()
    w = seeded_randn(300, seed=42).bfloat16()

    def fn(t, w):
        tf = t.float()
        return (tf * torch.rsqrt((tf * tf).mean(-1, keepdim=True) + 1e-6)).to(t.dtype) * w
    outs = {}
    for on in (False, True):
        with compiler.config.patch(native_bf16_casts=on):
            outs[on] = compiler.compile_fresh(fn)(x, w)
        text = compiler.dump.last_artifacts().texts["triton"].split("@triton.jit\ndef g")[-1]
        assert ("_td_" in text) == (not on), text
    assert outs[False].dtype == outs[True].dtype == torch.bfloat16
    torch.testing.assert_close(outs[True].float(), outs[False].float(), rtol=2 ** -6, atol=0)
    torch.testing.assert_close(outs[False], fn(x, w), rtol=2 ** -8, atol=1e-6)
