"""The GEMM template: mm / addmm / bmm lowering, tile codegen, epilogue fusion, the extern switch."""
import pytest
import torch

from tritondiff import compiler
from tritondiff.compiler.codegen import generate
from tritondiff.compiler.lowering import lower_graph
from tritondiff.compiler.pipeline import compile_graph
from tritondiff.compiler.scheduler import KernelGroup, schedule
from tritondiff.compiler.templates import GemmTemplate, candidate_configs, fuse_templates, heuristic_config
from tritondiff.compiler.templates.gemm import GemmConfig
from tests.compiler.util import assert_same, check, kernel_sources, reaches_compiler, seeded_randn, trace_meta

TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (4e-2, 8e-2)}


def _ref(fn, *args):
    """fn in float64, cast back: the rounding-error floor the template is judged against."""
    out = fn(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args])
    if isinstance(out, tuple):
        return tuple(o.to(args[0].dtype) for o in out)
    return out.to(args[0].dtype)


def _judge(fn, *args):
    dtype = args[0].dtype
    with reaches_compiler():
        got = compiler.compile(fn)(*args)
    rtol, atol = TOL[dtype]
    assert_same(got, _ref(fn, *args), rtol=rtol, atol=atol)
    return got


def _sched(fn, *args):
    gm = trace_meta(fn, *args)
    graph = lower_graph(gm, list(args), "t")
    return graph, schedule(graph, fuse_templates)


def _templates(sched):
    return [s for s in sched.steps if isinstance(s, GemmTemplate)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("m,k,n", [(1, 17, 1), (9, 41, 341), (37, 130, 5), (64, 64, 64)])
def test_mm_odd_shapes_every_dtype(m, k, n, dtype):
    a, b = seeded_randn(m, k, seed=1).to(dtype), seeded_randn(k, n, seed=2).to(dtype)
    _judge(lambda a, b: a @ b, a, b)
    assert compiler.counters["gemm_template.mm"] == 1
    assert compiler.counters["extern.aten.mm"] == 0


def test_transposed_and_sliced_operands_are_read_through_their_strides():
    a = seeded_randn(45, 33, seed=3)[2:, 1:].t()          # [32, 43], stride (1, 33), offset 35
    b = seeded_randn(29, 43, seed=4).t()                  # [43, 29], column-major
    got = _judge(lambda a, b: a @ b, a, b)
    assert got.shape == (32, 29)
    source = compiler.dump.last_artifacts().texts["triton"]
    assert "rk[None, :] * 33)" in source.split("a_ptrs = ")[1].split("\n")[0]  # A walks K with stride 33


def test_ragged_k_is_masked_and_even_k_is_not():
    for k, masked in ((41, True), (64, False)):
        torch._dynamo.reset()
        a, b = seeded_randn(16, k, seed=5), seeded_randn(k, 16, seed=6)
        _judge(lambda a, b: a @ b, a, b)
        gemm = [s for s in kernel_sources(compiler.dump.last_artifacts().texts["triton"]) if "acc += " in s][0]
        assert ("mask=rk[None, :] <" in gemm) == masked


def test_linear_bias_relu_runs_as_one_kernel():
    x, w, bias = seeded_randn(33, 70, seed=7), seeded_randn(19, 70, seed=8), seeded_randn(19, seed=9)

    def fn(x, w, bias):
        return torch.relu(torch.nn.functional.linear(x, w, bias))
    _judge(fn, x, w, bias)
    _, sched = _sched(fn, x, w, bias)
    (gemm,) = _templates(sched)
    assert gemm.epilogue is not None and not gemm.store_output
    assert not [s for s in sched.steps if isinstance(s, KernelGroup)]  # the relu left no kernel of its own
    source = kernel_sources(compiler.dump.last_artifacts().texts["triton"])
    assert len(source) == 1 and "acc += " in source[0] and "_td_maximum" in source[0]


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 2.0), (2.0, 0.0)])
def test_addmm_alpha_beta_in_fp32(alpha, beta):
    bias, a, b = seeded_randn(1, 23, seed=10), seeded_randn(21, 40, seed=11), seeded_randn(40, 23, seed=12)
    if beta == 0.0:
        bias = torch.full_like(bias, float("nan"))  # torch ignores the bias entirely when beta == 0
    _judge(lambda bias, a, b: torch.addmm(bias, a, b, alpha=alpha, beta=beta), bias, a, b)
    assert compiler.counters["gemm_template.addmm"] == 1


def test_per_row_scale_from_another_buffer_is_an_epilogue():
    """mHC's shape: rsqrt(mean(x^2)) computed by a reduction, applied to the projection's rows."""
    x, w = seeded_randn(41, 96, seed=13), seeded_randn(24, 96, seed=14)

    def fn(x, w):
        inv_rms = torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
        return (x @ w.t()) * inv_rms
    _judge(fn, x, w)
    _, sched = _sched(fn, x, w)
    (gemm,) = _templates(sched)
    assert gemm.epilogue is not None and not gemm.store_output


def test_scale_computed_after_the_matmul_moves_the_template_down():
    x, w = seeded_randn(41, 96, seed=15), seeded_randn(24, 96, seed=16)

    def fn(x, w):
        y = x @ w.t()
        return y * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    _judge(fn, x, w)
    _, sched = _sched(fn, x, w)
    assert _templates(sched)[0].epilogue is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bmm_with_broadcast_scale_epilogue(dtype):
    a = seeded_randn(3, 17, 40, seed=17).to(dtype)
    b = seeded_randn(3, 23, 40, seed=18).to(dtype).transpose(1, 2)
    s = seeded_randn(3, 17, 1, seed=19).to(dtype)
    _judge(lambda a, b, s: torch.sigmoid(torch.bmm(a, b) * s), a, b, s)
    assert compiler.counters["gemm_template.bmm"] == 1


def test_output_used_elsewhere_is_still_stored():
    a, b = seeded_randn(19, 33, seed=20), seeded_randn(33, 27, seed=21)

    def fn(a, b):
        y = a @ b
        return y.relu(), y.sum(0)
    _judge(fn, a, b)
    _, sched = _sched(fn, a, b)
    (gemm,) = _templates(sched)
    assert gemm.epilogue is not None and gemm.store_output


def test_transposed_consumer_is_refused_with_a_reason():
    a, b, c = seeded_randn(19, 33, seed=22), seeded_randn(33, 27, seed=23), seeded_randn(27, 19, seed=24)

    def fn(a, b, c):
        return (a @ b).t() + c
    _judge(fn, a, b, c)
    _, sched = _sched(fn, a, b, c)
    assert _templates(sched)[0].epilogue is None
    assert any("another element" in why for _, _, why in sched.refused)


def test_matmul_extern_switch_and_small_k():
    a, b = seeded_randn(9, 41, seed=25), seeded_randn(41, 5, seed=26)
    with compiler.config.patch(matmul="extern"):
        check(lambda a, b: (a @ b).relu(), a, b)
    assert compiler.counters["extern.aten.mm"] == 1 and compiler.counters["gemm_template.mm"] == 0
    torch._dynamo.reset()
    small = seeded_randn(9, compiler.config.matmul_small_k_max, seed=27)
    check(lambda a, b: a @ b, small, seeded_randn(compiler.config.matmul_small_k_max, 5, seed=28))
    assert compiler.counters["gemm_template.mm"] == 0


def test_eager_execution_modes_and_ir_verification_agree_with_the_template():
    x, w, bias = seeded_randn(33, 70, seed=29), seeded_randn(19, 70, seed=30), seeded_randn(19, seed=31)

    def fn(x, w, bias):
        return torch.tanh(torch.nn.functional.linear(x, w, bias)) * 2
    want = fn(x, w, bias)
    for mode in ("triton", "ir", "ir_unfused"):
        torch._dynamo.reset()
        with compiler.config.patch(execution=mode, verify_ir=True):
            assert_same(compiler.compile(fn)(x, w, bias), want, rtol=1e-4, atol=1e-4)


def test_large_batched_gemm_uses_int64_offsets():
    """2**31+ elements: generated from meta tensors only, never run."""
    a = torch.empty(4, 2**15, 2**14 + 1, dtype=torch.float16, device="meta")
    b = torch.empty(4, 2**14 + 1, 64, dtype=torch.float16, device="meta")
    gm = trace_meta(lambda a, b: torch.bmm(a, b), a, b)
    exe = compile_graph(gm, [a, b], "big")
    (gemm,) = [s for s in kernel_sources(exe.generated.source) if "acc += " in s]
    assert "tl.program_id(1).to(tl.int64)" in gemm and "pid_m.to(tl.int64)" in gemm


def test_a_batch_past_the_grid_limit_folds_into_axis_0(monkeypatch):
    """CUDA's grid axis 1 holds 65535 programs: a larger batch rides axis 0 with the tiles.  Here the limit is
    lowered to 2 so the interpreter runs the folded grid (a GPU campaign found B = 126,322,568 going extern)."""
    from tritondiff.compiler.templates import gemm
    monkeypatch.setattr(gemm, "MAX_GRID_Y", 2)
    a = seeded_randn(5, 70, 40, seed=21)
    b = seeded_randn(5, 40, 70, seed=22)
    s = seeded_randn(5, 70, 1, seed=23)
    _judge(lambda a, b, s: torch.bmm(a, b) * s, a, b, s)
    assert compiler.counters["gemm_template.bmm"] == 1
    src = compiler.dump.last_artifacts().texts["triton"]
    # 70 x 70 outputs in 64 x 64 tiles: four programs per GEMM, twenty in all on axis 0
    assert "zindex = (tl.program_id(0) // 4)" in src and "pid = tl.program_id(0) % 4" in src
    assert "tl.program_id(1)" not in src


def test_a_batch_of_126_million_gemms_reaches_the_template_with_int64_offsets():
    """The campaign's shape (generated from meta tensors only): the batch folds into axis 0 and the batch
    offsets are int64; a grid past 2^31 - 1 programs even at the smallest tiles stays with ATen."""
    from tritondiff.compiler.templates import gemm
    a = torch.empty(126_322_568, 1, 17, device="meta")
    b = torch.empty(126_322_568, 17, 1, device="meta")
    gm = trace_meta(lambda a, b: torch.bmm(a, b), a, b)
    exe = compile_graph(gm, [a, b], "batch")
    (src,) = [s for s in kernel_sources(exe.generated.source) if "acc += " in s]
    assert "zindex = (tl.program_id(0) // 1).to(tl.int64)" in src and "tl.program_id(1)" not in src
    assert gemm.grid_fits(126_322_568, 1, 1) and gemm.grid_fits(65536, 1000, 1000)     # 65536 x 63^2 programs
    assert not gemm.grid_fits(2**31 // 4, 17, 33)                     # 2 x 3 tiles of 16 x 16 per GEMM: too many


def test_heuristic_and_candidate_configs_fit_the_problem():
    cfg = heuristic_config(9, 341, 41, torch.float16)
    assert cfg.block_m == 16 and cfg.block_k >= 16
    for c in candidate_configs(9, 341, 41, torch.float16):
        assert isinstance(c, GemmConfig) and c.block_m <= 128 and min(c.block_m, c.block_n, c.block_k) >= 16
    assert candidate_configs(512, 512, 512, torch.float32)[0] == heuristic_config(512, 512, 512, torch.float32)


def test_generate_is_deterministic_for_the_template():
    x, w = seeded_randn(33, 70, seed=32), seeded_randn(19, 70, seed=33)
    graph, sched = _sched(lambda x, w: (x @ w.t()).relu(), x, w)
    one = generate(sched, graph, "g").source
    graph, sched = _sched(lambda x, w: (x @ w.t()).relu(), x, w)
    assert generate(sched, graph, "g").source == one


def test_bf16_subnormal_operands_regression():
    """Harness finding (compiler.gemm_template.bmm): the interpreter's bf16 -> fp32 conversion lost
    bf16 subnormals (5e-39 became 8e-39); operands and epilogue values are now widened bit-exactly."""
    a = seeded_randn(1, 1, 17, seed=34).bfloat16()
    b = (seeded_randn(1, 17, 9, seed=35) * 4e-39).bfloat16()  # bf16 subnormals (< 1.18e-38)
    s = torch.full((1, 1, 1), -0.291, dtype=torch.bfloat16)
    got = compiler.compile(lambda a, b, s: torch.bmm(a, b) * s)(a, b, s)
    want = (torch.bmm(a.double(), b.double()) * s.double()).bfloat16()
    torch.testing.assert_close(got, want, rtol=0, atol=2e-40)


def test_widened_call_is_the_aten_equivalent_of_narrow_operands():
    """The template's ATen call when it reads operands narrow (cast prologue): widen, then the op."""
    from tritondiff.compiler.ir import op_name
    from tritondiff.compiler.scheduler import _may_mutate
    from tritondiff.compiler.templates.gemm import WidenedCall
    call = WidenedCall(torch.ops.aten.mm.default, torch.float32)
    a, b = seeded_randn(9, 41, seed=36).bfloat16(), seeded_randn(41, 5, seed=37)
    got = call(a, b)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, a.float() @ b, rtol=0, atol=0)
    assert op_name(call) == op_name(torch.ops.aten.mm.default) and not _may_mutate(call)  # no extra ordering edges
