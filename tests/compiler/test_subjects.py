"""The bundled compiler subjects run under the harness and pass a few examples each."""
import pytest

import compiler.subjects  # noqa: F401  (registers the subjects)
from harness import explore, registry

SUBJECTS = sorted(name for name in registry() if name.startswith("compiler."))


def test_the_issue_s_subjects_are_registered():
    for name in ("compiler.reduce_rows_persistent", "compiler.reduce_rows_looped", "compiler.reduce_rows_split",
                 "compiler.reduce_columns_split", "compiler.layer_norm_fwd_bwd", "compiler.softmax",
                 "compiler.rms_norm", "compiler.nrm2", "compiler.mhc_pre_map", "compiler.mhc_post_res",
                 "compiler.mhc_rmsnorm_project", "compiler.graph_fuzz"):
        assert name in SUBJECTS


@pytest.mark.parametrize("name", SUBJECTS)
def test_subject_passes_a_few_examples(name, tmp_path, in_process):
    res = explore(registry()[name], seed=7, out_dir=str(tmp_path), database=False, executor=in_process,
                  budget_s=10, max_examples=2)
    assert res.status == "pass", res.line()
    assert res.examples >= 1
