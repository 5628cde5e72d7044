import pytest

from tritondiff import compiler
from tritondiff.compiler.config import CompilerConfig
from tritondiff.compiler.exc import CompilerError, ConfigError


def test_patch_sets_and_restores():
    before = compiler.config.reduction_strategy
    with compiler.config.patch(reduction_strategy="looped", rblock=64):
        assert compiler.config.reduction_strategy == "looped"
        assert compiler.config.rblock == 64
    assert compiler.config.reduction_strategy == before
    assert compiler.config.rblock is None


def test_patch_restores_after_an_exception():
    with pytest.raises(RuntimeError):
        with compiler.config.patch(reduction_strategy="split"):
            raise RuntimeError("boom")
    assert compiler.config.reduction_strategy == "auto"


@pytest.mark.parametrize("changes, needle", [
    ({"reduction_strategy": "fast"}, "reduction_strategy"),
    ({"no_such_knob": 1}, "unknown compiler config knob"),
    ({"rblock": 100}, "power of two"),
    ({"xblock": 0}, "positive int"),
    ({"fusion": "yes"}, "True or False"),
    ({"execution": "gpu"}, "execution"),
    ({"fp_fusion": 1}, "True or False"),
    ({"one_wave_elements_per_warp": 300}, "power of two"),
    ({"mixed_order_wide_warps": 12}, "power of two"),
    ({"split_streaming_warps": 64}, "at most 32 warps"),
    ({"max_num_warps": 64}, "at most 32 warps"),
    ({"persistent_wide_warps": 64}, "at most 32 warps"),
    ({"looped_reread_warps": 48}, "power of two"),
    ({"looped_reread_warps": 64}, "at most 32 warps"),
    ({"looped_reread_min_held": 0}, "positive int"),
    ({"persistent_wide_max_rnumel": 30000}, "power of two"),
    ({"persistent_wide_min_fill": 0}, r"fraction in \(0, 1\]"),
    ({"persistent_wide_min_fill": 1.5}, r"fraction in \(0, 1\]"),
    ({"persistent_wide_min_fill": True}, r"fraction in \(0, 1\]"),
    ({"num_warps": 6}, "power of two"),
    ({"split_streaming_min_steps": 0}, "positive int"),
    ({"split_last_program_final": 1}, "True or False"),
    ({"split_last_program_max_numel": 0}, "positive int"),
    ({"split_short_programs_per_sm": 0}, "positive int"),
    ({"split_short_tagged_programs_per_sm": 0}, "positive int"),
    ({"split_last_program_sync": "flags"}, r"split_last_program_sync='flags': use one of \('tagged', 'fence'\)"),
    ({"persistent_reread_loads": "yes"}, "True or False"),
    ({"native_bf16_casts": 1}, "True or False"),
    ({"loop_stages": 0}, "positive int"),
    ({"mixed_order_loop_stages": 0}, "positive int"),
    ({"mixed_order_wide_bytes": -1}, "positive int"),
    ({"hoist_loads": 1}, "True or False"),
    ({"lean_runtime": "yes"}, "True or False"),
    ({"row_elements_from_registers": 1}, "True or False"),
    ({"spread_row_loads": "on"}, "True or False"),
    ({"partitioner": "greedy"}, r"partitioner='greedy': use one of \('min_cut', 'default'\)"),
    ({"pointwise_tiling": "3d"}, "pointwise_tiling"),
])
def test_patch_rejects_bad_knobs_with_a_clear_error(changes, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        with compiler.config.patch(**changes):
            pass
    assert isinstance(info.value, CompilerError) and isinstance(info.value, ValueError)
    assert info.value.knob == next(iter(changes))


def test_a_tensor_limit_past_triton_s_own_is_refused_naming_the_limit():
    from triton.language.core import TRITON_MAX_TENSOR_NUMEL
    assert TRITON_MAX_TENSOR_NUMEL == 1_048_576 == CompilerConfig().max_triton_tensor_numel
    with pytest.raises(ConfigError, match="Triton's own limit of 1,048,576") as info:
        with compiler.config.patch(max_triton_tensor_numel=2**22, reduction_strategy="persistent"):
            pass
    assert info.value.knob == "max_triton_tensor_numel"
    assert compiler.config.max_triton_tensor_numel == 1_048_576 and compiler.config.reduction_strategy == "auto"
    with compiler.config.patch(max_triton_tensor_numel=2**20):  # the limit itself, and below it, are fine
        pass
    with compiler.config.patch(max_triton_tensor_numel=1024):
        pass


def test_cache_key_tracks_codegen_knobs_only():
    cfg = CompilerConfig()
    key = cfg.cache_key()
    with cfg.patch(reduction_strategy="looped"):
        assert cfg.cache_key() != key
    with cfg.patch(execution="ir", verify_ir=True, lean_runtime=False):   # how graphs run, not what they are
        assert cfg.cache_key() == key
    with cfg.patch(partitioner="default"):                               # which graphs exist, not their code
        assert cfg.cache_key() == key
    with cfg.patch(row_elements_from_registers=False):
        assert cfg.cache_key() != key
    with cfg.patch(spread_row_loads=False):
        assert cfg.cache_key() != key


def test_env_vars_are_read_in_config(monkeypatch):
    monkeypatch.setenv("TRITONDIFF_COMPILER_FALLBACK", "aten.exp, aten.mul.Tensor")
    monkeypatch.setenv("TRITONDIFF_COMPILER_VERIFY", "1")
    monkeypatch.setenv("TRITONDIFF_COMPILER_FP_FUSION", "1")
    cfg = CompilerConfig()
    assert cfg.fallback_ops == frozenset({"aten.exp", "aten.mul.Tensor"})
    assert cfg.verify_ir is True
    assert cfg.fp_fusion is True and CompilerConfig.__dataclass_fields__["fp_fusion"].default_factory() is True
    monkeypatch.delenv("TRITONDIFF_COMPILER_FP_FUSION")
    assert CompilerConfig().fp_fusion is False
    assert CompilerConfig().lean_runtime is True                       # on unless the environment says no
    monkeypatch.setenv("TRITONDIFF_COMPILER_LEAN_RUNTIME", "0")
    assert CompilerConfig().lean_runtime is False
    assert CompilerConfig().partitioner == "min_cut"
    monkeypatch.setenv("TRITONDIFF_COMPILER_PARTITIONER", "default")
    assert CompilerConfig().partitioner == "default"


def test_the_cache_token_follows_every_knob_change_through_its_shortcut():
    """Setting a knob to a value it had before moves the token by a lookup (_STEPS), not by rebuilding the key:
    after any sequence of sets and patches the token must be the one a freshly built key gets."""
    import dataclasses
    import random

    import sys
    module = sys.modules["tritondiff.compiler.config"]

    def fresh() -> tuple:
        return tuple((f.name, getattr(compiler.config, f.name)) for f in dataclasses.fields(compiler.config)
                     if f.name not in module._NOT_IN_KEY)
    rng = random.Random(3)
    choices = {"autotune": [True, False], "reduction_strategy": ["auto", "looped", "persistent"],
               "elements_per_warp": [256, 512], "execution": ["triton", "ir"], "fp_fusion": [True, False]}
    saved = {k: getattr(compiler.config, k) for k in choices}
    try:
        for _ in range(200):
            knob = rng.choice(sorted(choices))
            value = rng.choice(choices[knob])
            if rng.random() < 0.5:
                setattr(compiler.config, knob, value)
            else:
                with compiler.config.patch(**{knob: value}):
                    assert compiler.config.cache_key() == fresh()
            assert compiler.config.cache_key() == fresh()
            assert module._TOKENS[fresh()] == compiler.config.cache_token()
    finally:
        for k, v in saved.items():
            setattr(compiler.config, k, v)


def test_review_finding_a_stale_token_cannot_poison_the_knob_steps():
    """Review finding: a step was recorded as the token of the whole config after the change, so a
    config whose token was stale (a field written around __setattr__) taught every later config a wrong step:
    a clean config then claimed autotune=True in its key.  A step now follows from the old token's own key."""
    import pickle
    import sys
    config_class = sys.modules["tritondiff.compiler.config"].CompilerConfig
    stale = config_class()
    stale.cache_token()
    object.__setattr__(stale, "autotune", not stale.autotune)      # the token does not see this
    stale.xblock = 64
    clean = config_class()
    clean.cache_token()
    clean.xblock = 64
    assert dict(clean.cache_key())["autotune"] == clean.autotune
    copy = pickle.loads(pickle.dumps(compiler.config))                # a token is this process's number
    assert "_token" not in copy.__dict__ and copy.cache_key() == compiler.config.cache_key()


def test_each_reduction_strategy_s_knobs_are_a_section_under_short_names():
    cfg = compiler.config
    assert cfg.split.count is cfg.split_count is None and cfg.looped.rblock == cfg.looped_rblock
    assert "count" in cfg.split.names() and "prefetch" in cfg.mixed_order.names()
    key = cfg.cache_key()
    with cfg.split.patch(count=4):
        assert cfg.split_count == 4 and cfg.cache_key() != key          # the flat knob, in the cache key
    with cfg.patch(**{"split.count": 8, "looped_rblock": 64}):          # either name in one patch
        assert (cfg.split.count, cfg.looped.rblock) == (8, 64)
    assert cfg.split.count is None and cfg.looped.rblock == cfg.looped_rblock and cfg.cache_key() == key
    with pytest.raises(AttributeError, match="compiler.config.split has no knob 'cuont'; it has: .*count"):
        cfg.split.cuont
    with pytest.raises(ConfigError, match="split_count=0: expected a positive int"):
        cfg.split.count = 0
    with pytest.raises(ConfigError, match="has no knob 'rblok'"):
        cfg.looped.rblok = 64
    assert cfg.split.count is None and not hasattr(cfg.persistent, "count")
