"""Bugs the graph fuzzer and the OpInfo sweep found, each with its runnable repro.

Fuzzer programs are kept as ``Program`` values (``repr(program)`` prints them as code); sweep
findings as the smallest torch call that showed them.
"""
import torch

from tritondiff import compiler
from tritondiff.harness.graph_fuzz import Program, Step, check_program
from tritondiff.base import device as harness_device
from tests.compiler.util import check


def test_fuzz_exp_of_a_one_element_tensor():
    """A one-element load simplified to a 0-d scalar; the NaN-aware max of a 0-d value failed
    in the interpreter (numpy bool scalars).  Loads without an axis are now [1] blocks."""
    program = Program(((1,),), (Step("exp", (0,)),), (1,))
    assert check_program(program, seed=0).passed


def test_fuzz_softmax_over_a_size_one_dim():
    """Rank-1 constants inside a 2-D reduction tile: tl.broadcast_to refused [1] -> [1, 1].
    One-element blocks now have the kernel's rank."""
    program = Program(((1, 1),), (Step("softmax", (0,), (("dim", 0),)),), (1,))
    for strategy in (None, "looped", "split"):
        assert check_program(program, seed=0, strategy=strategy).passed


def test_fuzz_row_norm_after_a_keepdim_amax():
    program = Program(((41, 1),), (Step("amax", (0,), (("dim", 0), ("keepdim", True))), Step("log", (1,)),
                                   Step("flatten", (2,)), Step("shift", (2,), (("c", 3.0),)),
                                   Step("norm_rows", (4,), (("dim", 1),))), (3, 5))
    assert check_program(program, seed=62).passed


def test_sweep_reduction_of_a_zero_dim_tensor():
    """sum / amax / argmax / mean of a 0-d tensor: the block reduce got a value of rank 0."""
    x = torch.tensor(2.5)
    check(lambda x: (x.sum(), x.amax(), x.argmax(), x.mean(), x.sum(0)), x)


def test_sweep_masked_load_of_a_broadcast_value():
    """cat / block_diag: a masked load whose index lacks an axis the mask has; Triton broadcasts
    the mask to the pointer, so the pointer now covers the tile."""
    a, b = torch.randn(2, 3), torch.randn(4)
    check(torch.block_diag, a, b)
    check(lambda a, b: torch.cat([a.sum(1, keepdim=True).expand(2, 4), b[None].expand(2, 4)]), a, b)


def test_sweep_logical_ops_on_floats():
    """logical_and(float, float) reached Triton as `a & b` on floats; operands are bools now."""
    a, b = torch.randn(41), torch.randn(41)
    a[::3] = 0.0
    check(lambda a, b: (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_xor(a, 2 * b)), a, b)


def test_sweep_batch_norm_inference_is_functional():
    """native_batch_norm decomposed to the mutating _native_batch_norm_legit, which AOTAutograd
    refuses; the table now carries that op's functional decomposition too."""
    x, rm, rv = torch.randn(3, 2, 4), torch.randn(2), torch.rand(2) + 0.5
    w, b = torch.randn(2), torch.randn(2)
    check(lambda *t: torch.native_batch_norm(*t, False, 0.1, 1e-5), x, w, b, rm, rv, rtol=1e-5, atol=1e-5)


def test_sweep_complex_values_stay_in_aten():
    """A complex clone/view reached code generation (no Triton dtype); views of unsupported dtypes
    now fall back."""
    x = torch.randn(8, dtype=torch.complex64)
    check(lambda x: (x.clone() * 2)[1:5], x)
    assert compiler.counters["kernels_generated"] == 0


def test_mixed_order_column_sums_of_many_equal_rows_stay_accurate():
    """The gate found x.sum(0) of 3,626 equal (expanded) rows 4e-5 off: the mixed-order kernel's
    column sums ran along a 4,096-row block axis, summed sequentially by the interpreter."""
    from tritondiff.harness.subjects.compiler import row_and_column_reductions, run_compiled
    v = torch.randn(17, generator=torch.Generator().manual_seed(0), device="cpu").to(harness_device.torch_device())
    x = v.expand(3626, 17)
    got = run_compiled(row_and_column_reductions, x)[2].double().cpu()
    truth = x.double().sum(0).cpu()
    assert compiler.counters["reduction_strategy.mixed_order"] == 5  # every reduction, rows and columns
    assert float(((got - truth).abs() / truth.abs()).max()) < 1e-5
