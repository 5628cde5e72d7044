"""The graph fuzzer: Hypothesis builds random pointwise / reduction / view programs; each is
compiled and judged against eager with the harness oracle.  Every failure it finds becomes a
named test in tests/compiler/test_regressions.py holding the program as a ``Program`` value."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritondiff.compiler.exc import ReductionTooLarge
from tritondiff.harness.graph_fuzz import OPS, Program, Step, check_program, codegen_knobs, programs
from tritondiff.harness import graph_fuzz
from tritondiff.harness.config import config as harness_config
from tests.compiler.conftest import fresh_compiler  # noqa: F401  (autouse: fresh dynamo caches, counters)

EXAMPLES = 12 if harness_config.profile != "nightly" else 400
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(program=programs(), seed=st.integers(0, 2**16), dtype=st.sampled_from(DTYPES), knobs=codegen_knobs())
def test_random_programs_match_eager(program, seed, dtype, knobs):
    try:
        result = check_program(program, seed, dtype, knobs=knobs)
    except ReductionTooLarge:  # a forced strategy past the limit: refused on purpose
        return
    assert result.passed, f"{result.message}\n{dtype} {knobs}\n{program!r}"


def test_program_repr_is_runnable_source():
    p = Program(((3, 5),), (Step("softmax", (0,), (("dim", 1),)), Step("add", (1, 0))), (2,))
    src = repr(p)
    scope = {"OPS": OPS}
    exec(src, scope)
    x = torch.randn(3, 5)
    torch.testing.assert_close(scope["program"](x)[0], p(x)[0])
    assert eval(p.to_source(), {"Program": Program, "Step": Step}) == p
    import json
    assert Program.from_json(json.loads(json.dumps(p.to_json()))) == p


def test_every_fuzzer_op_is_reachable():
    seen = set()

    @settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(programs())
    def collect(p):
        seen.update(s.op for s in p.steps)
    collect()
    assert seen == set(OPS) - graph_fuzz.MODEL_ONLY_OPS, sorted(set(OPS) - graph_fuzz.MODEL_ONLY_OPS - seen)


def test_programs_draw_every_strategy_large_sizes_and_inputs_that_fit():
    knobs_seen, tilings, sizes_seen, kinds, finals = set(), set(), set(), set(), set()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(programs(), codegen_knobs())
    def collect(p, knobs):
        knobs_seen.add((knobs.get("reduction_strategy", "auto"), knobs.get("rblock")))
        if knobs.get("reduction_strategy") == "split":   # a final kernel, or the last program with or without flags
            finals.add((knobs.get("split_last_program_final", True), knobs.get("split_last_program_sync")))
        tilings.add(knobs.get("pointwise_tiling", "auto"))
        for shape in p.input_shapes:
            n = 1
            for s in shape:
                n *= s
            assert n <= 20_000, shape  # two inputs always fit the subject's flat tensor of 40,000
            sizes_seen.update(shape)
        outs = p(*[torch.zeros(s, device="meta") for s in p.input_shapes])
        kinds.update(o.dtype for o in outs)
    collect()
    assert {s for s, _ in knobs_seen} == {"auto", "persistent", "looped", "split"}
    assert tilings == {"auto", "1d", "2d", "unrolled"}
    assert ("looped", 16) in knobs_seen and ("split", 128) in knobs_seen and ("persistent", None) in knobs_seen
    assert finals == {(False, None), (True, "fence"), (True, "tagged")}     # each form drawn, none left to the default
    assert max(sizes_seen) > 41
    assert {torch.int64, torch.bool, torch.float16} <= kinds  # argmax, any, casts reach the outputs


def test_every_program_has_a_step_even_when_its_drawn_steps_grow_too_large():
    """A step whose value would pass max_numel is dropped; with all dropped, the program returned its input
    and dynamo had no graph for the compiler."""
    drawn = []

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(programs(max_steps=1, max_numel=9))
    def collect(p):
        drawn.append(len(p.steps))
        outs = p(*[torch.randn(s) for s in p.input_shapes])
        assert p.steps and all(o is not None for o in outs)
    collect()
    assert min(drawn) == 1


def test_programs_never_norm_over_a_single_element():
    """x * rsqrt(x * x + eps) over one element: its gradient is the remainder of two O(1) terms that cancel, which
    eager's own error over a few elements cannot bound; a
    softmax over one element stays (exactly 1, gradient exactly 0), and norms over longer dims are drawn."""
    from tritondiff.harness.graph_fuzz import OPS
    norm_extents, softmax_extents = set(), set()

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(programs())
    def collect(p):
        values = [torch.zeros(s, device="meta") for s in p.input_shapes]
        for step in p.steps:
            if step.op in ("norm_rows", "softmax"):
                x = values[step.args[0]]
                (norm_extents if step.op == "norm_rows" else softmax_extents).add(x.shape[dict(step.params)["dim"]])
            values.append(OPS[step.op](*[values[a] for a in step.args], **step.kwargs()))
    collect()
    assert norm_extents and 1 not in norm_extents and 1 in softmax_extents, (norm_extents, softmax_extents)


def test_model_programs_draw_every_model_step_and_their_exact_run_is_the_program():
    seen = set()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(graph_fuzz.model_programs())
    def collect(program):
        seen.update(s.op for s in program.steps)
        x = torch.randn(program.input_shapes[0], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        (eager,) = program(x.float())
        (exact,) = program.exact(x)
        assert exact.dtype == torch.float64 or not exact.dtype.is_floating_point
        torch.testing.assert_close(eager.double(), exact.double(), rtol=1e-4, atol=1e-4)
    collect()
    wanted = graph_fuzz.MODEL_ONLY_OPS | {"norm_rows", "attention", "add", "argmax", "softmax", "silu", "gelu"}
    assert wanted <= seen, sorted(wanted - seen)


def test_model_program_weights_hold_the_same_values_in_every_dtype():
    like = {dt: torch.empty(0, dtype=dt) for dt in (torch.float64, torch.float32, torch.bfloat16, torch.float16)}
    weights = {dt: graph_fuzz._weight(41, 16, 3, t) for dt, t in like.items()}
    for dt, w in weights.items():
        assert w.dtype == dt and torch.equal(w.double(), weights[torch.float64]), dt
