"""RQA (§2.5.2): keep the golden prefix, rewrite Q into Q′ that the reached state fulfils."""
import pytest

from flywheel.models import App, FunctionNode, GemPage, ModelVersion, Query, SftEntry, Trajectory
from flywheel.repair.rqa import align_query
from flywheel.screens.page_identity import fingerprint
from tests.flywheel.judging.pixel_judge import images_of, text_of
from tests.flywheel.openai_stub import StubOpenAI
from tests.flywheel.repair.stored import (
    BLUETOOTH,
    GIVE_UP,
    HOME,
    MAIN,
    OPEN_SETTINGS,
    SETTINGS,
    TAP_BLUETOOTH,
    make_query,
    png,
    repair_for,
    stored_trajectory,
)

pytestmark = pytest.mark.django_db
OVER_SCOPED = "Turn on Bluetooth, pair my Sony XM5 headphones and play my running playlist on them"
TAP_USE = {"action": "click", "point": [540, 390], "coords": "pixel"}


def over_scoped(tier="L2", **options):
    """Open Settings, open Bluetooth (the golden prefix), then it went wrong at step 2."""
    query = make_query(text=OVER_SCOPED, tier=tier)
    return stored_trajectory([HOME, MAIN, BLUETOOTH, BLUETOOTH], [OPEN_SETTINGS, TAP_BLUETOOTH, TAP_USE, GIVE_UP],
                             query=query, **options)


@pytest.fixture
def explored():
    """GEM knows the Bluetooth page, and the function tree has a leaf on it."""
    app = App.objects.get_or_create(package=SETTINGS, defaults={"label": "Settings"})[0]
    seen = fingerprint(png(BLUETOOTH), BLUETOOTH)
    page = GemPage.objects.create(app=app, name="bluetooth", title="Bluetooth", phash=seen.phash,
                                  layout_signature=seen.layout_signature, layout_shape=seen.layout_shape,
                                  activity=".bluetooth.BluetoothSettings")
    return FunctionNode.objects.create(app=app, path="connections/bluetooth", label="Bluetooth", is_leaf=True,
                                       page=page)


def test_the_reached_pages_function_becomes_q_prime_and_the_prefix_its_sample(explored):
    original = over_scoped()
    repair = align_query(repair_for(original, path="rqa", step_index=2, cause="over_scoped"))
    assert repair.status == "done", repair.reason or repair.human_reason
    derived = repair.derived_query
    assert derived.source == "rqa" and derived.derived_from_id == original.pk and derived.status == "ready"
    assert derived.tier == "L2" and derived.app_packages == [SETTINGS]
    assert "Bluetooth" in derived.text and "Settings" in derived.text and "Sony" not in derived.text
    assert list(derived.functions.all()) == [explored]
    assert derived.gate_results["rqa"]["function"] == explored.pk
    assert derived.gate_results["rqa"]["method"] == "offline" and derived.gate_results["rqa"]["step"] == 2
    spec = derived.verification
    assert {"check": "foreground", "package": SETTINGS, "activity": ".bluetooth.BluetoothSettings"} in spec["terminal"]
    assert {"check": "screen", "contains": "Bluetooth"} in spec["terminal"]
    # milestones of the prefix's pages inside the task's app (Home is the launcher's)
    assert [m["text"] for m in spec["milestones"]] == ["Settings", "Bluetooth"]
    sample = repair.sample
    assert sample.query_id == derived.pk and sample.derived_from_id == original.pk
    steps = list(sample.steps.order_by("index"))
    assert [s.executed_action["action"] for s in steps] == ["open", "click", "terminate"]
    assert steps[-1].executed_action["status"] == "success"
    assert steps[-1].screenshot.name == original.steps.get(index=2).screenshot.name
    assert "Bluetooth" in steps[-1].cot["Observation"]
    assert SftEntry.objects.get(trajectory=sample).intake == "ecdm_repaired"
    assert repair.correction["query"] == derived.text
    # run again (a redelivered task): the same query and sample, nothing doubled
    align_query(repair)
    assert Query.objects.filter(source="rqa").count() == 1 and Trajectory.objects.filter(line="ecdm").count() == 1


def test_without_a_gem_the_prefix_is_narrated_for_an_l1_query():
    original = over_scoped(tier="L1")
    repair = align_query(repair_for(original, path="rqa", step_index=2))
    text = repair.derived_query.text
    assert repair.derived_query.tier == "L1" and repair.derived_query.subclass == "plain_narration"
    assert "Open Settings" in text and "tap Bluetooth" in text, text
    assert repair.derived_query.gate_results["rqa"]["function"] is None


def test_no_golden_prefix_or_no_screenshots_is_recorded_with_the_reason():
    repair = align_query(repair_for(over_scoped(), path="rqa", step_index=0))
    assert repair.status == "failed" and "deviated at its first step" in repair.reason
    repair = align_query(repair_for(over_scoped(), path="rqa", step_index=7))
    assert repair.status == "failed" and "no step 7 stored" in repair.reason
    original = over_scoped(screenshots=False)
    repair = align_query(repair_for(original, path="rqa", step_index=2))
    assert repair.status == "needs_human" and "no screenshot" in repair.human_reason
    assert not Query.objects.filter(source="rqa").exists() and original.steps.count() == 4


def test_the_teacher_llm_rewrites_q_and_garbage_keeps_the_offline_text(settings, explored):
    with StubOpenAI(model="teacher-72b") as stub:
        ModelVersion.objects.create(name="teacher", kind="endpoint", endpoint_url=stub.url,
                                    served_model_name="teacher-72b", sampling={"retries": 0})
        settings.TEACHER_MODEL_VERSION = "teacher"
        stub.replies += [(200, stub.chat_reply('{"text": "Turn to the Bluetooth page in Settings"}'), 0),
                         (200, stub.chat_reply("I cannot help with that."), 0)]
        good = align_query(repair_for(over_scoped(), path="rqa", step_index=2))
        bad = align_query(repair_for(over_scoped(), path="rqa", step_index=2))
    assert good.derived_query.text == "Turn to the Bluetooth page in Settings"
    provenance = good.derived_query.gate_results["rqa"]
    assert provenance["method"] == "llm" and provenance["model"] == "teacher" and provenance["offline_text"]
    prompt = text_of(stub.requests[0])
    assert OVER_SCOPED in prompt and "Use Bluetooth" in prompt and stub.requests[0]["model"] == "teacher-72b"
    assert images_of(stub.requests[0]) == [png(BLUETOOTH)]      # the terminal frame (step 2), as stored
    assert bad.status == "done" and bad.derived_query.gate_results["rqa"]["method"] == "offline"
    assert "not JSON" in bad.derived_query.gate_results["rqa"]["llm_error"]
    assert "Bluetooth" in bad.derived_query.text
