"""The hand-back channel end to end on phones in real-phone mode: the farm shows hand-back states by
its own schedule (nothing the console injects: a real phone takes no such command), a schema-guided
run collects on them, routing hands every trajectory to the channel's job on a real worker, and the
states met become samples in the SFT pool that the Hand-back page counts."""
import pytest

from devices.models import Device
from devices.registry import discover_devices
from flywheel.collection.launch import launch_run
from flywheel.models import CollectionRun, HandbackSample, SftEntry
from tests.farm import running_farm
from tests.flywheel.collection.test_recollection import SHOP_TASK, import_task
from tests.flywheel.collection.test_worker import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
WORKER_ENV = {"HANDBACK_SAMPLES": "1"}


@pytest.fixture
def scheduled_farm(tmp_path, settings, monkeypatch):
    """One phone in real-phone mode that meets a hand-back state after every input in an app."""
    args = ("--real-phone", "--handback-rate", "1.0")
    with running_farm(devices=1, seed=3, log_path=tmp_path / "farm.log", extra_args=args) as farm:
        settings.ADB_SERVERS = [farm.address]
        monkeypatch.setenv("ADB_SERVERS", farm.address)
        yield farm


def test_states_the_phone_shows_by_itself_become_samples(scheduled_farm, celery_worker_process, client_as):
    discover_devices()
    assert Device.objects.count() == 1
    import_task(SHOP_TASK)
    run = launch_run("schema", {"keys": [SHOP_TASK]}, config={"phones": 1, "max_steps": 6})
    assert wait_for(lambda: CollectionRun.objects.filter(pk=run.pk, status="done").first(), timeout=180)
    samples = wait_for(lambda: list(HandbackSample.objects.select_related("sample", "source")), timeout=60)
    assert samples, "the run's trajectory met no hand-back state"
    for sample in samples:
        assert sample.source.run_id == run.pk and sample.sample.line == "handback"
        assert SftEntry.objects.get(trajectory=sample.sample).intake == "handback"
        written = sample.sample.steps.get(index=sample.step_index)
        expected = "call_user" if sample.behaviour == "hand_back" else "click"
        assert written.executed_action["action"] == expected and not written.not_a_training_label
    page = client_as("manager").get("/pools/handback/").content.decode()
    assert f"{len(samples)} of " in page
