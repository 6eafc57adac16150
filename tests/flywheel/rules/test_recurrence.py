"""When a failure class recurs (§2.5.2): across multiple trajectories AND multiple queries."""
from flywheel.rules.recurrence import failure_class_key, recurring_error_class, recurs_again_after_derivation


def test_the_class_key_is_level_cause_capability():
    assert failure_class_key(3, "constraint_violation", "multi_constraint_filtering") == \
        "3:constraint_violation:multi_constraint_filtering"
    assert failure_class_key(3, "perception_drift") == "3:perception_drift:"
    assert failure_class_key(3, "") == "3:unknown:"


def test_recurring_needs_several_trajectories_over_several_queries():
    # "multi-constraint filtering settled early" three times on two different queries: a gap
    assert recurring_error_class(3, 2)
    # one query failing again and again is that query's problem, not a capability gap
    assert not recurring_error_class(10, 1)
    # two slips on two queries: occasional, not yet a class
    assert not recurring_error_class(2, 2)
    assert recurring_error_class(5, 4, min_trajectories=5, min_queries=4)
    assert not recurring_error_class(4, 4, min_trajectories=5, min_queries=4)
    # nonsense minimums still need at least one failure
    assert not recurring_error_class(0, 0, min_trajectories=0, min_queries=0)


def test_a_derived_class_recurs_again_only_on_new_failures():
    assert recurs_again_after_derivation(3, 2)
    assert not recurs_again_after_derivation(1, 1)
