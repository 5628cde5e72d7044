"""What the GEMM template reads for an operand: hoisted row / column scales, cast prologues, and the
patterns left alone (compiler/lowerings/matmul_operands.py)."""
import math

import pytest
import torch

from tritondiff import compiler
from tritondiff.base import device
from tritondiff.compiler import workloads
from tritondiff.compiler.analysis import Read
from tritondiff.compiler.ir import InputBuffer, Layout
from tritondiff.compiler.lowerings import matmul_operands as mo
from tritondiff.compiler.pipeline import compile_graph
from tritondiff.compiler.templates import GemmTemplate
from tests.compiler.util import assert_oracle, kernel_sources, reaches_compiler, seeded_randn, trace_meta

NARROW = (torch.float16, torch.bfloat16)
up = workloads._acc  # fp16 / bf16 -> fp32; fp64 (the truth's inputs) untouched


def _oracle(fn, *args):
    """``fn`` compiled afresh, judged as the harness does: as right as eager, against a float64 truth."""
    torch._dynamo.reset()
    with reaches_compiler():
        got = compiler.compile(fn)(*args)
    truth = fn(*[a.double() if a.is_floating_point() else a for a in args])
    assert_oracle(got, fn(*args), truth)
    return got


def _compiled(fn, *args):
    """The Executable for ``fn`` on ``args`` (its schedule, buffers and generated source)."""
    return compile_graph(trace_meta(fn, *args), list(args), "t")


def _gemm_source(exe) -> str:
    (src,) = [s for s in kernel_sources(exe.generated.source) if "acc += " in s]
    return src


def _stored_numel(exe) -> list:
    """(name, numel, dtype) of every buffer a kernel writes to memory, the template's included."""
    out = [(n, exe.graph.buffers[n].layout.numel, exe.graph.buffers[n].get_dtype()) for n in exe.sched.stored]
    for step in exe.sched.steps:
        if isinstance(step, GemmTemplate) and step.store_output:
            out.append((step.output.name, step.output.layout.numel, step.dtype))
    return out


def _mhc(x, w):
    return workloads.mhc_rmsnorm_project(x, w)  # eps as the default: make_fx traces positional tensors only


def _mhc_inputs(t, c, dtype, seed=0):
    return seeded_randn(t, c, seed=seed).to(dtype), seeded_randn(24, c, seed=seed + 1).to(dtype)


# ------------------------------------------------------------------------- the issue #8 workload

def test_rmsnorm_projection_reads_bf16_once_and_never_stores_the_normalised_copy():
    """Issue #8: one GEMM template reading x and the weight as bf16, the [T, 1] sum of squares folded
    from its A tiles (templates.row_reductions) and the inv-rms row scale as its epilogue; no [T, C]
    fp32 buffer anywhere, and x read by this one kernel only."""
    t, c = 41, 300
    x, w = _mhc_inputs(t, c, torch.bfloat16)
    exe = _compiled(_mhc, x, w)
    assert compiler.counters["gemm_template.hoisted_scale.rows"] == 1
    assert compiler.counters["gemm_template.cast_prologue"] == 2
    assert compiler.counters["gemm_template.epilogues"] == 1
    stored = _stored_numel(exe)
    assert all(numel <= t * 24 for _, numel, _ in stored), stored      # [T, 1] sums and the [T, 24] output
    (gemm,) = [s for s in exe.sched.steps if isinstance(s, GemmTemplate)]
    assert gemm.epilogue is not None and not gemm.store_output
    assert [x.get_dtype() for x in gemm.inputs] == [torch.bfloat16, torch.bfloat16]
    assert [getattr(x, "buffer", x).name for x in gemm.inputs] == ["arg0", "arg1"]  # the graph's inputs
    assert not exe.sched.groups() and [p.node.buf.data.reduction_type for p in gemm.row_reduction_nodes] == ["sum"]
    plan = exe.describe_plan()
    assert plan.count("launch ") == 1 and "GEMM template" in plan
    src = _gemm_source(exe)
    if device.is_interpreter():
        assert "_td_bf16_to_f32(a)" in src and "_td_bf16_to_f32(b)" in src  # widened in the K loop, bit-exactly
    else:                                                                   # tensor cores: exact bf16 products
        assert "acc += tl.dot(a, b, out_dtype=tl.float32)" in src
    assert "tl.rsqrt(" in src                                             # the row scale, in the epilogue


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("t, c", [(1, 65), (41, 341)])
def test_rmsnorm_projection_matches_eager_within_the_oracle(t, c, dtype):
    x, w = _mhc_inputs(t, c, dtype, seed=2)
    _oracle(_mhc, x, w)
    assert compiler.counters["gemm_template.hoisted_scale.rows"] == 1
    assert compiler.counters["gemm_template.cast_prologue"] == (2 if dtype in NARROW else 0)


def test_nonfinite_rows_propagate_as_in_eager():
    """inf in x makes inv_rms 0 (eager: inf * 0 = NaN in that row; hoisted: 0 * (inf or NaN) = NaN)."""
    x, w = _mhc_inputs(9, 130, torch.bfloat16, seed=4)
    x[1, 3], x[4, 7], x[6, :] = float("inf"), float("nan"), 0.0
    w[5, 2] = float("-inf")
    got = _oracle(_mhc, x, w)
    assert got[1].isnan().all() and got[4].isnan().all() and (got[6, :5] == 0).all()


def test_eager_execution_modes_and_ir_verification_agree():
    """The IR modes run the template's ATen equivalent (WidenedCall) on the narrow operands."""
    x, w = _mhc_inputs(17, 200, torch.bfloat16, seed=6)
    want = compiler.compile(_mhc)(x, w)
    for mode in ("ir", "ir_unfused"):
        torch._dynamo.reset()
        with compiler.config.patch(execution=mode, verify_ir=True):
            got = compiler.compile(_mhc)(x, w)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------- other shapes of the rewrite

def test_bmm_row_and_column_scales_with_narrow_operands():
    a = seeded_randn(3, 17, 70, seed=8).half()
    b = seeded_randn(3, 70, 23, seed=9).half()
    s, t = seeded_randn(3, 17, 1, seed=10), seeded_randn(3, 1, 23, seed=11)

    def fn(a, b, s, t):
        return torch.bmm(up(a) * torch.sigmoid(s), up(b) * torch.rsqrt(t * t + 1.0))
    _oracle(fn, a, b, s, t)
    c = compiler.counters
    assert (c["gemm_template.hoisted_scale.rows"], c["gemm_template.hoisted_scale.columns"]) == (1, 1)
    assert c["gemm_template.cast_prologue"] == 2 and c["gemm_template.epilogues"] == 1


def test_nested_scales_and_a_computed_rest():
    """(x + 1) * s1 * s2: both factors leave the K-sum; the rest is computed into a buffer of its own."""
    x, w = seeded_randn(33, 90, seed=12), seeded_randn(90, 19, seed=13)
    s1, s2 = seeded_randn(33, 1, seed=14), seeded_randn(33, 1, seed=15)

    def fn(x, w, s1, s2):
        return ((x + 1.0) * torch.sigmoid(s1) * torch.rsqrt(s2.abs() + 0.5)) @ w
    _oracle(fn, x, w, s1, s2)
    assert compiler.counters["gemm_template.hoisted_scale.rows"] == 2


def test_strided_narrow_operands_are_read_through_their_layout():
    a = seeded_randn(37, 305, seed=16).bfloat16()   # sliced: offset 5
    b = seeded_randn(24, 300, seed=17).half()       # transposed

    def fn(a, b):
        return up(a)[:, 5:] @ up(b).t()
    _oracle(fn, a, b)
    assert compiler.counters["gemm_template.cast_prologue"] == 2
    src = _gemm_source(_compiled(fn, a, b))
    assert "a_ptrs = p_arg0 + (5 + (yindex % 37) * 305 + rk[None, :] * 1)" in src   # offset 5, row stride 305
    assert "b_ptrs = p_arg1 + (0 + rk[:, None] * 1 + (xindex % 24) * 300)" in src     # B = b.t()
    assert "_td_bf16_to_f32(a)" in src and "b.to(tl.float32)" in src


def test_gemm_template_widens_bf16_through_the_helpers_where_other_kernels_use_native_casts():
    """A GEMM template's fp32 dot of bf16 operands ran 9% slower widened by .to() on an H100:
    its kernels keep the prelude's helper under config.native_bf16_casts, which other kernels follow."""
    a, b = seeded_randn(37, 64, seed=23).bfloat16(), seeded_randn(24, 64, seed=24)   # one narrow operand: widened

    def fn(a, b):
        return up(a) @ b.t()
    with compiler.config.patch(native_bf16_casts=True):
        _oracle(fn, a, b)
        src = _gemm_source(_compiled(fn, a, b))
    assert "_td_bf16_to_f32(a)" in src and ".to(tl.float32)" not in src


# ------------------------------------------------------------------------- patterns left alone

def test_factor_along_k_is_not_hoisted():
    a, b, c = seeded_randn(37, 90, seed=18), seeded_randn(90, 24, seed=19), seeded_randn(1, 90, seed=20)
    _oracle(lambda a, b, c: (a * torch.sigmoid(c)) @ b, a, b, c)
    assert compiler.counters.with_prefix("gemm_template.hoisted_scale") == {}
    assert compiler.counters["gemm_template.epilogues"] == 0


@pytest.mark.parametrize("case", ["input_scale", "no_eps"])
def test_scale_that_may_be_infinite_is_kept_in_the_operand(case):
    x, w = _mhc_inputs(29, 130, torch.bfloat16, seed=21)
    if case == "input_scale":
        fn, args = (lambda x, w, s: (up(x) * s) @ up(w).t()), (x, w, seeded_randn(29, 1, seed=22))
    else:
        fn, args = (lambda x, w: workloads.mhc_rmsnorm_project(x, w, eps=0.0)), (x, w)
    _oracle(fn, *args)
    assert compiler.counters["gemm_template.hoisted_scale.refused_infinite"] == 1
    assert compiler.counters["gemm_template.hoisted_scale.rows"] == 0
    assert compiler.counters["gemm_template.cast_prologue"] == 1  # the weight still; x * s is stored


def test_plain_fp32_gemm_is_unchanged():
    a, b = seeded_randn(37, 90, seed=23), seeded_randn(90, 24, seed=24)
    exe = _compiled(lambda a, b: a @ b, a, b)
    (gemm,) = [s for s in exe.sched.steps if isinstance(s, GemmTemplate)]
    assert [x.name for x in gemm.inputs] == ["arg0", "arg1"] and gemm.target is torch.ops.aten.mm.default
    (loop,) = [line for line in _gemm_source(exe).splitlines() if "acc += " in line]
    assert "(a[:, :, None] * b[None, :, :], 1)" in loop or "tl.dot(a, b," in loop  # nothing widened
    assert compiler.counters.with_prefix("gemm_template.hoisted") == {}
    assert compiler.counters["gemm_template.cast_prologue"] == 0


def test_round_trip_cast_and_non_affine_reads_are_materialised():
    """x.half().float() widens no buffer (it rounds an fp32 value); a permuted reshape is not strided."""
    x, w = seeded_randn(37, 90, seed=25), seeded_randn(90, 24, seed=26)
    _oracle(lambda x, w: x.half().to(w.dtype) @ w, x, w)
    assert compiler.counters["gemm_template.cast_prologue"] == 0
    compiler.counters.clear()
    y = seeded_randn(3, 37, 50, seed=27).bfloat16()
    _oracle(lambda y, w: up(y).permute(1, 0, 2).reshape(37, 150) @ w[:75].repeat(2, 1), y, w)
    assert compiler.counters["gemm_template.cast_prologue"] == 0


def test_addmm_reads_narrow_operands_but_hoists_no_scale():
    """A row scale does not commute with addmm's bias; the casts still move into the template."""
    x, w = seeded_randn(33, 70, seed=28).bfloat16(), seeded_randn(19, 70, seed=29).bfloat16()
    bias = seeded_randn(19, seed=30)

    def fn(x, w, bias):
        xf = up(x)
        return torch.nn.functional.linear(xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6), up(w), bias)
    _oracle(fn, x, w, bias)
    assert compiler.counters["gemm_template.addmm"] == 1
    assert compiler.counters["gemm_template.cast_prologue"] == 1  # the weight; A is x * inv_rms, stored
    assert compiler.counters.with_prefix("gemm_template.hoisted") == {}


# ------------------------------------------------------------------------- legality, planted wrong

def test_hoisting_an_infinite_scale_would_be_caught(monkeypatch):
    """The legality rule matters: with it switched off, a row whose scale is inf and whose P has a 0
    is +-inf where eager (and float64) have NaN -- which a consumer turns into a finite value
    (sigmoid(inf) = 1, sigmoid(NaN) = NaN), and the oracle rejects that."""
    x, w = seeded_randn(9, 70, seed=31), seeded_randn(24, 70, seed=32)
    s = seeded_randn(9, 1, seed=33).abs()
    s[2, 0], x[2, 5] = float("inf"), 0.0

    def fn(x, w, s):
        return torch.sigmoid((x * s) @ w.t())
    got = _oracle(fn, x, w, s)                            # refused: correct
    assert got[2].isnan().all()
    assert compiler.counters["gemm_template.hoisted_scale.refused_infinite"] == 1
    monkeypatch.setattr(mo, "is_finite", lambda e: True)  # planted: every K-invariant factor hoisted
    with pytest.raises(AssertionError, match="nonfinite"):
        _oracle(fn, x, w, s)
    assert compiler.counters["gemm_template.hoisted_scale.rows"] == 1


def test_scaling_the_wrong_axis_would_be_caught(monkeypatch):
    """A planted bug in the epilogue (a row scale read by column) is caught by the value check."""
    x, w = _mhc_inputs(24, 130, torch.bfloat16, seed=34)
    _oracle(_mhc, x, w)
    real = mo._Operand

    def swapped(node, symbols, k_axis, out_axes):
        return real(node, symbols, k_axis, tuple(1 - a if a is not None else None for a in out_axes))
    monkeypatch.setattr(mo, "_Operand", swapped)
    with pytest.raises(AssertionError):
        _oracle(_mhc, x, w)


def _read(name="x"):
    buf = InputBuffer(name, Layout.contiguous((8, 1), torch.float32), 0)
    return mo.Expr("read", (Read(buf, index=(0, 0)),), torch.float32)


def _c(v):
    return mo.Expr("constant", (v, torch.float32), torch.float32)


def test_bounds_show_a_norm_scale_is_finite_and_nothing_more():
    x = _read()
    square = mo.Expr("mul", (x, x), torch.float32)
    inv_rms = mo.Expr("rsqrt", (mo.Expr("add", (square, _c(1e-6)), torch.float32),), torch.float32)
    assert mo.bounds(square) == (0.0, math.inf)
    assert mo.bounds(inv_rms) == pytest.approx((0.0, 1000.0)) and mo.is_finite(inv_rms)
    assert not mo.is_finite(mo.Expr("rsqrt", (square,), torch.float32))         # eps = 0: rsqrt(0) = inf
    assert not mo.is_finite(mo.Expr("mul", (x, _read("y")), torch.float32))     # not a square
    assert not mo.is_finite(mo.Expr("mul", (_c(1e30), _c(1e30)), torch.float32))  # overflows float32
    assert mo.is_finite(mo.Expr("sigmoid", (x,), torch.float32))
    assert not mo.is_finite(mo.Expr("truediv", (_c(1.0), mo.Expr("abs", (x,), torch.float32)), torch.float32))


@pytest.mark.parametrize("narrow_dot", [True, False])
def test_gpu_source_multiplies_narrow_operands_on_tensor_cores_only_when_allowed(monkeypatch, narrow_dot):
    """GPU codegen (no kernel runs): bf16 x bf16 -> fp32 dot, or the widened "ieee" dot with the knob off."""
    x, w = _mhc_inputs(64, 256, torch.bfloat16)
    monkeypatch.setattr(device, "is_interpreter", lambda: False)
    with compiler.config.patch(matmul_narrow_dot=narrow_dot):
        exe = _compiled(_mhc, x, w)
        (gemm,) = [s for s in exe.sched.steps if isinstance(s, GemmTemplate)]
        assert gemm.dot_dtype == (torch.bfloat16 if narrow_dot else torch.float32)
    src = _gemm_source(exe)
    if narrow_dot:
        assert "acc += tl.dot(a, b, out_dtype=tl.float32)" in src and "ieee" not in src
    else:
        assert 'input_precision="ieee"' in src and "out_dtype" not in src


def test_one_narrow_operand_keeps_the_fp32_dot():
    x = seeded_randn(32, 64, seed=3).to(torch.bfloat16)
    w = seeded_randn(64, 16, seed=4)
    exe = _compiled(lambda x, w: up(x) @ w, x, w)
    (gemm,) = [s for s in exe.sched.steps if isinstance(s, GemmTemplate)]
    assert gemm.dot_dtype == torch.float32


# ------------------------------------------------------------------------- matmul="auto"

def _steps(exe):
    return [type(s).__name__ for s in exe.sched.steps if type(s).__name__ in ("GemmTemplate", "ExternKernel")]


@pytest.mark.parametrize("narrow", [True, False])
def test_auto_calls_cublas_on_cuda_unless_an_operand_is_read_narrow(monkeypatch, narrow):
    """matmul="auto" on a CUDA graph: a plain GEMM is an ATen call (cuBLAS); an fp32 GEMM of widened bf16
    values stays a template (read narrow, no widened copy).  The probe pins and counts nothing."""
    from tritondiff.compiler.lowerings import matmul
    x, w = _mhc_inputs(41, 300, torch.bfloat16)
    if not narrow:
        x, w = up(x), up(w)
    monkeypatch.setattr(matmul, "_cublas", lambda: True)
    with compiler.config.patch(matmul="auto"):
        exe = _compiled(lambda x, w: up(x) @ up(w).t(), x, w)
    assert _steps(exe) == (["GemmTemplate"] if narrow else ["ExternKernel"])
    assert compiler.counters["gemm_template.cast_prologue"] == (2 if narrow else 0)
    assert compiler.counters["gemm_template.auto_extern"] == (0 if narrow else 1)


def test_auto_is_the_template_off_cuda():
    x, w = (up(t) for t in _mhc_inputs(41, 300, torch.bfloat16))
    with compiler.config.patch(matmul="auto"):
        exe = _compiled(lambda x, w: x @ w.t(), x, w)
    assert _steps(exe) == ["GemmTemplate"]
