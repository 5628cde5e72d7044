"""compiler.dump: each compilation's artifacts, with the counters of that compilation alone."""
import os
import subprocess
import sys

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


LOGGED = """
import torch
f = torch.compile(lambda x: (x * 3).amax(-1), backend="tritondiff")
f(torch.randn(5, 17))
"""


def test_torch_logs_output_code_prints_the_generated_triton_source(tmp_path):
    env = {**os.environ, "TORCH_LOGS": "output_code"}
    res = subprocess.run([sys.executable, "-c", LOGGED], env=env, capture_output=True, text=True, timeout=300,
                         cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "[__output_code] tritondiff triton of graph" in res.stderr and "@triton.jit" in res.stderr, res.stderr
    quiet = subprocess.run([sys.executable, "-c", LOGGED], env={k: v for k, v in env.items() if k != "TORCH_LOGS"},
                           capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert quiet.returncode == 0 and "@triton.jit" not in quiet.stderr


def test_counters_land_in_torchs_and_torch_compile_debug_writes_the_steps(monkeypatch, tmp_path):
    import torch._dynamo.config
    from torch._dynamo.utils import counters as torch_counters

    torch_counters["tritondiff"].clear()
    check(lambda x: (x * 3).amax(-1) - 2, torch.randn(5, 19))
    assert torch_counters["tritondiff"]["graphs_compiled"] == 1 and torch_counters["tritondiff"]["kernels_generated"]

    monkeypatch.setenv("TORCH_COMPILE_DEBUG", "1")                 # torch's debug dump folder
    monkeypatch.setattr(torch._dynamo.config, "debug_dir_root", str(tmp_path))
    check(lambda x: x - 1, torch.randn(4))
    graph = compiler.dump.last_artifacts()
    assert graph.directory == str(tmp_path / "tritondiff" / graph.graph)
    assert any(name.endswith("_triton.py") for name in os.listdir(graph.directory))
