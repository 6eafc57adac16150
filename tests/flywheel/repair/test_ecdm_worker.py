"""End to end through a real Celery worker and the virtual farm: a False verdict's routing starts
the ECDM, the worker attributes it, the offline Teacher corrects the slipped step, the sample enters
the SFT pool as ecdm_repaired, and the prefix is replayed on a phone and continued."""
import time

import pytest

from flywheel.models import Attribution, Repair, SftEntry, Trajectory
from tests.flywheel.repair.test_step_correction import collect_slip
from tests.flywheel.repair.test_step_correction import farm_phones as farm_phones  # the fixture, shared

pytestmark = pytest.mark.django_db(transaction=True)

WORKER_ENV = {"ECDM_AUTOMATIC": "1", "ECDM_REPLAY": "1"}
KNOWN_PATH = {"mode": "tap", "summary": "Settings → Bluetooth", "steps": [
    {"action": "open", "app": "com.android.settings"}, {"action": "click", "target": {"text": "Bluetooth"}},
    {"action": "terminate", "status": "success"}]}


def wait_for(condition, what, deadline_s=240):
    """Poll the database until `condition()` holds (a guard against hanging, not a speed check)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"never happened: {what}")


def test_a_false_trajectory_becomes_a_repaired_sample_and_a_replayed_continuation(
        farm_phones, celery_worker_process, settings):
    settings.ECDM_AUTOMATIC = True
    # The query carries its known path (the Teacher may use it; the automatic line never shows it).
    original = collect_slip(farm_phones[0], known_path=KNOWN_PATH)
    assert original.verdict == "false", original.stop_reason

    attribution = wait_for(lambda: Attribution.objects.filter(trajectory=original).first(), "attribution")
    assert attribution.level == 3 and attribution.first_bad_step == 1, attribution.evidence
    repair = wait_for(lambda: Repair.objects.filter(trajectory=original, status="done").first(), "the repair")
    assert repair.path == "step" and repair.correction["by"] == "teacher"
    sample = repair.sample
    assert (sample.line, sample.derived_from_id, sample.verdict) == ("ecdm", original.pk, "true")
    assert SftEntry.objects.filter(trajectory=sample, intake="ecdm_repaired", repair=repair).exists()
    assert [s.index for s in sample.steps.order_by("index")] == [0, 1]
    # why step 1 was wrong: the offline Teacher's own reason, in the corrected step's [Reflection]
    explanation = repair.correction["explanation"]
    assert explanation["source"] == "teacher" and explanation["error_class"] == attribution.cause
    assert sample.steps.get(index=1).cot["Reflection"] == explanation["text"] != ""

    replay = wait_for(lambda: (Repair.objects.get(pk=repair.pk).replay or {}).get("status") in (
        "replayed", "failed", "skipped") and Repair.objects.get(pk=repair.pk).replay, "the replay")
    assert replay["status"] == "replayed", replay
    continuation = Trajectory.objects.get(pk=replay["trajectory"])
    assert continuation.derived_from_id == original.pk and continuation.verdict == "true"
    assert continuation.steps.get(index=1).edit["explanation"] == explanation   # the replayed correction keeps it
    # the continuation is an ECDM trajectory: the ECDM never attributes or repairs it again
    assert not continuation.attributions.exists() and not continuation.repairs.exists()

