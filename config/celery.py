"""The Celery app: Redis broker, one queue per kind of work, beat for periodic work."""
import os

from celery import Celery
from celery.signals import task_prerun
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("flywheel")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [
    Queue(name) for name in ("default", "collection", "evaluation", "repair", "training", "benchmark")
]
app.conf.task_routes = {
    "flywheel.tasks.collect_*": {"queue": "collection"},
    "flywheel.tasks.evaluate_*": {"queue": "evaluation"},
    "flywheel.tasks.repair_*": {"queue": "repair"},
    "flywheel.tasks.regenerate_*": {"queue": "repair"},   # the Teacher's work, like repairs
    "training.tasks.*": {"queue": "training"},
    "flywheel_demo.tasks.*": {"queue": "training"},  # its stages train the compact policy in the task
    "benchmark.tasks.*": {"queue": "benchmark"},
}
app.conf.beat_schedule = {
    "devices-discover": {"task": "devices.tasks.discover_devices", "schedule": 60.0},
    "devices-health": {"task": "devices.tasks.check_health", "schedule": 30.0},
    "devices-expire-leases": {"task": "devices.tasks.expire_leases", "schedule": 10.0},
    "devices-mark-silent-hosts": {"task": "devices.tasks.mark_silent_hosts", "schedule": 10.0},
    "flywheel-heartbeat": {"task": "flywheel.tasks.heartbeat", "schedule": 30.0},
    "flywheel-evaluate-pending": {"task": "flywheel.tasks.evaluate_pending", "schedule": 60.0},
    # Work of a dead worker or a silent host is picked up within seconds of its leases expiring.
    "flywheel-recover-interrupted": {"task": "flywheel.tasks.recover_interrupted", "schedule": 10.0},
    "flywheel-redispatch-runs": {"task": "flywheel.tasks.redispatch_runs", "schedule": 10.0},
    "queries-resume-explorations": {"task": "flywheel.tasks.resume_explorations", "schedule": 60.0},
    "queries-recheck-edges": {"task": "flywheel.tasks.recheck_gem_edges", "schedule": 120.0},
    "repair-sweep": {"task": "flywheel.tasks.repair_sweep", "schedule": 60.0},
    "pages-fold-tallies": {"task": "flywheel.tasks.fold_tallies", "schedule": 60.0},
    "pages-rebuild-tallies": {"task": "flywheel.tasks.rebuild_tallies", "schedule": 24 * 3600.0},
    "pages-snapshot-ledger": {"task": "flywheel.tasks.snapshot_ledger", "schedule": 60.0},
    "repair-derive-recurring": {"task": "flywheel.tasks.repair_derive_recurring", "schedule": 300.0},
    "evolution-advance-loops": {"task": "flywheel.tasks.advance_loops", "schedule": 30.0},
    # RL-pool queries awaiting measurement (Phase 1 intake) get their run, also after Phase 0 ends.
    "pools-measure-rl-intake": {"task": "flywheel.tasks.measure_rl_intake", "schedule": 60.0},
    # Steps whose reasoning waits for regeneration (SFT intake's gate) past its job get it again.
    "pools-regenerate-waiting": {"task": "flywheel.tasks.regenerate_waiting", "schedule": 300.0},
    "benchmark-sweep": {"task": "benchmark.tasks.sweep", "schedule": 30.0},
    "flywheel-demo-advance": {"task": "flywheel_demo.tasks.advance_demos", "schedule": 10.0},
    "training-resume-stalled": {"task": "training.tasks.resume_stalled_runs", "schedule": 60.0},
    "training-check-endpoints": {"task": "training.tasks.check_model_endpoints", "schedule": 60.0},
}
app.autodiscover_tasks()


@task_prerun.connect
def fresh_content_types(**_):
    """The decision history keys its entries by content type, cached per process: a database
    recreated or restored under a running worker gives the types new ids, so each task reads them
    afresh (one small query per model a task logs)."""
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()
