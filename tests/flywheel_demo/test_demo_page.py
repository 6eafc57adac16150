"""The demo page without the training extras, and a failed demo as a person reads it."""
import pytest
from django.urls import reverse

from flywheel_demo import orchestrator
from flywheel_demo.models import DemoRun
from training import runs
from training.compact import CompactTrainingError, run_trainer, train_compact

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_extras(monkeypatch):
    monkeypatch.setattr(runs, "training_extras_installed", lambda: False)


def test_without_the_extras_the_page_says_what_to_run_and_launches_nothing(client_as, no_extras):
    manager = client_as("manager")
    page = manager.get(reverse("flywheel-demo")).content.decode()
    assert 'data-testid="install-hint"' in page and "make install-training" in page
    assert 'data-testid="demo-start" disabled' in page
    answer = manager.post(reverse("flywheel-demo-start"), {"phones": "2"}, follow=True).content.decode()
    assert "make install-training" in answer and not DemoRun.objects.exists()


def test_with_the_extras_the_launch_button_is_live(client_as):
    page = client_as("manager").get(reverse("flywheel-demo")).content.decode()
    assert 'data-testid="install-hint"' not in page and 'data-testid="demo-start" disabled' not in page


def test_a_failed_demo_reads_in_plain_words_without_a_cancel_button(client_as, settings, tmp_path, monkeypatch):
    settings.TRAINING_ROOT = tmp_path
    demo = orchestrator.start_demo(None, {})
    live = client_as("manager").get(reverse("flywheel-demo-detail", args=[demo.pk])).content.decode()
    assert 'data-testid="demo-cancel"' in live  # queued: it can be cancelled
    # The extras go missing on the worker: its first stage trains the untrained head and fails.
    monkeypatch.setattr(runs, "training_extras_installed", lambda: False)
    monkeypatch.setitem(orchestrator.STAGES, "setup", lambda d: bool(train_compact("demo-m0", epochs=0)))
    orchestrator.advance_demo(demo.pk)
    demo.refresh_from_db()
    assert demo.status == DemoRun.Status.FAILED and "make install-training" in demo.error
    manager = client_as("manager")
    for url in (reverse("flywheel-demo-detail", args=[demo.pk]), reverse("flywheel-demo-live", args=[demo.pk]),
                reverse("flywheel-demo")):
        page = manager.get(url).content.decode()
        assert "Why it stopped" in page and "make install-training" in page, url
        assert "Traceback" not in page and "Error" not in page and 'data-testid="demo-cancel"' not in page, url
    assert manager.post(reverse("flywheel-demo-cancel", args=[demo.pk])).status_code == 302
    demo.refresh_from_db()
    assert demo.status == DemoRun.Status.FAILED  # a cancel of a finished demo changes nothing


def test_a_crashing_trainer_leaves_its_traceback_in_the_log_not_the_message(tmp_path, caplog, own_processes):
    with pytest.raises(CompactTrainingError) as failure:
        run_trainer(tmp_path / "no-such-features.npz", tmp_path / "out", None, epochs=1, seed=0)
    message = str(failure.value)
    assert "stopped with an error" in message and "Traceback" not in message and "Error:" not in message
    assert "Traceback" in caplog.text
