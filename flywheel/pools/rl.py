"""The RL query pool's intake and metabolism (§2.4.1, §2.4.3), over the database."""
import logging

from django.db import IntegrityError, transaction

from flywheel.events import publish
from flywheel.models import CollectionRun, ModelVersion, Query, RlQueryEntry, RlRollout, Trajectory
from flywheel.rules.pools import LEAVE, RETIRE, WAIT, phase0_prescreen, rl_pool_metabolism, rl_uniform_intake_gate

log = logging.getLogger(__name__)


def query_features(query: Query) -> list[str]:
    path = (query.known_path or {}).get("steps") or []
    return phase0_prescreen(query.tier, len(path), query.is_cross_app,
                            query.function_links.count())


def phase0_candidates():
    """The queries Phase 0 looks at: not in the RL pool yet, not held out for the benchmark."""
    return Query.objects.filter(rl_entry__isnull=True, evaluation_only=False)


def bank_phase0(queries=None) -> int:
    """Phase 0: bank naturally difficult queries by objective features, before any policy exists.
    The one service behind `manage.py rl_pool bank` and the loop page's button; all or nothing."""
    banked = 0
    with transaction.atomic():
        for query in (queries if queries is not None else phase0_candidates()):
            if query.evaluation_only:  # held out for the benchmark: never trained on
                continue
            features = query_features(query)
            if features and not RlQueryEntry.objects.filter(query=query).exists():
                RlQueryEntry.objects.create(query=query, state=RlQueryEntry.State.BANKED, channel="phase0",
                                            phase0_features={"features": features})
                banked += 1
    return banked


def admit(query: Query, channel: str, rollout_verdicts: list[str]) -> RlQueryEntry | None:
    """Phase 1's one gate for every channel: only queries in the current policy's middle band."""
    if not rl_uniform_intake_gate(rollout_verdicts):
        return None
    entry, _ = RlQueryEntry.objects.update_or_create(
        query=query, defaults={"state": "active", "channel": channel,
                               "success_rate": _success_rate(rollout_verdicts)})
    return entry


def _success_rate(verdicts):
    scored = [v for v in verdicts if v in ("true", "false")]
    return round(sum(v == "true" for v in scored) / len(scored), 3) if scored else None


def record_rollouts(entry: RlQueryEntry, model_version: ModelVersion | None,
                    rollout_verdicts: list[str], run: CollectionRun | None = None) -> str:
    """After G rollouts of M(t): retire, keep or let the query leave (its failures are already in
    the ECDM queue, where HTSC routed them). A group of `run` is recorded once."""
    decision = rl_pool_metabolism(rollout_verdicts)
    if decision == WAIT:
        return decision
    state = {RETIRE: "retired", LEAVE: "left"}.get(decision, "active")
    with transaction.atomic():
        RlRollout.objects.create(entry=entry, model_version=model_version, run=run,
                                 outcomes=list(rollout_verdicts), decision=decision)
        entry.state, entry.success_rate = state, _success_rate(rollout_verdicts)
        entry.save(update_fields=["state", "success_rate", "updated_at"])
    publish("pools", pool="rl")
    return decision


def group_verdicts(run: CollectionRun, query_id: int) -> list[str]:
    """The verdict of each rollout of the run over the query, as the group stands now.

    A rollout re-collected after Env_ERROR counts by its re-collection; a rollout still queued or
    being collected counts as "pending".
    """
    trajectories = list(Trajectory.objects.filter(run=run, query_id=query_id)
                        .values_list("pk", "verdict", "recollection_of_id"))
    replaced = {parent for _, _, parent in trajectories if parent}
    verdicts = [verdict for pk, verdict, _ in trajectories if pk not in replaced]
    still_open = run.work_items().open().filter(payload__query_id=query_id).count()
    return verdicts + ["pending"] * still_open


def metabolize_group(run_id: int, query_id: int) -> str | None:
    """Metabolise the RL-pool query once its group in this RL run is complete; the decision, WAIT
    while a verdict is outstanding, or None when the query is not in the pool."""
    run = CollectionRun.objects.select_related("model_version").get(pk=run_id)
    entry = RlQueryEntry.objects.filter(query_id=query_id).first()
    if entry is None:
        return None
    recorded = RlRollout.objects.filter(entry=entry, run=run).values_list("decision", flat=True).first()
    if recorded:
        return recorded
    verdicts = group_verdicts(run, query_id)
    try:
        decision = record_rollouts(entry, run.model_version, verdicts, run=run)
    except IntegrityError:  # another process recorded this group a moment ago
        return RlRollout.objects.filter(entry=entry, run=run).values_list("decision", flat=True).first()
    log.info("RL run %s, query %s: %s over %s", run_id, query_id, decision, verdicts)
    return decision
