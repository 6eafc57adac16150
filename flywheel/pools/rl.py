"""The RL query pool's intake and metabolism (§2.4.1, §2.4.3), over the database."""
from django.db import transaction

from flywheel.console.events import publish
from flywheel.models import ModelVersion, Query, RlQueryEntry, RlRollout
from flywheel.rules.pools import LEAVE, RETIRE, phase0_prescreen, rl_pool_metabolism, rl_uniform_intake_gate


def query_features(query: Query) -> list[str]:
    path = (query.known_path or {}).get("steps") or []
    return phase0_prescreen(query.tier, len(path), query.is_cross_app,
                            query.function_links.count())


def bank_phase0(queries=None) -> int:
    """Phase 0: bank naturally difficult queries by objective features, before any policy exists."""
    banked = 0
    for query in (queries if queries is not None else Query.objects.filter(rl_entry__isnull=True)):
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
                    rollout_verdicts: list[str]) -> str:
    """After G rollouts of M(t): retire, keep or let the query leave (its failures are already in
    the ECDM queue, where HTSC routed them)."""
    decision = rl_pool_metabolism(rollout_verdicts)
    state = {RETIRE: "retired", LEAVE: "left"}.get(decision, "active")
    with transaction.atomic():
        RlRollout.objects.create(entry=entry, model_version=model_version,
                                 outcomes=list(rollout_verdicts), decision=decision)
        entry.state, entry.success_rate = state, _success_rate(rollout_verdicts)
        entry.save(update_fields=["state", "success_rate", "updated_at"])
    publish("pools", pool="rl")
    return decision
