"""The write path of one step (issue #17: a thousand phones write through it): a fixed, small number
of queries per recorded step, each stage still persisted as it happens, redelivery idempotent and
the CPT cleaning unchanged. perf/step_writes.py measures its speed; this pins its queries."""
import io

import pytest
from django.db import transaction
from PIL import Image, ImageDraw

from devices.actions import normalize_action
from devices.executor import ActionResult
from devices.models import Device
from devices.observation import Observation
from flywheel.blobs import blob_name
from flywheel.collection import recorder
from flywheel.models import App, CptEntry, Query, Step, Trajectory
from flywheel.policies.base import Proposal
from flywheel.pools.cpt import stored_frame_facts

# Autocommit, as in a collection worker: a test transaction would add savepoints to the count.
pytestmark = pytest.mark.django_db(transaction=True)

# One accepted step: INSERT the observed step; SELECT the history; UPDATE with the proposal;
# BEGIN, UPDATE with the executed action, INSERT its CPT sample, COMMIT. The trajectory's previous
# CPT hash is the one this process noted at the step before (8 with its SELECT before issue #38;
# 17 before issue #17: update_or_create, the query's apps at every step, get_or_create of the sample.)
QUERIES_PER_STEP = 7
CLICK = {"action": "click", "point": [500, 700]}


def screen(n: int) -> bytes:
    """A phone-sized frame whose content moves with n (distinct perceptual hashes)."""
    image = Image.new("RGB", (1080, 2400), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 300 * n, 1080, 300 * n + 500), fill=(30, 60, 200))
    draw.rectangle((100 * n, 0, 100 * n + 200, 2400), fill=(200, 60, 30))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def observation(png: bytes, n: int) -> Observation:
    return Observation(png=png, hierarchy_xml=f'<hierarchy rotation="0"><node text="row {n}"/></hierarchy>',
                       width=1080, height=2400, foreground={"package": "com.android.settings"},
                       timings={"observe_ms": 900})


class Answers:
    name = "fixed"

    def propose(self, state):
        return Proposal(cot={"Observation": "a list", "Reflection": "", "Plan": "open the row",
                             "Decision": "tap the row", "Memory": ""}, action=CLICK, confidence=0.9,
                        model_io={"request": {"messages": ["..."]}, "response": {"choices": []}})


class RanWithoutPhone:
    """What ActionExecutor returns for an action that ran (the step's phone I/O is not counted here)."""

    def window_size(self):
        return (1080, 2400)

    def execute(self, action, hierarchy_xml=None):
        return ActionResult(ok=True, action=normalize_action(action, 1080, 2400), timings={"audit": 3, "execute": 400})


@pytest.fixture
def trajectory(settings, tmp_path):
    return make_trajectory(settings, tmp_path)


def make_trajectory(settings, tmp_path):
    """A trajectory on a phone row, its blobs under tmp_path."""
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path)}}}
    app = App.objects.create(package="com.android.settings")
    query = Query.objects.create(key="writes", text="Open the first row", tier="L1")
    query.set_apps([app])
    device = Device.objects.create(serial="sim-0001", adb_server="127.0.0.1:15037")
    return Trajectory.objects.create(query=query, device=device, line="automatic")


def record(trajectory, index, png):
    seen = observation(png, index)
    step = recorder.record_observation(trajectory, index, seen)
    recorder.propose(step, seen, Answers())
    return recorder.execute(step, CLICK, RanWithoutPhone(), hierarchy_xml=seen.hierarchy_xml, claim=False)


def test_a_recorded_step_costs_a_fixed_number_of_queries(trajectory, django_assert_max_num_queries):
    frames = [screen(n) for n in range(6)]
    record(trajectory, 0, frames[0])  # the first step also reads what stays fixed for the trajectory
    for index in range(1, 6):  # not growing with the trajectory's length
        with django_assert_max_num_queries(QUERIES_PER_STEP):
            outcome = record(trajectory, index, frames[index])
        assert outcome.ok and outcome.step.audit["cpt"] == "accepted"
    steps = list(trajectory.steps.order_by("index"))
    assert [s.index for s in steps] == list(range(6)) and all(s.executed_action for s in steps)
    assert [s.proposed_action for s in steps] == [CLICK] * 6 and all(s.model_io for s in steps)
    assert CptEntry.objects.filter(step__trajectory=trajectory).count() == 6


def test_a_frame_seen_again_is_still_cleaned_by_the_rules(trajectory):
    """The same bytes again (an action that changed nothing): a duplicate of the previous sample,
    also when its image facts were computed before; a blank frame is rejected."""
    first, blank = screen(1), io.BytesIO()
    Image.new("RGB", (1080, 2400), (0, 0, 0)).save(blank, "PNG")
    assert record(trajectory, 0, first).step.audit["cpt"] == "accepted"
    assert record(trajectory, 1, first).step.audit["cpt"] == "duplicate of the previous frame"
    assert record(trajectory, 2, blank.getvalue()).step.audit["cpt"] == "blank frame"
    assert record(trajectory, 3, first).step.audit["cpt"] == "duplicate of the previous frame"
    assert record(trajectory, 4, screen(4)).step.audit["cpt"] == "accepted"
    assert list(CptEntry.objects.order_by("step__index").values_list("step__index", flat=True)) == [0, 4]


def test_a_stored_frame_is_decoded_once_per_process():
    """A blob's name is the hash of its bytes: its image facts are computed once, not at every step."""
    name = blob_name(screen(5), "png")
    facts = stored_frame_facts(name, screen(5))
    assert stored_frame_facts(name, b"not an image: never decoded again") == facts


def test_each_stage_is_persisted_as_it_happens(trajectory):
    """A worker dying after any stage leaves that stage in the database."""
    seen = observation(screen(2), 0)
    step = recorder.record_observation(trajectory, 0, seen)
    stored = Step.objects.get(pk=step.pk)
    assert stored.screenshot.name.startswith("blobs/") and stored.proposed_action is None
    recorder.propose(step, seen, Answers())
    stored = Step.objects.get(pk=step.pk)
    assert stored.proposed_action == CLICK and stored.executed_action is None and stored.model_io
    recorder.execute(step, CLICK, RanWithoutPhone(), claim=False)
    stored = Step.objects.get(pk=step.pk)
    assert stored.executed_action["point"] == [500, 700] and stored.model_io and stored.cot["Plan"]
    assert stored.timings["observe_ms"] == 900 and stored.timings["execute_ms"] == 400


def test_a_redelivered_step_rewrites_its_row_and_keeps_one_sample(trajectory):
    first = record(trajectory, 0, screen(1)).step
    again = recorder.record_observation(trajectory, 0, observation(screen(3), 0))
    assert again.pk == first.pk and Step.objects.filter(trajectory=trajectory).count() == 1
    assert Step.objects.get(pk=first.pk).screenshot.name == again.screenshot.name != first.screenshot.name
    assert Step.objects.get(pk=first.pk).executed_action is not None  # what ran is not forgotten
    recorder.execute(again, CLICK, RanWithoutPhone(), claim=False)
    assert CptEntry.objects.filter(step=first).count() == 1
    with transaction.atomic():  # inside a caller's transaction too (a person's page)
        assert recorder.record_observation(trajectory, 0, observation(screen(4), 0), replace=False) is None
        assert recorder.record_observation(trajectory, 1, observation(screen(4), 1), replace=False).index == 1
