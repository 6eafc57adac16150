"""Curriculum sampling of RL queries (Xiaomi-GUI-0 §4.4).

"Before rollout, task sampling uses smoothed success-rate estimates and a softmax score; α and β
shift sampling from easier tasks toward harder ones during training." The paper's summary gives no
formula; the one implemented is:

    p̂_q      = (s_q + a) / (n_q + b)                      smoothed success rate (a = 1, b = 2: Laplace)
    α(t)     = α_0 + (α_1 − α_0) · t,  β(t) = β_0 + (β_1 − β_0) · t     t = training progress in [0, 1]
    score_q  = (α(t) · p̂_q + β(t) · (1 − p̂_q)) / τ
    w_q      = softmax(score)_q

With the defaults (α: 1 → 0, β: 0 → 1) early training favours queries the policy often solves
(high p̂), late training the ones it rarely solves, and halfway (α = β = 0.5) every query weighs the
same. τ sets how sharp the preference is: the easiest and hardest query's weights differ by at most
a factor exp(|α − β| / τ).
"""
from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence

TEMPERATURE = 0.25


def smoothed_success_rate(successes: int, attempts: int, prior_successes: float = 1,
                          prior_attempts: float = 2) -> float:
    """(s + a) / (n + b): a Beta(a, b − a) prior's posterior mean; with no attempt, a / b (½)."""
    if attempts < 0 or not 0 <= successes <= attempts:
        raise ValueError(f"need 0 ≤ successes ≤ attempts, not {successes} of {attempts}")
    if prior_attempts <= 0 or not 0 <= prior_successes <= prior_attempts:
        raise ValueError(f"need 0 ≤ prior_successes ≤ prior_attempts > 0, not {prior_successes} of {prior_attempts}")
    return (successes + prior_successes) / (attempts + prior_attempts)


def schedule(start: float, end: float, progress: float) -> float:
    return start + (end - start) * progress


def sampling_weights(success_rates: Sequence[float], progress: float, alpha_start: float = 1.0,
                     alpha_end: float = 0.0, beta_start: float = 0.0, beta_end: float = 1.0,
                     temperature: float = TEMPERATURE) -> list[float]:
    """Softmax weights over queries from their (smoothed) success rates at training `progress`."""
    if not 0.0 <= progress <= 1.0:
        raise ValueError(f"progress must lie in [0, 1], not {progress!r}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, not {temperature!r}")
    if any(not 0.0 <= p <= 1.0 for p in success_rates):
        raise ValueError("success rates must lie in [0, 1]")
    if not success_rates:
        return []
    alpha, beta = schedule(alpha_start, alpha_end, progress), schedule(beta_start, beta_end, progress)
    scores = [(alpha * p + beta * (1.0 - p)) / temperature for p in success_rates]
    top = max(scores)  # subtract the max: exp never overflows
    exps = [math.exp(s - top) for s in scores]
    total = math.fsum(exps)
    return [e / total for e in exps]


def sample_queries(ids: Sequence[Hashable], weights: Sequence[float], n: int, seed: int) -> list:
    """n distinct ids drawn without replacement with probability proportional to weight
    (Efraimidis–Spirakis: each id gets the key log(u)/w, the n largest keys win). Deterministic for
    the same ids, weights, n and seed; an id of weight 0 is never drawn; n larger than the number of
    drawable ids returns all of them. The result is in draw order (largest key first)."""
    if len(ids) != len(weights):
        raise ValueError(f"{len(ids)} ids for {len(weights)} weights")
    if n < 0:
        raise ValueError(f"n must be non-negative, not {n!r}")
    if any(w < 0 or not math.isfinite(w) for w in weights):
        raise ValueError("weights must be finite and non-negative")
    rng = random.Random(seed)
    keyed = []
    for position, (query, weight) in enumerate(zip(ids, weights)):
        u = 1.0 - rng.random()  # (0, 1]: log(u) is finite
        if weight > 0:
            keyed.append((math.log(u) / weight, -position, query))
    keyed.sort(reverse=True)
    return [query for _, _, query in keyed[:n]]
