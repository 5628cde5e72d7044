"""The bundled compiler subjects run under the harness and pass a few examples each."""
import glob
import os

import pytest

import compiler.subjects  # noqa: F401  (registers the subjects)
from compiler.subjects import run_compiled
from harness import explore, registry, subject, tensor

SUBJECTS = sorted(name for name in registry() if name.startswith("compiler."))  # before the planted one


def test_the_issue_s_subjects_are_registered():
    for name in ("compiler.reduce_rows_persistent", "compiler.reduce_rows_looped", "compiler.reduce_rows_split",
                 "compiler.reduce_columns_split", "compiler.layer_norm_fwd_bwd", "compiler.softmax",
                 "compiler.rms_norm", "compiler.nrm2", "compiler.mhc_pre_map", "compiler.mhc_post_res",
                 "compiler.mhc_rmsnorm_project", "compiler.graph_fuzz"):
        assert name in SUBJECTS


@pytest.mark.slow  # the gate's bundled-subject part fuzzes every one of them at the ci profile
@pytest.mark.parametrize("name", SUBJECTS)
def test_subject_passes_a_few_examples(name, tmp_path, in_process):
    res = explore(registry()[name], seed=7, out_dir=str(tmp_path), database=False, executor=in_process,
                  budget_s=10, max_examples=2)
    assert res.status == "pass", res.line()
    assert res.examples >= 1


def _off_by_one_reference(x):
    return x.sin() + 1


@subject(name="tests.compiler.planted_off_by_one", reference=_off_by_one_reference,
         inputs={"x": tensor(("N",), dtypes=("float32",), values=("normal",))}, dims={"N": (1, 64)})
def _planted_off_by_one(x):
    return run_compiled(lambda x: x.sin() + 2, x)


def test_a_failing_compiled_subject_dumps_the_compiler_artifacts(tmp_path, in_process):
    res = explore(registry()["tests.compiler.planted_off_by_one"], seed=3, out_dir=str(tmp_path), database=False,
                  executor=in_process, budget_s=30, max_examples=5)
    assert res.status == "fail" and res.failure_class == "mismatch"
    graphs = sorted(glob.glob(os.path.join(res.dump, "compiler", "*")))
    assert graphs, "no compiler artifacts in the dump"
    files = os.listdir(graphs[-1])
    triton_src = [f for f in files if f.endswith("_triton.py")]
    assert triton_src and "counters.json" in files
    with open(os.path.join(graphs[-1], triton_src[0])) as f:
        assert "@triton.jit" in f.read()
