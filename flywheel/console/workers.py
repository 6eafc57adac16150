"""Which Celery workers run where, and which queues each consumes, for the Tasks page (issue #18).

A phone host's worker consumes its own `collection.<host>` queue: this table is how an operator
sees that every host has one, and that the worker role covers evaluation, repair, training and
benchmark.
"""
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db.models import BooleanField, Count, DateTimeField, ExpressionWrapper, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, Now

from devices.models import Device, PhoneHost

ANSWER_WITHIN_S = 1.0


@dataclass(frozen=True)
class WorkerQueues:
    name: str
    host: str
    queues: list[str]


def worker_queues(timeout: float = ANSWER_WITHIN_S) -> tuple[list[WorkerQueues], str]:
    """(workers sorted by host then name, error): the workers that answered within `timeout`, or the
    reason none could be asked (an unreachable broker is reported, never raised to the page)."""
    try:
        with current_app.connection_for_read() as connection:
            # One quick attempt: kombu's default retries would hold the page for seconds when the
            # broker is down, and the page has nothing better to do than say so.
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
            replies = current_app.control.inspect(timeout=timeout, connection=connection).active_queues() or {}
    except Exception as error:  # the broker's errors vary by transport; the page shows the message
        return [], f"The broker did not answer: {type(error).__name__}: {str(error).rstrip('.')}"
    workers = [WorkerQueues(name=name, host=name.partition("@")[2] or name,
                            queues=sorted({queue["name"] for queue in queues or ()}))
               for name, queues in replies.items()]
    return sorted(workers, key=lambda worker: (worker.host, worker.name)), ""


def phone_hosts():
    """The registered phone hosts with whether each is alive (database clock) and its phone count."""
    alive_since = ExpressionWrapper(Now() - Value(timedelta(seconds=settings.PHONE_HOST_STALE_S)),
                                    output_field=DateTimeField())
    phones = Device.objects.filter(adb_server=OuterRef("name")).order_by().values("adb_server").annotate(
        n=Count("pk")).values("n")
    return list(PhoneHost.objects.annotate(
        live=ExpressionWrapper(Q(last_seen__gt=alive_since), output_field=BooleanField()),
        phones=Coalesce(Subquery(phones), 0)).order_by("name"))
