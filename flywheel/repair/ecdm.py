"""The ECDM's entry (§2.5): every False or Env_ERROR trajectory is attributed once, dispatched by
its attribution, and its repair started. Nothing is dropped: a failure that is not attributed yet
is found again by the sweep, and so is a repair whose worker died.

    routing (after commit) ──► process_failure ──► attribute (Level 1 → 2 → 3)
                                                └─► dispatch_attribution ──► Repair ──► run_repair
"""
import importlib
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from devices.models import Lease
from flywheel import jobs
from flywheel.collection.engine import finish_trajectory
from flywheel.models import Attribution, Line, Outcome, Repair, RuleFlag, Trajectory
from flywheel.repair import attribution as attribution_module
from flywheel.repair import counterfactual
from flywheel.rules.ecdm import NO_REPAIR, AttributionFacts, ecdm_dispatch
from flywheel.rules.stops import Stop, StopKind

log = logging.getLogger(__name__)
FAILED = (Outcome.FALSE, Outcome.ENV_ERROR)
# A worker holds a pending repair this long; after that the sweep may run it again.
WORKER_CLAIM = timedelta(minutes=10)
# The sweep leaves fresh failures to the task routing dispatched for them.
SWEEP_GRACE = timedelta(minutes=1)
FACT_FIELDS = set(AttributionFacts.__dataclass_fields__) - {"recurring"}


def needs_repair(trajectory: Trajectory) -> bool:
    """A failure the ECDM owns: judged False or Env_ERROR, and not itself an ECDM sample or the
    continuation of a repair (those are never repaired again, so a repair cannot loop), and not of a
    query held out for evaluation: its failures are measured, never turned into training data (the
    sample would never be exported, and its replay would run a held-out task off the benchmark)."""
    return (trajectory.verdict in FAILED and trajectory.line != Line.ECDM
            and not trajectory.query.evaluation_only)


def on_trajectory_routed(sender, trajectory_id, outcome, reason="", **kwargs):
    """Routing committed a False or Env_ERROR verdict: start the ECDM on a repair worker."""
    if outcome not in FAILED or not settings.ECDM_AUTOMATIC:
        return
    jobs.task(jobs.REPAIR_TRAJECTORY).delay(trajectory_id)


def process_failure(trajectory_id: int, force: bool = False) -> Attribution | None:
    """Attribute the failure and dispatch it, once (None when it is not the ECDM's, or done).

    The trajectory's row is locked while the cascade writes, so two workers never attribute the
    same failure twice; the repair itself runs after commit.
    """
    with transaction.atomic():
        trajectory = Trajectory.objects.select_for_update().filter(pk=trajectory_id).first()
        if trajectory is None or not needs_repair(trajectory):
            return None
        if not force and attributed_since_last_verdict(trajectory):
            return None
        attribution = attribution_module.attribute(trajectory)
        dispatch_attribution(attribution)
    return attribution


def attributed_since_last_verdict(trajectory: Trajectory) -> bool:
    """Already attributed for the verdict it has now. A new verdict (a re-evaluation after a rule
    fix, a person's decision) asks for a new attribution; a Level-1 re-route does not."""
    latest = trajectory.attributions.order_by("-created_at").values_list("created_at", flat=True).first()
    if latest is None:
        return False
    judged = trajectory.verdicts.order_by("-created_at").values_list("created_at", flat=True).first()
    decided = (trajectory.adjudications.exclude(decided_at=None).order_by("-decided_at")
               .values_list("decided_at", flat=True).first())
    newest = max((t for t in (judged, decided) if t is not None), default=None)
    return newest is None or latest >= newest


def facts_of(attribution: Attribution, recurring: bool = False) -> AttributionFacts:
    stored = (attribution.features or {}).get("facts") or {}
    facts = {name: stored[name] for name in FACT_FIELDS if name in stored}
    facts.setdefault("level", attribution.level)
    facts.setdefault("cause", attribution.cause)
    facts.setdefault("first_bad_step", attribution.first_bad_step)
    return AttributionFacts(**facts, recurring=recurring)


def dispatch_attribution(attribution: Attribution) -> Repair | None:
    """ECDM dispatch (§2.5.2) by the attribution alone; the repair starts after commit.

    A Level-3 failure joins its failure class first, so recurrence is known when dispatching; a
    recurring class that cannot be salvaged case by case goes to counterfactual derivation.
    """
    failure_class = counterfactual.assign_class(attribution) if attribution.level == 3 else None
    recurring = failure_class is not None and failure_class.status != "watching"
    path = ecdm_dispatch(facts_of(attribution, recurring=recurring))
    Attribution.objects.filter(pk=attribution.pk).update(ecdm_path=path, failure_class=failure_class)
    attribution.ecdm_path, attribution.failure_class = path, failure_class
    if path == NO_REPAIR:
        return None
    repair = Repair.objects.create(trajectory_id=attribution.trajectory_id, attribution=attribution, path=path,
                                   step_index=attribution.first_bad_step, failure_class=failure_class)
    transaction.on_commit(lambda: _run_later(repair.pk))
    return repair


def _run_later(repair_id: int):
    jobs.task(jobs.REPAIR_RUN).delay(repair_id)


def resolve_rule_flag(flag: RuleFlag, user, fixed: bool) -> RuleFlag:
    """A person's answer to a verifier-defect flag (attribution's Level 2). Fixed: the flag is closed
    and the trajectory re-enters evaluation (judged again after commit). Not fixed (the rule was
    right): dismissed, and the trajectory is attributed again without the verifier check and
    handed to the ECDM. A flag already resolved is returned as it is."""
    with transaction.atomic():
        flag = RuleFlag.objects.select_for_update().get(pk=flag.pk)
        if flag.status != RuleFlag.Status.OPEN:
            return flag
        trajectory = Trajectory.objects.select_for_update().select_related("query").get(pk=flag.trajectory_id)
        flag.status = RuleFlag.Status.FIXED if fixed else RuleFlag.Status.DISMISSED
        flag.resolved_by, flag.resolved_at = user, timezone.now()
        flag.save(update_fields=["status", "resolved_by", "resolved_at"])
        if fixed:
            Trajectory.objects.filter(pk=trajectory.pk).update(verdict=Outcome.PENDING, destination="",
                                                               judging_since=None)
            trajectory_id = trajectory.pk
            transaction.on_commit(lambda: _evaluate_later(trajectory_id))
        else:
            attribution = attribution_module.attribute(trajectory, skip_verifier=True)
            dispatch_attribution(attribution)
    return flag


def _evaluate_later(trajectory_id: int):
    jobs.task(jobs.EVALUATE_TRAJECTORY).delay(trajectory_id)


def claim_for_worker(repair_id: int, now=None) -> bool:
    """The one right to run a pending repair (a conditional update; an old claim is a dead worker's)."""
    now = now or timezone.now()
    return Repair.objects.filter(pk=repair_id, status=Repair.Status.PENDING, claimed_by__isnull=True).filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)).update(claimed_until=now + WORKER_CLAIM) == 1


PATH_RUNNERS = {
    Repair.Path.STEP: ("flywheel.repair.step_correction", "correct_step"),
    Repair.Path.RQA: ("flywheel.repair.rqa", "align_query"),
    Repair.Path.ENV: ("flywheel.repair.env_repair", "repair_interruption"),
    # The class is what gets repaired: the first repair of a recurring class derives its
    # adversarial queries, the others are filled with them (counterfactual.counterfactual_repair).
    Repair.Path.COUNTERFACTUAL: ("flywheel.repair.counterfactual", "counterfactual_repair"),
}


def run_repair(repair_id: int) -> Repair | None:
    """Run one pending repair down its path. An error is recorded on the repair and the repair
    goes to a person (never lost, never retried forever)."""
    if not claim_for_worker(repair_id):
        return None
    repair = Repair.objects.select_related("trajectory__query", "attribution").get(pk=repair_id)
    module_name, function_name = PATH_RUNNERS[repair.path]
    try:
        runner = getattr(importlib.import_module(module_name), function_name)
        repair = runner(repair)
    except Exception as error:  # the repair, not the worker, failed: a person takes it
        log.exception("repair %s (%s) failed", repair_id, repair.path)
        Repair.objects.filter(pk=repair_id, status=Repair.Status.PENDING).update(
            status=Repair.Status.NEEDS_HUMAN, human_fallback=True,
            human_reason=f"the {repair.get_path_display().lower()} broke: {type(error).__name__}: {error}"[:300])
    finally:
        Repair.objects.filter(pk=repair_id, claimed_by__isnull=True).update(claimed_until=None)
    return Repair.objects.get(pk=repair_id)


def sweep(limit: int = 50, now=None) -> dict:
    """What routing's own tasks missed (a worker or the broker died): unattributed failures and
    pending repairs no live worker holds."""
    now = now or timezone.now()
    unattributed = (Trajectory.objects.filter(verdict__in=FAILED).exclude(line=Line.ECDM)
                    .exclude(query__evaluation_only=True).filter(attributions__isnull=True)
                    .filter(Q(finished_at__isnull=True) | Q(finished_at__lte=now - SWEEP_GRACE))
                    .order_by("finished_at", "pk").values_list("pk", flat=True)[:limit])
    attributed = 0
    for trajectory_id in list(unattributed):
        try:
            attributed += process_failure(trajectory_id) is not None
        except Exception:
            log.exception("sweep: trajectory %s not attributed; the next sweep retries", trajectory_id)
    stalled = (Repair.objects.filter(status=Repair.Status.PENDING, claimed_by__isnull=True,
                                     created_at__lte=now - SWEEP_GRACE)
               .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
               .values_list("pk", flat=True)[:limit])
    started = 0
    for repair_id in list(stalled):
        started += run_repair(repair_id) is not None
    return {"attributed": attributed, "repairs_run": started, "replays_requeued": requeue_replays(now),
            "continuations_closed": close_dead_continuations(now)}


REPLAY_ATTEMPTS = 5
NO_PHONE = "no idle phone"


def requeue_replays(now=None) -> int:
    """A replay that found no idle phone is tried again later (a few times, then left skipped)."""
    now = now or timezone.now()
    waiting = Repair.objects.filter(path=Repair.Path.STEP, status=Repair.Status.DONE, sample__isnull=False,
                                    replay__status="skipped", replay__reason=NO_PHONE,
                                    finished_at__lte=now - SWEEP_GRACE)
    queued = 0
    for repair in waiting[:20]:
        attempts = int((repair.replay or {}).get("attempts", 1))
        if attempts >= REPLAY_ATTEMPTS:
            continue
        if Repair.objects.filter(pk=repair.pk, replay=repair.replay).update(
                replay={"status": "queued", "attempts": attempts + 1}):
            repair_id = repair.pk
            transaction.on_commit(lambda repair_id=repair_id: jobs.task(jobs.REPAIR_REPLAY).delay(repair_id))
            queued += 1
    return queued


def close_dead_continuations(now=None) -> int:
    """A replay's continuation whose worker died is finished as interrupted and judged (routed,
    never left running)."""
    now = now or timezone.now()
    live = set(Lease.objects.filter(released_at__isnull=True, holder__startswith="repair:replay:")
               .values_list("holder", flat=True))
    closed = 0
    for trajectory in Trajectory.objects.filter(line=Line.ECDM, status=Trajectory.Status.RUNNING,
                                                started_at__lt=now - SWEEP_GRACE)[:20]:
        holders = {f"repair:replay:{pk}" for pk in Repair.objects.filter(
            trajectory_id=trajectory.derived_from_id).values_list("pk", flat=True)}
        if holders & live:
            continue
        finish_trajectory(trajectory, Stop(StopKind.WORKER_STOPPED, "interrupted: the replay worker stopped"), phone=None)
        closed += 1
    return closed
