"""Env_ERROR repair (§2.4.2): "close the pop-up and resume" synthesised into the trajectory."""
import pytest

from flywheel.models import SftEntry, Trajectory
from flywheel.policies import teacher as teacher_module
from flywheel.repair import env_repair
from flywheel.repair.env_repair import repair_interruption
from flywheel.repair.step_correction import apply_correction
from tests.flywheel.repair.stored import (
    BLUETOOTH,
    GIVE_UP,
    HOME,
    MAIN,
    OPEN_SETTINGS,
    TAP_BLUETOOTH,
    dialog,
    repair_for,
    stored_trajectory,
)

pytestmark = pytest.mark.django_db
PERMISSION = dialog("Allow Settings to access this device's location?", ["Allow", "Don't allow"])
ALLOW = {"action": "click", "point": [540, 1115], "coords": "pixel"}
DENY = {"action": "click", "point": [540, 1265], "coords": "pixel"}
SCROLL = {"action": "swipe", "direction": "up", "coords": "pixel"}
FEATURES = {"type": "permission", "step": 2, "network": "connected"}


@pytest.fixture
def dismissal(monkeypatch):
    """The Teacher's dismissal_action, as the contract gives it: the dialog's Deny button."""
    found = {"action": DENY}
    monkeypatch.setattr(env_repair, "dismissal_action",
                        lambda xml: dict(found["action"]) if found["action"] and "parentPanel" in xml else None)
    return found


def interrupted(actions, screens=(HOME, MAIN, PERMISSION, MAIN, BLUETOOTH), **options):
    """Open Settings, scroll, a permission dialog comes (step 2), then what the model did."""
    return stored_trajectory(list(screens), [OPEN_SETTINGS, SCROLL, *actions], verdict="env_error", **options)


def repair_of(trajectory, step=2):
    return repair_for(trajectory, path="env", step_index=step, level=1, cause="permission", features=FEATURES)


def test_the_popup_is_closed_and_the_step_that_resumes_on_the_same_page_is_kept(dismissal):
    # the model tapped Allow (not a dismissal), then went on on the Settings list it had before
    original = interrupted([ALLOW, TAP_BLUETOOTH, GIVE_UP])
    repair = repair_interruption(repair_of(original))
    assert repair.status == "done", repair.human_reason
    steps = list(repair.sample.steps.order_by("index"))
    assert [s.index for s in steps] == [0, 1, 2, 3]
    closing, resumed = steps[2], steps[3]
    assert closing.executed_action == DENY and closing.screenshot.name == original.steps.get(index=2).screenshot.name
    assert "permission dialog covers the screen" in closing.cot["Observation"]
    assert "access this device's location" in closing.cot["Observation"]
    assert closing.cot["Plan"] == "Close the permission dialog and resume the task: Open the Bluetooth settings"
    assert closing.cot["Decision"].startswith("Tap \"Don't allow\"")
    assert closing.edit["synthesized"] == "dismissal"
    assert resumed.executed_action == TAP_BLUETOOTH and resumed.edit["resumed_after_popup"]
    assert repair.correction["synthesized"] == "dismissal" and repair.correction["resumed_step"] == 3
    assert repair.teacher_output["source"] == "dismissal"
    assert SftEntry.objects.get(trajectory=repair.sample).intake == "ecdm_repaired"
    # the model's later steps (the give-up) are not copied
    assert repair.sample.steps.filter(index__gt=3).count() == 0


def test_the_models_own_dismissal_makes_its_next_step_a_resumption(dismissal):
    # the page under the dialog differs from the one before (the model's tap led there first)
    original = interrupted([DENY, TAP_BLUETOOTH, GIVE_UP], screens=(HOME, MAIN, PERMISSION, BLUETOOTH, BLUETOOTH))
    repair = repair_interruption(repair_of(original))
    assert [s.index for s in repair.sample.steps.order_by("index")] == [0, 1, 2, 3]


def test_later_steps_are_not_copied_when_the_model_did_not_resume_where_it_was(dismissal):
    original = interrupted([ALLOW, TAP_BLUETOOTH, GIVE_UP], screens=(HOME, MAIN, PERMISSION, BLUETOOTH, BLUETOOTH))
    repair = repair_interruption(repair_of(original))
    assert [s.index for s in repair.sample.steps.order_by("index")] == [0, 1, 2]
    assert repair.correction["resumed_step"] is None
    # nor when its next step on the same page gives up
    original = interrupted([ALLOW, GIVE_UP, GIVE_UP])
    assert repair_interruption(repair_of(original)).sample.steps.count() == 3


def test_no_dismissal_found_goes_to_a_person(dismissal):
    dismissal["action"] = None
    original = interrupted([ALLOW, TAP_BLUETOOTH, GIVE_UP])
    repair = repair_interruption(repair_of(original))
    assert repair.status == "needs_human" and repair.human_fallback
    assert "no Close / Cancel / Not now button found on step 2" in repair.human_reason
    assert repair.sample is None and original.steps.count() == 5
    # the person sets the tap on the frozen screen: prefix + that step, no replay (the pop-up is gone)
    repair = apply_correction(repair, DENY, {"Observation": "A permission dialog.", "Plan": "Close it"}, by="human")
    assert repair.status == "done" and repair.correction["by"] == "human"
    assert [s.index for s in repair.sample.steps.order_by("index")] == [0, 1, 2]
    assert repair.replay["status"] == "skipped" and "is not replayed" in repair.replay["reason"]


def test_bad_input_is_recorded_with_a_reason(dismissal):
    original = interrupted([ALLOW, TAP_BLUETOOTH, GIVE_UP], screenshots=False)
    repair = repair_interruption(repair_of(original))
    assert repair.status == "needs_human" and "no screenshot stored for steps 0, 1, 2" in repair.human_reason
    assert not Trajectory.objects.filter(line="ecdm").exists()
    repair = repair_for(interrupted([ALLOW, TAP_BLUETOOTH, GIVE_UP]), path="env", step_index=None, level=1,
                        cause="popup", features={"type": "popup"})
    repair = repair_interruption(repair)
    assert repair.status == "failed" and "at which step" in repair.reason
    # the step may also come from Level 1's features (its timing)
    repair = repair_for(interrupted([ALLOW, TAP_BLUETOOTH, GIVE_UP]), path="env", step_index=None, level=1,
                        cause="popup", features={"type": "popup", "step": 2})
    repair = repair_interruption(repair)
    assert repair.status == "done" and repair.step_index == 2
    assert "pop-up covers the screen" in repair.sample.steps.get(index=2).cot["Observation"]


@pytest.mark.skipif(not hasattr(teacher_module, "dismissal_action"),
                    reason="the Teacher's dismissal_action (flywheel/policies/teacher.py) is not written yet")
def test_the_real_dismissal_closes_a_farm_permission_dialog(farm_settings, transactional_db):
    from devices.executor import execute_action
    from devices.phone import PhoneConnection
    from flywheel.blobs import store_blob
    from flywheel.models import Step

    phone = PhoneConnection(farm_settings.address, farm_settings.serials[0])
    phone.shell("am force-stop com.android.settings; input keyevent KEYCODE_HOME; "
                "am start -n com.android.settings/.Settings")
    screens = [(phone.dump_hierarchy(), phone.screencap_png())]
    phone.shell("am broadcast -a com.sim.ANOMALY --es kind permission_dialog --es package com.android.settings")
    screens.append((phone.dump_hierarchy(), phone.screencap_png()))
    assert "permission" in screens[1][0]
    original = stored_trajectory([HOME, MAIN, PERMISSION], [OPEN_SETTINGS, SCROLL, GIVE_UP], verdict="env_error")
    for index, (xml, png) in ((1, screens[0]), (2, screens[1])):
        Step.objects.filter(trajectory=original, index=index).update(
            hierarchy=store_blob(xml.encode(), "xml"), screenshot=store_blob(png, "png"))
    repair = repair_interruption(repair_of(original))
    assert repair.status == "done", repair.human_reason
    closing = repair.sample.steps.get(index=2).executed_action
    result = execute_action(phone, closing)
    assert result.ok, result.error
    assert "permission" not in phone.dump_hierarchy()
    phone.shell("am force-stop com.android.settings; input keyevent KEYCODE_HOME")
