"""bench.compile_time's tables from a child process's figures (no GPU needed to check the arithmetic)."""
from bench import compile_time


def _row(**warm):
    cold = {"compile_s": 8.0, "pipeline_s": 0.5, "trace_s": 0.5, "triton_compiles": 20, "triton_s": 4.0,
            "workers": 1}
    return {"workload": "block fwd+bwd float32", "tritondiff": {"cold": cold, "warm": {**cold, **warm}},
            "inductor": {"cold": {"compile_s": 10.0}, "warm": {"compile_s": 1.0}}}


def test_the_rest_is_what_neither_trace_pipeline_nor_triton_took():
    text = compile_time.breakdown([_row(compile_s=3.0, triton_s=0.5)], ["tritondiff"])
    cold, warm = [ln for ln in text.splitlines() if "| cold |" in ln or "| warm |" in ln]
    assert cold.split("|")[-2].strip() == "3.0"          # 8.0 - 0.5 trace - 0.5 pipeline - 4.0 Triton
    assert warm.split("|")[-2].strip() == "1.5"


def test_with_compile_threads_the_rest_counts_what_launches_waited_not_the_threads_sum():
    row = _row(compile_s=3.0, triton_s=9.0, workers=16, waited_s=0.5)
    warm = [ln for ln in compile_time.breakdown([row], ["tritondiff"]).splitlines() if "| warm |" in ln][0]
    assert warm.split("|")[-2].strip() == "1.5"          # 3.0 - 0.5 - 0.5 - 0.5 waited


def test_the_table_compares_cold_with_inductors_and_warm_with_its_own_cold():
    line = compile_time.table([_row(compile_s=2.0)], ["inductor", "tritondiff"]).splitlines()[-1]
    cells = [c.strip() for c in line.split("|")]
    assert cells[-3:-1] == ["0.80", "0.25"]


def test_the_threaded_backend_alone_is_still_compared_with_inductor():
    row = _row(compile_s=2.0)
    row["tritondiff-threads"] = row.pop("tritondiff")
    line = compile_time.table([row], ["inductor", "tritondiff-threads"]).splitlines()[-1]
    assert [c.strip() for c in line.split("|")][-3:-1] == ["0.80", "0.25"]


def test_a_process_whose_graphs_left_the_lean_runtime_says_its_trace_was_not_timed():
    row = _row(lean_graphs=0, trace_s=0.0)
    warm = [ln for ln in compile_time.breakdown([row], ["tritondiff"]).splitlines() if "| warm |" in ln][0]
    assert "- (AOTAutograd)" in warm
    cold = [ln for ln in compile_time.breakdown([row], ["tritondiff"]).splitlines() if "| cold |" in ln][0]
    assert "| 0.50 |" in cold
