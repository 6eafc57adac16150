"""Advantages for agentic RL: the report's GRPO (§3.3.3, eq. 5) and GiGPO (ClawGUI §3.2; Feng et al. 2025).

Both give one advantage per step of every trajectory in one group (the G rollouts of one query);
the run config chooses with "advantage": "grpo" | "gigpo".

Normalisation uses the population standard deviation (divide by N, not N − 1): the group is the
whole set being compared, not a sample of a larger one, so normalised values have unit RMS; it is
also defined for a group of one. A set whose values are all equal (std ≤ eps) contributes 0 for its
term, never NaN or a huge quotient of rounding noise.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence

GRPO, GIGPO = "grpo", "gigpo"
ADVANTAGES = (GRPO, GIGPO)


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def population_std(values: Sequence[float]) -> float:
    centre = mean(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / len(values))


def normalized(values: Sequence[float], eps: float = 1e-6, scale: bool = True) -> list[float]:
    """(v − mean) / std over `values`; all zeros when std ≤ eps. `scale=False`: v − mean only
    (GiGPO's "mean_norm" mode, F_norm = 1)."""
    if not values:
        return []
    centre, spread = mean(values), population_std(values)
    if spread <= eps:
        return [0.0] * len(values)
    return [(v - centre) / spread if scale else v - centre for v in values]


def _check_group(trajectory_rewards: Sequence[float], step_rewards: Sequence[Sequence[float]]) -> None:
    if len(trajectory_rewards) != len(step_rewards):
        raise ValueError(f"{len(trajectory_rewards)} trajectory rewards for {len(step_rewards)} trajectories")
    for i, steps in enumerate(step_rewards):
        if not steps:
            raise ValueError(f"trajectory {i} has no steps")


def grpo_advantages(trajectory_rewards: Sequence[float], step_rewards: Sequence[Sequence[int]],
                    lam: float = 1.0, eps: float = 1e-6) -> list[list[float]]:
    """Eq. 5: A_{i,t} = (R_i − mean_j R_j) / std_j R_j + λ · (r_{i,t} − mean_t' r_{i,t'}) / std_t' r_{i,t'}.

    The trajectory reward is normalised within the group (whole solutions compared), the step reward
    within its own trajectory (steps compared). A group whose R are all equal gives 0 for the first
    term; a trajectory whose step rewards are all equal gives 0 for its step term.
    """
    _check_group(trajectory_rewards, step_rewards)
    episode = normalized(list(trajectory_rewards), eps)
    return [[episode[i] + lam * step for step in normalized(list(steps), eps)]
            for i, steps in enumerate(step_rewards)]


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """G_t = Σ_{k ≥ t} γ^{k−t} r_k within one trajectory (GiGPO's step return)."""
    returns, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def gigpo_advantages(trajectory_rewards: Sequence[float], step_rewards: Sequence[Sequence[int]],
                     anchors: Sequence[Sequence[Hashable]], omega: float = 1.0, gamma: float = 0.95,
                     eps: float = 1e-6, scale: bool = True) -> list[list[float]]:
    """GiGPO's two-level advantage over one group (ClawGUI §3.2; Feng et al. 2025, "Group-in-Group
    Policy Optimization", and verl-agent's gigpo/core_gigpo.py):

        episode level   A^E_i = (R_i − mean_j R_j) / std_j R_j        (as eq. 5's first term)
        anchor groups   U(s) = every step (i, t), across the group's trajectories, whose anchor
                        key anchors[i][t] is s (the same screen: e.g. a hash of its hierarchy)
        step return     G_{i,t} = Σ_{k ≥ t} γ^{k−t} r_{i,k}   (eq. 4's step rewards, discounted)
        step level      A^S_{i,t} = (G_{i,t} − mean_{U(s)} G) / std_{U(s)} G
        advantage       A_{i,t} = A^E_i + ω · A^S_{i,t}

    A step alone in its anchor group has nothing to be compared with: A^S = 0 (verl-agent's mean
    over a singleton group gives the same). `scale=False` is the "mean_norm" mode (no division by
    std). The report's step rewards replace GiGPO's sparse environment reward in G_{i,t}.
    """
    _check_group(trajectory_rewards, step_rewards)
    if len(anchors) != len(step_rewards) or any(len(a) != len(s) for a, s in zip(anchors, step_rewards)):
        raise ValueError("anchors must name the state of every step of every trajectory")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must lie in [0, 1], not {gamma!r}")
    episode = normalized(list(trajectory_rewards), eps, scale)
    returns = [discounted_returns(list(steps), gamma) for steps in step_rewards]
    members = defaultdict(list)
    for i, keys in enumerate(anchors):
        for t, key in enumerate(keys):
            members[key].append((i, t))
    step_level = [[0.0] * len(steps) for steps in step_rewards]
    for group in members.values():
        for (i, t), value in zip(group, normalized([returns[i][t] for i, t in group], eps, scale)):
            step_level[i][t] = value
    return [[episode[i] + omega * a for a in step_level[i]] for i in range(len(step_rewards))]


def group_advantages(method: str, trajectory_rewards: Sequence[float], step_rewards: Sequence[Sequence[int]],
                     anchors: Sequence[Sequence[Hashable]] | None = None, lam: float = 1.0,
                     gamma: float = 0.95, eps: float = 1e-6) -> list[list[float]]:
    """The run config's choice: "grpo" (eq. 5, λ) or "gigpo" (anchor groups, ω = λ, γ)."""
    if method == GRPO:
        return grpo_advantages(trajectory_rewards, step_rewards, lam=lam, eps=eps)
    if method == GIGPO:
        if anchors is None:
            raise ValueError("gigpo needs the anchor state of every step")
        return gigpo_advantages(trajectory_rewards, step_rewards, anchors, omega=lam, gamma=gamma, eps=eps)
    raise ValueError(f"unknown advantage {method!r}: one of {', '.join(ADVANTAGES)}")
