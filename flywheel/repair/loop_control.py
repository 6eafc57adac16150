"""A person's hand on a self-evolution loop: cancel it, or resume one its trainer paused."""
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from flywheel.collection.launch import cancel_run
from flywheel.events import publish
from flywheel.models import CollectionRun, EvolutionLoop
from flywheel.repair.loop import LIVE, Stage, Status, _finish, _snapshot, advance_loop

OPEN = (*LIVE, Status.PAUSED)  # a paused loop can still be cancelled


def cancel_loop(loop: EvolutionLoop, user=None) -> EvolutionLoop:
    """Stop the loop: its open round fails as cancelled and a rollout still collecting is cancelled
    (phones finish their current step). Everything already collected, judged and repaired stays."""
    with transaction.atomic():
        loop = EvolutionLoop.objects.select_for_update().get(pk=loop.pk)
        if loop.status not in OPEN:
            return loop
        who = f" by {user}" if user else ""
        current = loop.rounds.exclude(stage__in=[Stage.DONE, Stage.FAILED]).order_by("-number").first()
        if current is not None:
            run = current.rollout_run
            if run is not None and run.status in (CollectionRun.Status.QUEUED, CollectionRun.Status.RUNNING):
                cancel_run(run)
            stage = current.get_stage_display()
            current.stage, current.finished_at = Stage.FAILED, timezone.now()
            _snapshot(current)
            current.detail = f"cancelled{who} during: {stage}"[:300]
            current.save()
        _finish(loop, Status.CANCELLED, f"cancelled{who}" + (f" in round {current.number}" if current else ""))
        publish("runs", loop=loop.pk)
    return loop


def resume_loop(loop: EvolutionLoop, user=None) -> EvolutionLoop:
    """A paused loop goes on: its trainer is asked again at once (and pauses it again, with the
    reason, if what stopped it is still there). ValidationError when the loop is not paused."""
    with transaction.atomic():
        loop = EvolutionLoop.objects.select_for_update().get(pk=loop.pk)
        if loop.status != Status.PAUSED:
            raise ValidationError(f"{loop} is {loop.get_status_display().lower()}, not paused")
        who = f" by {user}" if user else ""
        loop.status, loop.state = Status.RUNNING, f"resumed{who}: asking the trainer again"[:300]
        loop.save(update_fields=["status", "state"])
    return advance_loop(loop.pk)
