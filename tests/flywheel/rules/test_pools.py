"""The pool rules (§2.4.3): SFT intake, RL metabolism, Phase 0 and the uniform gate."""
from flywheel.rules.pools import (
    KEEP,
    LEAVE,
    RETIRE,
    phase0_prescreen,
    rl_pool_metabolism,
    rl_uniform_intake_gate,
    sft_intake_allowed,
)


def test_rl_pool_metabolism():
    assert rl_pool_metabolism(["true"] * 8) == RETIRE
    assert rl_pool_metabolism(["false"] * 8) == LEAVE
    assert rl_pool_metabolism(["true", "false", "false"]) == KEEP
    assert rl_pool_metabolism(["true", "env_error"]) == RETIRE  # the environment is not scored
    assert rl_pool_metabolism(["env_error"]) == KEEP


def test_phase0_and_uniform_gate():
    assert phase0_prescreen("L1", 3, False, 1) == []
    assert phase0_prescreen("L3", 12, True, 2) == ["tier L3", "depth 12", "cross-app", "multi-function"]
    assert rl_uniform_intake_gate(["true", "false"]) and not rl_uniform_intake_gate(["true", "true"])
    assert not rl_uniform_intake_gate([]) and not rl_uniform_intake_gate(["false"])


def test_sft_takes_only_high_confidence_intakes():
    assert all(sft_intake_allowed(i) for i in ("htsc_true", "adjudicated", "ecdm_repaired",
                                                "semi_auto_verified"))
    assert not sft_intake_allowed("automatic") and not sft_intake_allowed("htsc_false")
