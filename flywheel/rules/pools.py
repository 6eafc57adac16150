"""The rules of the three data pools (§2.4.3), as pure functions."""

RETIRE, KEEP, LEAVE, WAIT = "retire", "keep", "leave", "wait"
# A rollout whose verdict is not known yet: still being collected or judged ("pending"), or
# Undetermined until a person decides (§2.4.2).
AWAITING_VERDICT = ("pending", "undetermined")

# Only these may enter the SFT pool (purity first): the three classes of §2.4.3, and the
# semi-automatic line's trajectories, verified by a person at every step (§2.3.1, the gold
# standard), which is the strictest human judgment a trajectory can get; among those, the ones
# whose annotator stated the task infeasible are refusal samples, kept apart by their intake.
# The hand-back channel's samples (§2.3.7) teach one step each, written by rule at a recognised state.
SFT_INTAKES = ("htsc_true", "adjudicated", "ecdm_repaired", "semi_auto_verified", "semi_auto_refusal", "handback")


def sft_intake_allowed(intake: str) -> bool:
    return intake in SFT_INTAKES


def rl_pool_metabolism(rollout_verdicts: list[str]) -> str:
    """Phase 1 metabolism after G rollouts of the current model over one query.

    All True → retire (mastered); all False → leave the pool (failures go to the ECDM);
    mixed → keep (the capability boundary). The within-group distribution is one of successes and
    failures, so the group waits while any rollout awaits its verdict (an Undetermined one is
    counted once a person decides). Env_ERROR rollouts measure the environment, not the model:
    they are re-collected, and one passed here (no re-collection left) is left out. A group with
    no scorable rollout is kept for another try.
    """
    if any(v in AWAITING_VERDICT for v in rollout_verdicts):
        return WAIT
    scored = [v for v in rollout_verdicts if v in ("true", "false")]
    if not scored:
        return KEEP
    if all(v == "true" for v in scored):
        return RETIRE
    if all(v == "false" for v in scored):
        return LEAVE
    return KEEP


def phase0_prescreen(tier: str, step_depth: int, cross_app: bool, function_count: int,
                     min_depth: int = 8) -> list[str]:
    """Phase 0 bootstrap: the objective difficulty features that qualify a query for the RL pool.

    Returns the features it has (empty: not banked): tier L2/L3, large step depth, cross-app
    linkage, multi-function combination.
    """
    features = []
    if tier in ("L2", "L3"):
        features.append(f"tier {tier}")
    if step_depth >= min_depth:
        features.append(f"depth {step_depth}")
    if cross_app:
        features.append("cross-app")
    if function_count > 1:
        features.append("multi-function")
    return features


def rl_uniform_intake_gate(rollout_verdicts: list[str]) -> bool:
    """Phase 1 gate for every channel: admit only queries in the current policy's middle band
    (neither all-true nor all-false)."""
    return rl_pool_metabolism(rollout_verdicts) == KEEP and any(
        v in ("true", "false") for v in rollout_verdicts)


def rl_intake_refusal(rollout_verdicts: list[str]) -> str:
    """Why the uniform gate refuses a judged group ("" when it admits): mastered, beyond the
    boundary, or nothing the policy did could be scored."""
    if rl_uniform_intake_gate(rollout_verdicts):
        return ""
    if rl_pool_metabolism(rollout_verdicts) == WAIT:
        return "a rollout still awaits its verdict"
    scored = [v for v in rollout_verdicts if v in ("true", "false")]
    if not scored:
        return f"none of its {len(rollout_verdicts)} rollouts could be scored (environment errors)"
    if all(v == "true" for v in scored):
        return f"all {len(scored)} rollouts succeeded (already mastered)"
    return f"all {len(scored)} rollouts failed (beyond the current boundary)"
