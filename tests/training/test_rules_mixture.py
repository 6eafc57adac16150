"""Mixture ratios per source (§5.3.3), against hand-counted cases."""
import random

import pytest

from training.rules.mixture import cap_per_group, copies_per_row, mix, validate_ratios


def rows(source, n):
    return [f"{source}{i}" for i in range(n)]


def test_ratio_one_keeps_every_row_in_order_and_sources_in_name_order():
    kept = mix({"b": rows("b", 3), "a": rows("a", 2)}, {"a": 1.0, "b": 1}, seed=0)
    assert kept == ["a0", "a1", "b0", "b1", "b2"]


def test_a_half_keeps_a_seeded_half_and_the_same_half_for_the_same_seed():
    pool = {"ecdm_repaired": rows("e", 10)}
    first = mix(pool, {"ecdm_repaired": 0.5}, seed=7)
    assert len(first) == 5 and len(set(first)) == 5 and set(first) <= set(pool["ecdm_repaired"])
    assert first == sorted(first, key=lambda row: int(row[1:]))  # the pool's order is kept
    assert mix(pool, {"ecdm_repaired": 0.5}, seed=7) == first
    others = {tuple(mix(pool, {"ecdm_repaired": 0.5}, seed=seed)) for seed in range(20)}
    assert len(others) > 1  # the seed decides which half


def test_a_fractional_count_rounds_half_up():
    assert len(mix({"s": rows("s", 3)}, {"s": 0.5}, seed=1)) == 2   # 1.5 -> 2
    assert len(mix({"s": rows("s", 3)}, {"s": 0.3}, seed=1)) == 1   # 0.9 -> 1
    assert len(mix({"s": rows("s", 3)}, {"s": 0.1}, seed=1)) == 0   # 0.3 -> 0


def test_two_repeats_every_row_twice_next_to_its_copy():
    assert mix({"semi_auto_verified": ["x", "y"]}, {"semi_auto_verified": 2.0}, seed=0) == ["x", "x", "y", "y"]


def test_an_integer_part_repeats_and_the_fraction_samples_once_more():
    copies = copies_per_row(4, 2.5, random.Random("s"))
    assert sorted(copies) == [2, 2, 3, 3] and sum(copies) == 10
    kept = mix({"s": rows("s", 4)}, {"s": 2.5}, seed=3)
    assert len(kept) == 10 and all(kept.count(row) in (2, 3) for row in rows("s", 4))


def test_the_reports_example_mixture():
    pool = {"htsc_true": rows("h", 4), "ecdm_repaired": rows("e", 4), "semi_auto_verified": rows("s", 3),
            "adjudicated": rows("a", 2)}
    kept = mix(pool, {"htsc_true": 1.0, "ecdm_repaired": 0.5, "semi_auto_verified": 2.0}, seed=0)
    counts = {source: sum(row.startswith(source[0]) for row in kept) for source in pool}
    # adjudicated is not named and there is no "*": it keeps ratio 1
    assert counts == {"htsc_true": 4, "ecdm_repaired": 2, "semi_auto_verified": 6, "adjudicated": 2}


def test_a_default_ratio_applies_to_unnamed_sources_only():
    pool = {"a": rows("a", 2), "b": rows("b", 2), "c": rows("c", 2)}
    assert mix(pool, {"*": 0, "b": 1}, seed=0) == ["b0", "b1"]
    assert mix(pool, {"*": 2}, seed=0) == ["a0", "a0", "a1", "a1", "b0", "b0", "b1", "b1", "c0", "c0", "c1", "c1"]


def test_one_source_does_not_change_what_another_keeps():
    half = {"e": rows("e", 9)}
    alone = mix(half, {"e": 0.5}, seed=4)
    together = mix({**half, "h": rows("h", 5)}, {"e": 0.5, "h": 0.4}, seed=4)
    assert [row for row in together if row.startswith("e")] == alone


def test_empty_pools_and_zero_ratios_keep_nothing():
    assert mix({}, {"a": 1}, seed=0) == []
    assert mix({"a": []}, {"a": 3}, seed=0) == []
    assert mix({"a": rows("a", 5)}, {"a": 0}, seed=0) == []


@pytest.mark.parametrize("ratios, word", [({"a": -0.5}, "negative"), ({"a": "1"}, "finite number"),
                                          ({"a": float("nan")}, "finite number"), ({"a": True}, "finite number"),
                                          ({"": 1}, "non-empty"), (["a"], "mapping")])
def test_bad_ratios_are_refused_with_the_source_named(ratios, word):
    with pytest.raises(ValueError, match=word):
        mix({"a": rows("a", 2)}, ratios, seed=0)


def test_validated_ratios_are_floats():
    assert validate_ratios({"a": 2, "b": 0.25}) == {"a": 2.0, "b": 0.25}


# -- the high-frequency cap per function group (Xiaomi-GUI-0 §3.1) -----------------------------------

def group(row):
    """"f1-a" is in group f1; a row without a dash is in no group."""
    return row.split("-")[0] if "-" in row else None


def test_a_group_over_the_cap_keeps_a_seeded_sample_in_order_and_others_stay_whole():
    rows_in = ["f1-a", "x", "f1-b", "f2-a", "f1-c", "f2-b", "y", "f1-d"]
    kept = cap_per_group(rows_in, group, cap=2, seed=5)
    f1 = [row for row in kept if row.startswith("f1")]
    assert len(f1) == 2 and set(f1) <= {"f1-a", "f1-b", "f1-c", "f1-d"}
    assert [row for row in kept if not row.startswith("f1")] == ["x", "f2-a", "f2-b", "y"]  # at the cap: whole
    assert kept == [row for row in rows_in if row in kept]  # the given order
    assert len(kept) == 6


def test_the_cap_is_deterministic_and_the_seed_decides():
    rows_in = [f"f-{i}" for i in range(10)]
    first = cap_per_group(rows_in, group, cap=3, seed=1)
    assert first == cap_per_group(rows_in, group, cap=3, seed=1) and len(first) == 3
    assert len({tuple(cap_per_group(rows_in, group, cap=3, seed=s)) for s in range(20)}) > 1


def test_one_group_does_not_change_what_another_keeps():
    alone = cap_per_group([f"f-{i}" for i in range(6)], group, cap=2, seed=9)
    together = cap_per_group([f"f-{i}" for i in range(6)] + [f"g-{i}" for i in range(6)], group, cap=2, seed=9)
    assert [row for row in together if row.startswith("f")] == alone


def test_a_cap_of_zero_drops_every_grouped_row_and_a_large_cap_keeps_all():
    rows_in = ["f-1", "x", "f-2"]
    assert cap_per_group(rows_in, group, cap=0, seed=0) == ["x"]
    assert cap_per_group(rows_in, group, cap=5, seed=0) == rows_in
    assert cap_per_group([], group, cap=1, seed=0) == []


@pytest.mark.parametrize("cap", [-1, 1.5, "2", True, None])
def test_a_bad_cap_is_refused(cap):
    with pytest.raises(ValueError, match="cap per group"):
        cap_per_group(["f-1"], group, cap=cap, seed=0)
