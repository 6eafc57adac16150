"""ECDM dispatch (§2.5.2) against the report's own cases, and the salvage yield."""
from flywheel.rules.ecdm import (
    COUNTERFACTUAL,
    ENV_REPAIR,
    NO_REPAIR,
    RQA,
    STEP_CORRECTION,
    AttributionFacts,
    ecdm_dispatch,
)
from flywheel.rules.salvage import salvage_yield


def facts(**kw):
    base = {"level": 3, "cause": "perception_drift", "first_bad_step": 3, "good_prefix": 3,
            "wrong_steps": 1, "correctable": True}
    return AttributionFacts(**{**base, **kw})


def test_a_single_step_slip_with_a_correct_prefix_goes_to_step_correction():
    # "a trajectory triggers a popup at step N while steps 1..N-1 are correct"
    assert ecdm_dispatch(facts()) == STEP_CORRECTION
    assert ecdm_dispatch(facts(first_bad_step=0, good_prefix=0)) == STEP_CORRECTION


def test_an_over_scoped_task_with_a_correct_prefix_goes_to_rqa():
    # the XM5 example: search on both platforms and compare succeeded, checkout could not
    assert ecdm_dispatch(facts(cause="over_scoped", first_bad_step=6, good_prefix=6)) == RQA
    # a prefix that is right but a step whose right action cannot be determined offline
    assert ecdm_dispatch(facts(correctable=False, good_prefix=4)) == RQA


def test_a_recurring_class_that_cannot_be_salvaged_case_by_case_goes_to_counterfactual_derivation():
    assert ecdm_dispatch(facts(cause="constraint_violation", wrong_steps=3, correctable=False,
                               good_prefix=0, recurring=True)) == COUNTERFACTUAL
    # the same class, not recurring yet: a person gets the first bad step
    assert ecdm_dispatch(facts(cause="constraint_violation", wrong_steps=3, correctable=False,
                               good_prefix=0)) == STEP_CORRECTION


def test_several_wrong_steps_are_not_an_occasional_slip():
    assert ecdm_dispatch(facts(wrong_steps=3, good_prefix=2)) == RQA


def test_environment_and_data_production_defects_are_never_repaired_as_model_failures():
    assert ecdm_dispatch(facts(level=1, cause="popup", interruption_known=True)) == ENV_REPAIR
    assert ecdm_dispatch(facts(level=1, cause="network", interruption_known=True)) == NO_REPAIR
    assert ecdm_dispatch(facts(level=1, cause="popup", interruption_known=False)) == NO_REPAIR
    assert ecdm_dispatch(facts(level=2, cause="ambiguous_query")) == NO_REPAIR
    assert ecdm_dispatch(facts(level=2, cause="verifier_defect", recurring=True)) == NO_REPAIR


def test_nothing_to_anchor_a_repair_on():
    assert ecdm_dispatch(facts(first_bad_step=None, good_prefix=0, correctable=False)) == NO_REPAIR


def test_salvage_yield_counts_supervision_paths_only():
    assert salvage_yield(0, {"step": 1}) is None
    assert salvage_yield(10, {"step": 3, "rqa": 2, "human": 1, "env": 1, "counterfactual": 5}) == 0.7
    assert salvage_yield(2, {"step": 5}) == 1.0
