"""Human adjudication of Undetermined trajectories (§2.4.2): claim, decide, calibrate.

A claim is a lock with an expiry, so two people never judge one trajectory; an abandoned claim
frees itself.
"""
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from flywheel.access import IN_ADJUDICATION_QUEUE
from flywheel.judging.destinations import route_trajectory
from flywheel.models import Adjudication, Destination, Trajectory
from flywheel.rules.htsc import route_adjudication

CLAIM_TTL = timedelta(minutes=10)


class ClaimRefused(Exception):
    pass


def waiting_for_adjudication():
    """Undetermined trajectories no one has decided, oldest first."""
    return (Trajectory.objects.filter(IN_ADJUDICATION_QUEUE)
            .exclude(adjudications__decision__gt="").order_by("finished_at", "pk"))


def open_claim(trajectory):
    return trajectory.adjudications.filter(decision="", claimed_until__gt=timezone.now()).first()


def claim(trajectory_id, user):
    """Lock the trajectory for `user` (or extend their lock); refuse if someone else holds it."""
    with transaction.atomic():
        trajectory = Trajectory.objects.select_for_update().get(pk=trajectory_id)
        if trajectory.destination != Destination.ADJUDICATION:
            raise ClaimRefused("this trajectory is no longer waiting for adjudication")
        current = open_claim(trajectory)
        if current and current.adjudicator_id != user.pk:
            raise ClaimRefused(f"{current.adjudicator} is judging it until "
                               f"{timezone.localtime(current.claimed_until):%H:%M}")
        trajectory.adjudications.filter(decision="", claimed_until__lte=timezone.now()).delete()
        until = timezone.now() + CLAIM_TTL
        if current:
            current.claimed_until = until
            current.save(update_fields=["claimed_until"])
            return current
        return Adjudication.objects.create(trajectory=trajectory, adjudicator=user, claimed_until=until)


def next_for(user):
    """The user's own open claim, else the oldest unclaimed trajectory, claimed for them."""
    mine = Adjudication.objects.filter(adjudicator=user, decision="",
                                       claimed_until__gt=timezone.now()).first()
    if mine:
        return mine
    for trajectory in waiting_for_adjudication().exclude(
            Q(adjudications__decision="") & Q(adjudications__claimed_until__gt=timezone.now()))[:20]:
        try:
            return claim(trajectory.pk, user)
        except ClaimRefused:
            continue
    return None


def release(trajectory_id, user):
    Adjudication.objects.filter(trajectory_id=trajectory_id, adjudicator=user, decision="").delete()


def decide(trajectory_id, user, decision, note=""):
    """Record the person's decision and route the trajectory: correct → SFT pool, wrong → ECDM,
    environment issue → the Env_ERROR branch."""
    if decision not in ("correct", "wrong", "environment"):
        raise ValueError(f"unknown decision {decision!r}")
    with transaction.atomic():
        adjudication = claim(trajectory_id, user)
        adjudication.decision, adjudication.note = decision, note
        adjudication.decided_at = timezone.now()
        adjudication.claimed_until = None
        adjudication.save()
        outcome, _ = route_adjudication(decision)
        route_trajectory(adjudication.trajectory, outcome, reason=f"adjudicated: {note}"[:300],
                         intake="adjudicated")
    return adjudication
