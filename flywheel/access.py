"""Which records of the data engine a person may see: the one object-level rule, used by the API and
by /media/.

Managers and admins see everything. An annotator sees the sessions they own (their trajectories),
with those trajectories' steps, attributions and repairs, and the failed trajectories of the human
repair queue: those waiting for a person, and those they claimed or repaired (with the samples
they made). An adjudicator sees the Undetermined
queue and what they have claimed or decided, with those trajectories' steps, votes and verdicts.
A person with several roles sees the union.
"""
from django.db.models import Q

from accounts.roles import ADJUDICATOR, ANNOTATOR, MANAGER, has_role, user_roles
from flywheel.models import Adjudication, Destination, Line, Outcome, Repair, Step, Trajectory

# The Undetermined queue: what annotation.adjudication.waiting_for_adjudication lists (and what a
# decision moves out of it, since routing changes the destination).
IN_ADJUDICATION_QUEUE = Q(destination=Destination.ADJUDICATION, verdict=Outcome.UNDETERMINED)


# The human repair queue: repairs the Teacher could not make, waiting for an annotator.
IN_REPAIR_QUEUE = Q(status=Repair.Status.NEEDS_HUMAN)


def sees_everything(user) -> bool:
    return has_role(user, MANAGER)


def trajectories_visible_to(user, trajectories=None):
    trajectories = Trajectory.objects.all() if trajectories is None else trajectories
    if sees_everything(user):
        return trajectories
    roles, allowed = user_roles(user), Q(pk__in=[])
    if ANNOTATOR in roles:
        allowed |= Q(annotator=user) | Q(pk__in=Repair.objects.filter(
            IN_REPAIR_QUEUE | Q(claimed_by=user) | Q(repaired_by=user)).values("trajectory_id"))
        allowed |= Q(repair_sample_of__repaired_by=user)
    if ADJUDICATOR in roles:
        allowed |= IN_ADJUDICATION_QUEUE | Q(pk__in=Adjudication.objects.filter(adjudicator=user)
                                             .values("trajectory_id"))
        # The benchmark's split verdicts wait for an expert (§4.3) the way HTSC's Undetermined do.
        allowed |= Q(line=Line.BENCHMARK, verdict=Outcome.UNDETERMINED)
    return trajectories.filter(allowed)


def with_visible_trajectory(user, records):
    """Records hanging off a trajectory (steps, votes, verdicts, attributions): visible with it."""
    if sees_everything(user):
        return records
    return records.filter(trajectory__in=trajectories_visible_to(user).values("pk"))


def steps_visible_to(user, steps=None):
    return with_visible_trajectory(user, Step.objects.all() if steps is None else steps)


def adjudications_visible_to(user, adjudications=None):
    """An adjudicator's own claims and decisions, and every claim on the open queue (who holds what)."""
    adjudications = Adjudication.objects.all() if adjudications is None else adjudications
    if sees_everything(user):
        return adjudications
    if ADJUDICATOR not in user_roles(user):
        return adjudications.none()
    return adjudications.filter(Q(adjudicator=user) | Q(
        trajectory__in=Trajectory.objects.filter(IN_ADJUDICATION_QUEUE).values("pk")))


def repairs_visible_to(user, repairs=None):
    """Repairs of the person's own trajectories, and those they made."""
    repairs = Repair.objects.all() if repairs is None else repairs
    if sees_everything(user):
        return repairs
    return repairs.filter(Q(trajectory__in=trajectories_visible_to(user).values("pk")) | Q(repaired_by=user))


def blob_visible_to(user, name: str) -> bool:
    """A stored screenshot or UI dump: staff see every file; others one that a step they may see
    references (content-addressed blobs are shared by identical frames, so any such step will do)."""
    if sees_everything(user):
        return True
    return steps_visible_to(user).filter(Q(screenshot=name) | Q(hierarchy=name)).exists()
