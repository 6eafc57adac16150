"""Counterfactual query derivation's trigger (§2.5.2): when a class of model failures recurs.

Failed trajectories are clustered by their structured attribution (§2.5.1): the level, the cause
and the capability-profile dimension (§2.2.4) it points to. Only a class that recurs across
multiple trajectories AND multiple queries points to a capability deficiency; one query failing
many times is that query's problem, one trajectory is an occasional slip.
"""

MIN_TRAJECTORIES = 3
MIN_QUERIES = 2


def failure_class_key(level: int, cause: str, capability: str = "") -> str:
    """The class a failure belongs to: "level:cause:capability" (capability may be empty)."""
    return f"{int(level)}:{(cause or 'unknown').strip()}:{(capability or '').strip()}"


def recurring_error_class(trajectories: int, queries: int, min_trajectories: int = MIN_TRAJECTORIES,
                          min_queries: int = MIN_QUERIES) -> bool:
    """"The same error class recurs across multiple trajectories and multiple queries": at least
    `min_trajectories` failed trajectories, spread over at least `min_queries` distinct queries."""
    return trajectories >= max(1, min_trajectories) and queries >= max(1, min_queries)


def recurs_again_after_derivation(trajectories_since: int, queries_since: int,
                                  min_trajectories: int = MIN_TRAJECTORIES, min_queries: int = MIN_QUERIES) -> bool:
    """A class already derived is derived again only when it recurs anew among the failures that
    came after its adversarial queries: the model is still fragile at that boundary (§2.5.3)."""
    return recurring_error_class(trajectories_since, queries_since, min_trajectories, min_queries)
