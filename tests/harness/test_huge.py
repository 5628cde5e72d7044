"""harness.huge: inputs past 2^31 elements on the GPU -- shape selection, memory bounds, CPU refusal.

Nothing here allocates a huge tensor: the memory figures are faked, shapes are checked as drawn
data (Case objects), and the CPU refusals happen before any example runs.
"""
from __future__ import annotations

import io
import json
import math
import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritondiff.harness import config, huge, oracle_chunks, subject, tensor
from tritondiff.harness.case import Case, TensorCase, shape_bucket
from tritondiff.harness.cli import main
from tritondiff.harness.dump import INPUTS_PT_MAX_BYTES, write_dump
from tritondiff.harness.exc import HugeShapesUnavailable, UsageError
from tritondiff.harness.explore import explore
from tritondiff.harness.runner import Verdict
from tritondiff.harness.strategies import cases
from tritondiff.harness.tensors import on_device_workspace_bytes

GIB = 2 ** 30
F = ("float32", "float16")


@subject(name="huge_test.norm", reference=lambda x: torch.linalg.vector_norm(x),
         inputs={"x": tensor(("N",), dtypes=("float32", "float16", "bfloat16"))}, dims={"N": (0, 3_000_000)})
def norm(x):
    return torch.linalg.vector_norm(x)


@subject(name="huge_test.scale", reference=lambda x, g: x * g,
         inputs={"x": tensor(("N",), dtypes=F), "g": tensor((), dtype_like="x")}, dims={"N": (0, 5000)})
def scale(x, g):
    return x * g


@subject(name="huge_test.rows", reference=lambda x: x.sum(1), inputs={"x": tensor(("M", "N"), dtypes=F)},
         dims={"M": (1, 9), "N": (1, 9)})
def rows(x):
    return x.sum(1)


def _data_dependent(x):
    return x[: int(x.numel() > 0)].sum() * float(x.abs().max())     # needs values: cannot run on meta


@subject(name="huge_test.data", reference=_data_dependent, inputs={"x": tensor(("N",), dtypes=F)},
         dims={"N": (1, 64)})
def data(x):
    return _data_dependent(x)


def _plan(subj, free_gib: float, host_gib: float = 1024.0, **kw):
    return huge.plan(subj, free_bytes=int(free_gib * GIB), host_bytes=int(host_gib * GIB), **kw)


# ---------------------------------------------------------------------------------------------- eligibility

def test_the_size_dim_is_the_first_ranged_dim_of_the_largest_input():
    assert huge.size_dim(norm) == ("N", "")
    assert huge.size_dim(scale) == ("N", "")                 # a 0-D input beside the 1-D one is fine
    assert huge.size_dim(rows) == ("M", "")

    @subject(reference=lambda x, y: x + y, inputs={"x": tensor(("N",)), "y": tensor(("K",))},
             dims={"N": (1, 9), "K": (1, 9)}, name="huge_test.two_dims")
    def two(x, y):
        return x + y

    assert huge.size_dim(two) == ("N", "")                  # the first of equally large inputs

    @subject(reference=lambda h, x: h @ x, inputs={"h": tensor((4, 4)), "x": tensor((4, "T"))},
             dims={"T": (1, 9)}, name="huge_test.literal")
    def literal(h, x):
        return h @ x

    assert huge.size_dim(literal) == ("T", "")

    @subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 7}, name="huge_test.fixed")
    def fixed(x):
        return x

    assert huge.size_dim(fixed) == (None, "every dim of its inputs is fixed ('N' = 7)")
    assert huge.huge_dtypes(norm) == ("float32", "float16")   # bfloat16 is not drawn huge


def test_the_other_dims_take_a_few_values_position_by_position():
    assert huge.other_values(norm, "N") == ((),)
    assert huge.other_values(rows, "M") == ((("N", 1),), (("N", 3),), (("N", 9),))    # clamped to N <= 9

    @subject(reference=lambda x: x.sum((1, 2)), inputs={"x": tensor(("M", "N", "K"))},
             dims={"M": (1, 9), "N": (2, 100_000), "K": (1, 5)}, name="huge_test.three")
    def three(x):
        return x.sum((1, 2))

    assert huge.other_values(three, "M") == ((("N", 2), ("K", 1)), (("N", 3), ("K", 3)),
                                             (("N", 1000), ("K", 5)), (("N", 65_537), ("K", 5)))
    # the size dim brings the largest input to the target, and never below its declared lower bound
    x = three.inputs["x"]
    assert huge.size_for(three, x, "M", 2 ** 31, (("N", 1000), ("K", 5))) == -(-2 ** 31 // 5000)
    assert huge.size_for(three, x, "M", 2 ** 31, (("N", 65_537), ("K", 5))) == 6554
    assert huge.size_for(norm, norm.inputs["x"], "N", 2 ** 31 + 1, ()) == 2 ** 31 + 1

    @subject(reference=lambda x: x.sum(), inputs={"x": tensor(("B", "N"))}, dims={"B": (2, 8), "N": (1, 2 ** 32)},
             name="huge_test.batch_lo")
    def batch_lo(x):
        return x.sum()

    assert huge.size_for(batch_lo, batch_lo.inputs["x"], "B", 2 ** 31, (("N", 2 ** 31),)) == 2     # not 1


def test_a_square_input_is_sized_by_a_dim_it_uses_once_or_not_at_all():
    @subject(reference=lambda a: a.sum(), inputs={"a": tensor(("N", "N"))}, dims={"N": (1, 9)}, name="huge_test.sq")
    def square(a):
        return a.sum()

    @subject(reference=lambda a: a.sum((1, 2)), inputs={"a": tensor(("B", "N", "N"))}, dims={"B": (1, 9), "N": (1, 9)},
             name="huge_test.bsq")
    def batched_square(a):
        return a.sum((1, 2))

    dim, why = huge.size_dim(square)
    assert dim is None and "twice" in why
    with pytest.raises(HugeShapesUnavailable, match="no dim to draw past"):
        _plan(square, free_gib=1000)
    plan = _plan(batched_square, free_gib=10_000, host_gib=10_000)
    assert plan.dim == "B" and all(b * n * n >= 2 ** 31 - 1 for _, b, ((_, n),) in plan.pairs)


def test_a_plan_falls_back_to_the_next_input_when_the_first_cannot_fit():
    """addmm's bias (M, N) is declared first, but sized by M its N must move with K (the output is then as large
    as the input: on 100 GiB of GPU its float64 copies do not fit); a (M, K) sized by M keeps N short."""
    @subject(reference=lambda bias, a, b: torch.addmm(bias, a, b),
             inputs={"bias": tensor(("M", "N"), dtypes=F), "a": tensor(("M", "K"), dtype_like="bias"),
                     "b": tensor(("K", "N"), dtype_like="bias")},
             dims={"M": (1, 200), "K": (17, 200), "N": (1, 200)}, name="huge_test.addmm")
    def addmm(bias, a, b):
        return torch.addmm(bias, a, b)

    assert [(spec.shape, dim) for spec, dim in huge.candidates(addmm)] == [(("M", "N"), "M"), (("M", "K"), "M"),
                                                                        (("K", "N"), "K")]
    plan = _plan(addmm, free_gib=100, host_gib=125)
    assert plan.dim == "M" and plan.pairs
    for _, m, others in plan.pairs:
        assert m * dict(others)["K"] >= 2 ** 31 - 1 and dict(others)["N"] < 200     # a's elements, short N


def test_targets_that_round_to_one_size_are_drawn_once():
    plan = _plan(rows, free_gib=10_000, host_gib=10_000)
    assert len(plan.pairs) == len(set(plan.pairs))
    assert len({m for _, m, o in plan.pairs if o == (("N", 9),)}) < len(huge.HUGE_SIZES)     # 2^31-1, 2^31 -> one M


def test_outputs_are_sized_on_the_meta_device():
    n = 2 ** 31 + 1
    assert huge.output_elements(norm, "float16", {"N": n}) == [(1, 2)]
    assert huge.output_elements(scale, "float32", {"N": n}) == [(n, 4)]
    assert huge.output_elements(rows, "float32", {"M": n // 9 + 1, "N": 9}) == [(n // 9 + 1, 4)]
    assert huge.output_elements(data, "float32", {"N": n}) is None    # then the estimate assumes the worst
    assert huge.output_elements(rows, "float32", {"M": 2 ** 62, "N": 2 ** 62}) is None     # past torch's sizes


def test_example_bytes_follow_the_runner_phases():
    n, extra = 2 ** 31, huge.HEADROOM_BYTES + on_device_workspace_bytes()
    need, host = huge.example_bytes(norm, "float32", {"N": n})
    # calls phase: the float64 upcast kept for the spread 8n + inputs and snapshot 2*4n + mutation masks 4n, plus
    # the scalar outputs (eager 4, float64 8, three candidate copies 3*4) > the fp64 phase: upcast + its copy 2*8n
    assert need == 8 * n + 8 * n + 4 * n + (4 + 8 + 12) + extra
    assert host == 2 * 4 + 8 + huge.ORACLE_HOST_TEMPORARIES * 8 + huge.HEADROOM_BYTES   # no input on the host
    need16, _ = huge.example_bytes(norm, "float16", {"N": n})
    assert need16 == 2 * 8 * n + (2 * 8 + 2) + extra          # float16: the fp64 phase (16n + 18) > calls (16n + 16)
    # an elementwise output as large as the input: float64 outputs, judged on the GPU a chunk at a time (the
    # oracle's temporaries for one chunk there), nothing on the host
    need_s, host_s = huge.example_bytes(scale, "float32", {"N": n})
    chunk = huge.ORACLE_HOST_TEMPORARIES * 8 * oracle_chunks.CHUNK_ELEMENTS
    assert need_s == 8 * n + (8 + 4) * n + 8 * n + 4 * n + 3 * 4 * n + chunk + extra
    assert host_s == huge.HEADROOM_BYTES
    assert huge.example_bytes(data, "float32", {"N": n}) == (need_s, host_s)    # unknown outputs: sized like the input


def test_a_reduction_needs_no_host_memory_for_its_inputs():
    """Inputs are generated on the GPU: the host side no longer grows with the input (issue #9)."""
    for dt in F:
        sizes = {huge.example_bytes(norm, dt, {"N": n})[1] for n in huge.HUGE_SIZES}
        assert len(sizes) == 1 and sizes.pop() < huge.HEADROOM_BYTES + 2 ** 10


# ---------------------------------------------------------------------------------------------- plans

def test_the_first_draws_are_those_whose_slices_pass_2_31():
    """A huge example costs tens of seconds: the pairs a search draws first must wrap ``program_id * stride``
    of a row-wise kernel (the last row starts past 2^31), each (other dims, dtype) combination once before
    any repeats; the boundary sizes come last."""
    plan = _plan(rows, free_gib=1000)
    first = plan.pairs[0]
    rest = lambda p: math.prod(v for _, v in p[2])  # noqa: E731
    assert rest(first) > 1 and (first[1] - 1) * rest(first) >= 2 ** 31, plan.pairs[:3]
    tiers = [0 if rest(p) > 1 and (p[1] - 1) * rest(p) >= 2 ** 31 else 1 if p[1] * rest(p) > 2 ** 31 else 2
             for p in plan.pairs]
    assert tiers == sorted(tiers) and tiers[-1] == 2
    leading = plan.pairs[:tiers.count(0)]
    combos = {(dt, o) for dt, _, o in leading}
    head = leading[:len(combos)]
    assert {(dt, o) for dt, _, o in head} == combos, head          # every combination before a repeat
    assert all(n == max(m for dt2, m, o2 in leading if (dt2, o2) == (dt, o)) for dt, n, o in head)
    # a search draws the first pair first: searches with other seeds start from other pairs of that tier
    assert plan.lead == tiers.count(0)
    firsts = {plan.led_by(k).pairs[0] for k in range(plan.lead)}
    assert firsts == set(leading) and plan.led_by(0) == plan
    assert all(sorted(plan.led_by(k).pairs) == sorted(plan.pairs) for k in range(2 * plan.lead))



def test_plenty_of_memory_draws_every_size_in_both_dtypes():
    plan = _plan(norm, free_gib=1000)
    assert plan.dim == "N" and not plan.left_out
    assert sorted(plan.pairs) == sorted((dt, n, ()) for dt in F for n in huge.HUGE_SIZES)
    assert min(n for _, n, _ in plan.pairs) == 2 ** 31 - 1 and (2 ** 31 + 4097) in {n for _, n, _ in plan.pairs}
    assert "2^31-1, 2^31, 2^31+1, 2^31+4097" in plan.describe()


def test_an_h100_fits_the_norm_but_float32_past_2_32_and_the_elementwise_subject_in_float16():
    plan = _plan(norm, free_gib=79, host_gib=120)
    assert set(plan.pairs) == {(dt, n, ()) for dt in F for n in huge.HUGE_SIZES} - {("float32", 2 ** 32 + 17, ())}
    assert plan.left_out == (f"float32 N={2 ** 32 + 17:,}: needs ~81.3 GiB GPU / 1.0 GiB host memory "
                             "(GPU memory is short)",)
    # an output as large as the input is judged on the GPU: the host is no limit, GPU memory is (float32 needs
    # ~91.5 GiB: the float64 upcast and outputs)
    elementwise = _plan(scale, free_gib=79, host_gib=120)
    assert {dt for dt, _, _ in elementwise.pairs} == {"float16"} and ("float16", 2 ** 31 - 1, ()) in elementwise.pairs
    assert all("(GPU memory is short)" in line for line in elementwise.left_out)
    assert sum("float32" in line for line in elementwise.left_out) == len(huge.HUGE_SIZES)
    with pytest.raises(HugeShapesUnavailable, match="not enough memory for N past 2\\^31") as e:
        _plan(scale, free_gib=40, host_gib=120)
    assert "40.0 GiB GPU" in str(e.value) and "float16, N=2,147,483,647" in str(e.value)
    assert e.value.reason.startswith("not enough memory")


def test_memory_between_the_dtypes_keeps_float16_only():
    n = 2 ** 31 - 1
    need32 = huge.example_bytes(norm, "float32", {"N": n})[0]
    need16 = huge.example_bytes(norm, "float16", {"N": n})[0]
    free = (need16 + need32) / 2 / huge.SAFETY                  # room for float16, not float32
    plan = huge.plan(norm, free_bytes=int(free), host_bytes=1024 * GIB, sizes=(n,))
    assert plan.pairs == (("float16", n, ()),)
    assert plan.left_out == (f"float32 N={n:,}: needs ~{need32 / GIB:.1f} GiB GPU / "
                             f"{huge.example_bytes(norm, 'float32', {'N': n})[1] / GIB:.1f} GiB host memory "
                             "(GPU memory is short)",)


def test_a_row_reduction_as_large_as_its_input_is_judged_on_the_gpu():
    """x [M, N] -> [M]: at N = 1 the output is as large as the input -- judged on the GPU a chunk at a time, so
    it fits 120 GiB of host in float16 (float32's float64 copies are short of an H100's GPU memory); at N = 9 it
    is a ninth of that and fits in both dtypes."""
    plan = _plan(rows, free_gib=79, host_gib=120)
    kept = {(dt, others) for dt, _, others in plan.pairs}
    assert plan.dim == "M" and ("float16", (("N", 1),)) in kept and ("float32", (("N", 9),)) in kept
    assert ("float32", (("N", 1),)) not in kept
    for dt, m, ((_, n),) in plan.pairs:
        assert m * n >= 2 ** 31 - 1 and (m - 1) * n < 2 ** 32 + 17      # the input just past each size
    assert plan.left_out and all("(GPU memory is short)" in line for line in plan.left_out)
    assert "M in {" in plan.describe() and "N=9 x float16, float32" in plan.describe()
    everything = _plan(rows, free_gib=10_000, host_gib=10_000)
    assert {others for _, _, others in everything.pairs} == {(("N", 1),), (("N", 3),), (("N", 9),)}
    assert " at N=1 | N=3 | N=9 x " in everything.describe()


def test_ineligible_subjects_raise_with_a_reason():
    @subject(reference=lambda x: x, inputs={"x": tensor(("N",))}, dims={"N": 7}, name="huge_test.fixed7")
    def fixed(x):
        return x

    with pytest.raises(HugeShapesUnavailable, match="no dim to draw past 2\\^31") as e:
        _plan(fixed, free_gib=1000)
    assert "fixed" in e.value.reason


def test_plans_for_says_what_runs_and_what_is_skipped():
    lines: list[str] = []
    plans = huge.plans_for([norm, rows, scale], lines.append, measure=lambda: (44 * GIB, 120 * GIB))
    assert list(plans) == ["huge_test.norm", "huge_test.rows"]
    assert lines[0].startswith("huge  huge_test.norm: N in {2^31-1")
    assert lines[1].startswith("huge  huge_test.rows: M in {")
    assert lines[2].startswith("skip  huge_test.scale: not enough memory")
    with pytest.raises(UsageError, match="no target can run huge shapes here: huge_test.scale"):
        huge.plans_for([scale], lines.append, measure=lambda: (44 * GIB, 120 * GIB))
    assert huge.plans_for([scale], lines.append, strict=False, measure=lambda: (44 * GIB, 120 * GIB)) == {}


# ---------------------------------------------------------------------------------------------- draws

_PLAN = _plan(scale, free_gib=10_000)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(cases(scale, huge=_PLAN))
def test_huge_draws_take_the_plan_s_pairs_and_cheap_layouts(case):
    x, g = case.tensors["x"], case.tensors["g"]
    assert (x.dtype, case.dims["N"], ()) in _PLAN.pairs
    assert x.shape == (case.dims["N"],) and x.numel >= 2 ** 31 - 1 and shape_bucket(x.numel) == ">=2^31-1"
    assert x.layout in ("contiguous", "offset") and g.shape == () and g.dtype == x.dtype


_ROWS_PLAN = _plan(rows, free_gib=10_000, host_gib=10_000)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(cases(rows, huge=_ROWS_PLAN))
def test_huge_row_draws_put_the_largest_input_past_2_31(case):
    x = case.tensors["x"]
    assert (x.dtype, case.dims["M"], (("N", case.dims["N"]),)) in _ROWS_PLAN.pairs
    assert x.shape == (case.dims["M"], case.dims["N"]) and x.numel >= 2 ** 31 - 1 and x.layout in ("contiguous", "offset")


@subject(name="huge_test.loss", reference=lambda x, t: torch.nn.functional.cross_entropy(x.float(), t),
         inputs={"x": tensor(("N", "V"), dtypes=F), "t": tensor(("N",), dtypes=("int64",), low=0, high="V")},
         dims={"N": (1, 64), "V": (1, 64)})
def loss(x, t):
    return torch.nn.functional.cross_entropy(x.float(), t)


_LOSS_PLAN = _plan(loss, free_gib=10_000, host_gib=10_000)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(cases(loss, huge=_LOSS_PLAN))
def test_an_index_input_keeps_its_integer_dtype_and_does_not_bar_the_plan(case):
    """A loss over a target index (int64 only) is planned in float32 / float16 like its logits; the target
    keeps drawing int64 (it once made every such subject ineligible: 'its inputs allow none of float32')."""
    assert huge.huge_dtypes(loss) == F
    x, t = case.tensors["x"], case.tensors["t"]
    assert x.dtype in F and t.dtype == "int64" and x.numel >= 2 ** 31 - 1


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.data())
def test_normal_draws_are_unchanged_by_the_option(data):
    case = data.draw(cases(norm))
    assert case.dims["N"] <= 3_000_000


# ---------------------------------------------------------------------------------------------- refusals

@pytest.mark.skipif(huge.device.MODE == "cuda", reason="the refusal is the CPU interpreter's")
class TestCpuRefuses:
    def test_require_cuda(self):
        with pytest.raises(HugeShapesUnavailable, match="run on a CUDA GPU only") as e:
            huge.require_cuda()
        assert e.value.reason == "no CUDA device"

    def test_explore_with_a_plan_or_the_knob_refuses_before_running(self, tmp_path):
        with pytest.raises(HugeShapesUnavailable, match="CUDA GPU only"):
            explore(norm, huge=_plan(norm, free_gib=1000), budget_s=5, out_dir=str(tmp_path))
        with config.patch(huge_shapes=True), pytest.raises(HugeShapesUnavailable, match="CUDA GPU only"):
            explore(norm, budget_s=5, out_dir=str(tmp_path))
        assert not os.listdir(tmp_path)                        # nothing ran, nothing was dumped

    def test_fuzz_huge_exits_2_with_one_line(self, capsys, tmp_path):
        assert main(["fuzz", "--huge", "kernels.nrm2", "--budget", "5", "--store", str(tmp_path / "f.db")]) == 2
        err = capsys.readouterr().err
        assert "tritondiff fuzz --huge: huge shapes run on a CUDA GPU only" in err
        assert len(err.strip().splitlines()) == 1
        assert not os.path.exists(tmp_path / "f.db")


def test_a_huge_dump_keeps_case_json_and_leaves_inputs_pt_out(tmp_path):
    n = 2 ** 31 + 1
    case = Case({"N": n}, {"x": TensorCase((n,), "float32", "offset", 3, "normal", 5, "")}, {})
    verdict = Verdict("fail", "mismatch", "off by one", "out0:scalar", "first call")
    path = write_dump(str(tmp_path), norm, {"name": norm.name}, case, verdict)
    assert not os.path.exists(os.path.join(path, "inputs.pt"))
    summary = json.load(open(os.path.join(path, "summary.json")))
    assert summary["inputs"]["x"] == {"shape": [n], "stride": [1], "dtype": "torch.float32", "storage_offset": 256 + 4,
                                      "layout": "offset", "layout_param": 3, "values": "normal", "seed": 5,
                                      "nonfinite": ""}
    assert summary["inputs_pt"].startswith("left out: the inputs are 8.0 GiB")
    assert Case.from_json(json.load(open(os.path.join(path, "case.json")))) == case
    assert INPUTS_PT_MAX_BYTES < 4 * n


def test_a_small_dump_still_saves_its_inputs(tmp_path):
    case = Case({"N": 41}, {"x": TensorCase((41,), "float16", "contiguous", 0, "normal", 5, "")}, {})
    path = write_dump(str(tmp_path), norm, {"name": norm.name}, case, Verdict("fail", "mismatch", "m", "x", "c"))
    saved = torch.load(os.path.join(path, "inputs.pt"))
    assert saved["tensors"]["x"].shape == (41,) and saved["tensors"]["x"].dtype == torch.float16


def test_display_line_of_a_plan_is_one_line():
    out = io.StringIO()
    huge.plans_for([norm], lambda s: out.write(s + "\n"), measure=lambda: (139 * GIB, 200 * GIB))
    assert out.getvalue().count("\n") == 1 and "139.0 GiB GPU" in out.getvalue()


# ---------------------------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(huge.device.MODE != "cuda", reason="inputs past 2^31 elements need a CUDA device")
def test_an_int32_row_offset_is_found_past_2_31_and_its_int64_twin_passes(tmp_path):
    """A row-wise RMSNorm whose program_id * row_stride is int32 (the historical bug of row-wise LLM kernels):
    huge mode draws T x H past 2^31 elements, its outputs as large as its inputs judged on the GPU; the wrong rows
    are past 2^31 / H.  The same kernel with int64 offsets passes."""
    from tritondiff.harness import explore

    from . import planted

    # the default executor: an isolated worker, so a wrapped offset that faults costs the worker, not the test
    bug = planted.rms_norm_int32_offsets
    found = explore(bug, out_dir=str(tmp_path / "bug"), database=False, seed=5, max_examples=3, budget_s=540,
                    huge=huge.plan_on_device(bug))
    assert found.status == "fail" and found.failure_class in ("mismatch", "nonfinite", "crash"), found.message
    twin = planted.rms_norm_int64_offsets
    fixed = explore(twin, out_dir=str(tmp_path / "twin"), database=False, seed=5, max_examples=2, budget_s=540,
                    huge=huge.plan_on_device(twin))
    assert fixed.status == "pass", fixed.message


def test_a_measured_reference_phase_raises_its_estimate_and_never_lowers_it():
    """The reference phase's bytes per input element, measured on the GPU at a small size: measured larger than
    the estimate, it sizes the plan and the largest pairs no longer fit, saying so; measured smaller, the
    estimate stands (scaling a small run can underestimate, and an example that runs out of memory is only
    skipped).  Measured once per (dtype, other dims)."""
    calls = []

    def measured(per_element):
        def calibrate(dtype, dim, others):
            calls.append((dtype, dim, others))
            return huge.ReferenceCost(per_element)
        return calibrate

    free = 150 * GIB
    estimated = huge.plan(rows, free_bytes=free, host_bytes=1024 * GIB)
    heavy = huge.plan(rows, free_bytes=free, host_bytes=1024 * GIB, calibrate=measured(60.0))
    assert len(calls) == len(set(calls)) and {dim for _, dim, _ in calls} == {"M"}, calls
    light = huge.plan(rows, free_bytes=free, host_bytes=1024 * GIB, calibrate=measured(1.0))
    biggest = lambda p: max(n * math.prod(v for _, v in o) for _, n, o in p.pairs)  # noqa: E731
    assert biggest(heavy) < biggest(estimated) == biggest(light), (heavy.left_out, estimated.left_out)
    assert light.pairs == estimated.pairs and len(estimated.left_out) < len(heavy.left_out)
    dims = {"M": 2 ** 31, "N": 1}
    assert huge.example_bytes(rows, "float32", dims, measured=huge.ReferenceCost(60.0))[0] >= 60 * 2 ** 31
    light_bytes = huge.example_bytes(rows, "float32", dims, measured=huge.ReferenceCost(0.5))
    assert light_bytes == huge.example_bytes(rows, "float32", dims)


@pytest.mark.gpu
@pytest.mark.skipif(huge.device.MODE != "cuda", reason="measured on a CUDA device")
def test_the_measured_reference_phase_holds_the_float64_inputs_and_their_copy():
    from . import planted

    cost = huge.measure_reference(planted.rms_norm_int64_offsets, "float32", "T", (("H", 256),))
    assert cost is not None and cost.per_element >= 2 * 8      # float64 upcast and its copy at least
    assert 0 < cost.eager_per_element < cost.per_element and cost.chunked   # row-wise: its truth runs in slices
