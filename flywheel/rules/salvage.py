"""Salvage yield of the self-evolution loop (§2.5): how much of a round's failure became data."""

SUPERVISION_PATHS = ("step", "rqa", "human", "env")


def salvage_yield(failed: int, salvaged_by_path: dict[str, int]) -> float | None:
    """Share of failed trajectories that produced supervision (each counted once, under the path
    that produced it: Teacher step correction, RQA, human repair, env repair). None with no failures."""
    if failed <= 0:
        return None
    salvaged = sum(salvaged_by_path.get(path, 0) for path in SUPERVISION_PATHS)
    return round(min(salvaged, failed) / failed, 3)
