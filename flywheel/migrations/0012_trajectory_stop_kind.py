"""Trajectory.stop_kind: how a trajectory stopped, as data beside the words (stop_reason).

Existing rows get their kind from their stop_reason's words, once, here; from now on every producer
stores the kind itself (flywheel/rules/stops.py) and nothing reads the words to decide.
"""
from django.db import migrations, models
from django.db.models import Case, Q, Value, When

# (kind, condition) in order: the first that matches a row's reason decides.
_OLD_REASONS = [
    ("left_the_page", Q(status="paused", stop_reason="left the page")),
    ("paused", Q(status="paused")),
    ("not_executable", Q(status="not_executable")),
    ("repaired_sample", Q(line="ecdm", stop_reason__startswith="ECDM ")),
    ("terminate_success", Q(stop_reason__startswith="terminate: success")),
    ("terminate_failure", Q(stop_reason__startswith="terminate")),
    ("call_user", Q(stop_reason__startswith="call_user")),
    ("max_steps", Q(stop_reason__startswith="maximum steps") | Q(stop_reason__startswith="max steps")),
    ("timeout", Q(stop_reason__startswith="timeout")),
    ("repeated_actions", Q(stop_reason__contains="repeated actions") | Q(stop_reason__contains="identical actions")),
    ("blocked_by_audit", Q(stop_reason__startswith="blocked by the safety audit")),
    ("clarify_unanswered", Q(stop_reason__startswith="clarify: no answer")),
    ("clarify_stopped", Q(stop_reason__startswith="clarify answered")),
    ("endpoint_failed", Q(stop_reason__startswith="policy error: the endpoint failed")
     | Q(stop_reason__startswith="policy error: the endpoint call was refused")
     | Q(stop_reason__startswith="policy error: the endpoint answered HTTP 5")),
    ("policy_error", Q(stop_reason__startswith="policy error")),
    ("action_failed", Q(stop_reason__startswith="action failed")),
    ("lease_lost", Q(stop_reason__startswith="lease lost")),
    ("phone_lost", Q(stop_reason__startswith="phone lost")),
    ("reset_failed", Q(stop_reason__startswith="reset failed")),
    ("cancelled", Q(stop_reason__startswith="cancelled")),
    ("already_done", Q(stop_reason__startswith="interrupted: the success check already passed")),
    ("worker_stopped", Q(stop_reason__startswith="interrupted: the worker stopped")
     | Q(stop_reason__startswith="interrupted: the replay worker stopped")
     | Q(stop_reason__startswith="worker lost")),
    ("crashed", Q(stop_reason__startswith="interrupted")),
    ("closed_by_client", Q(stop_reason__startswith="closed by the client")),
]


def kinds_from_reasons(apps, schema_editor):
    """One UPDATE over the stopped trajectories (a CASE of the old reasons), not one per kind."""
    Trajectory = apps.get_model("flywheel", "Trajectory")
    Trajectory.objects.exclude(status="running").exclude(stop_reason="").update(
        stop_kind=Case(*(When(condition, then=Value(kind)) for kind, condition in _OLD_REASONS), default=Value("")))


class Migration(migrations.Migration):

    dependencies = [
        ('flywheel', '0011_pages_at_scale'),
    ]

    operations = [
        migrations.AddField(
            model_name='trajectory',
            name='stop_kind',
            field=models.CharField(blank=True, choices=[('', 'Not stopped yet'), ('terminate_success', 'Terminated: success'), ('terminate_failure', 'Terminated: failure'), ('call_user', 'Handed over to the user'), ('max_steps', 'Maximum steps'), ('timeout', 'Timeout'), ('repeated_actions', 'Repeated actions'), ('blocked_by_audit', 'Blocked by the safety audit'), ('clarify_unanswered', 'Clarify: no answer'), ('clarify_stopped', 'Clarify answered: stop'), ('policy_error', 'Policy error'), ('endpoint_failed', 'Model endpoint failed'), ('action_failed', 'Action failed'), ('lease_lost', 'Lease lost'), ('phone_lost', 'Phone lost'), ('reset_failed', 'Reset failed'), ('cancelled', 'Cancelled'), ('already_done', 'Already done before any action'), ('worker_stopped', 'Worker stopped'), ('crashed', 'Collection error'), ('closed_by_client', 'Closed by the client'), ('paused', 'Paused'), ('left_the_page', 'Left the page'), ('not_executable', 'Not executable'), ('repaired_sample', 'ECDM repaired sample')], default='', help_text='how it stopped, as code reads it (stop_reason: the words a person reads)', max_length=20),
        ),
        migrations.RunPython(kinds_from_reasons, migrations.RunPython.noop),
    ]
