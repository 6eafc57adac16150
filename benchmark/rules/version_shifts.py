"""How a benchmark version evolves (report §4): it differs from its parent only in stated quota shifts.

`shift_quota` applies the shifts and renormalises; `version_diff` says which dimensions moved, by
how much, and which queries were added or retired; `attribute_scores` splits a model's score
change between two versions by dimension value, so every change of score is attributable.
"""


def shift_quota(parent: dict, shifts: dict) -> dict:
    """The parent's table with `shifts` ({dimension: {value: ±share}}) added and each shifted
    dimension renormalised to sum to 1. Dimensions not named keep their parent shares exactly."""
    table = {**parent, "shares": {d: dict(s) for d, s in (parent.get("shares") or {}).items()}}
    for dimension, moves in (shifts or {}).items():
        shares = table["shares"].setdefault(dimension, {})
        for value, delta in moves.items():
            shares[value] = max(0.0, float(shares.get(value, 0)) + float(delta))
        total = sum(shares.values())
        if total <= 0:
            raise ValueError(f"the shifts leave {dimension} with no share at all")
        table["shares"][dimension] = {v: round(s / total, 4) for v, s in shares.items()}
    return table


def version_diff(parent_table: dict, child_table: dict, parent_keys, child_keys) -> dict:
    """Which dimension values moved (from → to share, by how much) and which queries came and went."""
    moved = []
    parent_shares, child_shares = parent_table.get("shares") or {}, child_table.get("shares") or {}
    for dimension in sorted(set(parent_shares) | set(child_shares)):
        before, after = parent_shares.get(dimension, {}), child_shares.get(dimension, {})
        for value in sorted(set(before) | set(after)):
            old, new = float(before.get(value, 0)), float(after.get(value, 0))
            if abs(new - old) > 1e-9:
                moved.append({"dimension": dimension, "value": value, "from": round(old, 4), "to": round(new, 4),
                              "delta": round(new - old, 4)})
    parent_keys, child_keys = set(parent_keys), set(child_keys)
    return {"moved": moved, "dimensions": sorted({m["dimension"] for m in moved}),
            "added": sorted(child_keys - parent_keys), "retired": sorted(parent_keys - child_keys),
            "kept": len(parent_keys & child_keys)}


def attribute_scores(breakdown_a: dict, breakdown_b: dict) -> list[dict]:
    """Per (dimension, value): SR on version A, on version B, and the change.

    A breakdown is {dimension: {value: {"sr": float, "n": int}}} (scoring.breakdown)."""
    rows = []
    for dimension in sorted(set(breakdown_a) | set(breakdown_b)):
        a, b = breakdown_a.get(dimension, {}), breakdown_b.get(dimension, {})
        for value in sorted(set(a) | set(b)):
            sr_a, sr_b = (a.get(value) or {}).get("sr"), (b.get(value) or {}).get("sr")
            rows.append({"dimension": dimension, "value": value, "sr_a": sr_a, "n_a": (a.get(value) or {}).get("n", 0),
                         "sr_b": sr_b, "n_b": (b.get(value) or {}).get("n", 0),
                         "change": None if sr_a is None or sr_b is None else round(sr_b - sr_a, 4)})
    return rows
