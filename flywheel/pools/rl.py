"""The RL query pool's intake and metabolism (§2.4.1, §2.4.3), over the database.

Phase 0 banks naturally difficult queries by objective features (bank_phase0). Under Phase 1 every
new query — derived, BadCase, business, generated — waits "awaiting measurement" (await_measurement)
until G rollouts of the current policy M(t) are judged; the uniform gate (admit) then lets it in or
refuses it (judge_measurement). The rollouts are an RL-line run (flywheel/collection/rl_measurement.py).
"""
import logging

from django.db import IntegrityError, transaction

from flywheel import jobs
from flywheel.events import publish
from flywheel.models import CollectionRun, EvolutionLoop, ModelVersion, Query, RlQueryEntry, RlRollout, Trajectory
from flywheel.policies import default_policy_version
from flywheel.rules.pools import (
    LEAVE,
    RETIRE,
    WAIT,
    phase0_prescreen,
    rl_intake_refusal,
    rl_pool_metabolism,
    rl_uniform_intake_gate,
)

log = logging.getLogger(__name__)
State, Channel = RlQueryEntry.State, RlQueryEntry.Channel
LIVE = (State.BANKED, State.ACTIVE, State.MEASURING)  # an entry already in (or entering) the pool
DEFAULT_GROUP_SIZE = 4  # G when no loop has said (the loop's own default)


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
    rate = _success_rate(rollout_verdicts)
    entry, _ = RlQueryEntry.objects.update_or_create(
        query=query, defaults={"state": State.ACTIVE, "channel": channel, "success_rate": rate,
                               "note": f"admitted: success rate {rate} over {len(rollout_verdicts)} rollouts"})
    return entry


# --- Phase 1 intake: measured before admitted ------------------------------------------------------

def current_policy() -> ModelVersion | None:
    """M(t): the current model of the newest self-evolution loop (the rule policy for a loop started
    without one). None while no loop exists: Phase 0, no policy to measure with yet."""
    loop = EvolutionLoop.objects.order_by("-created_at", "-pk").first()
    if loop is None:
        return None
    return loop.model_version or default_policy_version()


def measurement_config() -> dict:
    """How the current policy is measured, as the newest loop rolls it out: G rollouts per query
    ("repeats"), and the loop's phones and steps per rollout where it set them."""
    loop = EvolutionLoop.objects.order_by("-created_at", "-pk").first()
    config = (loop.config or {}) if loop is not None else {}
    size = config.get("group_size")
    measured = {"repeats": size if isinstance(size, int) and size > 0 else DEFAULT_GROUP_SIZE}
    measured.update({name: config[name] for name in ("phones", "max_steps") if isinstance(config.get(name), int)})
    return measured


def await_measurement(query: Query, channel: str) -> RlQueryEntry | None:
    """Offer a new query to the RL pool: it waits, awaiting measurement, until the current policy's
    rollouts on it are judged. A query held out for the benchmark is never offered (None); one
    already live in the pool stays as it is; one that retired, left or was refused is measured
    again (the policy has changed since). The measuring run is launched once this commits."""
    if query.evaluation_only:
        return None
    entry = RlQueryEntry.objects.filter(query=query).first()
    if entry is not None and entry.state in LIVE:
        return entry
    policy = current_policy()
    note = (f"awaiting measurement: G rollouts of {policy} are launched" if policy is not None else
            "awaiting measurement: no current policy yet (Phase 0); measured when a self-evolution loop starts")
    entry, _ = RlQueryEntry.objects.update_or_create(query=query, defaults={
        "state": State.MEASURING, "channel": channel, "measurement_run": None, "success_rate": None, "note": note})
    if policy is not None:
        transaction.on_commit(lambda: jobs.task(jobs.MEASURE_RL_INTAKE).delay())
    return entry


def offer_generated(query_ids) -> int:
    """Approved generated queries under Phase 1: the RL-pool candidates among them (objective
    difficulty features, §2.2.6's candidate screening) wait for the current policy's measurement.
    Under Phase 0 (no policy yet) nothing happens here: Phase-0 banking screens them."""
    if current_policy() is None:
        return 0
    offered = 0
    for query in Query.objects.filter(pk__in=list(query_ids), generation_run__isnull=False, evaluation_only=False,
                                      rl_entry__isnull=True):
        if query_features(query):
            offered += await_measurement(query, Channel.GENERATED) is not None
    return offered


def judge_measurement(entry: RlQueryEntry, model_version: ModelVersion | None, rollout_verdicts: list[str],
                      run: CollectionRun | None = None) -> str:
    """The uniform gate over a measuring query's judged group: "admit" (active), "refuse", or WAIT
    while a rollout awaits its verdict. Recorded as the run's group of the entry."""
    if rl_pool_metabolism(rollout_verdicts) == WAIT:
        return WAIT
    with transaction.atomic():
        admitted = admit(entry.query, entry.channel, rollout_verdicts)
        decision = "admit" if admitted is not None else "refuse"
        RlRollout.objects.create(entry=entry, model_version=model_version, run=run,
                                 outcomes=list(rollout_verdicts), decision=decision)
        if admitted is None:
            why = rl_intake_refusal(rollout_verdicts)
            RlQueryEntry.objects.filter(pk=entry.pk).update(
                state=State.REFUSED, success_rate=_success_rate(rollout_verdicts),
                note=f"refused by the Phase-1 gate: {why} ({model_version or 'no model'})"[:300])
    entry.refresh_from_db()
    publish("pools", pool="rl")
    return decision


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
    being collected counts as "pending"; one whose prerequisites could not be met is no rollout (the
    policy never acted) and is left out.
    """
    trajectories = list(Trajectory.objects.filter(run=run, query_id=query_id)
                        .exclude(status=Trajectory.Status.NOT_EXECUTABLE)
                        .values_list("pk", "verdict", "recollection_of_id"))
    replaced = {parent for _, _, parent in trajectories if parent}
    verdicts = [verdict for pk, verdict, _ in trajectories if pk not in replaced]
    still_open = run.work_items().open().filter(payload__query_id=query_id).count()
    return verdicts + ["pending"] * still_open


def metabolize_group(run_id: int, query_id: int) -> str | None:
    """Metabolise the RL-pool query once its group in this RL run is complete; the decision, WAIT
    while a verdict is outstanding, or None when the query is not in the pool."""
    run = CollectionRun.objects.select_related("model_version").get(pk=run_id)
    entry = RlQueryEntry.objects.filter(query_id=query_id).select_related("query").first()
    if entry is None:
        return None
    recorded = RlRollout.objects.filter(entry=entry, run=run).values_list("decision", flat=True).first()
    if recorded:
        return recorded
    measuring = entry.state == State.MEASURING
    if measuring and entry.measurement_run_id != run.pk:
        return None  # only its own measuring run decides a measuring query
    verdicts = group_verdicts(run, query_id)
    try:
        if measuring:
            decision = judge_measurement(entry, run.model_version, verdicts, run=run)
        else:
            decision = record_rollouts(entry, run.model_version, verdicts, run=run)
    except IntegrityError:  # another process recorded this group a moment ago
        return RlRollout.objects.filter(entry=entry, run=run).values_list("decision", flat=True).first()
    log.info("RL run %s, query %s: %s over %s", run_id, query_id, decision, verdicts)
    return decision
