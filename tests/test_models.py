from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from devices.models import Device, Lease
from flywheel.blobs import read_blob, store_blob
from flywheel.models import App, CptEntry, ModelVersion, Query, SftEntry, Step, Trajectory, Verdict, Vote

pytestmark = pytest.mark.django_db


@pytest.fixture
def trajectory():
    app = App.objects.create(package="com.android.settings", label="Settings", category="system")
    query = Query.objects.create(key="q", text="Turn on Bluetooth", tier="L2", verification={})
    query.set_apps([app])
    device = Device.objects.create(serial="sim-0001", adb_server="127.0.0.1:15037")
    model = ModelVersion.objects.create(name="offline-rules")
    return Trajectory.objects.create(query=query, device=device, line="automatic", model_version=model)


def test_identical_frames_are_stored_once(settings, tmp_path):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(tmp_path)}}}
    first = store_blob(b"\x89PNG same frame", "png")
    second = store_blob(b"\x89PNG same frame", "png")
    other = store_blob(b"\x89PNG other frame", "png")
    assert first == second != other
    assert len(list(tmp_path.rglob("*.png"))) == 2
    assert read_blob(first) == b"\x89PNG same frame"


def test_step_index_is_unique_per_trajectory(trajectory):
    Step.objects.create(trajectory=trajectory, index=0, executed_action={"action": "click"})
    with pytest.raises(IntegrityError), transaction.atomic():
        Step.objects.create(trajectory=trajectory, index=0)


def test_one_open_lease_per_device(trajectory):
    device = trajectory.device
    expires = timezone.now() + timedelta(minutes=1)
    lease = Lease.objects.create(device=device, holder="job-1", expires_at=expires)
    with pytest.raises(IntegrityError), transaction.atomic():
        Lease.objects.create(device=device, holder="job-2", expires_at=expires)
    lease.released_at = timezone.now()
    lease.save()
    assert Lease.objects.create(device=device, holder="job-2", expires_at=expires).is_live


def test_trajectory_records_votes_verdict_and_pools(trajectory):
    step = Step.objects.create(trajectory=trajectory, index=0, screenshot="blobs/ab/x.png",
                               executed_action={"action": "click", "x": 1, "y": 2})
    for system, vote in [("A", "true"), ("B", "true"), ("C", "false")]:
        Vote.objects.create(trajectory=trajectory, system=system, vote=vote)
    Verdict.objects.create(trajectory=trajectory, outcome="true")
    CptEntry.objects.create(step=step, screenshot=step.screenshot.name, action=step.executed_action)
    SftEntry.objects.create(trajectory=trajectory, intake="htsc_true")
    with pytest.raises(IntegrityError), transaction.atomic():
        SftEntry.objects.create(trajectory=trajectory, intake="htsc_true")
    assert trajectory.votes.count() == 3 and trajectory.sft_entries.count() == 1
    assert trajectory.query.app_packages == ["com.android.settings"]
