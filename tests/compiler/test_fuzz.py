"""The graph fuzzer: Hypothesis builds random pointwise / reduction / view programs; each is
compiled and judged against eager with the harness oracle.  Every failure it finds becomes a
named test in tests/compiler/test_regressions.py holding the program as a ``Program`` value."""
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.exc import ReductionTooLarge
from compiler.fuzz import OPS, Program, Step, check_program, programs
from harness.config import config as harness_config

EXAMPLES = 12 if harness_config.profile != "nightly" else 400


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(program=programs(), seed=st.integers(0, 2**16),
       strategy=st.sampled_from([None, "persistent", "looped", "split"]))
def test_random_programs_match_eager(program, seed, strategy):
    try:
        result = check_program(program, seed, strategy=strategy)
    except ReductionTooLarge:  # a forced strategy past the limit: refused on purpose
        return
    assert result.passed, f"{result.message}\n{program!r}"


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

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(programs())
    def collect(p):
        seen.update(s.op for s in p.steps)
    collect()
    assert seen == set(OPS), sorted(set(OPS) - seen)
