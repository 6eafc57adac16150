"""The policy objective of agentic RL (report §3.3.3, eq. 6) and its KL term toward the SFT model.

Scalar reference versions: the torch trainer (training/trainer/) computes the same quantities on
tensors and is tested against these.
"""
from __future__ import annotations

import math
from collections.abc import Sequence


def clipped_term(log_ratio: float, advantage: float, epsilon: float = 0.2) -> float:
    """min(ρ·A, clip(ρ, 1 − ε, 1 + ε)·A) with ρ = exp(log π_θ − log π_θ_old) (eq. 6's summand).

    With A > 0 the gain stops at ρ = 1 + ε; with A < 0 the penalty stops at ρ = 1 − ε (and keeps
    growing past 1 + ε: the min is pessimistic both ways).
    """
    if epsilon < 0:
        raise ValueError(f"epsilon must be non-negative, not {epsilon!r}")
    ratio = math.exp(log_ratio)
    clipped = min(max(ratio, 1.0 - epsilon), 1.0 + epsilon)
    return min(ratio * advantage, clipped * advantage)


# Where eq. 6's ratio ρ is taken (the trainer's `importance_ratio`):
SEQUENCE = "sequence"  # GSPO: one ratio per response, the geometric mean of its tokens' ratios
TOKEN = "token"        # GRPO as DeepSeekMath writes it: a ratio per token, clipped token by token
IMPORTANCE_RATIOS = (SEQUENCE, TOKEN)


def step_term(token_log_ratios: Sequence[float], advantage: float, epsilon: float = 0.2,
              importance: str = SEQUENCE) -> float:
    """A step's (one response's) clipped term of eq. 6 from its tokens' log π_θ − log π_old.

    sequence (GSPO, Zheng et al. 2025): clipped_term(mean_t log ρ_t, A) — the response is clipped
    as one, so a long response's ratio neither explodes nor vanishes;
    token (GRPO): mean_t clipped_term(log ρ_t, A) — each token clipped on its own.
    The two agree when every token has the same ratio.
    """
    if not token_log_ratios:
        raise ValueError("a step needs at least one response token")
    if importance == SEQUENCE:
        return clipped_term(math.fsum(token_log_ratios) / len(token_log_ratios), advantage, epsilon)
    if importance == TOKEN:
        return math.fsum(clipped_term(r, advantage, epsilon) for r in token_log_ratios) / len(token_log_ratios)
    raise ValueError(f"importance_ratio must be one of {', '.join(IMPORTANCE_RATIOS)}, not {importance!r}")


def kl_k3(logp: float, ref_logp: float) -> float:
    """The k3 estimator of KL(π_θ ‖ π_ref) at one sampled token: exp(d) − d − 1 with
    d = log π_ref − log π_θ (Schulman's "Approximating KL divergence"; GRPO's KL term). Never
    negative, 0 exactly where the two log-probabilities agree."""
    d = ref_logp - logp
    return math.exp(d) - d - 1.0


def grpo_objective(groups: Sequence[Sequence[tuple[float, float]]], epsilon: float = 0.2) -> float:
    """Eq. 6 for one group: J = (1/G) Σ_i (1/T_i) Σ_t clipped_term(log ρ_{i,t}, A_{i,t}).

    `groups` holds the G trajectories of one group, each a list of (log_ratio, advantage) per step;
    each trajectory weighs the same whatever its length. The KL term is added by the trainer
    (kl_coef · mean k3), outside this sum, as the report describes it.
    """
    if not groups:
        raise ValueError("the objective needs at least one trajectory")
    total = 0.0
    for i, trajectory in enumerate(groups):
        if not trajectory:
            raise ValueError(f"trajectory {i} has no steps")
        total += math.fsum(clipped_term(r, a, epsilon) for r, a in trajectory) / len(trajectory)
    return total / len(groups)
