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
