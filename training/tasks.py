"""Celery tasks of the training queue (config/celery.py routes training.tasks.* there)."""
from celery import shared_task
from django.utils import timezone


@shared_task(acks_late=True)
def run_training(run_id: int) -> str:
    from training.supervisor import execute_run

    return execute_run(run_id)


@shared_task(acks_late=True)
def train_reward_model_task(version_id: int) -> str:
    """A step reward model (issue #39), trained in the task: seconds of torch on CPU after reading the judged steps."""
    from training.reward_model import train_reward_model

    return train_reward_model(version_id)


@shared_task
def resume_stalled_runs() -> list:
    from training.runs import resume_stalled_runs as resume

    return resume()


@shared_task
def check_model_endpoints() -> dict:
    """Beat: every registered model endpoint (trained versions served by vLLM included) is
    health-checked, so a line or the benchmark never starts on a dead server unknowingly."""
    from flywheel.models import ModelVersion
    from flywheel.policies import check_endpoint_health

    results = {}
    for version in ModelVersion.objects.filter(kind=ModelVersion.Kind.ENDPOINT).exclude(endpoint_url=""):
        health = check_endpoint_health(version.endpoint_url, model=version.served_model_name)
        ModelVersion.objects.filter(pk=version.pk).update(health=health, health_checked_at=timezone.now())
        results[version.name] = bool(health.get("ok"))
    return results


@shared_task(acks_late=True)
def build_snapshot_task(snapshot_id: int) -> str:
    """A large export, built by a training worker (the page follows its status)."""
    from training.models import DataSnapshot
    from training.snapshots import build_snapshot

    snapshot = DataSnapshot.objects.filter(pk=snapshot_id, status=DataSnapshot.Status.BUILDING).first()
    return build_snapshot(snapshot).status if snapshot else "skipped"
