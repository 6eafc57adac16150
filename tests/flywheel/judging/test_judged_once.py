"""A trajectory is judged exactly once, by whichever judge claims it first; one that cannot be judged
goes to a person with the reason and does not stall the beat sweep."""
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from flywheel.blobs import store_blob
from flywheel.judging.pipeline import evaluate_trajectory
from flywheel.models import App, ModelVersion, Query, SftEntry, Step, Trajectory, Verdict, Vote
from flywheel.tasks import evaluate_pending
from tests.flywheel.openai_stub import StubOpenAI

pytestmark = pytest.mark.django_db(transaction=True)

SCREEN = ('<?xml version="1.0" ?><hierarchy rotation="0"><node index="0" text="Bluetooth" '
          'resource-id="com.android.settings:id/bluetooth_switch" class="android.widget.Switch" '
          'package="com.android.settings" content-desc="" clickable="true" bounds="[0,300][1080,450]" />'
          '</hierarchy>')
SPEC = {"terminal": [], "milestones": [{"name": "bluetooth page", "text": "Bluetooth"}], "veto": []}


def finished_trajectory(key, verification=SPEC, minutes_ago=10):
    """A collected trajectory whose judge never ran (the worker died after collecting it)."""
    query = Query.objects.create(key=key, text="Open the Bluetooth settings", tier="L1", verification=verification)
    query.set_apps([App.objects.get_or_create(package="com.android.settings")[0]])
    trajectory = Trajectory.objects.create(query=query, line="automatic", status="completed",
                                           finished_at=timezone.now() - timedelta(minutes=minutes_ago))
    for index, action in enumerate([{"action": "click", "point": [540, 375]},
                                    {"action": "terminate", "status": "success"}]):
        Step.objects.create(trajectory=trajectory, index=index, hierarchy=store_blob(SCREEN.encode(), "xml"),
                            executed_action=action, foreground_package="com.android.settings")
    return trajectory


@pytest.fixture
def slow_judge(settings, monkeypatch, transactional_db):
    """System C asks an LLM judge that takes 3 s to answer, in this process and in the worker."""
    with StubOpenAI(model="judge-7b") as stub:
        ModelVersion.objects.create(name="judge", kind="endpoint", endpoint_url=stub.url,
                                    served_model_name="judge-7b")
        settings.JUDGE_MODEL_VERSION = "judge"
        monkeypatch.setenv("JUDGE_MODEL_VERSION", "judge")
        reply = stub.chat_reply('{"vote": "true", "rationale": "opened the Bluetooth page"}')
        stub.replies.extend([(200, reply, 3)] * 4)
        yield stub


def test_the_runs_judge_and_the_beat_sweep_judge_a_trajectory_once(slow_judge, celery_worker_process):
    trajectory = finished_trajectory("race")
    results = []

    def the_runs_own_call():
        try:
            results.append(evaluate_trajectory(Trajectory.objects.get(pk=trajectory.pk)))
        finally:
            connection.close()

    judge = threading.Thread(target=the_runs_own_call)
    judge.start()
    deadline = time.monotonic() + 20
    while not slow_judge.requests and time.monotonic() < deadline:  # the run's judge is asking the LLM
        time.sleep(0.05)
    sweep = evaluate_pending.delay()  # beat's sweep, in the real worker, meanwhile
    sweep.get(timeout=60)
    judge.join(30)

    assert Verdict.objects.filter(trajectory=trajectory).count() == 1
    assert Vote.objects.filter(trajectory=trajectory).count() == 3
    assert len(slow_judge.requests) == 1  # the second judge never started
    assert results and results[0] is not None and results[0].outcome == "true"
    assert SftEntry.objects.filter(trajectory=trajectory).count() == 1


def test_a_malformed_spec_is_flagged_for_a_person_and_the_sweep_goes_on(celery_worker_process):
    good = finished_trajectory("good", minutes_ago=20)
    bad = finished_trajectory("bad", verification=["not", "a", "verification", "spec"], minutes_ago=30)

    evaluate_pending.delay().get(timeout=60)

    bad.refresh_from_db()
    assert bad.flag.startswith("not judged: ") and bad.verdict == "undetermined"
    assert bad.destination == "adjudication"
    assert Verdict.objects.get(trajectory=bad).rationale.startswith("flagged for a person: not judged")
    good.refresh_from_db()
    assert good.verdict != "pending" and good.destination and not good.flag
    # Flagged means judged: the next sweep does not take it up again.
    evaluate_pending.delay().get(timeout=60)
    assert Verdict.objects.filter(trajectory=bad).count() == 1
