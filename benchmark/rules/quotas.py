"""Quota tables (report §4.2): a version's purpose as target shares over Table 4's dimensions.

A table is plain JSON:
    {"size": 150,
     "shares": {"path_complexity": {"simple": 0.12, "moderate": 0.6, "complex": 0.28}, ...},
     "must_include": [{"dimension": "refusal_safety", "value": "high-sensitivity", "min": 2}],
     "app_cap": 8,
     "tolerance": 0.05}
Shares follow the dimensions a version cares about; risk scenarios are not a share but must be
present (§4.2.3); no app may contribute more than `app_cap` queries (§4.2.1).
"""
from collections import Counter

from benchmark.rules.metric_system import BY_KEY, QUOTA_DIMENSIONS

DEFAULT_TOLERANCE = 0.05


def quota_problems(table: dict) -> list[str]:
    """Every problem with a quota table, named ([] when it can drive generation and review)."""
    if not isinstance(table, dict):
        return ["a quota table is a JSON object"]
    problems = [f"unknown field {key!r}" for key in table if key not in (
        "size", "shares", "must_include", "app_cap", "tolerance", "preset", "purpose")]
    size = table.get("size")
    if size is not None and (not isinstance(size, int) or size < 1):
        problems.append("size: a positive whole number of queries")
    for dimension, shares in (table.get("shares") or {}).items():
        if dimension not in QUOTA_DIMENSIONS:
            problems.append(f"shares: unknown dimension {dimension!r} (one of {', '.join(QUOTA_DIMENSIONS)})")
            continue
        if not isinstance(shares, dict) or not shares:
            problems.append(f"shares.{dimension}: a mapping of value → share")
            continue
        for value, share in shares.items():
            if value not in BY_KEY[dimension].values:
                problems.append(f"shares.{dimension}: {value!r} is not one of {', '.join(BY_KEY[dimension].values)}")
            if not isinstance(share, (int, float)) or share < 0:
                problems.append(f"shares.{dimension}.{value}: a share ≥ 0")
        total = sum(s for s in shares.values() if isinstance(s, (int, float)))
        if abs(total - 1) > 0.011:
            problems.append(f"shares.{dimension}: the shares sum to {total:.3f}, not 1")
    for i, rule in enumerate(table.get("must_include") or []):
        if not isinstance(rule, dict) or rule.get("dimension") not in QUOTA_DIMENSIONS or (
                rule.get("value") not in BY_KEY[rule["dimension"]].values):
            problems.append(f"must_include[{i}]: needs a known dimension and value")
        elif not isinstance(rule.get("min", 1), int) or rule.get("min", 1) < 1:
            problems.append(f"must_include[{i}].min: a whole number ≥ 1")
    cap = table.get("app_cap")
    if cap is not None and (not isinstance(cap, int) or cap < 1):
        problems.append("app_cap: a whole number ≥ 1")
    return problems


def realised_counts(items: list[dict]) -> dict:
    """{dimension: Counter(value → queries)} over items' dimension values."""
    counts = {dimension: Counter() for dimension in QUOTA_DIMENSIONS}
    for values in items:
        for dimension in QUOTA_DIMENSIONS:
            if values.get(dimension):
                counts[dimension][values[dimension]] += 1
    return counts


def drift(table: dict, items: list[dict]) -> list[dict]:
    """Quota vs realised, one row per (dimension, value) the table sets: the target share and count,
    the realised share and count, and the signed gap (realised − target share)."""
    counts, size = realised_counts(items), max(len(items), 1)
    target_size = table.get("size") or len(items)
    rows = []
    for dimension, shares in (table.get("shares") or {}).items():
        for value in BY_KEY[dimension].values:
            if value not in shares and not counts[dimension][value]:
                continue
            target = float(shares.get(value, 0))
            realised = counts[dimension][value] / size
            rows.append({"dimension": dimension, "value": value, "target": round(target, 4),
                         "target_count": round(target * target_size), "count": counts[dimension][value],
                         "realised": round(realised, 4), "gap": round(realised - target, 4)})
    return rows


def app_overflow(app_lists: list[list[str]], cap: int | None) -> dict:
    """{app: queries} for each app over the per-app cap (a query counts for every app it uses)."""
    if not cap:
        return {}
    per_app = Counter(app for apps in app_lists for app in set(apps))
    return {app: n for app, n in sorted(per_app.items()) if n > cap}


def missing_must_include(table: dict, items: list[dict]) -> list[dict]:
    counts = realised_counts(items)
    missing = []
    for rule in table.get("must_include") or []:
        have = counts[rule["dimension"]][rule["value"]]
        if have < rule.get("min", 1):
            missing.append({**rule, "min": rule.get("min", 1), "count": have})
    return missing


def deficits(table: dict, items: list[dict]) -> list[dict]:
    """What targeted generation must add: (dimension, value, how many more), largest first.

    A cell is short when it lacks more than the tolerance's share of the size (1 query of 24 at
    5% is within it, 2 are not); a must-include rule below its minimum is always short."""
    tolerance = float(table.get("tolerance", DEFAULT_TOLERANCE))
    size = table.get("size") or max(len(items), 1)
    counts = realised_counts(items)
    short = {}
    for dimension, shares in (table.get("shares") or {}).items():
        for value, share in shares.items():
            missing = round(float(share) * size) - counts[dimension][value]
            if missing > 0 and missing / size > tolerance:
                short[(dimension, value)] = missing
    for rule in missing_must_include(table, items):
        key = (rule["dimension"], rule["value"])
        short[key] = max(short.get(key, 0), rule["min"] - rule["count"])
    return [{"dimension": d, "value": v, "missing": n}
            for (d, v), n in sorted(short.items(), key=lambda kv: (-kv[1], kv[0]))]


def within_quota(table: dict, items: list[dict], app_lists: list[list[str]] | None = None) -> bool:
    """True when no cell drifts beyond the tolerance, every must-include holds and no app is over."""
    tolerance = float(table.get("tolerance", DEFAULT_TOLERANCE))
    return (all(abs(row["gap"]) <= tolerance for row in drift(table, items))
            and not missing_must_include(table, items)
            and not app_overflow(app_lists or [], table.get("app_cap")))


def _distance(table: dict, counts: dict, size: int) -> float:
    total = 0.0
    for dimension, shares in (table.get("shares") or {}).items():
        for value in BY_KEY[dimension].values:
            total += abs(counts[dimension][value] / max(size, 1) - float(shares.get(value, 0)))
    return total


def select_against_quota(table: dict, candidates: list[dict], size: int | None = None,
                         fixed: list[dict] | None = None) -> list[int]:
    """Indexes of candidates to add to `fixed` so the whole best matches the table (greedy).

    Each candidate is {"values": {dimension: value}, "apps": [...]}. Must-include rules are met
    first; no app goes over the cap; then each pick is the one that most reduces the total
    distance between realised and target shares. Deterministic for the same input order."""
    fixed = list(fixed or [])
    size = size or table.get("size") or len(candidates) + len(fixed)
    cap = table.get("app_cap")
    chosen: list[int] = []
    values = [c["values"] for c in fixed]
    per_app = Counter(app for c in fixed for app in set(c.get("apps") or []))

    def fits(i):
        return not cap or all(per_app[a] < cap for a in set(candidates[i].get("apps") or []))

    def take(i):
        chosen.append(i)
        values.append(candidates[i]["values"])
        per_app.update(set(candidates[i].get("apps") or []))

    for rule in table.get("must_include") or []:
        for i, candidate in enumerate(candidates):
            have = sum(1 for v in values if v.get(rule["dimension"]) == rule["value"])
            if have >= rule.get("min", 1):
                break
            if i not in chosen and candidate["values"].get(rule["dimension"]) == rule["value"] and fits(i):
                take(i)
    while len(values) < size:
        best, best_distance = None, None
        for i in range(len(candidates)):
            if i in chosen or not fits(i):
                continue
            counts = realised_counts(values + [candidates[i]["values"]])
            distance = _distance(table, counts, len(values) + 1)
            if best_distance is None or distance < best_distance - 1e-12:
                best, best_distance = i, distance
        if best is None:
            break
        take(best)
    return chosen
