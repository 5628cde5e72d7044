"""compiler.dump: each compilation's artifacts, with the counters of that compilation alone."""
import torch

from tritondiff import compiler
from tests.compiler.util import check


def test_each_graph_s_artifacts_count_only_what_that_graph_did():
    x = torch.randn(9, 41)
    check(lambda x: x.amax(-1), x)                 # graph 1: one reduction kernel
    first = compiler.dump.last_artifacts()
    check(lambda x: x * 2 + 1, x)                  # graph 2: one pointwise kernel
    second = compiler.dump.last_artifacts()
    assert first is not second
    assert first.counters["graphs_compiled"] == 1 and first.counters["reduction_strategy.persistent"] == 1
    assert second.counters == {"graphs_compiled": 1, "kernels_generated": 1, "inlined_nodes": 1}  # x * 2 into + 1
    # The process-wide counters still hold both graphs.
    assert compiler.counters["graphs_compiled"] == 2 and compiler.counters["kernels_generated"] == 2
    assert "reduction_strategy" not in second.summary()


def test_a_failed_compilation_keeps_its_own_counters_and_the_error():
    check(lambda x: x.sum(-1), torch.randn(3, 5))
    with compiler.config.patch(reduction_strategy="persistent", rblock=2):
        try:
            check(lambda x: x.sum(-1), torch.randn(3, 5))
        except Exception as e:  # noqa: BLE001
            assert "rblock=2" in str(e)
    art = compiler.dump.last_artifacts()
    assert art.error is not None and "ConfigError" in art.error
    assert art.counters == {"graphs_compiled": 1}
