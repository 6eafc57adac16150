"""ECDM samples: prefix + the written step(s), routed True into the SFT pool as ecdm_repaired."""
import pytest

from flywheel.models import Query, SftEntry, Trajectory
from flywheel.repair import ecdm
from flywheel.repair.samples import make_sample
from tests.flywheel.repair.stored import OPEN_SETTINGS, TAP_BLUETOOTH, repair_for, slipped_trajectory

pytestmark = pytest.mark.django_db


def written(trajectory, index=1, action=TAP_BLUETOOTH):
    step = trajectory.steps.get(index=index)
    return {"index": index, "screenshot": step.screenshot.name, "hierarchy": step.hierarchy.name,
            "action": action, "cot": {"Observation": "Settings list", "Plan": "Open Bluetooth",
                                      "Decision": "Tap \"Bluetooth\""}}


def test_a_sample_is_the_prefix_plus_the_correction_in_the_sft_pool():
    original = slipped_trajectory()
    repair = repair_for(original, step_index=1)
    sample = make_sample(original, repair, keep_until=1, final_step=written(original))
    sample.refresh_from_db()
    assert (sample.line, sample.status, sample.verdict, sample.destination) == ("ecdm", "completed", "true", "sft")
    assert sample.derived_from_id == original.pk and sample.run_id is None and sample.query_id == original.query_id
    steps = list(sample.steps.order_by("index"))
    assert [s.index for s in steps] == [0, 1]
    kept, corrected = steps
    source = original.steps.get(index=0)
    # the same stored frames (content-addressed blob names), nothing copied on disk
    assert (kept.screenshot.name, kept.hierarchy.name) == (source.screenshot.name, source.hierarchy.name)
    assert kept.executed_action == OPEN_SETTINGS and kept.cot == source.cot
    assert corrected.screenshot.name == original.steps.get(index=1).screenshot.name
    assert corrected.executed_action == TAP_BLUETOOTH and corrected.cot["Plan"] == "Open Bluetooth"
    assert set(corrected.cot) == {"Observation", "Reflection", "Plan", "Decision", "Memory"}
    assert corrected.edit["ecdm"] == "step" and corrected.edit["repair"] == repair.pk
    entry = SftEntry.objects.get(trajectory=sample)
    assert (entry.intake, entry.repair_id) == ("ecdm_repaired", repair.pk)
    repair.refresh_from_db()
    assert repair.sample_id == sample.pk and repair.status == "done" and repair.finished_at
    # the original stays as it was: nothing is lost
    assert original.steps.count() == 3 and Trajectory.objects.get(pk=original.pk).verdict == "false"
    # a sample is never attributed or repaired again
    assert not ecdm.needs_repair(sample)


def test_a_repair_has_at_most_one_sample():
    original = slipped_trajectory()
    repair = repair_for(original, step_index=1)
    first = make_sample(original, repair, keep_until=1, final_step=written(original))
    again = make_sample(original, repair, keep_until=1, final_step=written(original))
    assert again.pk == first.pk
    assert Trajectory.objects.filter(line="ecdm").count() == 1 and SftEntry.objects.count() == 1


def test_blocked_proposals_are_not_kept_and_more_steps_follow_in_order():
    original = slipped_trajectory()
    original.steps.filter(index=1).update(executed_action=None)  # the audit blocked it: no supervision
    repair = repair_for(original, path="env", step_index=2)
    resume = written(original, index=2, action=TAP_BLUETOOTH)
    sample = make_sample(original, repair, keep_until=2, final_step=None, more_steps=[resume])
    assert list(sample.steps.order_by("index").values_list("index", flat=True)) == [0, 2]


def test_rqa_samples_carry_their_new_query_and_bad_cuts_are_refused():
    original = slipped_trajectory()
    repair = repair_for(original, path="rqa", step_index=1)
    with pytest.raises(ValueError, match="after the kept prefix"):
        make_sample(original, repair, keep_until=2, final_step=written(original, index=1))
    assert not Trajectory.objects.filter(line="ecdm").exists()
    shorter = Query.objects.create(key="q-prime", text="Open Settings", tier="L2", source="rqa")
    sample = make_sample(original, repair, keep_until=1, query=shorter,
                         final_step=written(original, index=1, action={"action": "terminate", "status": "success"}))
    assert sample.query_id == shorter.pk

