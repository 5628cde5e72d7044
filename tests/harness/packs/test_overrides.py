"""harness.packs.overrides: a library that overrides ATen ops becomes one subject per op, drawn from OpInfo
samples; a planted wrong override is found, a correct one passes (a stand-in library on the CPU)."""
import contextlib
import os
import subprocess
import sys

import pytest
import torch

from tritondiff.harness.explore import explore
from tritondiff.harness.packs import overrides

from . import planted_library


def _library(bug: bool):
    return lambda op: planted_library.enabled(op, bug)


@pytest.mark.parametrize("bug", [True, False])
def test_a_wrong_override_is_found_and_a_correct_one_passes(tmp_path, in_process, bug):
    made = overrides.declare(f"overrides_test{int(bug)}", ["sigmoid", "exp", "no_such_op"], _library(bug),
                             __name__, "cpu")
    assert sorted(made) == [f"overrides_test{int(bug)}.exp", f"overrides_test{int(bug)}.sigmoid"]
    sig = explore(made[f"overrides_test{int(bug)}.sigmoid"], budget_s=120, max_examples=40, seed=1,
                  out_dir=str(tmp_path), executor=in_process)
    assert sig.status == ("fail" if bug else "pass"), sig.message
    exp = explore(made[f"overrides_test{int(bug)}.exp"], budget_s=120, max_examples=40, seed=1,
                  out_dir=str(tmp_path), executor=in_process)
    assert exp.status == "pass", exp.message


def test_samples_are_widened_without_changing_values():
    t = torch.randn(3, 5)
    for layout in overrides.LAYOUTS:
        moved = overrides._relayout(t, layout)
        assert torch.equal(moved, t)
        assert moved.is_contiguous() == (layout == "as drawn")


def test_integer_only_ops_draw_integer_dtypes_and_random_ops_are_left_out(tmp_path, in_process):
    """An op with no floating dtype (bitwise_not) is drawn in its integer dtypes instead of having no input
    space (a harness error for every bitwise op of a pack); a random op (randn) has no reference and no
    subject."""
    made = overrides.declare("overrides_ints", ["bitwise_not", "randn"], lambda op: contextlib.nullcontext(),
                             __name__, "cpu")
    assert sorted(made) == ["overrides_ints.bitwise_not"]
    res = explore(made["overrides_ints.bitwise_not"], budget_s=60, max_examples=15, seed=2, out_dir=str(tmp_path),
                  executor=in_process)
    assert res.status == "pass" and res.examples >= 10 and res.skipped == 0, res.line()


def test_a_finding_replays_with_torch_and_the_library_alone(tmp_path, in_process):
    """An override finding's dump carries a kernel.py that rebuilds the drawn call from torch's OpInfo samples
    (the harness's own functions, as source) and switches the library on by its own import: standalone.py
    reproduces it where tritondiff is not importable, and stops reproducing once the library is fixed."""
    here = os.path.dirname(os.path.abspath(__file__))

    def standalone(op):
        return "planted library", "import planted_library", f"planted_library.enabled({op!r}, True)"

    made = overrides.declare("overrides_standalone", ["sigmoid"], _library(True), __name__, "cpu",
                             standalone=standalone)
    res = explore(made["overrides_standalone.sigmoid"], budget_s=120, max_examples=40, seed=1,
                  out_dir=str(tmp_path / "out"), executor=in_process)
    assert res.status == "fail" and {"kernel.py", "standalone.py", "standalone.json"} <= set(os.listdir(res.dump))
    blocker = tmp_path / "blocker" / "tritondiff"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("tritondiff is not installed here")\n')
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TRITONDIFF_DEVICE")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "blocker"), here])

    def run():
        return subprocess.run([sys.executable, "standalone.py", "--device", "cpu"], cwd=res.dump, env=env,
                              capture_output=True, text=True, timeout=300)

    out = run()
    assert out.returncode == 1 and "REPRODUCES" in out.stdout, out.stdout + out.stderr
    kernel = os.path.join(res.dump, "kernel.py")
    with open(kernel) as f:
        fixed = f.read().replace("'sigmoid', True)", "'sigmoid', False)")
    with open(kernel, "w") as f:
        f.write(fixed)
    out = run()
    assert out.returncode == 0 and "no output is off" in out.stdout, out.stdout + out.stderr


def test_sort_and_topk_indices_are_judged_by_the_elements_they_pick():
    """Equal elements may come in any order (torch.sort without stable=True, torch.topk): two index orders
    over ties are the same answer, an index that picks another value is not; a stable sort keeps its
    indices as they are."""
    x = torch.tensor([[2.0, 1.0, 2.0, 0.0]])
    values = torch.tensor([[2.0, 2.0, 1.0, 0.0]])
    one, other, wrong = (torch.tensor([[0, 2, 1, 3]]), torch.tensor([[2, 0, 1, 3]]), torch.tensor([[0, 1, 2, 3]]))
    sort = overrides.CONTRACTS["sort"]
    canon = [sort([x, -1, True], {}, (values, i)) for i in (one, other, wrong)]
    assert torch.equal(canon[0][1], canon[1][1]) and not torch.equal(canon[0][1], canon[2][1])
    assert torch.equal(sort([x, -1, True], {"stable": True}, (values, other))[1], other)
    for bad in (torch.tensor([[0, 2, 1, 4]]), other.int()):           # out of range, not int64: kept as given
        assert torch.equal(sort([x, -1, True], {}, (values, bad))[1], bad)
    topk = overrides.CONTRACTS["topk"]
    picked = [topk([x, 2], {}, (values[:, :2], i[:, :2]))[1] for i in (one, other)]
    assert torch.equal(*picked)


def test_eval_mode_batch_norm_leaves_its_saved_statistics_out():
    x, c = torch.randn(3, 2, 4), torch.ones(2)
    bn = overrides.CONTRACTS["native_batch_norm"]
    for training, kept in ((False, 1), (True, 3)):
        args = [x, c, c, c.clone(), c.clone(), training, 0.1, 1e-5]
        assert len(bn(args, {}, torch.ops.aten.native_batch_norm(*args))) == kept


def test_a_standalone_kernel_applies_the_op_s_contract():
    """The standalone kernel file of an op with a contract (sort) carries it: with the library a no-op, its
    candidate and reference agree on every sample, ties included."""
    source = overrides.standalone_source("no-op library", "sort", ["sort"], "cpu", "import contextlib",
                                         "contextlib.nullcontext()")
    assert "contract = _sort" in source
    space: dict = {}
    exec(compile(source, "kernel.py", "exec"), space)
    for index in range(0, 40, 7):
        call = ["sort", "float16", index, "strided", 2.0 ** 20, False]
        got, want = space["CALL"].fn(call), space["CALL"].reference(call)
        assert all(torch.equal(g, w) for g, w in zip(got, want))
        truth = space["CALL"].reference(space["CALL"].upcast({"call": call})["call"])
        assert truth[0].dtype == torch.float64


def test_a_call_scaled_past_its_dtype_s_range_is_an_edge_case_and_its_control_is_scaled_to_one():
    """float16 samples times 2^20 overflow to inf (times 2^-20: subnormal): a finding there is `edge`, and the
    control run that decides whether it is wrong anyway draws the same call at scale 1; float32 and bfloat16
    hold both scales in their normal range."""
    from tritondiff.harness.case import Case
    from tritondiff.harness.tiers import normalized, tier_of

    call = ["hypot", "float16", 4, "transposed", 2.0 ** 20, False]
    edge = overrides._edge({"call": call})
    assert edge == {"call": ["hypot", "float16", 4, "transposed", 1.0, False]}
    assert overrides._edge({"call": [*call[:4], 2.0 ** -20, False]}) is not None
    for dtype in ("float32", "bfloat16", "int32"):
        assert overrides._edge({"call": [call[0], dtype, *call[2:]]}) is None
    assert overrides._edge({"call": [*call[:4], 1.0, False]}) is None
    case = Case({}, {}, {"call": call}, edge)
    assert tier_of(case, "nonfinite") == "edge" and tier_of(case, "exception") == "edge"
    assert normalized(case).scalars == edge and tier_of(normalized(case), "nonfinite") == "wrong"
    assert Case.from_json(case.to_json()) == case


def test_an_overflowing_library_is_found_as_edge_and_a_wrong_one_as_wrong(tmp_path, in_process):
    """A library kernel that is right for ordinary values but returns 0 where the input is inf (float16 times
    2^20) is an `edge` finding; the planted sigmoid bug stays `wrong` whatever scale first showed it."""
    @contextlib.contextmanager
    def enabled(op):
        lib = torch.library.Library("aten", "IMPL")
        try:
            def exp(x):
                with torch._C._AutoDispatchBelowAutograd():
                    y = torch.ops.aten.pow.Scalar(torch.e, x)
                    return torch.ops.aten.where.self(torch.ops.aten.isinf.default(x), torch.zeros_like(y), y)
            lib.impl("exp", exp, "CPU")
            yield
        finally:
            lib._destroy()

    made = overrides.declare("overrides_edge", ["exp"], enabled, __name__, "cpu")
    res = explore(made["overrides_edge.exp"], budget_s=120, max_examples=200, seed=3, out_dir=str(tmp_path),
                  executor=in_process)
    tiers = {f.tier for f in res.findings} | {res.tier}
    assert res.status == "pass" and "edge" in tiers and "wrong" not in tiers, res.line()
    bug = overrides.declare("overrides_edge_bug", ["sigmoid"], _library(True), __name__, "cpu")
    res = explore(bug["overrides_edge_bug.sigmoid"], budget_s=120, max_examples=200, seed=3, out_dir=str(tmp_path),
                  executor=in_process)
    assert res.status == "fail" and res.tier == "wrong", res.line()


def test_normal_range_draws_leave_edge_scaled_calls_out():
    """After an edge finding the search looks in the normal range (an edge finding must not hide a wrong one):
    there, no call is scaled past its dtype's range, while the whole space still draws such calls."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tritondiff.harness.strategies import cases

    made = overrides.declare("overrides_normal", ["exp"], lambda op: contextlib.nullcontext(), __name__, "cpu")
    seen = {True: set(), False: set()}

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.data())
    def draw(data):
        normal = data.draw(st.booleans())
        case = data.draw(cases(made["overrides_normal.exp"], normal=normal))
        seen[normal].add(case.ordinary_scalars is not None)

    draw()
    assert seen[True] == {False} and True in seen[False]
